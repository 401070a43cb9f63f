"""Builders for throw-away projects, and a fault-injecting target for them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

# The fault-injecting target and scorer. Each task says how its trials behave in
# task["input"]["behaviour"]; every call of the target is logged to calls.log (one line per
# call: task id, seed) so tests can count attempts and calls from outside.
FAULTY_TARGET = r"""
import json, os, random, threading, time
from pathlib import Path
from honesteval import InfraError, RateLimited

HERE = Path(__file__).parent
_live = 0
_peak = 0
_lock = threading.Lock()


def _log(task_id, seed):
    line = json.dumps({"task": task_id, "seed": seed}) + "\n"
    with open(HERE / "calls.log", "a") as fh:
        fh.write(line)


def calls(task_id, seed):
    path = HERE / "calls.log"
    if not path.exists():
        return 0
    return sum(1 for l in path.read_text().splitlines()
               if json.loads(l) == {"task": task_id, "seed": seed})


def run(task, candidate_dir, seed):
    global _live, _peak
    inp = task["input"]
    behaviour = inp["behaviour"]
    previous = calls(task["id"], seed)
    _log(task["id"], seed)
    with _lock:
        _live += 1
        _peak = max(_peak, _live)
        (HERE / "peak.txt").write_text(str(_peak))
    try:
        if inp.get("sleep"):
            time.sleep(inp["sleep"])
        outage = Path(candidate_dir) / "outage.txt"  # this candidate's backend is down here
        if outage.exists() and task["id"] in outage.read_text().split():
            raise InfraError("outage")
        if (HERE / "drift.txt").exists():  # the world changed under the current best
            return {"answer": "drifted"}
        quality = float((Path(candidate_dir) / "quality.txt").read_text())
        if behaviour == "pass":
            return {"answer": task["target"]}
        if behaviour == "fail":
            return {"answer": "wrong"}
        if behaviour == "infra":
            raise InfraError("backend down")
        if behaviour == "flaky":  # fails twice, then works
            if previous < inp.get("failures", 2):
                raise InfraError(f"blip {previous + 1}")
            return {"answer": task["target"]}
        if behaviour == "rate_limited":
            raise RateLimited("429", retry_after=0.01)
        if behaviour == "hang":
            time.sleep(inp.get("hang_s", 5))
            return {"answer": task["target"]}
        if behaviour == "bug":
            raise ValueError("bad value in the target")
        if behaviour == "exits":  # the candidate calls sys.exit: its failure, not the harness's
            raise SystemExit(3)
        if behaviour == "interrupts":
            raise KeyboardInterrupt("candidate gave up")
        if behaviour == "crash_hard":  # returns 0.6 on most tasks, crashes on the hard ones
            if inp.get("hard"):
                raise RuntimeError("cannot handle this task")
            return {"value": 0.6}
        if behaviour == "scorer_error":
            return {"answer": "UNGRADEABLE"}
        if behaviour == "nan":
            return {"answer": "NAN"}
        if behaviour == "seeded":  # passes with probability `quality`, decided by the seed
            ok = random.Random(f"{task['id']}-{seed}").random() < quality
            return {"answer": task["target"] if ok else "wrong"}
        if behaviour == "graded":  # a continuous reward that depends on the seed
            return {"value": min(1.0, quality * random.Random(seed).random() + 0.1)}
        if behaviour == "same":  # ignores its seed
            return {"answer": task["target"]}
        raise AssertionError(behaviour)
    finally:
        with _lock:
            _live -= 1


def score(task, output):
    if "value" in output:
        return {"reward": output["value"], "feedback": "graded"}
    answer = output["answer"]
    if answer == "UNGRADEABLE":
        raise RuntimeError("judge unreachable")
    if answer == "NAN":
        return float("nan")
    return {"reward": 1.0 if answer == task["target"] else 0.0,
            "feedback": "right" if answer == task["target"] else "wrong answer"}
"""


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


def run_plain(root: Path, candidate: str = "base", split: str = "val", **plan_kw: Any):
    """Plan and run every trial in this thread, no Prefect: (records, SplitResult)."""
    from honesteval.evaluation import adapter_for, finish_evaluation, plan_evaluation
    from honesteval.trials import run_trial_with_retries

    plan = plan_evaluation(root, candidate, split, **plan_kw)
    adapter = adapter_for(str(root))
    records = [run_trial_with_retries(adapter, s, plan.settings) for s in plan.todo]
    return records, finish_evaluation(plan, records)
