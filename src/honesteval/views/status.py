"""``honesteval status``: what a user wants to see first about a project's state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honesteval.gating.ledger import read_best, search_ledger
from honesteval.gating.search import Ledger
from honesteval.models import BestRecord, DecisionRecord, OnlineState, Seal, SplitResult
from honesteval.project.loader import load_project
from honesteval.stats import next_level, wealth_left
from honesteval.store.state_dir import Store
from honesteval.views.text import (
    DELTA_HEADER,
    bar_cell,
    best_result,
    delta_cell,
    delta_vs_best,
    fmt,
    interval,
    missing_text,
    reward_bounds,
    task_lists,
    verdict,
)

#: Where the guarantee holds: confirmations re-run the val tasks the screens scored (fresh
#: seeds, the same tasks), so "better" means better on these tasks, not on new ones.
ON_THESE_TASKS = "on these val tasks (fresh seeds, the tasks the screens saw; not new tasks)"
#: With a held-out part of val (``gate.confirm_holdout``): confirmations score only tasks no
#: screen scored, a sample of tasks the search never saw.
ON_HELD_OUT_TASKS = (
    "on the held-out val tasks no screen scored (tasks the search never saw, so on new tasks "
    "like them)"
)


def guarantee_sentence(state: OnlineState, unconfirmed: int, holdout: bool = False) -> str:
    """One sentence: what the search-level error control guarantees, and the wealth left."""
    n, r = state.tests, len(state.promotions)
    if state.rule == "fallback":
        what = (
            f"online fallback at alpha {state.alpha:g} over {n} confirmation(s), {r} promoted: "
            f"P(any false promotion, ever) <= {state.alpha:g}"
        )
    elif state.rule == "e-lond":
        what = (
            f"e-LOND at alpha {state.alpha:g} over {n} confirmation(s), {r} promoted: the "
            f"expected share of false promotions stays <= {state.alpha:g} under any dependence "
            f"between confirmations, and P(any false promotion) <= {state.alpha:g} while no "
            "candidate is better"
        )
    else:
        what = (
            f"LORD++ at alpha {state.alpha:g} over {n} confirmation(s), {r} promoted: the "
            f"expected share of false promotions stays <= {state.alpha:g}, and P(any false "
            f"promotion) <= {state.alpha / 2:g} while no candidate is better"
        )
    what += f" {ON_HELD_OUT_TASKS if holdout else ON_THESE_TASKS}"
    outside = (
        f"; {unconfirmed} promotion(s) made with --no-confirm are outside it" if unconfirmed else ""
    )
    return (
        f"search guarantee: {what}; alpha-wealth left {wealth_left(state):.4g} (next "
        f"confirmation at alpha_j = {next_level(state):.3g}){outside}."
    )


def plain_guarantee(state: OnlineState) -> str:
    """The guarantee in words a newcomer reads without knowing LORD++ or alpha-wealth."""
    share = f"{state.alpha:.0%}"
    if state.rule == "fallback":
        promise = f"the chance of even one false promotion (no real gain) stays below {share}"
    else:
        promise = f"at most {share} of the promotions are expected to be false (no real gain)"
    return (
        "In plain words: a candidate is promoted only after a second run on fresh seeds "
        f"confirms it, and over the whole search {promise}. Each confirmation spends part of "
        "an error budget (the alpha-wealth), a promotion earns some back; a smaller budget "
        "means a stricter bar for the next one."
    )


@dataclass(frozen=True)
class ProjectStatus:
    """What ``status`` reads from the state folder, typed; :meth:`as_json` is ``--json``."""

    project: str
    best: BestRecord | None
    #: the last decisions shown (the search state is computed from all of them)
    decisions: list[DecisionRecord]
    search: OnlineState
    #: promotions made with --no-confirm, outside the search-level guarantee
    unconfirmed: int
    #: summaries of the last stored results
    #: (:data:`honesteval.store.state_dir.RESULT_SUMMARY_FIELDS`)
    results: list[dict[str, Any]]
    seal: Seal | None
    #: the ledger as replayed: its breaks and open reservations
    ledger: Ledger
    #: the frozen held-out val tasks of the confirmations (``gate.confirm_holdout``), if any
    holdout: list[str] | None = None

    #: the newest val result of each candidate, the current best's first
    candidates: list[SplitResult] = field(default_factory=list)

    @property
    def best_val(self) -> SplitResult | None:
        """The current best's val result the candidates are compared with."""
        return best_result(self.best, self.candidates)

    def as_json(self) -> dict[str, Any]:
        best = self.best
        state = self.search
        return {
            "project": self.project,
            "best": None
            if best is None
            else {
                "name": best.name,
                "fingerprint": best.fingerprint,
                "promoted_at": best.promoted_at,
                "reward": best.result.reward,
                "stderr": best.result.stderr,
                "coverage": best.result.coverage,
                "n_scored": best.result.n_scored,
                "n_tasks": best.result.n_tasks,
                "n_trials": best.result.n_trials,
                "reward_bounds": reward_bounds(best.result),
                "pass_hat_k": best.result.pass_hat_k,
                "pass_hat_k_bounds": best.result.pass_hat_k_bounds,
            },
            "candidates": [self._candidate_json(r) for r in self.candidates],
            "decisions": [d.model_dump(mode="json") for d in self.decisions],
            "search": {
                "rule": state.rule,
                "alpha": state.alpha,
                "confirmations": state.tests,
                "promotions": state.promotions,
                "wealth_left": wealth_left(state),
                "next_level": next_level(state),
                "unconfirmed_promotions": self.unconfirmed,
                "guarantee": guarantee_sentence(state, self.unconfirmed, self.holdout is not None),
            },
            "ledger": {
                "ok": self.ledger.ok,
                "breaks": [{"line": b.line, "message": b.message} for b in self.ledger.breaks],
                "open_reservations": [
                    r.record.model_dump(mode="json") for r in self.ledger.open_reservations()
                ],
                "repairs": self.ledger.repairs,
            },
            "results": self.results,
            "seal": None if self.seal is None else self.seal.model_dump(mode="json"),
        }

    def _candidate_json(self, r: SplitResult) -> dict[str, Any]:
        d = delta_vs_best(self.best_val, r)
        return {
            "candidate": r.candidate,
            "fingerprint": r.fingerprint,
            "reward": r.reward,
            "stderr": r.stderr,
            "coverage": r.coverage,
            "reward_bounds": reward_bounds(r),
            "pass_hat_k": r.pass_hat_k,
            "pass_hat_k_bounds": r.pass_hat_k_bounds,
            "delta_vs_best": None
            if d is None
            else {"delta": d.delta, "se": d.se, "n_paired": d.n_paired, "ci95": d.ci95},
        }


