"""Plain renderings of results: markdown for artifacts, rows for tables, text for the CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import get_args

from honesteval.models import (
    REWARD_RANGE,
    BestRecord,
    DriftReport,
    GateDecision,
    SplitResult,
    TrialRecord,
    TrialStatus,
)
from honesteval.stats import (
    first_sentence,
    missing_bounds,
    normal_quantile,
    paired_ci95,
    paired_deltas,
    reason_details,
)


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


def seeds_text(r: SplitResult) -> str:
    """The seeds a result's trials ran at (:mod:`honesteval.models.seeds`)."""
    if r.seeding == "per_task":
        return f"each task its own seeds (base seed {r.base_seed})"
    return f"seeds {r.base_seed}..{r.base_seed + r.n_trials - 1}"


def trial_counts(r: SplitResult) -> str:
    """Where this run's trials came from: taken from disk, graded from stored rollouts (their
    targets did not run again), or run."""
    return (
        f"{r.trials_reused} reused from disk, {r.trials_graded} graded from stored rollouts, "
        f"{r.trials_ran} ran"
        + (
            f" ({r.trials_repeated} of them a second time: a lost worker began them and "
            "stored no rollout)"
            if r.trials_repeated
            else ""
        )
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


def delta_bar(d: GateDecision) -> float | None:
    """The bar Δ had to beat, in the unit of Δ; None for a confirmation (its e-value decides,
    :func:`e_value_text`), also for one recorded when ``bar`` held its e-value threshold."""
    return None if d.e_value is not None else d.bar


def e_value_text(d: GateDecision) -> str | None:
    """A confirmation's e-value and the threshold it had to reach (None: not a confirmation)."""
    if d.e_value is None:
        return None
    threshold = d.e_value_bar or (1 / d.level if d.level else d.bar)
    shown = "n/a" if threshold is None else f"{threshold:.4g}"
    return f"{d.e_value:.4g}, threshold 1/alpha_j = {shown}"


def bar_cell(d: GateDecision) -> str:
    """A table's bar cell: the Δ bar, or "e-value" where a confirmation's e-value decided."""
    return "e-value" if d.e_value is not None else fmt(d.bar)


def bar_text(d: GateDecision, digits: int = 4) -> str:
    """The Δ the decision had to beat, with its multiple of the SE."""
    multiplier = f" ({d.bar_multiplier:.3g}×SE)" if d.bar_multiplier is not None else ""
    return f"{fmt(d.bar, digits)}{multiplier}"


def decision_line(d: GateDecision) -> str:
    """The decision in one line (a Prefect state message, the gate run's last log line): the
    reason's first sentence and the coverage of both sides."""
    first = f"{verdict(d)}: {first_sentence(d.reason)}".splitlines()[0]
    sides = [("current", d.current_coverage), ("candidate", d.candidate_coverage)]
    shown = [f"{side} {value:.2f}" for side, value in sides if value is not None]
    return f"{first} (coverage {', '.join(shown)})" if shown else first


def interval(ci: tuple[float, float], signed_values: bool = False) -> str:
    lo, hi = ci
    return f"[{lo:+.4f}, {hi:+.4f}]" if signed_values else f"[{lo:.4f}, {hi:.4f}]"


def clipped(ci: tuple[float, float], low: float, high: float) -> tuple[tuple[float, float], str]:
    """``ci`` inside [low, high], and the words saying so when that cut it (the true value
    cannot lie outside the range, so the cut loses no coverage)."""
    cut = (max(ci[0], low), min(ci[1], high))
    return cut, f", clipped to the range [{low:g}, {high:g}]" if cut != ci else ""


def _t_df(r: SplitResult) -> str:
    """The t interval's df as printed: whole for tasks, one decimal for Bell–McCaffrey's."""
    if r.ci95_t_df is None:  # a result stored before the df was kept
        return str((r.n_clusters if r.n_clusters is not None else r.n_scored) - 1)
    df = r.ci95_t_df
    return f"{df:.0f}" if df == round(df) else f"{df:.1f}"


#: The words that make the reported 95% CI *the* interval to read for a reward (the others are
#: details, each saying what it is for).
THE_INTERVAL = "the interval for the reward"


def interval_lines(r: SplitResult) -> list[tuple[str, str]]:
    """Every interval printed beside a reward, as (label, text): each says what it is about
    and what it assumes (issue 23 §3), so a wide interval over new tasks is not read as "no
    difference" beside a gate that decides on the same tasks.

    * ``95% CI``: the mean reward over new tasks like these. A betting (or other
      distribution-free) interval assumes only independent draws of tasks and rewards in
      [0, 1]; a Student t one assumes roughly normal task (or cluster) means.
    * ``t CI``: the Student t interval over tasks beside a distribution-free one, clipped.
    * ``trials CI``: these very tasks rerun with new trials (within-task SE, normal): it is
      narrower, and says nothing about new tasks.
    """
    out: list[tuple[str, str]] = []
    low, high = REWARD_RANGE
    unit = "clusters" if r.n_clusters is not None else "tasks"
    method = r.ci95_method or ""
    student = method.startswith("Student t")
    if r.ci95 is not None:
        assumption = (
            f"assumes roughly normal {unit[:-1]} means"
            if student
            else f"distribution-free: assumes only that the {unit} are independent draws "
            f"and rewards lie in [{low:g}, {high:g}]"
        )
        out.append(
            (
                "95% CI",
                f"{interval(r.ci95)} {THE_INTERVAL}: the mean reward over new tasks like these; "
                f"{assumption}" + (f" ({method})" if method else ""),
            )
        )
    if r.ci95_t is not None and not student:
        ci, cut = clipped(r.ci95_t, low, high)
        out.append(
            (
                "t CI",
                f"{interval(ci)} the same, a Student t interval ({_t_df(r)} df) assuming "
                f"roughly normal {unit[:-1]} means{cut}",
            )
        )
    if r.stderr_trials and r.reward is not None:
        half = normal_quantile(0.975) * r.stderr_trials
        ci, cut = clipped((r.reward - half, r.reward + half), low, high)
        out.append(
            (
                "trials CI",
                f"{interval(ci)} these {r.n_scored} tasks rerun with new trials (normal, "
                f"within-task SE {r.stderr_trials:.4f}){cut}; says nothing about new tasks",
            )
        )
    return out


def ci_short(r: SplitResult) -> str:
    """The reported interval with its assumption in a few words (a table cell)."""
    if r.ci95 is None:
        return "n/a"
    method = r.ci95_method or ""
    kind = (
        "Student t: roughly normal task means, clipped"
        if method.startswith("Student t")
        else "distribution-free"
    )
    return f"{interval(r.ci95)} ({kind})"


def ci_text(r: SplitResult) -> str:
    """The intervals of :func:`interval_lines` in one text (a table cell, a line)."""
    lines = interval_lines(r)
    return "; ".join(f"{label} {text}" for label, text in lines) if lines else "n/a"


def reward_bounds(r: SplitResult) -> tuple[float, float] | None:
    """The reward with every task missing whole at the range's low end, and at its high end;
    None at full coverage or with nothing scored. (Results stored before the bounds were
    recorded get them from their tasks.)"""
    if r.reward is None or r.n_scored >= r.n_tasks:
        return None
    if r.reward_bounds is not None:
        return r.reward_bounds
    means = {t.id: t.mean for t in r.per_task if t.mean is not None}
    return missing_bounds(means, [t.id for t in r.per_task])


def missing_text(r: SplitResult) -> str | None:
    """The bounds line printed whenever coverage < 1 (None otherwise)."""
    bounds = reward_bounds(r)
    if bounds is None:
        return None
    low, high = REWARD_RANGE
    missing = r.n_tasks - r.n_scored
    return (
        f"{missing} of {r.n_tasks} tasks missing whole: reward {interval(bounds)} with them "
        f"at {low:g} and at {high:g} (the reward over all tasks lies between)"
    )


def missing_cell(r: SplitResult) -> str:
    """A table cell: the reward's bounds and the bounds of pass^k for the largest k (missing
    tasks at 0 / at 1), or "-" when nothing is missing."""
    bounds = reward_bounds(r)
    parts = [] if bounds is None else [f"reward {interval(bounds)}"]
    if r.pass_hat_k_bounds:
        k = max(r.pass_hat_k_bounds)
        parts.append(f"pass^{k} {r.pass_hat_k[k]:.4f} in {interval(r.pass_hat_k_bounds[k])}")
    return "; ".join(parts) or "-"


@dataclass(frozen=True)
class DeltaVsBest:
    """A candidate's paired Δ against the current best: candidate − best per task, over the
    tasks scored on both sides (from the stored trials), its SE (the gate's paired SE) and its
    95 % Student t interval, clipped to [−1, 1]."""

    delta: float
    se: float
    n_paired: int
    ci95: tuple[float, float] | None

    @property
    def text(self) -> str:
        return f"{self.delta:+.4f} ± {self.se:.4f} (n={self.n_paired})"


def delta_vs_best(best: SplitResult | None, r: SplitResult) -> DeltaVsBest | None:
    """None without a current best, for the best itself, or with no task scored on both."""
    if best is None or best.candidate == r.candidate:
        return None
    pairs = paired_deltas(best, r)
    if pairs.n == 0:
        return None
    span = REWARD_RANGE[1] - REWARD_RANGE[0]
    ci = paired_ci95(pairs)
    return DeltaVsBest(
        float(pairs.mean),
        pairs.se,
        pairs.n,
        None if ci is None else clipped(ci, -span, span)[0],
    )


def best_result(best: BestRecord | None, results: Iterable[SplitResult]) -> SplitResult | None:
    """The current best's val result to compare candidates with: its newest stored one when
    that is the promoted version (same fingerprint), else the one it was promoted on."""
    if best is None:
        return None
    newest = {r.candidate: r for r in results if r.split == "val"}.get(best.name)
    if newest is not None and newest.fingerprint == best.fingerprint:
        return newest
    return best.result


DELTA_HEADER = "Δ vs best ± SE"


def delta_cell(best: SplitResult | None, r: SplitResult) -> str:
    """The candidates tables' ``Δ vs best ± SE`` cell."""
    if best is None:
        return "no current best"
    if best.candidate == r.candidate:
        return "(current best)"
    d = delta_vs_best(best, r)
    return "n/a" if d is None else d.text


PASS_BOUNDS = "pass^k, missing at 0 / 1"


def pass_k_rows(r: SplitResult) -> list[dict[str, object]]:
    """One row per k; with the pass^k bounds column whenever some task lacks pass^k."""
    with_bounds = bool(r.pass_hat_k_bounds)
    rows: list[dict[str, object]] = []
    for k in sorted(r.pass_hat_k):
        row: dict[str, object] = {
            "k": k,
            "pass^k": round(r.pass_hat_k[k], 4),
            "pass@k": round(r.pass_at_k[k], 4),
            "tasks": r.tasks_k[k],
        }
        if with_bounds:
            bounds = r.pass_hat_k_bounds.get(k)
            row[PASS_BOUNDS] = "" if bounds is None else interval(bounds)
        rows.append(row)
    return rows


#: Failed trials listed in an evaluation's summary artifact at most.
FAILED_ROWS = 20


def summary_markdown(
    r: SplitResult,
    not_ok: Sequence[TrialRecord] = (),
    links: dict[str, str] | None = None,
) -> str:
    """The evaluation summary artifact: the trials that did not end ok first (``not_ok``),
    then reward ± SE, CI, coverage, pass^k, warnings, and ``links`` to the other artifacts
    (label: URL)."""
    lines = [
        f"# {r.candidate} on {r.split}",
        "",
        *([failed_trials_markdown(not_ok)] if not_ok else []),
        f"**reward:** {fmt(r.reward)} ± {fmt(r.stderr)} (SE, {r.stderr_method})  ",
        *(f"**{label}:** {text}  " for label, text in interval_lines(r)),
        f"**coverage:** {coverage_text(r)}  ",
        *([f"**missing:** {missing}  "] if (missing := missing_text(r)) else []),
        f"**trials:** {r.n_trials} per task, {seeds_text(r)}; {trial_counts(r)}  ",
        f"**fingerprint:** `{r.fingerprint[:12]}`"
        + ("  \n**subset run** (not gateable)" if r.subset else ""),
        "",
        f"pass threshold: reward >= {r.pass_threshold:g}",
        "",
    ]
    rows = pass_k_rows(r)
    if rows:
        lines += ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(str(v) for v in row.values()) + " |" for row in rows]
    if r.warnings:
        lines += ["", "**warnings**", ""] + [f"- {w}" for w in r.warnings]
    if links:
        lines += ["", "**artifacts:** " + ", ".join(f"[{k}]({v})" for k, v in links.items())]
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


