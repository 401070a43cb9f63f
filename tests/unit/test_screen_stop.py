"""Stopping a gate's screen early (issue 28 §4): the rule against values computed by hand and
with scipy, a futile candidate stopped through the real gate (API, local orchestration), and an
interrupted staged screen resumed without paying a trial twice."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

import honesteval
from honesteval.evaluation.local import run_plans_locally
from honesteval.evaluation.plan import EvaluationPlan
from honesteval.gating.run import prepare_gate, run_gate
from honesteval.models import GateConfig, GateDecision, GateRequest, SplitResult, trial_seed
from honesteval.project.loader import load_project
from honesteval.stats import (
    GateDesign,
    ScreenStopping,
    boundaries,
    conditional_pass,
    promotion_power,
    round_decision,
    screen_round,
    screen_stopping,
)
from honesteval.views.text import confirmation_notice

# --- the rule, against scipy and hand algebra ---------------------------------------------


@pytest.mark.parametrize(
    ("z", "f", "bar", "drift"),
    [(0.4, 1 / 3, 1.0, 0.0), (-0.2, 2 / 3, 1.0, 1.5), (1.7, 0.5, 1.645, 2.0)],
)
def test_conditional_pass_is_the_brownian_motion_probability(
    z: float, f: float, bar: float, drift: float
) -> None:
    # B(1) | B(f) = z·√f  ~  N(z·√f + drift·(1 − f), 1 − f)
    expected = norm.sf(bar, loc=z * math.sqrt(f) + drift * (1 - f), scale=math.sqrt(1 - f))
    assert conditional_pass(z, f, bar, drift) == pytest.approx(expected, rel=1e-12)


def test_conditional_pass_matches_a_simulated_sum_of_rounds() -> None:
    # Independent of the formula: K rounds, each a N(θ/√K, 1) increment of S; Z_k = S_k/√k.
    # Given Z_k = z, Z_K = (z·√k + the remaining K − k increments)/√K.
    rng = np.random.default_rng(3)
    k, rounds, z, theta, bar = 1, 3, 0.5, 1.0, 1.0
    rest = rng.normal(theta / math.sqrt(rounds), 1.0, (400_000, rounds - k)).sum(axis=1)
    simulated = float(np.mean((z * math.sqrt(k) + rest) / math.sqrt(rounds) > bar))
    assert conditional_pass(z, k / rounds, bar, theta) == pytest.approx(simulated, abs=0.004)


def test_the_boundaries_are_where_the_conditional_powers_cross_their_thresholds() -> None:
    rule = ScreenStopping(futility=0.1, efficacy=0.9)
    for done, rounds, bar in [(1, 3, 1.0), (2, 3, 1.0), (1, 2, 1.645), (3, 5, 0.5)]:
        f = done / rounds
        low, high = boundaries(done, rounds, bar, rule)
        # by hand: trend θ̂ = z/√f makes B(1)'s mean z/√f, so CP_trend = 1 − Φ((c − z/√f)/√(1−f))
        assert norm.sf((bar - low / math.sqrt(f)) / math.sqrt(1 - f)) == pytest.approx(0.1)
        assert norm.sf((bar - high * math.sqrt(f)) / math.sqrt(1 - f)) == pytest.approx(0.9)
        assert screen_round(low - 1e-9, done, rounds, bar, rule).action == "futility"
        assert screen_round(low + 1e-9, done, rounds, bar, rule).action != "futility"
        assert screen_round(high + 1e-9, done, rounds, bar, rule).action == "efficacy"
        assert screen_round(high - 1e-9, done, rounds, bar, rule).action == "continue"


def test_round_one_of_three_at_the_default_bar_stops_below_z_of_minus_0_027() -> None:
    # √(1/3)·(1 − 1.2816·√(2/3)) = 0.57735·(1 − 1.04640) = −0.0268
    low, high = boundaries(1, 3, 1.0, ScreenStopping(0.1, 0.9))
    assert low == pytest.approx(-0.0268, abs=5e-4)
    # (1 + 1.2816·√(2/3)) / √(1/3) = 2.0464 / 0.57735 = 3.544
    assert high == pytest.approx(3.544, abs=5e-3)


def test_the_last_round_never_stops_early_and_a_stop_can_be_switched_off() -> None:
    rule = ScreenStopping(futility=0.1, efficacy=0.9)
    assert screen_round(-9.0, 3, 3, 1.0, rule).action == "continue"
    assert screen_round(-9.0, 1, 3, 1.0, ScreenStopping(None, 0.9)).action == "continue"
    assert screen_round(9.0, 1, 3, 1.0, ScreenStopping(0.1, None)).action == "continue"
    with pytest.raises(ValueError, match="futility"):
        ScreenStopping(futility=1.5)


def test_only_a_two_stage_gate_with_a_stop_on_is_staged() -> None:
    # the default two-stage gate is staged, its futility stop lenient enough for small vals
    # (docs/statistics.md)
    assert screen_stopping(GateConfig()) == ScreenStopping(futility=0.05, efficacy=0.9)
    assert screen_stopping(GateConfig(confirm=False)) is None  # --no-confirm never stages
    assert screen_stopping(GateConfig(screen_futility=0.1, confirm=False)) is None
    one = GateConfig(screen_futility=0.1, screen_efficacy=None)
    assert screen_stopping(one) == ScreenStopping(0.1, None)
    # both stops switched off (YAML null): the unstaged screen
    off = GateConfig.model_validate({"screen_futility": None, "screen_efficacy": None})
    assert screen_stopping(off) is None


def _decision(delta: float, se: float, accept: bool) -> GateDecision:
    return GateDecision(
        accept=accept,
        reason=f"{'ACCEPT' if accept else 'REJECT'}: paired Δ over 50 tasks = {delta:+.4f}",
        mode="paired",
        delta=delta,
        se=se,
        bar=se,
        bar_multiplier=1.0,
        candidate="c",
        candidate_fingerprint="fp",
    )


def test_a_futile_round_becomes_a_reject_that_says_how_far_it_ran() -> None:
    rule = ScreenStopping(futility=0.1, efficacy=0.9)
    d, stop = round_decision(_decision(-0.01, 0.05, False), 1, 3, rule, 50)
    z = -0.2
    cp = norm.sf((1.0 - z / math.sqrt(1 / 3)) / math.sqrt(2 / 3))
    assert stop and not d.accept
    assert (d.screen_stop, d.screen_round, d.screen_rounds) == ("futility", 1, 3)
    assert (d.screen_trials, d.screen_trials_planned) == (50, 150)
    assert d.screen_cp == pytest.approx(cp)
    assert d.reason.startswith("REJECT (stopped for futility after round 1 of 3")
    assert "50 of 150 trials" in d.reason


def test_efficacy_needs_the_screen_itself_to_pass() -> None:
    rule = ScreenStopping(futility=0.1, efficacy=0.9)
    passed, stop = round_decision(_decision(0.2, 0.05, True), 2, 3, rule, 50)  # z = 4
    assert stop and passed.accept and passed.screen_stop == "efficacy"
    # same z, but the screen's own rules rejected it (a veto): it goes on to the next round
    vetoed, stop = round_decision(_decision(0.2, 0.05, False), 2, 3, rule, 50)
    assert not stop and vetoed.screen_stop is None and vetoed.screen_round == 2


def test_the_two_stage_power_simulates_the_staged_screen() -> None:
    plain = GateDesign(0.0, 0.4, 50, 3, 9, 1.0, 0.01)
    staged = GateDesign(0.0, 0.4, 50, 3, 9, 1.0, 0.01, screen_stopping=ScreenStopping(0.1, 0.9))
    # A futility stop can only remove passes of a candidate with no gain, never add them:
    # its power stays below the unstaged screen's and the confirmation's own level
    assert promotion_power(0.0, staged) <= 0.01 + 0.005
    # for a clear gain both pass nearly always; for a small one the futility stop costs a bit
    assert promotion_power(0.25, staged) == pytest.approx(promotion_power(0.25, plain), abs=0.02)
    assert promotion_power(0.08, staged) <= promotion_power(0.08, plain) + 0.02


# --- through the real gate ----------------------------------------------------------------

TARGET = """\
from pathlib import Path