def project_status(project: str | Path, *, last: int = 10) -> ProjectStatus:
    proj = load_project(project)
    store = Store(proj.state_dir)
    led = search_ledger(proj)
    decisions = led.decisions  # the trusted ones: up to a break, if any
    best = read_best(proj)
    first = None if best is None else best.name
    latest = store.read_latest_results("val", last=last, keep=first)
    candidates = sorted(latest.values(), key=lambda r: (r.candidate != first, r.candidate))
    return ProjectStatus(
        project=proj.config.name,
        best=best,
        decisions=decisions[-last:],
        search=led.trusted_state(),
        unconfirmed=sum(1 for d in decisions if d.promoted and d.stage == "single"),
        results=store.read_result_summaries()[-last:],
        seal=store.read_seal(),
        ledger=led,
        holdout=store.read_holdout(),
        candidates=candidates,
    )


def pass_hat_text(r: SplitResult) -> str:
    """pass^k for each k, with its bounds (missing tasks at 0 / at 1) where some task lacks it."""
    parts = []
    for k in sorted(r.pass_hat_k):
        bounds = r.pass_hat_k_bounds.get(k)
        parts.append(
            f"pass^{k} {r.pass_hat_k[k]:.4f}"
            + ("" if bounds is None else f" (missing at 0 / 1: {interval(bounds)})")
        )
    return ", ".join(parts)


def candidate_lines(report: ProjectStatus) -> list[str]:
    """The candidates table: the newest val result of each, with the paired Δ against the
    current best (candidate − best per task, over tasks scored on both, from the stored
    trials) ± its SE, and the reward's bounds when tasks are missing whole."""
    lines = [
        "candidates (newest val result of the last evaluated and of the best; Δ paired over "
        "tasks scored on both sides):"
    ]
    if not report.candidates:
        return [*lines, "  no stored val result"]
    best = report.best_val
    lines.append(
        f"  {'candidate':14} {'reward ± SE':17} {'coverage':>8} {DELTA_HEADER:>26}  "
        "reward with missing at 0 / 1"
    )
    for r in report.candidates:
        bounds = reward_bounds(r)
        lines.append(
            f"  {r.candidate[:14]:14} {fmt(r.reward) + ' ± ' + fmt(r.stderr):17} "
            f"{r.coverage:>8.2f} {delta_cell(best, r):>26}  "
            + ("-" if bounds is None else interval(bounds))
        )
    return lines


