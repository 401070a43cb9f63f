"""Whole searches through the real gate code: is a promotion honest over hundreds of gate calls?

Run: ``python bench/search_sim.py`` (a few minutes on 2 cores; ``--null-reps`` /
``--mixed-reps`` for tighter MC errors, ``--mixed-reps 0`` for the null world alone,
``--checkpoint FILE`` to keep every finished search so that a killed run resumes and a partial
one counts; every search is seeded by ``--seed``, its world and its number alone).
``--compare-stopping [--quick] [--futility 0.5 --efficacy 0.9]``: the two-stage gate with its
screen unstaged against the same gate with its screen staged and stopped early (the default
since issue 28 §4, below; about 200 s of CPU, ``--quick`` under a minute).
No Prefect: trials are simulated with numpy, every result goes through the real
``aggregate``; every screen through the real ``decide``; every confirmation through the real
``promoted_paths`` and ``gating.confirm_decision`` (the level from the ledger's online state,
the decision, the state's next step); every nightly check through the real ``drift_report``.

World: n val tasks with heterogeneous pass probabilities (logits ~ N(0, 1)), binary rewards.
A candidate is the current best with every task's logit shifted by +gain (better), 0 (equal)
or −gain (worse). "True quality" is the mean pass probability over the val tasks; a promotion
is *false* when the candidate is not better than the best it replaced.

Arms (same candidates, same screens until the arms' bests diverge):
- ``today``: single stage, paired k_se = 1 (SPEC §4 default), the screen's result is the
  reference. This is ``honesteval gate --no-confirm``.
- ``fixed``: the screen (unstaged), then the default confirmation in rounds (issue 33): both
  sides on fresh seeds, one trial a task a round, at most 3× the screen's trials, the
  trial-level e-process against 1/alpha_j at the LORD++ level (α = 0.05, w0 = α/2), stopped
  at the first crossing or for futility (the real ``promoted_paths``, every call checked
  against the real ``confirm_decision``); the reference becomes the confirmation run. This is
  ``honesteval gate`` (its screen unstaged).
- ``sequential``: the screen, then the betting e-process on (random task, fresh seed) paired
  differences, stopping at K ≥ 1/alpha_j, at futility, or at the same trial budget as fixed.

Printed with MC standard errors (over searches): P(any false promotion) in the null world;
in the mixed world (10 % better, 60 % equal, 30 % worse) true/false promotions, share of the
better candidates promoted, final true gain, trials per screen, and the share of nightly
re-evaluations right after a promotion that cry "drifted".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

import numpy as np
from _common import paired_screen_passes, share_text, simulated_result
from scipy.stats import beta, binomtest

from honesteval.gating.ledger import Confirmation, confirm_decision
from honesteval.gating.run import screen_in_rounds
from honesteval.models import GateConfig, GateDecision, OnlineState, SplitResult
from honesteval.stats import (
    ScreenStopping,
    advance,
    confirmation_log_e,
    decide,
    drift_report,
    new_online_state,
    next_level,
    promoted_paths,
    screen_round,
    screen_stopping,
    sequential_stops,
)

ARMS = ("today", "fixed", "sequential")
SCREEN_CFG = GateConfig(confirm=False)  # the defaults; per-task drops are reported, no veto


def result(name: str, rewards: np.ndarray, seed: int, ids: np.ndarray | None = None) -> SplitResult:
    """The real aggregate over simulated trial rewards (tasks × trials); task i is
    ``t<ids[i]>`` (default: 0, 1, …)."""
    out: SplitResult = simulated_result(name, rewards, seed, ids)
    return out


def draw(rng: np.random.Generator, logits: np.ndarray, trials: int) -> np.ndarray:
    p = 1.0 / (1.0 + np.exp(-logits))
    return (rng.random((logits.size, trials)) < p[:, None]).astype(float)


def quality(logits: np.ndarray) -> float:
    return float(np.mean(1.0 / (1.0 + np.exp(-logits))))


@dataclass
class Best:
    name: str
    logits: np.ndarray
    screen: SplitResult  # its screen trials, reused by every screen against it
    reference: SplitResult | None  # what reevaluate-best compares against (None: no run)


@dataclass
class Tally:
    """One arm's search: its ledger state and its tallies."""

    arm: str
    start_quality: float
    state: OnlineState = field(default_factory=new_online_state)
    true_promotions: int = 0
    false_promotions: int = 0
    trials: int = 0
    screens: int = 0


@dataclass(kw_only=True)
class Search(Tally):
    """One arm's search with its best and what the nightly checks saw."""

    best: Best
    better_seen: int = 0
    better_promoted: int = 0
    drift_checks: int = 0
    drift_alarms: int = 0
    done: bool = False


@dataclass
class Args:
    n_tasks: int
    trials: int
    confirm_factor: int
    gain: float
    screens: int


def rounds_confirmation(
    screen: GateDecision | None,
    cur: np.ndarray,
    new: np.ndarray,
    state: OnlineState,
    seed: int,
    ids: np.ndarray | None = None,
) -> tuple[bool, int]:
    """The default confirmation in rounds on trial rewards (tasks × budget rounds, round r a
    fresh seed): the real ``promoted_paths`` at the ledger's alpha_j (promote at the first
    crossing, futility, budget); given the screen's decision, the rounds it ran also go
    through the real ``confirm_decision``, which must agree. (promoted, rounds run)."""
    promoted, used = promoted_paths((new - cur).T[None], next_level(state))
    rounds = int(used[0])
    if screen is not None:
        evidence = Confirmation(
            result("best", cur[:, :rounds], seed, ids),
            result("candidate", new[:, :rounds], seed, ids),
            SCREEN_CFG,
            cur.shape[1],
        )
        decision = confirm_decision(screen, evidence, state)
        assert decision.accept == bool(promoted[0]), "promoted_paths != confirm_decision"
    return bool(promoted[0]), rounds


