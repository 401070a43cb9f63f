"""A gate reason's first sentence: at most 100 characters, saying who beat whom by how much
and whether the candidate crashed where the best did not; the rules' words follow it."""

from __future__ import annotations

import itertools

from honesteval.models import GateConfig
from honesteval.stats import (
    HEADLINE_CHARS,
    aggregate,
    baseline_decision,
    decide,
    first_sentence,
    headlined,
)
from honesteval.stats._aggregate import TaskTrials
from tests.gate_helpers import result


def with_failures(name: str, means: list[float], failed_tasks: int, trials: int = 2):
    """One task per mean, ``trials`` trials each; the first ``failed_tasks`` tasks' trials all
    failed (the candidate's own exception: scored at 0.0, counted)."""
    tasks = [
        TaskTrials(id=f"t{i:03d}", statuses=["failed"] * trials, rewards=[0.0] * trials)
        if i < failed_tasks
        else TaskTrials(id=f"t{i:03d}", statuses=["ok"] * trials, rewards=[m] * trials)
        for i, m in enumerate(means)
    ]
    return aggregate(tasks, candidate=name, fingerprint=f"fp-{name}", split="val")


def test_a_screen_reject_says_who_lost_by_how_much_then_the_details():
    cur = result([0.8] * 10, name="baseline")
    cand = result([0.5] * 5 + [0.7] * 5, name="careful")
    d = decide(cur, cand, GateConfig())
    out = headlined(d)
    # Δ = mean(-0.3 × 5, -0.1 × 5) = -0.2; SE = sd/√10 with sd = √(10/9 · 0.01) = 0.1054
    assert (
        first_sentence(out.reason) == "careful does not beat baseline: Δ -0.20 ± 0.03 on 10 tasks"
    )
    assert out.reason.endswith(d.reason)  # the rules' own words, after the first sentence
    assert headlined(out) == out  # said once


def test_the_candidate_that_crashed_where_the_best_did_not_is_named_in_the_first_sentence():
    cur = with_failures("baseline", [0.6] * 10, failed_tasks=0)
    cand = with_failures("careful", [0.9] * 10, failed_tasks=4)  # 8 of 20 trials failed
    head = first_sentence(headlined(decide(cur, cand, GateConfig())).reason)
    assert head.endswith("; it failed 8 of 20 trials, baseline 0"), head
    # the best failing as often is no news: the clause is absent
    same = with_failures("baseline", [0.6] * 10, failed_tasks=4)
    head = first_sentence(headlined(decide(same, cand, GateConfig())).reason)
    assert "failed" not in head, head


def test_a_baseline_says_its_reward_and_its_failures():
    base = with_failures("baseline", [1.0] * 10, failed_tasks=3)  # reward 7/10, 6 of 20 failed
    head = first_sentence(headlined(baseline_decision(base, GateConfig())).reason)
    assert head == (
        "baseline becomes the baseline at reward 0.70 (no current best yet); "
        "it failed 6 of 20 trials"
    )


def test_the_first_sentence_fits_100_characters_whatever_the_names_and_the_case():
    long = "a-candidate-whose-folder-name-goes-on-and-on" * 3
    names = ["b", long, "two words. and a period"]
    cases = 0
    for cur_name, cand_name, failed in itertools.product(names, names, (0, 9)):
        cur = with_failures(cur_name, [0.5] * 12, failed_tasks=0)
        for cand_means in ([0.9] * 12, [0.1] * 12, [0.5] * 12):
            cand = with_failures(cand_name, cand_means, failed_tasks=failed)
            for d in (decide(cur, cand, GateConfig()), baseline_decision(cand, GateConfig())):
                head = first_sentence(headlined(d).reason)
                assert 0 < len(head) <= HEADLINE_CHARS, head
                assert (failed > 0) == ("it failed 18 of 24 trials" in head), head
                cases += 1
    assert cases == 3 * 3 * 2 * 3 * 2
