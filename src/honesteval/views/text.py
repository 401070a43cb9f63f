"""Plain renderings of results: markdown for artifacts, rows for tables, text for the CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import get_args

from honesteval.models import DriftReport, GateDecision, SplitResult, TrialRecord, TrialStatus


def slug(name: str) -> str:
    """A Prefect artifact key part: lowercase letters, digits and dashes only."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "x"


def fmt(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.4f}"


def coverage_text(r: SplitResult) -> str:
    return (
        f"{r.coverage:.2f} ({r.n_scored}/{r.n_tasks} tasks scored; trials: {r.trials_ok} ok, "
        f"{r.trials_failed} failed, {r.trials_infra_error} infra_error, "
        f"{r.trials_scorer_error} scorer_error"
        f" of {r.trials_planned})"
    )


def result_line(r: SplitResult) -> str:
    """The result in one line (a Prefect state message): reward ± SE, coverage, errors.

    Every status other than ``ok`` with a count is listed, so new statuses show up here.
    """
    reward = "reward n/a" if r.reward is None else f"reward {r.reward:.2f} ± {r.stderr or 0:.2f}"
    parts = [reward, f"coverage {r.n_scored}/{r.n_tasks}"]
    for status in get_args(TrialStatus):
        count = getattr(r, f"trials_{status}", 0)
        if status != "ok" and count:
            parts.append(f"{count} {status}")
    return ", ".join(parts)


def decision_line(d: GateDecision) -> str:
    """The decision in one line (a Prefect state message)."""
    if d.delta is None:
        return f"{verdict(d)} {d.candidate}: {d.reason}".splitlines()[0]
    return (
        f"{verdict(d)} {d.candidate}: Δ {d.delta:+.3f} ± {d.se or 0:.3f} (bar {fmt(d.bar, 3)}), "
        f"coverage current {fmt(d.current_coverage, 2)}, candidate {fmt(d.candidate_coverage, 2)}"
    )


def ci_text(r: SplitResult) -> str:
    """The reported interval with how it was made, then the Student t one, labelled."""
    if r.ci95 is None:
        return "n/a"
    text = f"[{r.ci95[0]:.4f}, {r.ci95[1]:.4f}]"
    if r.ci95_method:
        text += f" ({r.ci95_method})"
    if r.ci95_t is not None and r.ci95_method and not r.ci95_method.startswith("Student"):
        text += f"; t interval [{r.ci95_t[0]:.4f}, {r.ci95_t[1]:.4f}]"
    return text


def pass_k_rows(r: SplitResult) -> list[dict[str, object]]:
    return [
        {
            "k": k,
            "pass^k": round(r.pass_hat_k[k], 4),
            "pass@k": round(r.pass_at_k[k], 4),
            "tasks": r.tasks_k[k],
        }
        for k in sorted(r.pass_hat_k)
    ]


def summary_markdown(r: SplitResult) -> str:
    """The evaluation summary artifact: reward ± SE, CI, coverage, pass^k, warnings."""
    lines = [
        f"# {r.candidate} on {r.split}",
        "",
        f"**reward:** {fmt(r.reward)} ± {fmt(r.stderr)} (SE, {r.stderr_method})  ",
        f"**95% CI:** {ci_text(r)}  ",
        f"**coverage:** {coverage_text(r)}  ",
        f"**trials:** {r.n_trials} per task, seeds {r.base_seed}..{r.base_seed + r.n_trials - 1}"
        f"; {r.trials_reused} reused from disk  ",
        f"**fingerprint:** `{r.fingerprint[:12]}`"
        + ("  \n**subset run** (not gateable)" if r.subset else ""),
        "",
        f"pass threshold: reward >= {r.pass_threshold:g}",
        "",
        "| k | pass^k | pass@k | tasks |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {row['k']} | {row['pass^k']} | {row['pass@k']} | {row['tasks']} |"
        for row in pass_k_rows(r)
    ]
    if r.warnings:
        lines += ["", "**warnings**", ""] + [f"- {w}" for w in r.warnings]
    return "\n".join(lines) + "\n"