def confirm_fixed(
    s: Search, screen: GateDecision, cand: Best, rng: np.random.Generator, a: Args, seed: int
) -> tuple[bool, SplitResult]:
    """``honesteval gate``'s confirmation in rounds, at most 3× the screen's trials."""
    k = a.trials * a.confirm_factor
    cur, new = draw(rng, s.best.logits, k), draw(rng, cand.logits, k)
    level = next_level(s.state)
    promoted, rounds = rounds_confirmation(screen, cur, new, s.state, seed)
    s.state = advance(s.state, level, promoted)
    s.trials += 2 * a.n_tasks * rounds
    return promoted, result(cand.name, new[:, :rounds], seed)


def confirm_sequential(s: Search, cand: Best, rng: np.random.Generator, a: Args) -> bool:
    budget = a.n_tasks * a.trials * a.confirm_factor  # draws; each costs one trial a side
    tasks = rng.integers(0, a.n_tasks, budget)
    cur = draw(rng, s.best.logits[tasks], 1)[:, 0]
    new = draw(rng, cand.logits[tasks], 1)[:, 0]
    level = next_level(s.state)
    reject, used, _ = sequential_stops((new - cur)[None, :], [level])
    s.state = advance(s.state, level, bool(reject[0]))
    s.trials += 2 * int(used[0])
    return bool(reject[0])


def drift_check(s: Search, rng: np.random.Generator, seed: int) -> None:
    """The nightly re-runs after a promotion, as ``reevaluate-best`` does them: the first
    (fresh seeds, as many trials as the promoted run) becomes the unselected reference, the
    second is checked against it."""
    ref = s.best.reference
    assert ref is not None
    first = result(s.best.name, draw(rng, s.best.logits, ref.n_trials), seed)
    second = result(s.best.name, draw(rng, s.best.logits, ref.n_trials), seed + 1)
    s.drift_checks += 1
    s.drift_alarms += drift_report(first, second, SCREEN_CFG).status == "drifted"


def tally_promotion(s: Search, effect: float) -> None:
    """Count a promotion as true (the candidate was better) or false."""
    if effect > 0:
        s.true_promotions += 1
        s.better_promoted += 1
    else:
        s.false_promotions += 1


def gate_once(
    s: Search,
    cand: Best,
    effect: float,
    screen: GateDecision,
    rng: np.random.Generator,
    a: Args,
    seed: int,
) -> None:
    """One gate call of one arm, given the screen the arm shares with the others."""
    s.screens += 1
    s.trials += a.n_tasks * a.trials  # the best's screen trials are reused
    s.better_seen += effect > 0
    if not screen.accept:
        return
    reference: SplitResult | None = cand.screen
    if s.arm == "fixed":
        promoted, reference = confirm_fixed(s, screen, cand, rng, a, seed)
    elif s.arm == "sequential":
        promoted = confirm_sequential(s, cand, rng, a)
        reference = None  # no per-task run to compare a nightly re-run against
    else:
        promoted = True
    if not promoted:
        return
    tally_promotion(s, effect)
    s.best = Best(cand.name, cand.logits, cand.screen, reference)
    if reference is not None:
        drift_check(s, rng, seed + 1)  # seeds seed + 1, seed + 2


def run_search(
    rng: np.random.Generator, a: Args, mix: tuple[float, float, float], stop_at_false: bool
) -> dict[str, Search]:
    """One search per arm over the same candidate sequence.

    Arms share a screen while they share the best (the screen depends only on it), so the
    null world costs one screen per call, not three.
    """
    base = rng.normal(0.0, 1.0, a.n_tasks)
    screen0 = result("c000", draw(rng, base, a.trials), 0)
    first = Best("c000", base, screen0, screen0)
    searches = {arm: Search(arm, quality(base), best=first) for arm in ARMS}
    for i in range(1, a.screens + 1):
        effect = rng.choice([a.gain, 0.0, -a.gain], p=mix)
        shared: dict[int, tuple[Best, GateDecision]] = {}
        seed = 10 * i
        for s in searches.values():
            if s.done:
                continue
            key = id(s.best)
            if key not in shared:
                logits = s.best.logits + effect
                name = f"c{i:03d}-{key}"
                cand = Best(name, logits, result(name, draw(rng, logits, a.trials), 0), None)
                shared[key] = (cand, decide(s.best.screen, cand.screen, SCREEN_CFG))
            cand, screen = shared[key]
            gate_once(s, cand, effect, screen, rng, a, seed)
            if stop_at_false and s.false_promotions:
                s.done = True
    return searches