def run(task, candidate_dir, seed):
    with open(Path(__file__).parent / "calls.log", "a") as log:
        log.write(f"{Path(candidate_dir).name} {task['id']} {seed}\\n")
    return (Path(candidate_dir) / "answer.txt").read_text().strip()


def score(task, output):
    return {"reward": 1.0 if output == task["target"] else 0.0}
"""
TARGETS = ["yes", "yes", "no"] * 4  # 12 val tasks: 8 want "yes", 4 want "no"


def _project(base: Path, futility: float, efficacy: float | None = None) -> Path:
    root = base / "proj"
    for name, answer in (("best", "yes"), ("worse", "no"), ("never", "maybe")):
        (root / "candidates" / name).mkdir(parents=True)
        (root / "candidates" / name / "answer.txt").write_text(answer + "\n")
    tasks = [{"id": f"t{i:02d}", "input": i, "target": t} for i, t in enumerate(TARGETS)]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    ids = [t["id"] for t in tasks]
    stops = f"screen_futility: {futility}" + (
        "" if efficacy is None else f", screen_efficacy: {efficacy}"
    )
    (root / "honesteval.yaml").write_text(
        "name: stop\ntasks: tasks.jsonl\n"
        f"splits: {{train: [], val: {json.dumps(ids)}, test: []}}\n"
        'adapter: {kind: python, target: "target:run", scorer: "target:score"}\n'
        f"trials: 3\nretries: 0\ngate: {{{stops}}}\n"
    )
    (root / "target.py").write_text(TARGET)
    return root


def _calls(root: Path, candidate: str) -> list[tuple[str, int]]:
    lines = (root / "calls.log").read_text().split("\n")
    return [(t, int(s)) for c, t, s in (ln.split() for ln in lines if ln) if c == candidate]


# "worse" answers "no": on the 8 "yes" tasks Δ = −1, on the 4 "no" tasks +1, in every trial.
# Δ = −4/12, SD = sqrt((8·(2/3)² + 4·(4/3)²)/11) = sqrt(96/99), SE = SD/√12, z = Δ/SE.
DELTA = -1 / 3
SE = math.sqrt(96 / 99) / math.sqrt(12)
Z = DELTA / SE  # −1.1726


def test_a_futile_candidate_stops_after_one_round_through_the_real_gate(tmp_path: Path) -> None:
    root = _project(tmp_path, futility=0.1)
    assert honesteval.gate(root, "best", orchestration="local").baseline
    d = honesteval.gate(root, "worse", orchestration="local")
    cp = norm.sf((1.0 - Z / math.sqrt(1 / 3)) / math.sqrt(2 / 3))  # the trend's CP, round 1
    assert not d.accept and not d.indecisive
    assert (d.screen_stop, d.screen_round, d.screen_rounds) == ("futility", 1, 3)
    assert (d.screen_trials, d.screen_trials_planned) == (12, 36)
    assert d.delta == pytest.approx(DELTA) and d.se == pytest.approx(SE)
    assert d.screen_cp == pytest.approx(cp)
    # the candidate paid for one trial a task, on the screen's first seed only
    assert sorted(_calls(root, "worse")) == [(f"t{i:02d}", 0) for i in range(12)]
    recorded = json.loads((root / ".honesteval" / "decisions.jsonl").read_text().split("\n")[-2])
    assert recorded["screen_stop"] == "futility" and recorded["screen_trials"] == 12


class _Killed(Exception):
    """The process dies between two rounds."""


def test_an_interrupted_staged_screen_resumes_without_paying_a_trial_twice(
    tmp_path: Path,
) -> None:
    # futility 3e-5 (z_{1−γ} = 4.013): round 1's boundary √(1/3)·(1 − 4.013·√(2/3)) = −1.314
    # lets z = −1.173 go on, round 2's √(2/3)·(1 − 4.013·√(1/3)) = −1.075 stops it.
    futility = 3e-5
    assert boundaries(1, 3, 1.0, ScreenStopping(futility, None))[0] < Z
    assert boundaries(2, 3, 1.0, ScreenStopping(futility, None))[0] > Z
    whole = _project(tmp_path / "whole", futility)
    cut = _project(tmp_path / "cut", futility)
    for root in (whole, cut):
        honesteval.gate(root, "best", orchestration="local")
    expected = honesteval.gate(whole, "worse", orchestration="local")
    assert (expected.screen_stop, expected.screen_round) == ("futility", 2)

    rounds: list[int] = []

    def dies_after_round_one(plans: Sequence[EvaluationPlan]) -> list[SplitResult]:
        results = run_plans_locally(plans)
        rounds.append(plans[-1].n_trials)
        if len(rounds) == 1:
            raise _Killed
        return results

    with pytest.raises(_Killed):
        run_gate(
            prepare_gate(load_project(cut), GateRequest(candidate="worse")),
            run_plans=dies_after_round_one,
            confirmation_notice=confirmation_notice,
        )
    assert rounds == [1] and sorted(_calls(cut, "worse")) == [(f"t{i:02d}", 0) for i in range(12)]
    assert (cut / ".honesteval" / "decisions.jsonl").read_text().count("\n") == 1  # baseline

    again = honesteval.gate(cut, "worse", orchestration="local")
    for field in ("accept", "screen_stop", "screen_round", "screen_trials", "delta", "se"):
        assert getattr(again, field) == getattr(expected, field), field
    calls = _calls(cut, "worse")
    assert len(calls) == len(set(calls)) == 24  # seeds 0 and 1, each task once
    assert sorted(calls) == sorted(_calls(whole, "worse"))  # the uninterrupted gate's trials
    shutil.rmtree(tmp_path)


def test_an_efficacy_stop_only_starts_the_confirmation_earlier(tmp_path: Path) -> None:
    # "never" is the best (reward 0 everywhere); "best" answers "yes": Δ = +1 on the 8 "yes"
    # tasks, 0 on the 4 "no" tasks. Δ = 2/3, SD = sqrt((8·(1/3)² + 4·(2/3)²)/11) = sqrt(24/99),
    # z = (2/3)/(SD/√12) = 4.69 ≥ 3.544 (round 1's efficacy boundary, c = 1, ρ = 0.9).
    z = (2 / 3) / (math.sqrt(24 / 99) / math.sqrt(12))
    assert z >= boundaries(1, 3, 1.0, ScreenStopping(0.1, 0.9))[1]
    root = _project(tmp_path, futility=0.1, efficacy=0.9)
    honesteval.gate(root, "never", orchestration="local")
    d = honesteval.gate(root, "best", orchestration="local")
    assert d.stage == "confirm"  # the confirmation decided it, at the online level
    assert (d.screen_stop, d.screen_round, d.screen_trials) == ("efficacy", 1, 12)
    assert d.screen_cp == pytest.approx(norm.sf((1.0 - z * math.sqrt(1 / 3)) / math.sqrt(2 / 3)))
    # the confirmation's budget is what the plan says: 3 × the 3 planned screen trials a task
    # (not 3 × the one round the screen ran), on fresh seeds; it ran rounds until decided:
    # the capital is the mean over the bets λ = 0.1, 0.2, 0.4, 0.8 of (1 + λ)^(trials of
    # Δ = +1): round 1, (1 + λ)^8, 32.9 < 1/alpha_1 = 91.7; round 2, (1 + λ)^16, 3096 ≥ 91.7
    # (each task its own seeds: 12 tasks × 2 rounds, 24 seeds, the same on both sides)
    fresh = {(t, seed) for t, seed in _calls(root, "best") if seed >= 10**9}
    assert (d.confirm_budget, d.confirm_rounds, d.confirm_stop) == (9, 2, "promote")
    assert d.confirm_base_seed is not None
    tasks = {t for t, _ in fresh}
    wanted = {(t, trial_seed(d.confirm_base_seed, t, k, "per_task")) for t in tasks for k in (0, 1)}
    assert len(tasks) == 12 and fresh == wanted and len({s for _, s in fresh}) == 24
    assert fresh <= set(_calls(root, "never"))
    bets = [0.1, 0.2, 0.4, 0.8]
    assert sum((1 + b) ** 8 for b in bets) / 4 < 1 / d.level
    assert d.e_value == pytest.approx(sum((1 + b) ** 16 for b in bets) / 4)
    assert sorted(seed for _, seed in _calls(root, "best") if seed < 10**9) == [0] * 12
