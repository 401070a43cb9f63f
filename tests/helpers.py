"""Builders for throw-away projects, and a fault-injecting target for them."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

# The fault-injecting target and scorer (tests/faulty_target.py, a linted module), copied
# into each project as target.py.
FAULTY_TARGET = (Path(__file__).parent / "faulty_target.py").read_text()


class ProjectFactory:
    """Write a project folder: honesteval.yaml, tasks.jsonl, target.py, candidates/."""

    def __init__(self, base: Path):
        self.base = base
        self.count = 0

    def __call__(
        self,
        behaviours: list[str] | dict[str, Any] | None = None,
        *,
        tasks: list[dict[str, Any]] | None = None,
        candidates: dict[str, float] | None = None,
        config: dict[str, Any] | None = None,
        target_code: str = FAULTY_TARGET,
        name: str | None = None,
    ) -> Path:
        self.count += 1
        root = self.base / (name or f"proj{self.count}")
        (root / "candidates").mkdir(parents=True)
        if tasks is None:
            tasks = [
                {"id": f"t{i:02d}", "input": {"behaviour": b}, "target": "yes"}
                for i, b in enumerate(behaviours or ["pass"])
            ]
        with (root / "tasks.jsonl").open("w") as fh:
            for t in tasks:
                fh.write(json.dumps(t) + "\n")
        ids = [t["id"] for t in tasks]
        cfg: dict[str, Any] = {
            "name": root.name,
            "tasks": "tasks.jsonl",
            "splits": {"train": [], "val": ids, "test": []},
            "adapter": {"kind": "python", "target": "target:run", "scorer": "target:score"},
            "trials": 3,
            "retries": 3,
            "retry_backoff_s": 0.0,
            "timeout_s": 2.0,
        }
        cfg.update(config or {})
        (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        (root / "target.py").write_text(target_code)
        for cand, quality in (candidates or {"base": 0.5}).items():
            (root / "candidates" / cand).mkdir()
            (root / "candidates" / cand / "quality.txt").write_text(str(quality))
        return root


BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(stem: str) -> ModuleType:
    """``bench/<stem>.py`` as a module (the benches import their siblings from ``bench/``)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"{stem}_under_test", BENCH / f"{stem}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def copy_project(built: Path, into: Path) -> Path:
    """A copy of a project state built once for a module (``into/<its name>``), for a test to
    change: nothing in a project's state names its folder, so the copy is that state."""
    root = into / built.name
    shutil.copytree(built, root)
    return root


def migrate_into(database: Path) -> None:
    """Create Prefect's SQLite database at ``database``, migrated to the installed Prefect's
    schema, in a process of its own (the settings are read at import); written beside, then
    renamed, so a reader never sees half of it."""
    database.parent.mkdir(parents=True, exist_ok=True)
    partial = database.with_name("partial.db")
    url = f"sqlite+aiosqlite:///{partial}"
    code = (
        "import asyncio\n"
        "from prefect.server.database import provide_database_interface\n"
        "asyncio.run(provide_database_interface().create_db())\n"
    )
    env = {**os.environ, "PREFECT_API_DATABASE_CONNECTION_URL": url}
    env["PREFECT_HOME"] = str(database.parent)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    copy_database(partial, database)


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of the SQLite database ``source`` (its write-ahead log included)."""
    partial = target.with_name(target.name + ".partial")
    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(partial)) as dst,
    ):
        src.backup(dst)
    partial.rename(target)


def call_counts(root: Path) -> Counter[tuple[str, int]]:
    """How many times the target was called per (task id, seed)."""
    path = root / "calls.log"
    if not path.exists():
        return Counter()
    return Counter((d["task"], d["seed"]) for d in map(json.loads, path.read_text().splitlines()))


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run ``honesteval ARGS`` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "honesteval.cli", *args],
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        cwd=cwd,
        timeout=timeout,
    )


def popen_cli(*args: str, env: dict[str, str], new_session: bool = False) -> subprocess.Popen[str]:
    """Start ``honesteval ARGS`` in a subprocess and return at once (pipes for both streams);
    ``new_session``: in its own process group, so a test can kill the group."""
    return subprocess.Popen(
        [sys.executable, "-m", "honesteval.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


def stored_trials(root: Path, split: str = "*", candidate: str = "*") -> list[dict[str, Any]]:
    """Every stored trial record, read straight from the trial logs on disk
    (``.honesteval/trials/<split>/<candidate>/<fp>/trials.jsonl``, one JSON record per line,
    the last line of a (fingerprint, task, seed) wins, a torn fragment is skipped): a reader
    independent of Store."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    folder = root / ".honesteval" / "trials"
    for log in sorted(folder.glob(f"{split}/{candidate}/*/trials.jsonl")):
        for line in log.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # blank, or a fragment left by a crash mid-write
            key = ("split", "candidate", "fingerprint", "task_id", "seed")
            latest[tuple(rec[k] for k in key)] = rec
    return list(latest.values())