def ledger_lines(led: Ledger) -> list[str]:
    """The ledger's breaks and open reservations, for ``status``."""
    lines = [f"LEDGER BROKEN: {led.message()}"] if not led.ok else []
    lines += [f"  break: {b.message}" for b in led.breaks[1:]]
    for r in led.open_reservations():
        rec = r.record
        lines.append(
            f"open confirmation #{rec.j}: {rec.candidate} vs {rec.current}, reserved "
            f"{rec.timestamp} at alpha_j = {rec.level:.3g} (spent), base seed "
            f"{rec.base_seed}; gating that candidate again finishes it"
        )
    return lines


def status_lines(report: ProjectStatus) -> list[str]:
    """``honesteval status`` as text: the current best and the search's guarantee, the
    candidates, the last decisions, the coverage history, the test seal."""
    sentence = guarantee_sentence(report.search, report.unconfirmed, report.holdout is not None)
    return [
        f"project {report.project}",
        *_best_lines(report.best),
        *ledger_lines(report.ledger),
        plain_guarantee(report.search),
        sentence if report.ledger.ok else f"up to the break, {sentence}",
        "",
        *candidate_lines(report),
        "",
        "last decisions:",
        *_decision_rows(report.decisions),
        "",
        "coverage history:",
        *_coverage_rows(report.results),
        "",
        _seal_line(report.seal),
    ]


def _best_lines(best: BestRecord | None) -> list[str]:
    if best is None:
        return ["current best: none yet (gate a candidate to set the baseline)"]
    val = best.result
    lines = [
        f"current best: {best.name} (fingerprint {best.fingerprint[:12]}, "
        f"promoted {best.promoted_at})",
        f"  val reward {fmt(val.reward)} ± {fmt(val.stderr)}, coverage "
        f"{val.coverage:.2f} ({val.n_scored}/{val.n_tasks} tasks), "
        f"{val.n_trials} trials per task",
    ]
    if val.pass_hat_k:
        lines.append("  " + pass_hat_text(val))
    if val.coverage < 1.0:
        lines.append(
            f"  promoted below full coverage: {val.n_tasks - val.n_scored} val "
            "task(s) never scored for it"
        )
        lines.append(f"  {missing_text(val)}")
    return lines


def _decision_rows(decisions: list[DecisionRecord]) -> list[str]:
    if not decisions:
        return ["  none"]
    lines = [
        f"  {'time':27} {'verdict':10} {'candidate':14} {'vs':14} {'Δ':>8} "
        f"{'SE':>7} {'bar':>7} {'n':>4} {'screened':>8}"
    ]
    for d in decisions:
        delta = "" if d.delta is None else f"{d.delta:+.4f}"
        lines.append(
            f"  {d.timestamp:27} {verdict(d):10} {d.candidate[:14]:14} "
            f"{(d.current or '-')[:14]:14} {delta:>8} {fmt(d.se):>7} "
            f"{bar_cell(d):>7} {d.n_paired:>4} "
            f"{'' if d.screened is None else d.screened:>8}"
        )
        for label, ids in task_lists(d):
            lines.append(f"    {label}: {', '.join(ids[:10])}")
    return lines


def _coverage_rows(results: list[dict[str, Any]]) -> list[str]:
    lines = [] if results else ["  no stored results"]
    for r, times in _each_result_once(results):
        flag = "  (subset)" if r["subset"] else ""
        again = f"  (the same result stored {times}×: reruns reuse trials)" if times > 1 else ""
        bounds = r.get("reward_bounds")
        missing = "" if not bounds else f", missing at 0 / 1: {interval((bounds[0], bounds[1]))}"
        lines.append(
            f"  {r['finished_at']:27} {r['split']:5} {r['candidate'][:14]:14} reward "
            f"{fmt(r['reward'])} ± {fmt(r['stderr'])}  coverage {r['coverage']:.2f} "
            f"({r['n_scored']}/{r['n_tasks']}{missing}){flag}{again}"
        )
    return lines


def _seal_line(seal: Seal | None) -> str:
    if seal is None:
        return "test split: not sealed"
    return (
        f"test split: sealed for {seal.candidate} at {seal.sealed_at} "
        f"(reward {fmt(seal.reward)} ± {fmt(seal.stderr)})"
    )


def _each_result_once(results: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Stored results with the same numbers (an evaluation, its ``--json`` rerun, the gate's
    screen that reused its trials) once each, at the time of the last, with how many there
    were; in the order of those last times."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        key = json.dumps({k: v for k, v in r.items() if k != "finished_at"}, sort_keys=True)
        groups.setdefault(key, []).append(r)
    once = [(rs[-1], len(rs)) for rs in groups.values()]
    return sorted(once, key=lambda pair: str(pair[0]["finished_at"]))
