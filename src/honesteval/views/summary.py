"""The default screens of ``evaluate`` and ``gate``: the answer, its evidence and the next step
in a few lines of the README's words (task, trial, candidate, best, reward, coverage, failed,
missing, screen, confirmation). ``--verbose``, ``--json``, the report and the Prefect artifacts
carry the rest (:mod:`honesteval.views.text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from honesteval.models import GateDecision, SplitResult, TrialRecord
from honesteval.stats import first_sentence, reason_details
from honesteval.views.text import (
    confirm_short_text,
    error_line,
    failure_lines,
    missing_text,
    verdict,
)

#: The most lines the default screens print (the issue's promise to a reader).
EVALUATE_LINES, GATE_LINES = 8, 6
#: Tasks named on a failed or missing line at most (``--json`` names every trial).
NAMED_TASKS = 5
#: The statuses a reader is told apart: the candidate's own failures, and missing data.
MISSING_STATUSES = ("infra_error", "scorer_error")


def _label(name: str) -> str:
    """A line's label, padded so the values line up (as the verbose screens do)."""
    return f"  {name:9} "


def number(x: float) -> str:
    """An e-value or its threshold as a person reads it: 474, 91, 4.3, 0.62."""
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def trial_statuses(r: SplitResult) -> str:
    """``60 ok`` or ``45 ok, 15 failed, 2 missing``: the trials by status, none left out."""
    missing = r.trials_infra_error + r.trials_scorer_error
    counts = [(r.trials_ok, "ok"), (r.trials_failed, "failed"), (missing, "missing")]
    return ", ".join(f"{n} {word}" for n, word in counts if n or word == "ok")


def evaluation_lines(r: SplitResult, not_ok: Sequence[TrialRecord] = ()) -> list[str]:
    """``evaluate``'s default screen, at most :data:`EVALUATE_LINES` lines: reward ± SE, the
    95 % interval, coverage with the trials by status, one line a status for the trials that
    did not end ok, the bounds when tasks are missing whole, and the warnings."""
    reward = "n/a" if r.reward is None else f"{r.reward:.2f} ± {r.stderr or 0:.2f}"
    size = f"{r.n_tasks} tasks × {r.n_trials} trials"
    lines = [f"{r.candidate} on {r.split}: reward {reward} on {size}"]
    if r.ci95 is not None:
        lo, hi = r.ci95
        lines.append(
            f"{_label('95% CI')}[{lo:.2f}, {hi:.2f}] the mean reward over new tasks like these"
        )
    lines.append(
        f"{_label('coverage')}{r.n_scored}/{r.n_tasks} tasks scored; "
        f"{r.trials_planned} trials: {trial_statuses(r)}"
    )
    lines += [f"  {line}" for line in failure_lines(not_ok)]
    if (missing := missing_text(r)) is not None:
        lines.append(f"{_label('missing')}{missing}")
    lines += [f"  warning: {w}" for w in r.warnings]
    return fitted(lines, EVALUATE_LINES)


def fitted(lines: list[str], most: int) -> list[str]:
    """``lines`` cut to ``most``, the last one saying how many more ``--verbose`` shows."""
    if len(lines) <= most:
        return lines
    return [*lines[: most - 1], f"  ... {len(lines) - most + 1} more lines: --verbose"]


def gain(x: float) -> str:
    """A Δ as the default screens print it: ``+0.40``."""
    return f"{x:+.2f}"


def _screen_text(d: GateDecision) -> str:
    """What the screen (the same seeds as the best's) found, and how much of it ran."""
    if d.delta is None or d.bar is None:
        return "screen: too little scored on both sides to compare"
    passed = d.delta > d.bar
    said = (
        f"screen passed: Δ {gain(d.delta)} is over the bar {gain(d.bar)}"
        if passed
        else f"screen not passed: Δ {gain(d.delta)} is not over the bar {gain(d.bar)}"
    )
    if d.screen_round is not None and d.screen_rounds is not None:
        said += f"; ran {d.screen_round} of {d.screen_rounds} rounds"
        if d.screen_stop == "futility":
            said += ": it could no longer pass"
    return said


def _confirmation_text(d: GateDecision) -> str:
    """What the confirmation on fresh seeds found: its evidence against what it needed."""
    where = f"on {d.n_paired} held-out tasks" if d.holdout else "on fresh seeds"
    rounds = (
        ""
        if d.confirm_rounds is None
        else f" in {d.confirm_rounds} of at most {d.confirm_budget} rounds"
    )
    said = f"screen passed; {'confirmed' if d.accept else 'not confirmed'} {where}{rounds}"
    needed = d.e_value_bar or (1 / d.level if d.level else None)
    if d.e_value is not None and needed is not None:
        said += f": evidence {number(d.e_value)} of the {number(needed)} needed"
    return said