def run_plain(root: Path, candidate: str = "base", split: str = "val", **plan_kw: Any):
    """Plan and run every trial in this thread, no Prefect: (records, SplitResult).
    Stored rollouts awaiting a score are graded, as the flows do."""
    from honesteval import interrupts
    from honesteval.evaluation.plan import adapter_for, finish_evaluation, plan_evaluation
    from honesteval.evaluation.trial import grade_with_retries, run_trial_with_retries

    with interrupts.stop_on_signals():  # a run of its own, as the flows' runs are
        plan = plan_evaluation(root, candidate, split, **plan_kw)
        adapter = adapter_for(str(root), plan.settings.scoring)
        records = [run_trial_with_retries(adapter, s, plan.settings) for s in plan.todo]
        records += [grade_with_retries(adapter, s.task, r, plan.settings) for s, r in plan.to_score]
        return records, finish_evaluation(plan, records)


def task_means_on_disk(root: Path, split: str = "val") -> dict[str, dict[str, float]]:
    """Each candidate's per-task mean over its counted (ok, failed) trials, read straight from
    the trial logs (:func:`stored_trials`); a task without a counted trial is left out."""
    counted: dict[str, dict[str, list[float]]] = {}
    for rec in stored_trials(root, split):
        if rec["status"] in ("ok", "failed"):
            counted.setdefault(rec["candidate"], {}).setdefault(rec["task_id"], [])
            counted[rec["candidate"]][rec["task_id"]].append(rec["reward"])
    return {c: {t: sum(v) / len(v) for t, v in by.items()} for c, by in counted.items()}


def paired_by_hand(candidate: dict[str, float], best: dict[str, float]) -> tuple[float, float, int]:
    """(mean, SE, n) of candidate − best per task over the tasks both have: the textbook paired
    mean and sd(ddof=1)/√n, written out."""
    diffs = [candidate[t] - best[t] for t in sorted(candidate.keys() & best.keys())]
    n = len(diffs)
    mean = sum(diffs) / n
    return mean, (sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) ** 0.5, n


#: A fake priced target (a custom adapter): each trial reports ``{cost}`` dollars and
#: ``{tokens}`` tokens and is right when ``{right}`` (Python over ``seed`` and ``careful``: the
#: candidate's prompt says "check").
PRICED_TARGET = """
from pathlib import Path

from honesteval import Rollout, Score


class Priced:
    def __init__(self, **options):
        pass

    def run_target(self, task, candidate, *, seed):
        careful = "check" in (Path(candidate.path) / "prompt.txt").read_text()
        return Rollout(output={right}, cost={cost}, tokens={tokens})

    def score(self, task, rollout):
        return Score(reward=1.0 if rollout.output else 0.0)
"""


def priced_project(
    root: Path, *, cost: str = "0.01", tokens: str = "100", right: str = "seed % 2 == 0"
) -> Path:
    """The scaffold's project with its adapter replaced by :data:`PRICED_TARGET` (in
    ``priced.py``), priced and right as the expressions say."""
    from honesteval.project.scaffold import scaffold_project

    scaffold_project(root)
    (root / "priced.py").write_text(PRICED_TARGET.format(cost=cost, tokens=tokens, right=right))
    config = root / "honesteval.yaml"
    text = re.sub(
        r"adapter:\n(  .*\n)+",
        "adapter: {kind: custom, target: 'priced:Priced'}\n",
        config.read_text(),
    )
    config.write_text(text)
    return root


def screen_trial(task_id: str, seed: int, status: str, error: str | None = None) -> Any:
    """A trial record of candidate ``careful`` on val, for the screens' tests (reward 1 ok, 0
    failed, none missing)."""
    from honesteval.models import TrialRecord

    return TrialRecord(
        task_id=task_id,
        candidate="careful",
        fingerprint="f" * 64,
        split="val",
        trial=seed,
        seed=seed,
        status=status,
        reward=0.0 if status == "failed" else 1.0 if status == "ok" else None,
        error=error,
        started_at="2026-01-01T00:00:00Z",
    )