#: Characters of output and feedback shown in a table cell (the trial file has all of it).
CELL_CHARS = 120


def truncate(value: object, limit: int = CELL_CHARS) -> str:
    text = "" if value is None else value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rollout_rows(
    records: Iterable[TrialRecord],
    reused: set[tuple[str, int]],
    path_of: Callable[[TrialRecord], str],
) -> list[dict]:
    """One row per trial for the table artifact (plain Python types only): reward, status,
    truncated output and feedback, attempts, error, reused, and the trial file."""
    return [
        {
            "task": r.task_id,
            "trial": int(r.trial),
            "seed": int(r.seed),
            "status": r.status,
            "reward": None if r.reward is None else float(r.reward),
            "output": truncate(r.rollout),
            "feedback": truncate(r.feedback),
            "attempts": int(r.attempts),
            "error": r.error or "",
            "reused": (r.task_id, r.trial) in reused,
            "file": path_of(r),
        }
        for r in records
    ]


def task_lists(d: GateDecision) -> list[tuple[str, list[str]]]:
    """The decision's task lists that are not empty, by label: regressions, unverified, rerun."""
    lists = (("regressions", d.regressions), ("unverified", d.unverified), ("rerun", d.rerun))
    return [(label, ids) for label, ids in lists if ids]


def verdict(d: GateDecision) -> str:
    if d.indecisive:
        return "INDECISIVE"
    if d.baseline and d.accept:
        return "BASELINE"
    return "ACCEPT" if d.accept else "REJECT"


def decision_rows(d: GateDecision) -> list[dict[str, object]]:
    """The decision as a one-row table (plain Python types)."""
    return [
        {
            "verdict": verdict(d),
            "candidate": d.candidate,
            "current": d.current or "",
            "mode": d.mode,
            "delta": d.delta,
            "se": d.se,
            "bar": d.bar,
            "n_paired": int(d.n_paired),
            "mde": d.mde,
            "regressions": ", ".join(d.regressions),
            "unverified": ", ".join(d.unverified),
            "rerun": ", ".join(d.rerun),
            "worst_case_delta": d.worst_case_delta,
            "screened": d.screened,
            "current_coverage": d.current_coverage,
            "candidate_coverage": d.candidate_coverage,
            "promoted": d.promoted,
            "stage": d.stage or "",
            "alpha_j": d.level,
            "j": None if d.online is None else d.online.tests,
            "wealth_left": d.wealth_left,
            "gain_ci95": ""
            if d.gain_ci95 is None
            else f"[{d.gain_ci95[0]:+.4f}, {d.gain_ci95[1]:+.4f}]",
        }
    ]


def mde_text(d: GateDecision) -> str:
    """The gate's power: of the screen and confirmation when two stages decide, else the bar's."""
    if d.mde_level is None:
        return f"{fmt(d.mde)}  (smallest Δ this bar detects with 80% power)"
    now = "no gain up to 1 (too few tasks for this level)" if d.mde is None else fmt(d.mde)
    later = (
        ""
        if d.mde_later_level is None
        else f"; {'none' if d.mde_later is None else fmt(d.mde_later)} at alpha = "
        f"{d.mde_later_level:.3g}, nine confirmations on if none promotes"
    )
    return (
        f"{now}  (promoted with 80% power by the screen and the confirmation at alpha_j = "
        f"{d.mde_level:.3g}{later}; simulated)"
    )