#: (task id, trials not ``ok``, spread of its rewards, its lowest mean reward, rows it fills)
TaskRank = tuple[str, int, float, float, int]


def worst_first(tasks: Iterable[TaskRank], max_rows: int) -> list[str]:
    """The tasks a bounded table shows, each with all its rows: most trials not ``ok``
    (failed or errored) first, then the widest spread of rewards (where trials or candidates
    disagree: the most informative), then the lowest mean reward, then by id; a task that
    does not fit in what is left of ``max_rows`` is passed over. In that order.

    >>> worst_first([("a", 0, 0.0, 0.9, 2), ("b", 1, 0.0, 0.5, 2), ("c", 0, 1.0, 0.5, 2),
    ...              ("d", 0, 0.0, 0.1, 2)], max_rows=6)
    ['b', 'c', 'd']
    """
    shown, rows = [], 0
    for task_id, _, _, _, n in sorted(tasks, key=lambda t: (-t[1], -t[2], t[3], t[0])):
        if rows + n <= max_rows:
            shown.append(task_id)
            rows += n
    return shown


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
            "bar": delta_bar(d),
            "e_value": d.e_value,
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
            "gain_ci95": "" if d.gain_ci95 is None else gain_text(d.gain_ci95),
            "gain_cs95": "" if d.gain_cs95 is None else interval(d.gain_cs95, signed_values=True),
            "screen_rounds": screen_rounds_text(d) or "",
        }
    ]