def mean_se(xs: list[float]) -> tuple[float, float]:
    arr = np.asarray(xs, dtype=float)
    se = float(arr.std(ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else float("nan")
    return float(arr.mean()), se


def ratio_se(num: list[float], den: list[float]) -> tuple[float, float]:
    """Pooled ratio Σnum/Σden with its delta-method SE over searches."""
    n, d = np.asarray(num, float), np.asarray(den, float)
    if d.sum() == 0:
        return float("nan"), float("nan")
    r = n.sum() / d.sum()
    resid = n - r * d
    return float(r), float(resid.std(ddof=1) * math.sqrt(n.size) / d.sum())


def fmt(m: float, se: float, digits: int = 3) -> str:
    return "n/a" if math.isnan(m) else f"{m:.{digits}f} ± {se:.{digits}f}"


# -- the shift world's tables, search by search (a checkpoint file makes a partial run count) --

WORLDS = {"null": (0.0, 1.0, 0.0), "mixed": (0.1, 0.6, 0.3)}


@dataclass(frozen=True)
class SearchSummary:
    """What one arm's search leaves for the tables: one checkpoint line holds every arm's."""

    true_promotions: int
    false_promotions: int
    better_seen: int
    better_promoted: int
    gain: float  # final true quality − the first best's
    trials: int
    screens: int
    confirmations: int  # confirmations run (the ledger's tests)
    drift_checks: int
    drift_alarms: int

    @classmethod
    def of(cls, s: Search) -> SearchSummary:
        counts = (s.true_promotions, s.false_promotions, s.better_seen, s.better_promoted)
        gain = quality(s.best.logits) - s.start_quality
        rest = (s.trials, s.screens, s.state.tests, s.drift_checks, s.drift_alarms)
        return cls(*map(int, counts), float(gain), *map(int, rest))  # numpy counts as JSON


def search_seed(seed: int, world: str, rep: int) -> list[int]:
    """Search ``rep`` of ``world`` is seeded by these alone: a resumed or partial run draws
    the same searches as an uninterrupted one."""
    return [seed, list(WORLDS).index(world), rep]


class Checkpoint:
    """Finished searches, one JSON line each (world, rep, every arm's summary), appended and
    flushed as each search ends; the first line holds the run's settings, and resuming with
    other settings is refused. A line a killed run left without its newline is cut."""

    def __init__(self, path: str | None, settings: dict[str, object]) -> None:
        self.path = path
        self.done: dict[tuple[str, int], dict[str, SearchSummary]] = {}
        if path is None:
            return
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            with open(path, "w") as f:
                f.write(json.dumps({"settings": settings}) + "\n")
            return
        with open(path, "r+") as f:
            text = f.read()
            f.truncate(len(text.encode()[: text.encode().rfind(b"\n") + 1]))  # a torn tail
        lines = [json.loads(line) for line in text.splitlines(keepends=True) if line[-1] == "\n"]
        if lines[0].get("settings") != settings:
            raise SystemExit(f"{path}: written with {lines[0]}, not {settings}; use another file")
        for line in lines[1:]:
            arms = {arm: SearchSummary(**v) for arm, v in line["arms"].items()}
            self.done[(line["world"], line["rep"])] = arms

    def add(self, world: str, rep: int, arms: dict[str, SearchSummary]) -> None:
        self.done[(world, rep)] = arms
        if self.path is not None:
            with open(self.path, "a") as f:
                line = {"world": world, "rep": rep, "arms": {k: asdict(v) for k, v in arms.items()}}
                f.write(json.dumps(line) + "\n")


def world_searches(
    a: Args, world: str, reps: int, seed: int, book: Checkpoint
) -> list[dict[str, SearchSummary]]:
    """``reps`` searches of ``world`` (the null world stops an arm at its first false
    promotion), those in the checkpoint read back, the others run and added to it."""
    out = []
    for rep in range(reps):
        if (world, rep) not in book.done:
            rng = np.random.default_rng(search_seed(seed, world, rep))
            searches = run_search(rng, a, WORLDS[world], stop_at_false=world == "null")
            book.add(world, rep, {arm: SearchSummary.of(s) for arm, s in searches.items()})
        out.append(book.done[(world, rep)])
    return out


def shift_main(ns: argparse.Namespace) -> None:
    """The shift world: P(any false promotion) in the null world, the mixed world's
    promotions, gains and costs, per arm."""
    a = Args(ns.tasks, ns.trials, ns.confirm_factor, ns.gain, ns.screens)
    book = Checkpoint(ns.checkpoint, {**asdict(a), "seed": ns.seed})
    t0, cpu0 = time.perf_counter(), time.process_time()
    resumed = len(book.done)
    null = world_searches(a, "null", ns.null_reps, ns.seed, book)
    mixed = world_searches(a, "mixed", ns.mixed_reps, ns.seed, book)
    print(
        f"search_sim {datetime.now(UTC):%Y-%m-%d}, {platform.machine()} {os.cpu_count()} cores; "
        f"{a.n_tasks} tasks, {a.trials} trials (confirm at most {a.trials * a.confirm_factor}), "
        f"binary, {a.screens} gate calls per search; better = logit +{a.gain} "
        f"(+{1 / (1 + math.exp(-a.gain)) - 0.5:.3f} at p = 0.5)"
    )
    print(f"null world ({ns.null_reps} searches), mixed world ({ns.mixed_reps} searches)\n")
    print(
        f"{'arm':11} {'P(any false), null (95 % CP)':>29} {'confirmations/call, null':>25} "
        f"{'drift alarms, null':>19}"
    )
    for arm in ARMS:
        nulls = [r[arm] for r in null]
        anyfalse = share_text(sum(s.false_promotions > 0 for s in nulls), len(nulls))
        confirms = ratio_se([s.confirmations for s in nulls], [s.screens for s in nulls])
        drift0 = ratio_se([s.drift_alarms for s in nulls], [s.drift_checks for s in nulls])
        print(f"{arm:11} {anyfalse:>29} {fmt(*confirms):>25} {fmt(*drift0):>19}")
    if mixed:
        mixed_table(mixed)
    print(
        f"\n({time.perf_counter() - t0:.0f} s, {time.process_time() - cpu0:.0f} s of CPU; "
        f"{resumed} searches read back from the checkpoint)"
    )


def mixed_table(mixed: list[dict[str, SearchSummary]]) -> None:
    """The mixed world's columns per arm, and their ratios against ``today``."""
    print(
        f"\n{'arm':11} {'true promo':>13} {'false promo':>13} {'better promoted':>16} "
        f"{'final true gain':>16} {'trials/screen':>14} {'drift alarms':>13}"
    )
    rows = {}
    for arm in ARMS:
        ms = [r[arm] for r in mixed]
        rows[arm] = (
            mean_se([s.true_promotions for s in ms]),
            mean_se([s.false_promotions for s in ms]),
            ratio_se([s.better_promoted for s in ms], [s.better_seen for s in ms]),
            mean_se([s.gain for s in ms]),
            ratio_se([s.trials for s in ms], [s.screens for s in ms]),
            ratio_se([s.drift_alarms for s in ms], [s.drift_checks for s in ms]),
        )
        tp, fp, sh, g, c, d = rows[arm]
        print(
            f"{arm:11} {fmt(*tp, 2):>13} {fmt(*fp, 2):>13} {fmt(*sh):>16} {fmt(*g):>16} "
            f"{fmt(*c, 0):>14} {fmt(*d):>13}"
        )
    print("\nratios against today (same run):")
    today = rows["today"]
    for arm in ARMS[1:]:
        promos, gain, cost = (rows[arm][i][0] / today[i][0] for i in (0, 3, 4))
        print(
            f"  {arm:10} true promotions {promos:.2f}×, final true gain {gain:.2f}×, "
            f"trials per screen {cost:.2f}×"
        )


# -- the null world at scale: the default gate's whole-search level with a tight MC error --
#
# While every candidate equals the best, the best never changes before the first (false)
# promotion, so one search is: the best's screen trials; 100 candidates' screens against them,
# decided at once by ``decide``'s paired rule on the per-task counts (exact,
# :func:`paired_screen_passes`); then, in order, each passing call's confirmation in rounds
# through the real ``promoted_paths`` at the real ``next_level`` of the ledger's state, the
# state advanced by the real ``advance``. The same worlds and draws as ``run_search``'s
# ``fixed`` arm (50 tasks with logits ~ N(0, 1), 3 screen trials, at most 9 rounds); the first
# ``--checked`` searches also run every call through the real ``aggregate``, ``decide`` and
# ``confirm_decision``, which must agree, or the run stops.


def null_search_vectorised(a: Args, rng: np.random.Generator, checked: bool) -> tuple[int, int]:
    """One null-world search of the default gate: (false promotions (0 or 1: it stops at the
    first), confirmations run)."""
    base = rng.normal(0.0, 1.0, a.n_tasks)
    best = draw(rng, base, a.trials)
    p = 1.0 / (1.0 + np.exp(-base))
    cands = (rng.random((a.screens, a.n_tasks, a.trials)) < p[None, :, None]).astype(float)
    passes = paired_screen_passes(cands.sum(axis=-1), best.sum(axis=-1), SCREEN_CFG.k_se)
    best_screen = result("c000", best, 0) if checked else None
    state, k = new_online_state(), a.trials * a.confirm_factor
    for i in range(a.screens):
        screen = None
        if best_screen is not None:
            screen = decide(best_screen, result(f"c{i + 1}", cands[i], 0), SCREEN_CFG)
            assert screen.accept == bool(passes[i]), "paired_screen_passes != decide"
        if not passes[i]:
            continue
        cur, new = draw(rng, base, k), draw(rng, base, k)
        level = next_level(state)
        promoted, _ = rounds_confirmation(screen, cur, new, state, 10 * (i + 1))
        state = advance(state, level, promoted)
        if promoted:
            return 1, state.tests
    return 0, state.tests


def null_vectorised_main(ns: argparse.Namespace) -> None:
    a = Args(ns.tasks, ns.trials, ns.confirm_factor, ns.gain, ns.screens)
    t0, cpu0 = time.perf_counter(), time.process_time()
    false, confirmations = 0, 0
    for rep in range(ns.reps):
        rng = np.random.default_rng([ns.seed, 2, rep])
        hit, tests = null_search_vectorised(a, rng, rep < ns.checked)
        false, confirmations = false + hit, confirmations + tests
        if (rep + 1) % 500 == 0:  # a partial run counts: the tally so far, on stderr
            print(f"{rep + 1} searches: {false} with a false promotion", file=sys.stderr)
    k = a.trials * a.confirm_factor
    print(
        f"search_sim --world null-vectorised {datetime.now(UTC):%Y-%m-%d}, {platform.machine()}"
        f" {os.cpu_count()} cores; {a.n_tasks} val tasks, {a.trials} screen trials, the "
        f"confirmation in rounds (at most {k}), binary, {a.screens} gate calls per search, every "
        f"candidate equal to the best; {ns.reps} searches, the first {ns.checked} checked call "
        "by call against the real aggregate / decide / confirm_decision; LORD++ alpha 0.05 "
        "(claim: P(any false promotion) <= 0.025)\n"
    )
    share = false / ns.reps
    ci = binomtest(false, ns.reps).proportion_ci(confidence_level=0.95, method="exact")
    upper = float(beta.ppf(0.95, false + 1, ns.reps - false)) if false < ns.reps else 1.0
    print(
        f"P(any false promotion over the search): {false}/{ns.reps} = {share:.5f} ± "
        f"{math.sqrt(share * (1 - share) / ns.reps):.5f} (MC SE), 95 % Clopper–Pearson "
        f"[{ci.low:.5f}, {ci.high:.5f}], one-sided 95 % upper bound {upper:.5f}; "
        f"confirmations per search {confirmations / ns.reps:.2f}"
    )
    print(f"\n({time.perf_counter() - t0:.0f} s, {time.process_time() - cpu0:.0f} s of CPU)")


# -- issue 24 §2: task-specific effects, a proposer that reads the feedback, a held-out set --
#
# World: every task of the population has the current best's logit θ ~ N(0, 1). A candidate
# changes each task's logit by its own effect e_i ~ N(0, τ²), independent across tasks: better
# on some, worse on others, and **no gain on a new task** (E e = 0). Any promotion is false
# for new tasks. Proposers:
# - ``random``: e ~ N(0, τ²) on every task;
# - ``feedback``: reads the screen's per-task feedback (the best's per-task means on the
#   tasks the screen scores) and patches the 5 it fails most (+PATCH logits there, on top
#   of e): what an optimiser does. A patch of a val task does nothing for a new task.
# Gates (LORD++ levels; verdicts vectorised, the first search of every cell checked call by
# call against the real ``decide`` and ``confirm_decision``):
# - ``today``: screen and confirmation both on all val tasks (fresh seeds, same tasks; the
#   default confirmation in rounds);
# - ``held-out``: a frozen part of val (HOLDOUT of it) that screens never score; the
#   screen scores the rest, the confirmation only the held-out part; the proposer sees the
#   screen's feedback only. The search is told the decision and its level, nothing else.
PATCH = 3.0
PATCHED = 5
HOLDOUT = 0.3


def _trials(counts: np.ndarray, k: int) -> np.ndarray:
    """Per-task success counts as a tasks × k trial matrix (the order of trials is immaterial
    to every statistic the gate computes)."""
    return (np.arange(k)[None, :] < counts[:, None]).astype(float)


def _probabilities(logits: np.ndarray) -> np.ndarray:
    p: np.ndarray = 1.0 / (1.0 + np.exp(-logits))
    return p


def task_specific_search_vectorised(
    rng: np.random.Generator, a: Args, tau: float, proposer: str, gate: str, checked: int = 0
) -> bool:
    """One search of ``a.screens`` gate calls; True when anything was promoted.

    The verdicts are vectorised: every screen of the search at once by ``decide``'s paired
    rule (exact, :func:`paired_screen_passes`), every confirmation at the ledger's alpha_j
    (the real ``next_level``/``advance``): ``today`` by the rounds confirmation
    (:func:`rounds_confirmation`, every call checked), ``held-out`` by the real task-level
    ``confirmation_log_e`` that ``confirm_holdout`` uses.
    The first ``checked`` gate calls also go through the real ``decide`` and
    ``confirm_decision`` on the same trials, which must agree (or the run stops)."""
    theta = rng.normal(0.0, 1.0, a.n_tasks)
    ids = np.arange(a.n_tasks)
    n_hold = round(HOLDOUT * a.n_tasks) if gate == "held-out" else 0
    hold, screen_ids = ids[:n_hold], ids[n_hold:]
    confirm_ids = hold if gate == "held-out" else ids
    k = a.trials * a.confirm_factor
    best_counts = rng.binomial(a.trials, _probabilities(theta[screen_ids]))
    worst = screen_ids[np.argsort(best_counts, kind="stable")]  # the best's per-task means
    effect = rng.normal(0.0, tau, (a.screens, a.n_tasks))
    if proposer == "better":
        effect += a.gain
    if proposer == "feedback":
        effect[:, worst[:PATCHED]] += PATCH
    cand = theta[None, :] + effect
    cand_counts = rng.binomial(a.trials, _probabilities(cand[:, screen_ids]))
    passed = paired_screen_passes(cand_counts, best_counts[None, :], SCREEN_CFG.k_se)
    state = new_online_state()
    for i in range(a.screens):
        real = None
        if i < checked:
            best_r = result("best", _trials(best_counts, a.trials), 0, screen_ids)
            new_r = result(f"c{i}", _trials(cand_counts[i], a.trials), 0, screen_ids)
            real = decide(best_r, new_r, SCREEN_CFG)
            assert real.accept == bool(passed[i]), "vectorised screen != decide"
        if not passed[i]:
            continue
        level = next_level(state)
        if gate == "today":  # the default confirmation in rounds on every val task
            cur_t = draw(rng, theta[confirm_ids], k)
            new_t = draw(rng, cand[i, confirm_ids], k)
            accept, _ = rounds_confirmation(real, cur_t, new_t, state, 10**9 + i, confirm_ids)
            state = advance(state, level, accept)
            if accept:
                return True
            continue
        cur = rng.binomial(k, _probabilities(theta[confirm_ids]))
        new = rng.binomial(k, _probabilities(cand[i, confirm_ids]))
        x = (new - cur) / k  # confirm_holdout: the task-level test for new tasks
        accept = bool(confirmation_log_e(x, level) >= math.log(1.0 / level))
        if real is not None:
            seed = 10**9 + i
            evidence = Confirmation(
                result("best", _trials(cur, k), seed, confirm_ids),
                result(f"c{i}", _trials(new, k), seed, confirm_ids),
                SCREEN_CFG,
            )
            decision = confirm_decision(real, evidence, state)
            assert decision.accept == accept, "vectorised confirmation != confirm_decision"
        state = advance(state, level, accept)
        if accept:
            return True
    return False


def task_specific_main(ns: argparse.Namespace) -> None:
    a = Args(ns.tasks, ns.trials, ns.confirm_factor, ns.gain, ns.screens)
    rng = np.random.default_rng(ns.seed)
    t0 = time.perf_counter()
    print(
        f"search_sim --world task-specific {datetime.now(UTC):%Y-%m-%d}, {platform.machine()} "
        f"{os.cpu_count()} cores; {a.n_tasks} val tasks, {a.trials} trials (confirm "
        f"{a.trials * a.confirm_factor}), {a.screens} gate calls per search, {ns.reps} searches "
        f"per cell; task effects N(0, {ns.tau}²) in logits, zero gain on new tasks; feedback "
        f"proposer patches the {PATCHED} tasks the best fails most by +{PATCH}; held-out = "
        f"{HOLDOUT:.0%} of val, screens never score it; LORD++ alpha 0.05 (claim: P(any "
        "promotion) <= 0.025)\n"
    )

    def checked(rep: int) -> int:
        """Gate calls checked against the real decide/confirm_decision: the first search's."""
        return a.screens if rep == 0 else 0

    print(f"{'proposer':9} {'gate':9} {'P(any promotion over the search)':>34}")
    for proposer in ("random", "feedback"):
        for gate in ("today", "held-out"):
            hits = sum(
                task_specific_search_vectorised(rng, a, ns.tau, proposer, gate, checked(r))
                for r in range(ns.reps)
            )
            print(f"{proposer:9} {gate:9} {share_text(hits, ns.reps):>34}")
    # What the held-out set costs: a real gain (logit +gain on every task, new ones too) at
    # the first confirmation, one gate call.
    one = Args(a.n_tasks, a.trials, a.confirm_factor, a.gain, 1)
    print(f"\n{'better':9} {'gate':9} {'P(promoted at its first gate call)':>34}")
    for gate in ("today", "held-out"):
        hits = sum(
            task_specific_search_vectorised(rng, one, ns.tau, "better", gate, checked(r))
            for r in range(ns.reps)
        )
        print(f"{'+' + str(a.gain):9} {gate:9} {share_text(hits, ns.reps):>34}")
    print(f"\n({time.perf_counter() - t0:.0f} s)")


# -- issue 28 §4: stopping a screen early --
#
# Two arms over the same candidates, both the two-stage gate (screen, then the betting
# confirmation at the LORD++ level): ``full`` screens with every trial at once (the unstaged
# screen); ``staged`` screens in rounds of one trial a task, stopped for futility / efficacy.
# Common random numbers whatever the arms' bests: a search draws every uniform of every gate
# call up front (:class:`StopWorld`), and a trial passes iff its uniform is below the task's
# pass probability, so the arms' candidates at call i are scored on the same uniforms even
# after the arms promoted different candidates, and so are their confirmations.
# Trials counted: the candidate's screen trials it ran, both sides of a confirmation, and the
# rounds a best promoted after an early pass did not run (its later screens need them; charged
# at once). Verdicts are computed on per-task success counts: ``decide``'s paired rule
# (exact, :func:`paired_screen_passes`) and the real ``screen_round`` on z = Δ/SE for the
# screen, the real ``confirmation_log_e`` at the real ``next_level`` for the confirmation. The
# first ``--checked`` searches of each world also run every gate call of both arms through the
# real ``aggregate``, ``screen_in_rounds`` (``decide``, ``round_decision``) and
# ``confirm_decision`` on the same trials, which must agree, or the run stops.
STOP_ARMS = ("full", "staged")
FULL_CFG = GateConfig(screen_futility=None, screen_efficacy=None)  # the unstaged screen


@dataclass
class StopTally(Tally):
    """One arm's search in the stopping comparison."""

    final_quality: float = 0.0
    stopped_early: int = 0  # screens that ran fewer rounds than planned
    futile: int = 0  # of them, stopped for futility


@dataclass(frozen=True)
class ScreenOutcome:
    """What a screen decided, after how many rounds (trials a task), and why it stopped."""

    accept: bool
    rounds: int
    stop: str | None  # "futility", "efficacy" or None (it ran every round)


def _passes(uniforms: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """Binary trials (tasks × trials): a trial passes iff its uniform < the task's p."""
    out: np.ndarray = (uniforms < _probabilities(logits)[:, None]).astype(np.int64)
    return out


def vectorised_screen(
    cand: np.ndarray, best: np.ndarray, rule: ScreenStopping | None, k_se: float
) -> ScreenOutcome:
    """The screen of ``cand`` against ``best`` (binary trials, tasks × K) as
    ``screen_in_rounds`` with ``decide`` (paired, bar k_se) and ``round_decision`` decide it:
    after round k < K, a z = Δ/SE of the first k trials below the futility boundary stops a
    rejecting screen, one at or above the efficacy boundary stops a passing one; a screen with
    SE = 0 never stops early; round K decides on the bar (``rule`` None: round K only)."""
    n, rounds = cand.shape
    diff = np.cumsum(cand - best, axis=1).T  # per-task count differences after each round
    passes = paired_screen_passes(diff, 0, k_se)
    totals, squares = diff.sum(axis=1).tolist(), (diff * diff).sum(axis=1).tolist()
    for done in range(1, rounds if rule is not None else 1):
        total, spread = totals[done - 1], n * squares[done - 1] - totals[done - 1] ** 2
        if spread <= 0:
            continue  # SE = 0: no z, never stops early
        z = total * math.sqrt(n - 1) / math.sqrt(spread)  # Δ/SE, the unit cancels
        assert rule is not None  # for mypy: only a staged screen has rounds before the last
        action = screen_round(z, done, rounds, k_se, rule).action
        if action == "futility" and not passes[done - 1]:
            return ScreenOutcome(False, done, "futility")
        if action == "efficacy" and passes[done - 1]:
            return ScreenOutcome(True, done, "efficacy")
    return ScreenOutcome(bool(passes[-1]), rounds, None)


def checked_screen(
    best: np.ndarray, cand: np.ndarray, cfg: GateConfig, want: ScreenOutcome, name: str
) -> GateDecision:
    """The same screen through the real ``aggregate`` and ``screen_in_rounds``; stops the run
    if it disagrees with the vectorised one."""

    def run_round(k: int) -> list[SplitResult]:
        return [result("best", best[:, :k], 0), result(name, cand[:, :k], 0)]

    decision, results = screen_in_rounds(run_round, decide, cfg, best.shape[1])
    got = ScreenOutcome(decision.accept, results[1].n_trials, decision.screen_stop)
    if got != want:
        raise AssertionError(f"{name}: vectorised screen {want} != the real screen {got}")
    return decision


def checked_confirmation(
    screen: GateDecision,
    sides: tuple[np.ndarray, np.ndarray],
    cfg: GateConfig,
    state: OnlineState,
    want: OnlineState,
) -> None:
    """The same confirmation through the real ``aggregate`` and ``confirm_decision``; stops
    the run if its verdict or the ledger's next state disagrees."""
    cur, new = (
        result(name, trials, 10**9) for name, trials in zip(("best", "c"), sides, strict=True)
    )
    decision = confirm_decision(screen, Confirmation(cur, new, cfg), state)
    if decision.online != want:
        raise AssertionError(f"vectorised confirmation {want} != confirm_decision {decision}")


@dataclass(frozen=True)
class StopWorld:
    """One search's random numbers, common to both arms: the first best's logits and screen
    uniforms, every gate call's effect, screen uniforms (calls × tasks × K) and confirmation
    uniforms (calls × 2 sides × tasks × confirmation trials)."""

    base: np.ndarray
    base_uniforms: np.ndarray
    effects: np.ndarray
    screen_uniforms: np.ndarray
    confirm_uniforms: np.ndarray

    @classmethod
    def draw(cls, a: Args, mix: tuple[float, float, float], search_seed: int) -> StopWorld:
        """Seeded by ``search_seed`` alone (the numbers do not depend on how many processes
        ran the searches)."""
        rng = np.random.default_rng(search_seed)
        k = a.trials * a.confirm_factor
        return cls(
            base=rng.normal(0.0, 1.0, a.n_tasks),
            base_uniforms=rng.random((a.n_tasks, a.trials)),
            effects=rng.choice([a.gain, 0.0, -a.gain], size=a.screens, p=mix),
            screen_uniforms=rng.random((a.screens, a.n_tasks, a.trials)),
            confirm_uniforms=rng.random((a.screens, 2, a.n_tasks, k)),
        )


def stopping_arm(a: Args, world: StopWorld, cfg: GateConfig, checked: bool) -> StopTally:
    """One arm's search over ``world`` (``cfg``: its screen)."""
    rule = screen_stopping(cfg)
    logits = world.base
    best = _passes(world.base_uniforms, logits)
    s = StopTally("staged" if rule else "full", quality(logits))
    k = a.trials * a.confirm_factor
    for i, effect in enumerate(world.effects.tolist()):
        cand_logits = logits + effect
        cand = _passes(world.screen_uniforms[i], cand_logits)
        screen = vectorised_screen(cand, best, rule, cfg.k_se)
        real = checked_screen(best, cand, cfg, screen, f"c{i + 1}") if checked else None
        s.screens += 1
        s.trials += a.n_tasks * screen.rounds
        s.stopped_early += screen.rounds < a.trials
        s.futile += screen.stop == "futility"
        if not screen.accept:
            continue
        cur = _passes(world.confirm_uniforms[i, 0], logits)
        new = _passes(world.confirm_uniforms[i, 1], cand_logits)
        level = next_level(s.state)
        x = (new.sum(axis=1) - cur.sum(axis=1)) / k
        promoted = bool(confirmation_log_e(x, level) >= math.log(1.0 / level))
        before, s.state = s.state, advance(s.state, level, promoted)
        if real is not None:
            checked_confirmation(real, (cur, new), cfg, before, s.state)
        s.trials += 2 * a.n_tasks * k
        if not promoted:
            continue
        s.true_promotions += effect > 0
        s.false_promotions += effect <= 0
        s.trials += a.n_tasks * (a.trials - screen.rounds)  # the best's rounds not yet run
        logits, best = cand_logits, cand
    s.final_quality = quality(logits)
    return s


def stopping_search(
    a: Args,
    mix: tuple[float, float, float],
    staged_cfg: GateConfig,
    search_seed: int,
    checked: bool,
) -> dict[str, StopTally]:
    """Both arms' searches over the same world (effects and uniforms)."""
    world = StopWorld.draw(a, mix, search_seed)
    cfgs = {"full": FULL_CFG, "staged": staged_cfg}
    return {arm: stopping_arm(a, world, cfgs[arm], checked) for arm in STOP_ARMS}


def paired_bootstrap_ratio(
    num: np.ndarray, den: np.ndarray, rng: np.random.Generator, draws: int = 4000
) -> np.ndarray:
    """mean(num)/mean(den) over ``draws`` resamples of the searches (pairs kept together)."""
    idx = rng.integers(0, num.size, (draws, num.size))
    out: np.ndarray = num[idx].mean(axis=1) / den[idx].mean(axis=1)
    return out


def paired_comparison(staged: list[float], full: list[float], rng: np.random.Generator) -> str:
    """staged / full over the same searches: the ratio of means with its paired delta-method
    SE, its one-sided 95 % bounds (r ∓ 1.645·SE and the paired bootstrap's 5 % / 95 %
    percentiles) and the paired difference with its SE."""
    num, den = np.asarray(staged, float), np.asarray(full, float)
    r, se = ratio_se(staged, full)
    boot = paired_bootstrap_ratio(num, den, rng)
    diff = mean_se(list(num - den))
    corr = float(np.corrcoef(num, den)[0, 1]) if num.std() > 0 and den.std() > 0 else math.nan
    return (
        f"{fmt(r, se)}× (one-sided 95 %: delta method [{r - 1.645 * se:.3f}, "
        f"{r + 1.645 * se:.3f}], paired bootstrap [{np.quantile(boot, 0.05):.3f}, "
        f"{np.quantile(boot, 0.95):.3f}]); difference {fmt(*diff, 4)}; arms' correlation "
        f"over searches {corr:.2f}"
    )


def upper_bound(arm: str, hits: list[float]) -> str:
    """The count of searches with a false promotion and its one-sided 95 % Clopper–Pearson
    upper bound (an MC error that stays informative at a count of 0)."""
    k, n = int(sum(hits)), len(hits)
    return f"{arm} {k}/{n} (95 % upper bound {float(beta.ppf(0.95, k + 1, n - k)):.4f})"


def stopping_main(ns: argparse.Namespace) -> None:
    """Issue 28 §4: the unstaged screen against the staged screen, same gate otherwise."""
    a = Args(ns.tasks, ns.trials, ns.confirm_factor, ns.gain, ns.screens)
    cfg = GateConfig(screen_futility=ns.futility, screen_efficacy=ns.efficacy)
    t0 = time.perf_counter()
    null_mix, mixed_mix = (0.0, 1.0, 0.0), (0.1, 0.6, 0.3)
    jobs = [(null_mix, ns.seed + r, r < ns.checked) for r in range(ns.null_reps)]
    jobs += [(mixed_mix, ns.seed + 10**6 + r, r < ns.checked) for r in range(ns.mixed_reps)]
    mixes, seeds, checks = zip(*jobs, strict=True)
    with ProcessPoolExecutor(ns.workers) as pool:
        n_jobs = len(jobs)
        done = list(
            pool.map(
                stopping_search, [a] * n_jobs, mixes, [cfg] * n_jobs, seeds, checks, chunksize=8
            )
        )
    null, mixed = done[: ns.null_reps], done[ns.null_reps :]
    print(
        f"search_sim --compare-stopping {datetime.now(UTC):%Y-%m-%d}, {platform.machine()} "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {a.n_tasks} tasks, "
        f"screen {a.trials} trials (rounds of one trial a task), confirmation "
        f"{a.trials * a.confirm_factor}, binary, {a.screens} gate calls per search, better = "
        f"logit +{a.gain}; staged: futility below CP {ns.futility}, efficacy at CP0 "
        f"{ns.efficacy}; null world {ns.null_reps} searches, mixed world (10 % better, 60 % "
        f"equal, 30 % worse) {ns.mixed_reps} searches, the first {ns.checked} of each checked "
        f"call by call against the real code; {ns.workers} worker processes\n"
    )
    print(
        f"{'screen':7} {'P(any false), null':>19} {'false promo, null':>18} "
        f"{'true promo':>12} {'false promo':>12} {'final true gain':>16} {'trials/call':>12} "
        f"{'stopped early':>14} {'futile':>7} {'confirmations/call, null':>25}"
    )
    cols: dict[str, dict[str, list[float]]] = {}
    for arm in STOP_ARMS:
        ms, nulls = [r[arm] for r in mixed], [r[arm] for r in null]
        cols[arm] = {
            "gain": [s.final_quality - s.start_quality for s in ms],
            "cost": [s.trials / s.screens for s in ms],
            "any_false": [float(s.false_promotions > 0) for s in nulls],
        }
        early = ratio_se([s.stopped_early for s in ms], [s.screens for s in ms])
        futile = ratio_se([s.futile for s in ms], [s.screens for s in ms])
        confirms0 = ratio_se([s.state.tests for s in nulls], [s.screens for s in nulls])
        print(
            f"{arm:7} {fmt(*mean_se(cols[arm]['any_false']), 4):>19} "
            f"{fmt(*mean_se([s.false_promotions for s in nulls]), 4):>18} "
            f"{fmt(*mean_se([s.true_promotions for s in ms]), 2):>12}"
            f" {fmt(*mean_se([s.false_promotions for s in ms]), 2):>12} "
            f"{fmt(*mean_se(cols[arm]['gain']), 4):>16} {fmt(*mean_se(cols[arm]['cost']), 1):>12} "
            f"{fmt(*early, 3):>14} {fmt(*futile, 3):>7} {fmt(*confirms0, 4):>25}"
        )
    rng = np.random.default_rng(ns.seed)
    staged, full = cols["staged"], cols["full"]
    null_diff = mean_se(
        [x - y for x, y in zip(staged["any_false"], full["any_false"], strict=True)]
    )
    print(
        "\nstaged / full, mixed world (same searches; target trials <= 0.6×, gain >= 0.95×):\n"
        f"  trials per gate call {paired_comparison(staged['cost'], full['cost'], rng)}\n"
        f"  final true gain      {paired_comparison(staged['gain'], full['gain'], rng)}\n"
        f"null world: P(any false promotion) staged − full {fmt(*null_diff, 4)} (same "
        f"searches); {', '.join(upper_bound(arm, cols[arm]['any_false']) for arm in STOP_ARMS)}"
    )
    print(f"\n({time.perf_counter() - t0:.0f} s)\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--null-reps", type=int, help="null-world searches (100; --compare-stopping: 6000)"
    )
    ap.add_argument(
        "--mixed-reps", type=int, help="mixed-world searches (30; --compare-stopping: 3000)"
    )
    ap.add_argument("--screens", type=int, default=100, help="gate calls per search")
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--confirm-factor", type=int, default=3)
    ap.add_argument("--gain", type=float, default=0.6, help="logit shift of a better candidate")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument(
        "--checkpoint",
        help="shift world: a JSON-lines file each finished search is appended to; a rerun "
        "with the same file and settings reads those back and runs only the rest",
    )
    ap.add_argument(
        "--world",
        choices=("shift", "task-specific", "null-vectorised"),
        default="shift",
        help="shift: every task moves alike (the tables above); task-specific: issue 24 §2; "
        "null-vectorised: the shift world's null for the default gate at scale (--reps)",
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=400,
        help="task-specific: searches per cell; null-vectorised: searches",
    )
    ap.add_argument("--tau", type=float, default=0.5, help="task-specific: SD of task effects")
    ap.add_argument(
        "--compare-stopping",
        action="store_true",
        help="issue 28 §4: the unstaged screen against the staged screen stopped early",
    )
    ap.add_argument("--futility", type=float, default=0.5, help="staged: futility CP")
    ap.add_argument("--efficacy", type=float, default=0.9, help="staged: efficacy CP0")
    ap.add_argument("--quick", action="store_true", help="compare-stopping: 200 / 60 searches")
    ap.add_argument("--workers", type=int, default=2, help="compare-stopping: processes")
    ap.add_argument(
        "--checked",
        type=int,
        default=2,
        help="compare-stopping, null-vectorised: searches (of each world) also run call by "
        "call through the real aggregate / decide or screen_in_rounds / confirm_decision "
        "(must agree)",
    )
    ns = ap.parse_args()
    if ns.compare_stopping:
        null_reps, mixed_reps = (200, 60) if ns.quick else (6000, 3000)
        ns.null_reps = null_reps if ns.null_reps is None else ns.null_reps
        ns.mixed_reps = mixed_reps if ns.mixed_reps is None else ns.mixed_reps
        stopping_main(ns)
        return
    ns.null_reps = 100 if ns.null_reps is None else ns.null_reps
    ns.mixed_reps = 30 if ns.mixed_reps is None else ns.mixed_reps
    if ns.world == "task-specific":
        task_specific_main(ns)
        return
    if ns.world == "null-vectorised":
        null_vectorised_main(ns)
        return
    shift_main(ns)


if __name__ == "__main__":
    main()
