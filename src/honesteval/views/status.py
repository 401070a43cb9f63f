"""``honesteval status``: what a user wants to see first about a project's state."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from honesteval.ledger.gate_ledger import online_state, read_best
from honesteval.models import BestRecord, DecisionRecord, OnlineState, Seal
from honesteval.project.loader import load_project
from honesteval.stats import next_level, wealth_left
from honesteval.store.state_dir import Store
from honesteval.views.text import fmt, task_lists, verdict


def guarantee_sentence(state: OnlineState, unconfirmed: int) -> str:
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
            },
            "decisions": [d.model_dump(mode="json") for d in self.decisions],
            "search": {
                "rule": state.rule,
                "alpha": state.alpha,
                "confirmations": state.tests,
                "promotions": state.promotions,
                "wealth_left": wealth_left(state),
                "next_level": next_level(state),
                "unconfirmed_promotions": self.unconfirmed,
                "guarantee": guarantee_sentence(state, self.unconfirmed),
            },
            "results": self.results,
            "seal": None if self.seal is None else self.seal.model_dump(mode="json"),
        }


def project_status(project: str | Path, *, last: int = 10) -> ProjectStatus:
    proj = load_project(project)
    store = Store(proj.state_dir)
    decisions = store.read_decisions()
    return ProjectStatus(
        project=proj.config.name,
        best=read_best(proj),
        decisions=decisions[-last:],
        search=online_state(decisions, proj.gate_config),
        unconfirmed=sum(1 for d in decisions if d.promoted and d.stage == "single"),
        results=store.read_result_summaries()[-last:],
        seal=store.read_seal(),
    )


def status_lines(report: ProjectStatus) -> list[str]:
    lines = [f"project {report.project}"]
    best = report.best
    if best is None:
        lines.append("current best: none yet (gate a candidate to set the baseline)")
    else:
        val = best.result
        lines += [
            f"current best: {best.name} (fingerprint {best.fingerprint[:12]}, "
            f"promoted {best.promoted_at})",
            f"  val reward {fmt(val.reward)} ± {fmt(val.stderr)}, coverage "
            f"{val.coverage:.2f} ({val.n_scored}/{val.n_tasks} tasks), "
            f"{val.n_trials} trials per task",
        ]
        if val.coverage < 1.0:
            lines.append(
                f"  promoted below full coverage: {val.n_tasks - val.n_scored} val "
                "task(s) never scored for it"
            )
    lines.append(plain_guarantee(report.search))
    lines.append(guarantee_sentence(report.search, report.unconfirmed))
    lines.append("")
    lines.append("last decisions:")
    if not report.decisions:
        lines.append("  none")
    else:
        lines.append(
            f"  {'time':27} {'verdict':10} {'candidate':14} {'vs':14} {'Δ':>8} "
            f"{'SE':>7} {'bar':>7} {'n':>4} {'screened':>8}"
        )
        for d in report.decisions:
            delta = "" if d.delta is None else f"{d.delta:+.4f}"
            lines.append(
                f"  {d.timestamp:27} {verdict(d):10} {d.candidate[:14]:14} "
                f"{(d.current or '-')[:14]:14} {delta:>8} {fmt(d.se):>7} "
                f"{fmt(d.bar):>7} {d.n_paired:>4} "
                f"{'' if d.screened is None else d.screened:>8}"
            )
            for label, ids in task_lists(d):
                lines.append(f"    {label}: {', '.join(ids[:10])}")
    lines.append("")
    lines.append("coverage history:")
    if not report.results:
        lines.append("  no stored results")
    for r, times in _each_result_once(report.results):
        flag = "  (subset)" if r["subset"] else ""
        again = f"  (the same result stored {times}×: reruns reuse trials)" if times > 1 else ""
        lines.append(
            f"  {r['finished_at']:27} {r['split']:5} {r['candidate'][:14]:14} reward "
            f"{fmt(r['reward'])} ± {fmt(r['stderr'])}  coverage {r['coverage']:.2f} "
            f"({r['n_scored']}/{r['n_tasks']}){flag}{again}"
        )
    seal = report.seal
    lines.append("")
    lines.append(
        "test split: not sealed"
        if seal is None
        else f"test split: sealed for {seal.candidate} at {seal.sealed_at} "
        f"(reward {fmt(seal.reward)} ± {fmt(seal.stderr)})"
    )
    return lines


def _each_result_once(results: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Stored results with the same numbers (an evaluation, its ``--json`` rerun, the gate's
    screen that reused its trials) once each, at the time of the last, with how many there
    were; in the order of those last times."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in results:
        key = tuple(r[k] for k in sorted(r) if k != "finished_at")
        groups.setdefault(key, []).append(r)
    once = [(rs[-1], len(rs)) for rs in groups.values()]
    return sorted(once, key=lambda pair: str(pair[0]["finished_at"]))
