"""The gate's state files read as typed records: old lines still read, fields of a later
version are kept, and a wrong-shape line stops with one line instead of being skipped."""

from __future__ import annotations

import json

import pytest

from honesteval.errors import StateFileError
from honesteval.gating.search import read_ledger
from honesteval.models import Seal
from honesteval.stats import new_online_state
from honesteval.store.state_dir import Store
from tests.e2e.test_faults import assert_one_line_error, run_main

#: A decision exactly as the first gating version wrote it (no stage, online state, rerun…).
FIRST_VERSION_LINE = {
    "accept": True,
    "indecisive": False,
    "reason": "BASELINE: no current best yet",
    "mode": "paired",
    "delta": None,
    "se": None,
    "bar": None,
    "bar_multiplier": None,
    "n_paired": 0,
    "regressions": [],
    "mde": None,
    "current": None,
    "current_fingerprint": None,
    "candidate": "base",
    "candidate_fingerprint": "f" * 64,
    "current_coverage": None,
    "candidate_coverage": 1.0,
    "current_reward": None,
    "candidate_reward": 0.5,
    "baseline": True,
    "promoted": True,
    "screened": None,
    "timestamp": "2026-01-01T00:00:00.000000Z",
}


def write_lines(store: Store, *lines: str) -> None:
    store.root.mkdir(parents=True, exist_ok=True)
    (store.root / "decisions.jsonl").write_text("".join(lines))


def test_first_version_lines_read_typed_and_later_fields_are_kept(tmp_path):
    store = Store(tmp_path / ".honesteval")
    later = {**FIRST_VERSION_LINE, "candidate": "next", "alpha_level": 0.0123}
    write_lines(
        store,
        json.dumps(FIRST_VERSION_LINE) + "\n",
        '{"accept": true, "reason": "torn mid-wri\n',  # a crash mid-append, closed since
        json.dumps(later) + "\n",
    )
    first, second = store.read_decisions()
    assert (first.candidate, first.promoted, first.stage) == ("base", True, None)
    assert first.online is None
    assert second.candidate == "next" and second.model_dump()["alpha_level"] == 0.0123
    # no line carries an online state: the search starts from the configured rule and alpha
    state = read_ledger(store, new_online_state(alpha=0.1)).state
    assert (state.rule, state.alpha, state.tests) == ("lord++", 0.1, 0)


@pytest.mark.parametrize(
    "bad_line",
    [
        "[1, 2]",
        json.dumps({**FIRST_VERSION_LINE, "accept": "maybe"}),
        json.dumps({k: v for k, v in FIRST_VERSION_LINE.items() if k != "candidate"}),
    ],
    ids=["not an object", "wrong type", "required field missing"],
)
def test_a_wrong_shape_decision_line_stops_status_with_one_line(make_project, capsys, bad_line):
    root = make_project(["pass"])
    store = Store.for_project(root)
    write_lines(store, json.dumps(FIRST_VERSION_LINE) + "\n", bad_line + "\n")
    before = (store.root / "decisions.jsonl").read_bytes()
    code, _, err = run_main(["status", "--project", str(root)], capsys)
    assert_one_line_error(code, err, "decisions.jsonl", "line 2", "will not reset it")
    assert (store.root / "decisions.jsonl").read_bytes() == before


def test_seal_round_trips_and_a_wrong_type_is_refused(tmp_path):
    store = Store(tmp_path / ".honesteval")
    assert store.read_seal() is None
    seal = Seal(candidate="base", sealed_at="2026-01-01T00:00:00Z", reward=0.75, n_tasks=4)
    store.write_seal(seal)
    assert store.read_seal() == seal
    (store.root / "seal.json").write_text(json.dumps({"candidate": 3, "sealed_at": "x"}))
    with pytest.raises(StateFileError, match=r"seal\.json: wrong shape \(candidate"):
        store.read_seal()