def gain_text(ci: tuple[float, float]) -> str:
    """A confirmation's gain interval, saying what it is about and what it assumes."""
    span = REWARD_RANGE[1] - REWARD_RANGE[0]
    shown, cut = clipped(ci, -span, span)
    return (
        f"{interval(shown, signed_values=True)} the paired Δ over new tasks like these, "
        "conditional on the promotion (selection-adjusted); assumes a roughly normal mean Δ "
        f"(SE estimated, t-like){cut}"
    )


def gain_sequence_text(d: GateDecision) -> str | None:
    """The rounds confirmation's gain: its raw Δ and the interval valid at its stop."""
    if d.gain_cs95 is None:
        return None
    return (
        f"Δ {signed(d.delta)} a trial on these val tasks (biased upwards by the stop); 95% "
        f"interval {interval(d.gain_cs95, signed_values=True)}, valid at the confirmation's "
        "data-chosen stop (betting confidence sequence, any rewards in [0, 1])"
    )


def mde_text(d: GateDecision) -> str:
    """The gate's power: of the screen and confirmation when two stages decide, else the bar's."""
    if d.mde_level is None and d.screen_round == 1 and d.screen_stop is not None:
        return "not measured (the screen stopped after one trial a task: no within-task variance)"
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
        f"{d.mde_level:.3g}{later}; simulated, averaged over the uncertainty of the variances "
        "this screen measured)"
    )


