"""``results/index.jsonl``: status reads one small line per result, not every result file."""

from __future__ import annotations

import json

from honesteval.models import TaskTrials
from honesteval.stats import aggregate
from honesteval.store.state_dir import RESULTS_INDEX, Store
from honesteval.views.status import project_status


def _result(candidate: str, rewards: list[float], finished_at: str):
    tasks = [TaskTrials(id=f"t{i}", statuses=["ok"], rewards=[r]) for i, r in enumerate(rewards)]
    return aggregate(tasks, candidate=candidate).model_copy(update={"finished_at": finished_at})


def test_summaries_come_from_the_index_and_from_files_it_lacks(make_project):
    root = make_project(["pass"])
    store = Store.for_project(root)
    written = [
        _result("a", [1.0, 0.0], "2026-01-01T00:00:03Z"),
        _result("b", [1.0, 1.0, 0.5], "2026-01-01T00:00:01Z"),
        _result("c", [0.0, 0.0], "2026-01-01T00:00:04Z"),
    ]
    paths = [store.write_result(r) for r in written]
    index = store.root / "results" / RESULTS_INDEX
    lines = index.read_text().splitlines()
    assert len(lines) == 3
    # A result from before the index existed (or a crash before its line was appended),
    # a torn last line, and a line whose result file is gone.
    legacy = _result("old", [0.25], "2026-01-01T00:00:02Z")
    (store.root / "results" / "val__old__x.json").write_text(legacy.model_dump_json())
    paths[2].unlink()
    index.write_text("\n".join(lines) + '\n{"file": "val__b')

    got = store.read_result_summaries()
    assert [s["candidate"] for s in got] == ["b", "old", "a"]  # by finished_at
    by_name = {s["candidate"]: s for s in got}
    assert by_name["a"]["reward"] == 0.5 and by_name["a"]["n_tasks"] == 2
    assert by_name["b"]["reward"] == (1.0 + 1.0 + 0.5) / 3
    assert by_name["old"]["reward"] == 0.25 and by_name["old"]["coverage"] == 1.0


def test_status_lists_the_last_results_with_their_numbers(make_project):
    root = make_project(["pass"])
    store = Store.for_project(root)
    for i in range(12):
        store.write_result(_result(f"c{i}", [i / 20, 1.0], f"2026-01-01T00:00:{i:02d}Z"))
    report = project_status(root, last=5)
    assert [r["candidate"] for r in report.results] == [f"c{i}" for i in range(7, 12)]
    assert [r["reward"] for r in report.results] == [(i / 20 + 1.0) / 2 for i in range(7, 12)]
    json.dumps(report.as_json())  # what --json prints


def test_status_reads_the_newest_result_of_the_last_candidates_and_of_the_best(make_project):
    root = make_project(["pass"])
    store = Store.for_project(root)
    for i in range(6):  # c0 evaluated twice: its second result is the newest
        store.write_result(_result(f"c{i}", [i / 10, 1.0], f"2026-01-01T00:00:{i:02d}Z"))
    store.write_result(_result("c0", [0.9, 1.0], "2026-01-01T00:00:30Z"))
    latest = store.read_latest_results("val", last=2, keep="c1")
    assert list(latest) == ["c1", "c5", "c0"]  # the best kept; then by last evaluation
    assert latest["c0"].reward == (0.9 + 1.0) / 2
    assert list(store.read_latest_results("val")) == ["c1", "c2", "c3", "c4", "c5", "c0"]
