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
        lines.append(f"  promoted  {d.candidate} is now the current best")
    return lines


def _cell(value: object) -> str:
    text = "" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", "<br>")


def reason_sentence(d: GateDecision) -> str:
    """The decision's reason without the screen's (a confirmed decision appends it)."""
    return d.reason.split(" | screen:")[0]


def trials_text(r: SplitResult) -> str:
    missing = r.trials_infra_error + r.trials_scorer_error
    return (
        f"{r.trials_ok} ok, {r.trials_failed} failed, {missing} missing "
        f"({r.trials_infra_error} infra_error, {r.trials_scorer_error} scorer_error) "
        f"of {r.trials_planned}"
    )


def decision_markdown(
    d: GateDecision,
    results: Iterable[SplitResult] = (),
    summaries: dict[str, str] | None = None,
) -> str:
    """The gate decision for the UI: the reason in one sentence, then a small table of what
    it rests on (Δ, SE, bar, coverage and trials by status on both sides, regressions),
    links to both evaluations, and every field of the record folded below.

    ``results`` are the evaluations decided on (for a confirmed decision, the
    confirmation's); ``summaries`` maps an evaluation's label to its summary artifact.
    """
    by_name = {r.candidate: r for r in results}
    sides = [(f"current best `{d.current}`", by_name.get(d.current or ""))] if d.current else []
    sides.append((f"candidate `{d.candidate}`", by_name.get(d.candidate)))
    head = "| | " + " | ".join(label for label, _ in sides) + " |"

    def row(name: str, show: Callable[[SplitResult], str]) -> str:
        return f"| {name} | " + " | ".join(_cell(show(r)) if r else "" for _, r in sides) + " |"

    lines = [
        head,
        "|---" * (len(sides) + 1) + "|",
        row("reward ± SE", lambda r: f"{fmt(r.reward)} ± {fmt(r.stderr)}"),
        row("coverage", lambda r: f"{r.coverage:.2f} ({r.n_scored}/{r.n_tasks} tasks)"),
        row("trials", trials_text),
    ]
    lists = dict(task_lists(d))
    if d.e_value is not None and d.level:  # a confirmation: Δ decided by its betting e-value
        bar_head, bar = "e-value vs bar", f"{d.e_value:.4g} vs 1/alpha_j = {1 / d.level:.4g}"
    else:
        bar_head = "bar"
        bar = fmt(d.bar) + (f" ({d.bar_multiplier:.3g}×SE)" if d.bar_multiplier is not None else "")
    gate_table = (
        f"| Δ | SE | {bar_head} | paired tasks | regressions |\n|---|---|---|---|---|\n"
        f"| {signed(d.delta)} | {fmt(d.se)} | {_cell(bar)} | {d.n_paired} | "
        f"{_cell(', '.join(lists.get('regressions', [])) or 'none')} |\n"
    )
    outcome = (
        f"**{d.candidate} is now the current best.**"
        if d.promoted
        else f"The current best stays `{d.current}`."
        if d.current
        else ""
    )
    links = "".join(f"- [{label}]({url})\n" for label, url in (summaries or {}).items())
    record = [*decision_rows(d)[0].items(), ("reason", d.reason)]
    raw = "\n".join(f"| {k} | {_cell(v)} |" for k, v in record)
    return (
        f"# Gate: {decision_lines(d)[0]}\n\n**{_cell(reason_sentence(d))}**\n\n"
        + ("" if d.baseline else gate_table + "\n")
        + "\n".join(lines)
        + f"\n\n{outcome}\n"
        + (f"\n**Evaluations:**\n\n{links}" if links else "")
        + "\n<details><summary>The whole decision record</summary>\n\n"
        f"| field | value |\n|---|---|\n{raw}\n\n</details>\n"
    )


def drift_markdown(r: DriftReport) -> str:
    return (
        f"# Re-evaluation of the current best: {r.status}\n\n"
        f"**{r.message}**\n\n"
        f"- candidate: {r.candidate} (`{r.fingerprint[:12]}`)\n"
        f"- stored val reward {fmt(r.stored_reward)} (seeds from {r.stored_base_seed}); "
        f"fresh {fmt(r.new_reward)} (seeds from {r.new_base_seed})\n"
    )


def gate_plan_notice(
    candidate: str,
    current: str | None,
    n_tasks: int,
    n_trials: int,
    confirm_trials: int | None,
) -> str:
    """What a gate is about to run, and why, in the words a user needs before waiting."""
    if current is None:
        return (
            f"gate: no current best yet, so {candidate!r} is evaluated on val ({n_tasks} tasks "
            f"× {n_trials} trials) and becomes the baseline"
        )
    then = (
        f"; a pass is confirmed on fresh seeds ({confirm_trials} trials a task, both sides) "
        "before anything is promoted"
        if confirm_trials
        else "; single stage (--no-confirm): a pass promotes at once"
    )
    return (
        f"gate: screening {candidate!r} against the current best {current!r} on val with the "
        f"same seeds ({n_tasks} tasks × {n_trials} trials each, stored trials reused){then}"
    )


def confirmation_notice(
    screen: GateDecision, n_tasks: int, n_trials: int, base_seed: int, level: float
) -> str:
    """Said before the second stage: the trials it runs and why it runs them."""
    return (
        f"screen passed: Δ {signed(screen.delta)} > bar {fmt(screen.bar)}. One pass is one "
        "draw among the many a search makes, so before promoting, the confirmation runs "
        f"{screen.current!r} and {screen.candidate!r} again on fresh seeds (from {base_seed}): "
        f"{n_tasks} tasks × {n_trials} trials each = {2 * n_tasks * n_trials} trials, decided "
        f"at alpha_j = {fmt(level, 6)}"
    )


def missing_trial_line(r: TrialRecord) -> str:
    """``t01 seed 0: infra_error after 4 attempts: InfraError: backend down``"""
    attempts = f" after {r.attempts} attempts" if r.attempts > 1 else ""
    return f"{r.task_id} seed {r.seed}: {r.status}{attempts}: {r.error or 'no error text'}"


def missing_summary_line(r: SplitResult, min_coverage: float) -> str:
    """How much of an evaluation is missing, and what it did to coverage, in one line."""
    missing = r.trials_infra_error + r.trials_scorer_error
    low = r.coverage < min_coverage
    return (
        f"{r.candidate} on {r.split}: {missing} of {r.trials_planned} trials are missing data "
        f"({r.trials_infra_error} infra_error, {r.trials_scorer_error} scorer_error); coverage "
        f"{r.n_scored}/{r.n_tasks} = {r.coverage:.2f}, "
        + (f"below min_coverage {min_coverage:.2f}" if low else f"min_coverage {min_coverage:.2f}")
    )
