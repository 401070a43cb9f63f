"""``honesteval compare A B [C …]``: candidates side by side, task by task, from stored results.

Each candidate is read as its newest stored result on the split (nothing is re-run). Every
candidate after the first is paired against the first with :func:`honesteval.stats.paired_deltas`
(the gate's own code): Δ̄ and SE over the tasks scored on both sides, wins / losses / ties by
the exact sign of each task's Δ, and the tasks where **missing data decides**: scored on one
side only, so they are in neither Δ̄ nor the counts, and a rerun could move the verdict.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError
from honesteval.models import SplitResult
from honesteval.project.loader import Project, load_project
from honesteval.stats import paired_deltas
from honesteval.store.reading import (
    latest_results,
    ordered_statuses,
    result_status_counts,
    status_counts,
)
from honesteval.store.state_dir import Store
from honesteval.views.export import csv_text


def _pair(first: SplitResult, other: SplitResult) -> dict[str, Any]:
    pairs = paired_deltas(first, other)
    signs = [(d > 0) - (d < 0) for d in pairs.values]
    scored_first = {t.id for t in first.per_task if t.scored}
    scored_other = {t.id for t in other.per_task if t.scored}
    return {
        "baseline": first.candidate,
        "candidate": other.candidate,
        "n_paired": pairs.n,
        "delta": float(pairs.mean) if pairs.n else None,
        # sd(d)/√n needs two pairs; with fewer the spread is unmeasured (None, not 0).
        "se": pairs.se if pairs.n >= 2 else None,
        "wins": signs.count(1),
        "losses": signs.count(-1),
        "ties": signs.count(0),
        "missing_decides": [
            {"task": tid, "scored_on": first.candidate if tid in scored_first else other.candidate}
            for tid in sorted(scored_first ^ scored_other)
        ],
    }


def compare_results(results: list[SplitResult]) -> dict[str, Any]:
    """The comparison of stored results (the first is the reference), as plain JSON data."""
    first = results[0]
    per_task = [{t.id: t for t in r.per_task} for r in results]
    task_ids = sorted(set().union(*per_task))
    pairs = [_pair(first, r) for r in results[1:]]
    undecided = [{m["task"] for m in p["missing_decides"]} for p in pairs]
    tasks = []
    for tid in task_ids:
        cells: dict[str, dict[str, Any]] = {}
        for r, by_id in zip(results, per_task, strict=True):
            t = by_id.get(tid)
            cells[r.candidate] = {
                "mean": None if t is None else t.mean,
                "statuses": {} if t is None else status_counts(t.statuses),
            }
        ref = cells[first.candidate]["mean"]
        deltas = {}
        for r in results[1:]:
            mean = cells[r.candidate]["mean"]
            deltas[r.candidate] = None if ref is None or mean is None else mean - ref
        tasks.append(
            {
                "task": tid,
                "candidates": cells,
                "deltas": deltas,
                "missing_decides": [
                    r.candidate for r, ids in zip(results[1:], undecided, strict=True) if tid in ids
                ],
            }
        )
    return {
        "split": first.split,
        "candidates": [
            {
                "name": r.candidate,
                "fingerprint": r.fingerprint,
                "finished_at": r.finished_at,
                "reward": r.reward,
                "stderr": r.stderr,
                "coverage": r.coverage,
                "n_scored": r.n_scored,
                "n_tasks": r.n_tasks,
                "n_trials": r.n_trials,
                "subset": r.subset,
                "statuses": result_status_counts(r),
            }
            for r in results
        ],
        "pairs": pairs,
        "tasks": tasks,
    }


def require_results(project: Project, names: list[str], split: str) -> list[SplitResult]:
    """The latest stored result of each named candidate; a clear error for any that has none."""
    latest = latest_results(Store(project.state_dir), split)
    known = set(project.candidate_names())
    out = []
    for name in names:
        if name in latest:
            out.append(latest[name])
        elif name not in known:
            raise ConfigError(
                f"unknown candidate {name!r} (candidates: {', '.join(sorted(known)) or 'none'})"
            )
        else:
            raise ConfigError(
                f"no stored result for {name!r} on {split}: run honesteval evaluate "
                f"--candidate {name} --split {split}"
            )
    return out


def compare_candidates(project: str | Path, names: list[str], split: str = "val") -> dict:
    """Compare the newest stored results of ``names`` on ``split`` (at least two, distinct)."""
    if len(names) < 2:
        raise ConfigError("compare needs at least two candidates")
    if len(set(names)) != len(names):
        raise ConfigError(f"a candidate is named twice: {names}")
    if split not in ("train", "val", "test"):
        raise ConfigError(f"unknown split {split!r}: use train, val or test")
    proj = load_project(project)
    return compare_results(require_results(proj, names, split))


def compare_csv(report: dict[str, Any]) -> str:
    """One row per task: ``<cand>.mean``, ``<cand>.<status>`` counts, ``<cand>.delta`` (vs
    the first), ``missing_decides`` (the candidates whose pair this task cannot be counted in)."""
    names = [c["name"] for c in report["candidates"]]
    statuses = ordered_statuses(s for c in report["candidates"] for s in c["statuses"])
    header = ["task"]
    for i, name in enumerate(names):
        header += [f"{name}.mean"] + [f"{name}.{s}" for s in statuses]
        if i:
            header.append(f"{name}.delta")
    header.append("missing_decides")
    rows: list[list[Any]] = [header]
    for row in report["tasks"]:
        line: list[Any] = [row["task"]]
        for i, name in enumerate(names):
            cell = row["candidates"][name]
            line.append(_blank(cell["mean"]))
            line += [cell["statuses"].get(s, 0) for s in statuses]
            if i:
                line.append(_blank(row["deltas"][name]))
        line.append(";".join(row["missing_decides"]))
        rows.append(line)
    return csv_text(rows)  # names and task ids come from untrusted hands: no formulas


def compare_markdown(report: dict[str, Any]) -> str:
    """The comparison as a pull-request comment: each candidate's reward ± SE, coverage and
    trials by status, then each pair's paired Δ ± SE and where missing data decides.

    >>> r = {"split": "val", "candidates": [
    ...     {"name": "a", "reward": 0.5, "stderr": 0.1, "coverage": 1.0, "n_scored": 2,
    ...      "n_tasks": 2, "statuses": {"ok": 6}, "subset": False},
    ...     {"name": "b|c", "reward": 0.75, "stderr": 0.05, "coverage": 0.5, "n_scored": 1,
    ...      "n_tasks": 2, "statuses": {"ok": 3, "infra_error": 3}, "subset": False}],
    ...     "pairs": [{"baseline": "a", "candidate": "b|c", "delta": 0.25, "se": None,
    ...                "n_paired": 1, "wins": 1, "losses": 0, "ties": 0,
    ...                "missing_decides": [{"task": "t2", "scored_on": "a"}]}]}
    >>> print(compare_markdown(r))
    ### honesteval compare on val
    <BLANKLINE>
    | candidate | reward ± SE | coverage | trials |
    |---|---|---|---|
    | a | 0.5000 ± 0.1000 | 1.00 (2/2) | ok=6 |
    | b\\|c | 0.7500 ± 0.0500 | 0.50 (1/2) | ok=3 infra_error=3 |
    <BLANKLINE>
    | pair | paired Δ ± SE | tasks | wins / losses / ties | missing data decides |
    |---|---|---|---|---|
    | b\\|c vs a | +0.2500 ± n/a | 1 | 1 / 0 / 0 | 1: t2 |
    <BLANKLINE>
    """

    def cell(text: object) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = [
        f"### honesteval compare on {report['split']}",
        "",
        "| candidate | reward ± SE | coverage | trials |",
        "|---|---|---|---|",
    ]
    for c in report["candidates"]:
        lines.append(
            f"| {cell(c['name'])}{' (subset)' if c['subset'] else ''} | {_num(c['reward'])} ± "
            f"{_num(c['stderr'])} | {c['coverage']:.2f} ({c['n_scored']}/{c['n_tasks']}) | "
            f"{cell(_counts_text(c['statuses']))} |"
        )
    lines += [
        "",
        "| pair | paired Δ ± SE | tasks | wins / losses / ties | missing data decides |",
        "|---|---|---|---|---|",
    ]
    for p in report["pairs"]:
        missing = [m["task"] for m in p["missing_decides"]]
        shown = ", ".join(missing[:10]) + (" …" if len(missing) > 10 else "")
        lines.append(
            f"| {cell(p['candidate'])} vs {cell(p['baseline'])} | {_num(p['delta'], True)} ± "
            f"{_num(p['se'])} | {p['n_paired']} | {p['wins']} / {p['losses']} / {p['ties']} | "
            f"{len(missing)}{': ' + cell(shown) if missing else ''} |"
        )
    return "\n".join(lines) + "\n"


def _blank(x: float | None) -> Any:
    return "" if x is None else x  # a float is written as its repr


def _num(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _counts_text(counts: dict[str, int]) -> str:
    return " ".join(f"{s}={n}" for s, n in counts.items()) or "-"


def compare_lines(report: dict[str, Any]) -> list[str]:
    """The human rendering: per candidate, per pair, then one line per task."""
    names = [c["name"] for c in report["candidates"]]
    lines = [f"compare on {report['split']} (newest stored result of each candidate)"]
    for c in report["candidates"]:
        lines.append(
            f"  {c['name']}: reward {_num(c['reward'])} ± {_num(c['stderr'])}, coverage "
            f"{c['coverage']:.2f} ({c['n_scored']}/{c['n_tasks']}), trials "
            f"{_counts_text(c['statuses'])}" + ("  (subset)" if c["subset"] else "")
        )
    lines.append("")
    for p in report["pairs"]:
        missing = p["missing_decides"]
        lines.append(
            f"{p['candidate']} vs {p['baseline']}: paired Δ {_num(p['delta'], True)} ± "
            f"{_num(p['se'])} (SE) over {p['n_paired']} tasks; wins {p['wins']}, losses "
            f"{p['losses']}, ties {p['ties']}; missing data decides {len(missing)} task(s)"
            + (": " + ", ".join(m["task"] for m in missing[:10]) if missing else "")
            + (" …" if len(missing) > 10 else "")
        )
    lines.append("")
    header = ["task"]
    for i, name in enumerate(names):
        header += [f"{name} mean", f"{name} trials"] + ([f"Δ vs {names[0]}"] if i else [])
    header.append("")
    body = []
    for row in report["tasks"]:
        cells = [row["task"]]
        for i, name in enumerate(names):
            cell = row["candidates"][name]
            cells += [_num(cell["mean"]), _counts_text(cell["statuses"])]
            if i:
                cells.append(_num(row["deltas"][name], True))
        cells.append("missing data decides" if row["missing_decides"] else "")
        body.append(cells)
    lines += aligned([header, *body], numeric=_numeric_columns(header))
    return lines


def _numeric_columns(header: list[str]) -> set[int]:
    return {i for i, h in enumerate(header) if h.endswith(" mean") or h.startswith("Δ vs")}


def aligned(rows: list[list[str]], numeric: Collection[int] = ()) -> list[str]:
    """Rows as lines of columns padded to their widest cell (numbers to the right)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
