"""Plain renderings of results: markdown for artifacts, rows for tables, text for the CLI."""

from __future__ import annotations

import re
from collections.abc import Iterable

from honesteval.models import SplitResult, TrialRecord


def slug(name: str) -> str:
    """A Prefect artifact key part: lowercase letters, digits and dashes only."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "x"


def fmt(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def coverage_text(r: SplitResult) -> str:
    return (
        f"{r.coverage:.2f} ({r.n_scored}/{r.n_tasks} tasks scored; trials: {r.trials_ok} ok, "
        f"{r.trials_infra_error} infra_error, {r.trials_scorer_error} scorer_error"
        f" of {r.trials_planned})"
    )


def ci_text(r: SplitResult) -> str:
    return "n/a" if r.ci95 is None else f"[{r.ci95[0]:.4f}, {r.ci95[1]:.4f}]"


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


def rollout_rows(records: Iterable[TrialRecord], reused: set[tuple[str, int]]) -> list[dict]:
    """One row per trial for the table artifact (plain Python types only)."""
    return [
        {
            "task": r.task_id,
            "trial": int(r.trial),
            "seed": int(r.seed),
            "status": r.status,
            "reward": None if r.reward is None else float(r.reward),
            "attempts": int(r.attempts),
            "error": r.error or "",
            "reused": (r.task_id, r.trial) in reused,
        }
        for r in records
    ]


def summary_text(r: SplitResult) -> str:
    """The same summary as plain text for a terminal."""
    out = [
        f"{r.candidate} on {r.split}  (fingerprint {r.fingerprint[:12]})",
        f"  reward    {fmt(r.reward)} ± {fmt(r.stderr)}  (SE, {r.stderr_method})",
        f"  95% CI    {ci_text(r)}",
        f"  coverage  {coverage_text(r)}",
        f"  trials    {r.n_trials} per task, {r.trials_reused} reused from disk",
    ]
    rows = pass_k_rows(r)
    if rows:
        out.append("  k   pass^k  pass@k  tasks")
        out += [
            f"  {row['k']:<3} {row['pass^k']:<7.4f} {row['pass@k']:<7.4f} {row['tasks']}"
            for row in rows
        ]
    out += [f"  warning: {w}" for w in r.warnings]
    return "\n".join(out)
