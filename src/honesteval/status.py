"""``honesteval status``: what a user wants to see first about a project's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from honesteval.gating import online_state, read_best
from honesteval.models import OnlineState
from honesteval.project import load_project
from honesteval.reporting import fmt
from honesteval.stats import next_level, wealth_left
from honesteval.store import Store


def guarantee_sentence(state: OnlineState, unconfirmed: int) -> str:
    """One sentence: what the search-level error control guarantees, and the wealth left."""
    n, r = state.tests, len(state.promotions)
    if state.rule == "fallback":
        what = (
            f"online fallback at alpha {state.alpha:g} over {n} confirmation(s), {r} promoted: "
            f"P(any false promotion, ever) <= {state.alpha:g}"
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


def search_status(decisions: list[dict[str, Any]], state: OnlineState) -> dict[str, Any]:
    unconfirmed = sum(1 for d in decisions if d.get("promoted") and d.get("stage") == "single")
    return {
        "rule": state.rule,
        "alpha": state.alpha,
        "confirmations": state.tests,
        "promotions": state.promotions,
        "wealth_left": wealth_left(state),
        "next_level": next_level(state),
        "unconfirmed_promotions": unconfirmed,
        "guarantee": guarantee_sentence(state, unconfirmed),
    }


def project_status(project: str | Path, *, last: int = 10) -> dict[str, Any]:
    proj = load_project(project)
    store = Store(proj.state_dir)
    best = read_best(proj)
    results = store.read_result_summaries()[-last:]
    decisions = store.read_decisions()
    state = online_state(decisions, proj.gate_config)
    return {
        "project": proj.config.name,
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
        "decisions": decisions[-last:],
        "search": search_status(decisions, state),
        "results": results,
        "seal": store.read_seal(),
    }


def _verdict(d: dict[str, Any]) -> str:
    if d.get("indecisive"):
        return "INDECISIVE"
    if d.get("baseline") and d.get("accept"):
        return "BASELINE"
    return "ACCEPT" if d.get("accept") else "REJECT"


def status_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"project {report['project']}"]
    best = report["best"]
    if best is None:
        lines.append("current best: none yet (gate a candidate to set the baseline)")
    else:
        lines += [
            f"current best: {best['name']} (fingerprint {best['fingerprint'][:12]}, "
            f"promoted {best['promoted_at']})",
            f"  val reward {fmt(best['reward'])} ± {fmt(best['stderr'])}, coverage "
            f"{best['coverage']:.2f} ({best['n_scored']}/{best['n_tasks']} tasks), "
            f"{best['n_trials']} trials per task",
        ]
        if best["coverage"] < 1.0:
            lines.append(
                f"  promoted below full coverage: {best['n_tasks'] - best['n_scored']} val "
                "task(s) never scored for it"
            )
    lines.append(report["search"]["guarantee"])
    lines.append("")
    lines.append("last decisions:")
    if not report["decisions"]:
        lines.append("  none")
    else:
        lines.append(
            f"  {'time':27} {'verdict':10} {'candidate':14} {'vs':14} {'Δ':>8} "
            f"{'SE':>7} {'bar':>7} {'n':>4} {'screened':>8}"
        )
        for d in report["decisions"]:
            delta = "" if d.get("delta") is None else f"{d['delta']:+.4f}"
            lines.append(
                f"  {d['timestamp']:27} {_verdict(d):10} {d['candidate'][:14]:14} "
                f"{(d.get('current') or '-')[:14]:14} {delta:>8} {fmt(d.get('se')):>7} "
                f"{fmt(d.get('bar')):>7} {d.get('n_paired', 0):>4} "
                f"{'' if d.get('screened') is None else d['screened']:>8}"
            )
            for label in ("regressions", "unverified", "rerun"):
                if d.get(label):
                    lines.append(f"    {label}: {', '.join(d[label][:10])}")
    lines.append("")
    lines.append("coverage history:")
    if not report["results"]:
        lines.append("  no stored results")
    for r in report["results"]:
        flag = "  (subset)" if r["subset"] else ""
        lines.append(
            f"  {r['finished_at']:27} {r['split']:5} {r['candidate'][:14]:14} reward "
            f"{fmt(r['reward'])} ± {fmt(r['stderr'])}  coverage {r['coverage']:.2f} "
            f"({r['n_scored']}/{r['n_tasks']}){flag}"
        )
    seal = report["seal"]
    lines.append("")
    lines.append(
        "test split: not sealed"
        if seal is None
        else f"test split: sealed for {seal['candidate']} at {seal['sealed_at']} "
        f"(reward {fmt(seal.get('reward'))} ± {fmt(seal.get('stderr'))})"
    )
    return lines
