"""``export`` streams: its bytes equal rows computed straight from the trial logs and the stored
results on disk, however many stored results share a log (each log is read once)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from honesteval.models import TaskTrials, TrialRecord
from honesteval.project.loader import load_project
from honesteval.stats import aggregate
from honesteval.store.state_dir import Store
from tests.helpers import ProjectFactory, run_cli, stored_trials

TASKS = ["t-b", "=t-a", "t-c"]  # not in sorted order; one a spreadsheet formula
COLUMNS = [
    *("split", "candidate", "fingerprint", "task_id", "trial", "seed", "status", "reward"),
    *("attempts", "error", "feedback", "started_at", "target_s", "score_s", "tokens", "cost"),
    *("output", "errors"),
]
FP_OLD, FP_NEW = "a" * 64, "b" * 64


def _record(cand: str, fp: str, tid: str, k: int, **kw: Any) -> TrialRecord:
    fields: dict[str, Any] = {
        "task_id": tid,
        "candidate": cand,
        "fingerprint": fp,
        "split": "val",
        "trial": k,
        "seed": k,
        "status": "ok",
        "reward": 0.5 * (k % 3),
        "started_at": f"2026-12-0{k + 1}T00:00:00Z",
        "rollout": {"answer": f"{cand}/{fp[:1]}/{tid}/{k}", "uni": "é"},
        "feedback": "=HYPERLINK(1)" if k == 1 else None,
    }
    fields.update(kw)
    return TrialRecord(**fields)


def _result(store: Store, cand: str, fp: str, n_trials: int, finished: str) -> None:
    tasks = [TaskTrials(id=t, statuses=["ok"] * n_trials, rewards=[0.5] * n_trials) for t in TASKS]
    result = aggregate(tasks, candidate=cand, fingerprint=fp, split="val", n_trials=n_trials)
    store.write_result(result.model_copy(update={"finished_at": finished}))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Candidate ``a`` in two versions (the old one rerun: 3 stored results share its log),
    ``b`` in one; logs hold superseded lines, and trials no stored result names."""
    root = ProjectFactory(tmp_path_factory.mktemp("export"))(
        tasks=[{"id": t, "input": t} for t in TASKS], candidates={"a": 0.5, "b": 0.5}
    )
    store = Store(load_project(root).state_dir)
    for cand, fp in (("a", FP_OLD), ("a", FP_NEW), ("b", FP_NEW)):
        for tid in TASKS:
            for k in range(4):  # k = 3: stored, but no result has 4 trials
                store.write_trial(
                    _record(cand, fp, tid, k, status="scorer_error", reward=None, error="await")
                )
                store.write_trial(_record(cand, fp, tid, k))
        store.write_trial(
            _record(
                cand,
                fp,
                "t-b",
                0,
                status="infra_error",
                reward=None,
                error="down",
                errors=["down", "down"],
                attempts=2,
            )
        )
    _result(store, "a", FP_OLD, 2, "2026-12-01T00:00:00Z")
    _result(store, "a", FP_NEW, 3, "2026-12-02T00:00:00Z")
    _result(store, "a", FP_OLD, 3, "2026-12-03T00:00:00Z")  # a rerun of the old version
    _result(store, "a", FP_OLD, 3, "2026-12-04T00:00:00Z")
    _result(store, "b", FP_NEW, 1, "2026-12-05T00:00:00Z")
    return root


def _expected_records(root: Path) -> list[dict[str, Any]]:
    """The last line of each trial in the logs, for the (task, seed) a stored result names;
    ordered by split, candidate, task, trial, seed, then by the oldest result naming it."""
    trials = {
        (r["candidate"], r["fingerprint"], r["task_id"], r["seed"]): r for r in stored_trials(root)
    }
    results = [json.loads(p.read_text()) for p in (root / ".honesteval" / "results").glob("*.json")]
    results.sort(key=lambda r: r["finished_at"])
    first: dict[tuple[str, str, str, int], int] = {}
    for i, r in enumerate(results):
        for t in r["per_task"]:
            for k in range(r["n_trials"]):
                first.setdefault((r["candidate"], r["fingerprint"], t["id"], r["base_seed"] + k), i)

    def order(key: tuple[str, str, str, int]) -> tuple[Any, ...]:
        return (
            *(trials[key][c] for c in ("split", "candidate", "task_id", "trial", "seed")),
            first[key],
        )

    return [trials[key] for key in sorted(first, key=order)]


def _row(rec: dict[str, Any]) -> dict[str, Any]:
    return {c: rec.get({"output": "rollout"}.get(c, c)) for c in COLUMNS}


def _cell(value: Any) -> Any:
    """OWASP: a text cell starting with = + - @ tab CR that is not a number gets a quote."""
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        try:
            float(value)
        except ValueError:
            return "'" + value
    return value


def test_export_jsonl_bytes_are_the_logs_rows(project: Path) -> None:
    proc = run_cli("export", "--project", str(project), "--format", "jsonl")
    assert proc.returncode == 0, proc.stderr
    expected = "".join(
        json.dumps(_row(r), ensure_ascii=False) + "\n" for r in _expected_records(project)
    )
    # a: 3 tasks × 3 seeds in each of 2 versions; b: 3 tasks × 1 seed
    assert len(expected.splitlines()) == 3 * 3 * 2 + 3
    assert proc.stdout == expected


def test_export_csv_file_bytes_are_the_logs_rows(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "trials.csv"
    only_a = ("--format", "csv", "--candidate", "a", "--out", str(out))
    proc = run_cli("export", "--project", str(project), *only_a)
    assert proc.returncode == 0, proc.stderr
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for rec in _expected_records(project):
        if rec["candidate"] != "a":
            continue
        row = _row(rec)
        row["output"] = json.dumps(row["output"], ensure_ascii=False)
        row["errors"] = json.dumps(row["errors"], ensure_ascii=False)
        writer.writerow([_cell(row[c]) for c in COLUMNS])
    assert out.read_bytes() == buf.getvalue().encode("utf-8")
    text = out.read_text(encoding="utf-8")
    assert "'=t-a" in text and "'=HYPERLINK(1)" in text  # the injection guard holds
    infra = [r for r in csv.DictReader(io.StringIO(text)) if r["status"] == "infra_error"]
    assert len(infra) == 2 and {r["attempts"] for r in infra} == {"2"}  # the newest line won