def screen_rounds_text(d: GateDecision) -> str | None:
    """How much of a staged screen ran, and why it stopped (None: an unstaged screen)."""
    if d.screen_round is None or d.screen_rounds is None:
        return None
    trials = f"{d.screen_trials} of {d.screen_trials_planned} candidate trials"
    where = f"after round {d.screen_round} of {d.screen_rounds} ({trials})"
    if d.screen_stop == "futility":
        return (
            f"stopped early for futility {where}: conditional power {d.screen_cp or 0:.2g} "
            "under the Δ measured so far"
        )
    if d.screen_stop == "efficacy":
        return (
            f"passed early {where}: it clears the bar with probability {d.screen_cp or 0:.2g} "
            "even with no further gain"
        )
    return f"ran all {d.screen_rounds} rounds ({trials})"


def stage_lines(d: GateDecision) -> list[str]:
    """The two-stage part of a decision: the level, the screen, the adjusted gain, wealth."""
    if d.stage == "single":
        return ["  guarantee none: single stage (--no-confirm), no search-level error control"]
    rounds = screen_rounds_text(d)
    if d.stage == "screen":
        return (
            ["  stage     screen (a pass goes on to a confirmation on fresh seeds)"]
            if not d.accept
            else []
        ) + ([f"  rounds    {rounds}"] if rounds else [])
    if d.stage != "confirm" or d.online is None:
        return []
    lines = [
        f"  stage     confirmation #{d.online.tests} on fresh seeds (from {d.confirm_base_seed})"
        f" at alpha_j = {fmt(d.level, 6)} ({d.online.rule}, search alpha {d.online.alpha:g})",
        f"  screen    Δ {signed(d.screen_delta)} (passed; selected, so biased upwards)"
        + (f"; {rounds}" if rounds else ""),
    ]
    if (evidence := e_value_text(d)) is not None:
        lines.append(f"  e-value   {evidence} (betting test, level exact for deltas in [-1, 1])")
    if d.confirm_rounds is not None and d.confirm_budget is not None:
        lines.append(
            f"  rounds    {d.confirm_rounds} of at most {d.confirm_budget} (one fresh paired "
            f"trial a task each), stopped: {d.confirm_stop or 'not yet'}"
        )
    if (gain := gain_sequence_text(d)) is not None:
        lines.append(f"  gain      {gain}")
    if d.gain_ci95 is not None and d.gain_estimate is not None:
        lines.append(
            # "nominal": measured 0.943 ± 0.004 at j = 1 (docs/statistics.md), not quite 95 %
            f"  gain      {d.gain_estimate:+.4f}, nominal 95% CI {gain_text(d.gain_ci95)}; the "
            f"confirmation's raw Δ {signed(d.delta)} is biased upwards"
        )
    lines.append(f"  wealth    {fmt(d.wealth_left, 6)} alpha-wealth left for future confirmations")
    return lines


