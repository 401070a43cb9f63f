"""The ledger of confirmations in rounds: a budget spent in between is continued on the same
reserved level, recorded as a continuation line; a forged one breaks the replay; a ledger
written before rounds existed replays as it did (golden files written by that version).

Expected levels from the LORD++ formula through ``tests.unit.test_online.g``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from honesteval.gating.ledger import (
    Confirmation,
    read_best,
    record_decision,
    reserve_confirmation,
    search_ledger,
    staged,
)
from honesteval.models import GateConfig
from honesteval.project.loader import load_project
from honesteval.stats import decide, next_level
from honesteval.store.state_dir import Store
from tests.gate_helpers import result
from tests.unit.test_eprocess import _split
from tests.unit.test_ledger import baseline
from tests.unit.test_online import g

W0 = 0.025
GOLDEN = Path(__file__).parent / "data" / "ledger_before_rounds"


def _rounds(rng: np.random.Generator, rounds: int, gain_tasks: int) -> tuple:
    """(best, candidate) rewards over 6 tasks: the candidate passes every trial of the first
    ``gain_tasks`` tasks, else equals the best (a modest, real gain)."""
    cur = (rng.random((rounds, 6)) < 0.5).astype(float)
    cand = cur.copy()
    cand[:, :gain_tasks] = 1.0
    return cur, cand


def _confirm(proj, cfg, cur, cand):
    best = read_best(proj)
    screen_cand = result([0.9] * 6, name="a")
    screen = staged(decide(best.result, screen_cand, cfg), cfg)
    since = search_ledger(proj).lines  # this gate's start: earlier decisions are not shared
    reserved = reserve_confirmation(proj, best, screen_cand, cfg, since, screen_trials=1)
    evidence = Confirmation(_split(cur, best.name), _split(cand, "a"), cfg, budget=reserved.budget)
    return reserved, record_decision(proj, screen, screen_cand, best, evidence, reserved)


def test_a_budget_spent_in_between_is_continued_on_the_same_level_and_seeds(make_project):
    proj = baseline(make_project)
    rng = np.random.default_rng(1)
    cur, cand = _rounds(rng, 12, gain_tasks=2)
    small = GateConfig(confirm_trials=3)
    first, d1 = _confirm(proj, small, cur[:3], cand[:3])
    assert d1.indecisive and d1.confirm_stop == "exhausted" and not d1.promoted
    assert d1.confirm_settle is not None and f"--confirm-trials {d1.confirm_settle}" in d1.reason
    led = search_ledger(proj)
    assert led.ok and led.state.tests == 1
    # a larger budget: the same confirmation 1 goes on (no new level spent)
    again, d2 = _confirm(proj, GateConfig(confirm_trials=12), cur, cand)
    assert again.record.j == first.record.j == 1 and again.budget == 12
    assert again.record.base_seed == first.record.base_seed
    kinds = [json.loads(x.text)["kind"] for x in Store(proj.state_dir).read_ledger_lines() or []]
    assert kinds == ["decision", "reservation", "decision", "continuation", "decision"]
    led = search_ledger(proj)
    assert led.ok and led.state.tests == 1
    assert led.state.spent == pytest.approx(W0 * g(1))  # one level, spent once
    assert d2.level == pytest.approx(W0 * g(1)) and d2.confirm_budget == 12
    assert d2.promoted and d2.confirm_stop == "promote" and led.state.promotions == [1]
    assert 3 < d2.confirm_rounds <= 12  # it went on past the first budget


def test_the_same_budget_again_is_a_new_confirmation_at_the_next_level(make_project):
    proj = baseline(make_project)
    cur, cand = _rounds(np.random.default_rng(1), 3, gain_tasks=2)
    small = GateConfig(confirm_trials=3)
    first, d1 = _confirm(proj, small, cur, cand)
    assert d1.confirm_stop == "exhausted"
    second, d2 = _confirm(proj, small, cur, cand)
    assert (first.record.j, second.record.j) == (1, 2)
    assert second.record.base_seed != first.record.base_seed  # fresh seeds
    assert d2.level == pytest.approx(W0 * g(2))


def test_a_continuation_of_a_confirmation_that_did_not_run_out_breaks_the_replay(make_project):
    proj = baseline(make_project)
    rng = np.random.default_rng(2)
    cur, cand = _rounds(rng, 8, gain_tasks=6)  # promoted: nothing to continue
    reserved, d = _confirm(proj, GateConfig(confirm_trials=8), cur, cand)
    assert d.promoted
    r = reserved.record
    forged = {
        "kind": "continuation",
        "j": r.j,
        "n_trials": 30,
        "current": r.current,
        "current_fingerprint": r.current_fingerprint,
        "candidate": r.candidate,
        "candidate_fingerprint": r.candidate_fingerprint,
        "online": search_ledger(proj).state.model_dump(mode="json"),
    }
    Store(proj.state_dir).append_ledger(forged)
    led = search_ledger(proj)
    assert not led.ok and "continues confirmation 1" in led.message()


def test_a_ledger_written_before_rounds_replays_as_it_did(make_project):
    """Golden files: a baseline, a confirmation not promoted, one promoted (j = 2), written
    by the version before confirmations ran in rounds."""
    proj = load_project(make_project())
    proj.state_dir.mkdir(parents=True, exist_ok=True)
    for name in ("decisions.jsonl", "decisions.head.json", "best.json"):
        shutil.copy(GOLDEN / name, proj.state_dir / name)
    led = search_ledger(proj)
    assert led.ok, led.message() if led.breaks else ""
    assert (led.state.tests, led.state.promotions) == (2, [2])
    assert led.state.spent == pytest.approx(W0 * (g(1) + g(2)))
    assert read_best(proj).name == "b"
    # LORD++ after τ1 = 2: w0·γ_3 + (α − w0)·γ_1
    assert next_level(led.state) == pytest.approx(W0 * g(3) + (0.05 - W0) * g(1))