def stage_lines(d: GateDecision) -> list[str]:
    """The two-stage part of a decision: the level, the screen, the adjusted gain, wealth."""
    if d.stage == "single":
        return ["  guarantee none: single stage (--no-confirm), no search-level error control"]
    if d.stage == "screen":
        return (
            ["  stage     screen (a pass goes on to a confirmation on fresh seeds)"]
            if not d.accept
            else []
        )
    if d.stage != "confirm" or d.online is None:
        return []
    lines = [
        f"  stage     confirmation #{d.online.tests} on fresh seeds (from {d.confirm_base_seed})"
        f" at alpha_j = {fmt(d.level, 6)} ({d.online.rule}, search alpha {d.online.alpha:g})",
        f"  screen    Δ {signed(d.screen_delta)} (passed; selected, so biased upwards)",
    ]
    if d.e_value is not None and d.level is not None:
        lines.append(
            f"  e-value   {d.e_value:.4g} vs 1/alpha_j = {1 / d.level:.4g} (betting test, level "
            "exact for deltas in [-1, 1])"
        )
    if d.gain_ci95 is not None and d.gain_estimate is not None:
        lo, hi = d.gain_ci95
        lines.append(
            f"  gain      {d.gain_estimate:+.4f}, 95% CI [{lo:+.4f}, {hi:+.4f}] (conditional on "
            f"the promotion; the confirmation's raw Δ {signed(d.delta)} is biased upwards)"
        )
    lines.append(f"  wealth    {fmt(d.wealth_left, 6)} alpha-wealth left for future confirmations")
    return lines


def decision_lines(d: GateDecision) -> list[str]:
    if d.baseline:
        return [f"{verdict(d)}: {d.candidate}", f"  reason    {d.reason}"] + (
            [f"  promoted  {d.candidate} is now the current best"] if d.promoted else []
        )
    lines = [
        f"{verdict(d)}: {d.candidate}" + (f" vs current best {d.current}" if d.current else ""),
        f"  Δ         {signed(d.delta)}",
        f"  SE        {fmt(d.se)}",
        f"  bar       {fmt(d.bar)}"
        + (f"  ({d.bar_multiplier:.3g}×SE)" if d.bar_multiplier is not None else ""),
        f"  n paired  {d.n_paired}",
        f"  MDE       {mde_text(d)}",
        f"  coverage  current {fmt(d.current_coverage, 2)}, candidate "
        f"{fmt(d.candidate_coverage, 2)}",
    ]
    if d.worst_case_delta is not None:
        lines.append(
            f"  worst Δ   {d.worst_case_delta:+.4f}  (tasks one side lacks at the worst case)"
        )
    for label, ids in task_lists(d):
        lines.append(f"  {label}  {', '.join(ids[:20])}" + (" ..." if len(ids) > 20 else ""))
    lines += stage_lines(d)
    if d.screened is not None:
        lines.append(
            f"  screened  {d.screened} candidate(s) against this current best since "
            "it was promoted (each is another draw from the noise)"
        )
    lines.append(f"  reason    {d.reason}")
    if d.promoted:
        where = (
            "better on held-out val tasks no screen scored: tasks the search never saw"
            if d.holdout
            else "better on these val tasks, fresh seeds: the tasks the screens saw, not new tasks"
        )
        lines.append(f"  promoted  {d.candidate} is now the current best ({where})")
    return lines


def _cell(value: object) -> str:
    text = "" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", "<br>")


def decision_markdown(d: GateDecision, summaries: dict[str, str] | None = None) -> str:
    """The decision as a markdown table, the reason in full, links to both summaries.

    ``summaries`` maps an evaluation's label (e.g. ``current best base``) to the address of
    its summary artifact.
    """
    rows = [("verdict", verdict(d)), *decision_rows(d)[0].items(), ("reason", d.reason)]
    table = "\n".join(f"| {k} | {_cell(v)} |" for k, v in rows if k != "verdict")
    links = "".join(f"- [{label}]({url})\n" for label, url in (summaries or {}).items())
    return f"# Gate: {verdict(d)}\n\n**{decision_lines(d)[0]}**\n\n| | |\n|---|---|\n{table}\n" + (
        f"\n**Evaluations:**\n\n{links}" if links else ""
    )


def drift_markdown(r: DriftReport) -> str:
    return (
        f"# Re-evaluation of the current best: {r.status}\n\n"
        f"**{r.message}**\n\n"
        f"- candidate: {r.candidate} (`{r.fingerprint[:12]}`)\n"
        f"- stored val reward {fmt(r.stored_reward)} (seeds from {r.stored_base_seed}); "
        f"fresh {fmt(r.new_reward)} (seeds from {r.new_base_seed})\n"
    )