def evidence_line(d: GateDecision) -> str | None:
    """The evidence in plain words (None for a baseline: its first line says it all)."""
    if d.budget is not None:  # what ran of what was planned, and what was spent
        return f"{_label('evidence')}{first_sentence(reason_details(d.reason))}"
    if d.baseline:
        return None
    if d.stage == "confirm":
        return f"{_label('evidence')}{_confirmation_text(d)}"
    said = _screen_text(d)
    if d.stage == "single":
        said += "; one stage (--no-confirm): not confirmed on fresh seeds"
    elif d.stage == "screen" and d.accept:
        said += "; confirmation on fresh seeds not run"
    return f"{_label('evidence')}{said}"


def _side_coverage(name: str, result: SplitResult | None, share: float | None) -> str:
    if result is not None:
        return f"{name} {result.n_scored}/{result.n_tasks} tasks"
    return f"{name} {'n/a' if share is None else f'{share:.2f}'}"


def _not_ok_text(name: str, records: Sequence[TrialRecord]) -> str:
    """``verbose 15 trials on 5 tasks (q09, q20, …), e.g. q09 seed 0: RuntimeError: …``"""
    tasks = sorted({r.task_id for r in records})
    shown = ", ".join(tasks[:NAMED_TASKS]) + (", …" if len(tasks) > NAMED_TASKS else "")
    first = records[0]
    statuses = sorted({r.status for r in records})
    kinds = f" ({', '.join(statuses)})" if any(s in MISSING_STATUSES for s in statuses) else ""
    return (
        f"{name} {len(records)} trial{'s' * (len(records) > 1)}{kinds} on {len(tasks)} "
        f"task{'s' * (len(tasks) > 1)} ({shown}), e.g. {first.task_id} seed {first.seed}: "
        f"{error_line(first)}"
    )


def coverage_lines(
    d: GateDecision,
    results: Iterable[SplitResult],
    not_ok: Mapping[str, Sequence[TrialRecord]],
) -> list[str]:
    """Coverage of both sides, then one line naming the failed trials and one the missing
    ones, each side's (none: every trial ok)."""
    by_name = {r.candidate: r for r in results}
    sides = [(d.current, d.current_coverage)] if d.current and not d.baseline else []
    sides.append((d.candidate, d.candidate_coverage))
    shown = ", ".join(_side_coverage(n, by_name.get(n), s) for n, s in sides if n)
    lines: list[str] = []
    for label, statuses in (("failed", ("failed",)), ("missing", MISSING_STATUSES)):
        told = [
            _not_ok_text(name, trials)
            for name, _ in sides
            if name and (trials := [r for r in not_ok.get(name, ()) if r.status in statuses])
        ]
        if told:
            lines.append(_label(label) + "; ".join(told))
    known = [by_name.get(name or "") for name, _ in sides]
    all_ok = all(r is not None and r.trials_ok == r.trials_planned for r in known)
    return [f"{_label('coverage')}{shown}{'; every trial ok' if all_ok else ''}", *lines]


#: How a confirmation that ran out of rounds says the ``confirm_trials`` that would settle it.
_SETTLE = re.compile(r"confirm_trials >= (\d+)")


def next_line(d: GateDecision, command: str) -> str:
    """What changed (the best), and for an INDECISIVE decision the command that settles it;
    ``command`` is the gate command as the user would type it again."""
    if d.promoted:
        was = f" (was {d.current})" if d.current and not d.baseline else ""
        return f"{_label('best')}{d.candidate} is now the best{was}"
    kept = f"{d.current} stays the best" if d.current else "no best yet"
    if not d.indecisive:
        return f"{_label('best')}{kept}"
    if d.budget is not None:
        step = f"{command} with a larger --budget-usd or --budget-tokens (stored trials are reused)"
    elif d.confirm_settle is not None:  # the budget or missing trials stand in the way
        step = (
            f"{command} --confirm-trials {d.confirm_settle} (the same confirmation continues; "
            f"in the way: {confirm_short_text(d)})"
        )
    elif (settle := _SETTLE.search(d.reason)) is not None:  # the bar is out of reach
        step = f"{command} --confirm-trials {settle.group(1)} (the same confirmation continues)"
    elif d.rerun:
        step = f"{command} again: it runs only the trials still missing"
    else:
        step = f"{command} with more --trials"
    return f"{_label('next')}{kept}; to settle it: {step}"


def gate_lines(
    d: GateDecision,
    results: Iterable[SplitResult],
    not_ok: Mapping[str, Sequence[TrialRecord]],
    command: str,
) -> list[str]:
    """``gate``'s default screen, at most :data:`GATE_LINES` lines: the verdict with both names
    and Δ ± SE over n tasks, the evidence, coverage (failed and missing trials named), and what
    changed or, for INDECISIVE, the command that would settle it."""
    evidence = evidence_line(d)
    return [
        f"{verdict(d)}: {first_sentence(d.reason)}",
        *([evidence] if evidence else []),
        *coverage_lines(d, results, not_ok),
        next_line(d, command),
    ]