def reason_lines(d: GateDecision) -> list[str]:
    """The reason's first sentence on its line, the details (the rules' own words) after it."""
    head, details = first_sentence(d.reason), reason_details(d.reason)
    return [f"  reason    {head}"] + ([f"  details   {details}"] if details else [])


def decision_lines(d: GateDecision) -> list[str]:
    if d.baseline:
        return [f"{verdict(d)}: {d.candidate}", *reason_lines(d)] + (
            [f"  promoted  {d.candidate} is now the current best"] if d.promoted else []
        )
    lines = [
        f"{verdict(d)}: {d.candidate}" + (f" vs current best {d.current}" if d.current else ""),
        f"  Δ         {signed(d.delta)}",
        f"  SE        {fmt(d.se)}",
        *([f"  bar       {bar_text(d)}"] if delta_bar(d) is not None else []),
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
    lines += reason_lines(d)
    if d.promoted:
        where = (
            "better on held-out val tasks no screen scored: tasks the search never saw"
            if d.holdout
            else "better on these val tasks and seeds, in one stage: not confirmed"
            if d.stage == "single"
            else "better on these val tasks, fresh seeds: the tasks the screens saw, not new tasks"
        )
        lines.append(f"  promoted  {d.candidate} is now the current best ({where})")
    return lines


def _cell(value: object) -> str:
    text = "" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", "<br>")


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
    if (evidence := e_value_text(d)) is not None:  # a confirmation: its e-value decides
        bar_head, bar = "e-value", evidence
    else:
        bar_head, bar = "bar (Δ)", bar_text(d)
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
        f"# Gate: {decision_lines(d)[0]}\n\n**{_cell(first_sentence(d.reason))}**\n\n"
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
    *,
    staged: bool = False,
    imported_only: bool = False,
) -> str:
    """What a gate is about to run, and why, in the words a user needs before waiting.
    ``staged``: the screen runs in rounds of one trial a task and may stop early;
    ``imported_only``: every trial the screen reuses was imported (run outside honesteval)."""
    if current is None:
        return (
            f"gate: no current best yet, so {candidate!r} is evaluated on val ({n_tasks} tasks "
            f"× {n_trials} trials) and becomes the baseline"
        )
    then = (
        f"; a pass is confirmed on fresh seeds ({confirm_trials} trials a task, both sides) "
        "before anything is promoted"
        + (
            ". The screen reuses only imported trials (run outside honesteval, no seed "
            "contract): its confirmation needs fresh trials, run here by the project's adapter"
            if imported_only
            else ""
        )
        if confirm_trials
        else "; single stage (--no-confirm): a pass promotes at once"
        + (" on imported trials alone, never run here" if imported_only else "")
    )
    return (
        f"gate: screening {candidate!r} against the current best {current!r} on val with the "
        f"same seeds ({n_tasks} tasks × {n_trials} trials each, stored trials reused"
        + (
            f"; in {n_trials} rounds of one trial a task, stopped early when it cannot pass or "
            "has clearly passed"
            if staged
            else ""
        )
        + f"){then}"
    )


def confirmation_notice(
    screen: GateDecision,
    n_tasks: int,
    n_trials: int,
    base_seed: int,
    level: float,
    held_out: bool = False,
) -> str:
    """Said before the second stage: the trials it runs and why it runs them."""
    head = (
        f"screen passed: Δ {signed(screen.delta)} > bar {fmt(screen.bar)}. One pass is one "
        "draw among the many a search makes, so before promoting, the confirmation runs "
        f"{screen.current!r} and {screen.candidate!r} again on fresh seeds (from {base_seed}): "
    )
    if held_out:
        return head + (
            f"{n_tasks} held-out tasks × {n_trials} trials each = {2 * n_tasks * n_trials} "
            f"trials, decided at alpha_j = {fmt(level, 6)}"
        )
    return head + (
        f"round by round, one fresh paired trial on each of {n_tasks} tasks a round, until the "
        f"evidence reaches 1/alpha_j = {1 / level:.4g} (alpha_j = {fmt(level, 6)}) or cannot: "
        f"at most {n_trials} rounds = {2 * n_tasks * n_trials} trials"
    )


#: The order trials that did not end ok are told in: the candidate's own failures first.
NOT_OK_ORDER: tuple[TrialStatus, ...] = ("failed", "infra_error", "scorer_error")


def error_line(r: TrialRecord) -> str:
    """A trial's error in one line (its first line, cut; the trial file keeps all of it)."""
    text = (r.error or "").strip()
    return truncate(text.splitlines()[0]) if text else "no error text"


def failure_lines(records: Iterable[TrialRecord]) -> list[str]:
    """One line per status other than ok, the trials' own failures first, each with its first
    example: ``failed: 24 trials on 8 tasks, e.g. q09 (seed 3): ValueError: bad input``."""
    by_status: dict[str, list[TrialRecord]] = {}
    for r in records:
        if r.status != "ok":
            by_status.setdefault(r.status, []).append(r)
    lines = []
    for status in NOT_OK_ORDER:
        trials = by_status.get(status)
        if trials:
            tasks = len({r.task_id for r in trials})
            first = trials[0]
            lines.append(
                f"{status}: {len(trials)} trial{'s' * (len(trials) > 1)} on {tasks} "
                f"task{'s' * (tasks > 1)}, e.g. {first.task_id} (seed {first.seed}): "
                f"{error_line(first)}"
            )
    return lines


def failed_trials_markdown(records: Sequence[TrialRecord], limit: int = FAILED_ROWS) -> str:
    """The trials that did not end ok, as a table: task, seed, status, error (first
    ``limit``; the rollouts table and the trial files hold them all)."""
    if not records:
        return ""
    rows = [
        f"| {_cell(r.task_id)} | {r.seed} | {r.status} | {_cell(error_line(r))} |"
        for r in records[:limit]
    ]
    more = f"\n\n{len(records) - limit} more in the rollouts table" if len(records) > limit else ""
    return (
        f"## Trials that did not end ok: {len(records)}\n\n| task | seed | status | error |\n"
        "|---|---|---|---|\n" + "\n".join(rows) + more + "\n\n"
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
