"""``honesteval report``: one self-contained HTML file of a project's stored state.

Sections: the headline table (with each candidate's paired Δ against the current best, and
the bounds of reward and pass^k when tasks are missing whole); first plot, what decides
promotion: each candidate's paired Δ against the current best with its 95 % interval; second,
labelled absolute: reward with its 95 % CI over new tasks per candidate; coverage with trial
counts by status; the current best's reward over time with promotions and drift checks marked;
the candidates × tasks heat map; the decisions log (every field a record carries, so fields added
later, e.g. alpha levels, show up); a drill-down to every trial. Figures are matplotlib SVG,
inlined; the only script is a small inline task filter. No URL is fetched: no CDN, no font,
no image link. Every string from a project (task ids, candidate names, outputs, feedback,
errors, reasons) is HTML-escaped: they are hostile input.

The ``gate`` and ``reevaluate-best`` flows write it at their end and publish its headline table
(:func:`headline_markdown`) as an artifact
(:func:`honesteval.orchestration.flows._artifacts.publish_report`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from honesteval.gating.ledger import read_best
from honesteval.models import (
    BestRecord,
    DecisionRecord,
    DriftRecord,
    SplitResult,
    utc_now,
)
from honesteval.project.loader import Project, load_project
from honesteval.stats import task_means
from honesteval.store.reading import (
    TaskTrialRecords,
    latest_results,
    ordered_statuses,
    result_status_counts,
    status_counts,
    trials_of,
)
from honesteval.store.state_dir import Store, atomic_write_text
from honesteval.views import plots
from honesteval.views.text import (
    DELTA_HEADER,
    bar_cell,
    best_result,
    ci_short,
    delta_cell,
    delta_vs_best,
    fmt,
    missing_cell,
    verdict,
    worst_first,
)

REPORT_FILE = "report.html"
#: An output or error longer than this is cut in the drill-down (the trial file keeps it all).
TEXT_LIMIT = 2000
#: Decision fields shown in their own columns; every other non-empty field is folded under
#: the reason (so fields added later, e.g. alpha levels, show up without widening the table).
_DECISION_COLUMNS = (
    "timestamp",
    "accept",
    "indecisive",
    "baseline",
    "candidate",
    "current",
    "delta",
    "se",
    "bar",
    "n_paired",
    "current_coverage",
    "candidate_coverage",
    "promoted",
    "reason",
)
#: A reason longer than this is cut in its row; the whole of it is one click away.
REASON_CHARS = 90

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;
vertical-align:top;text-align:left}th{background:#f3f3f3}td.num{text-align:right;
font-variant-numeric:tabular-nums}pre{margin:0;white-space:pre-wrap;word-break:break-all;
max-height:12em;overflow:auto;font-size:12px}details{margin:2px 0}summary{cursor:pointer}
.st-ok{color:#2e7d32}.st-bad{color:#c62828}details.why{max-width:36em;font-size:13px}
details.why table{font-size:12px}details.why td{overflow-wrap:anywhere}
.task-input{margin:.3em 0 .5em}.note{color:#555;font-size:12px}
.best{font-weight:bold}svg{width:100%;height:auto}
"""
_JS = """
const box=document.getElementById('task-filter');
box.addEventListener('input',()=>{const q=box.value.toLowerCase();
for(const d of document.querySelectorAll('details.task')){
d.hidden=!d.dataset.task.toLowerCase().includes(q);}});
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


@dataclass
class ReportData:
    """Everything the report shows, read from the state folder (nothing is re-run)."""

    project: str
    split: str
    results: list[SplitResult]
    best: BestRecord | None
    decisions: list[DecisionRecord]
    drift_checks: list[DriftRecord]
    #: The trials of the tasks the drill-down shows (:func:`drilldown_tasks`), by candidate.
    trials: dict[str, list[TaskTrialRecords]]
    generated_at: str
    #: each task's input (and target, when it has one), by task id, for the drill-down
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def task_ids(self) -> list[str]:
        return sorted({t.id for r in self.results for t in r.per_task})


def load_report_data(project: Project, split: str = "val") -> ReportData:
    """The newest stored result of every candidate on ``split`` (the current best first)."""
    store = Store(project.state_dir)
    best = read_best(project)
    latest = latest_results(store, split)
    first = best.name if best is not None else None
    results = sorted(latest.values(), key=lambda r: (r.candidate != first, r.candidate))
    shown = set(drilldown_tasks(results))
    return ReportData(
        project=project.config.name,
        split=split,
        results=results,
        best=best,
        decisions=store.read_decisions(),
        drift_checks=store.read_drift_checks(),
        trials={r.candidate: trials_of(store, r, shown) for r in results},
        generated_at=utc_now(),
        tasks={
            t.id: {"input": t.input} | ({"target": t.target} if t.target is not None else {})
            for t in project.all_tasks
        },
    )


def run_label(r: SplitResult, data: ReportData) -> str:
    """Which run a stored result comes from: a nightly re-evaluation, a gate's confirmation,
    the run a best was promoted on, or an evaluation (with the seed of its trial 0)."""
    seeds = f"seeds from {r.base_seed}"
    for check in reversed(data.drift_checks):
        if check.candidate == r.candidate and check.new_base_seed == r.base_seed:
            return f"nightly re-evaluation {check.timestamp[:10]} ({seeds})"
    best = data.best
    promoted_on = (
        best is not None and best.name == r.candidate and best.result.base_seed == r.base_seed
    )
    if promoted_on:
        return f"the run it was promoted on ({seeds})"
    if any(d.confirm_base_seed == r.base_seed for d in data.decisions):
        return f"a gate's confirmation ({seeds})"
    return f"evaluation ({seeds})"


#: Trials the drill-down shows at most (each task whole): every trial up to this, beyond it
#: the worst and most informative tasks, and a sentence pointing to ``export`` for the rest
#: (a page of 50,000 trials was 32 MB; bench/scale.py).
DRILLDOWN_TRIALS = 3000


def drilldown_tasks(results: list[SplitResult]) -> list[str]:
    """The tasks whose trials the report lists, by id: all of them up to
    :data:`DRILLDOWN_TRIALS` trials, else those :func:`worst_first` picks (failed or
    errored trials first, then where the candidates' task means differ most, then the
    lowest)."""
    ranks: dict[str, tuple[int, list[float], int]] = {}
    for r in results:
        for t in r.per_task:
            not_ok, means, rows = ranks.get(t.id, (0, [], 0))
            not_ok += sum(s != "ok" for s in t.statuses)
            ranks[t.id] = (
                not_ok,
                [*means, *([t.mean] if t.mean is not None else [])],
                rows + r.n_trials,
            )
    shown = worst_first(
        (
            (tid, not_ok, max(means) - min(means) if means else 0.0, min(means, default=0.0), rows)
            for tid, (not_ok, means, rows) in ranks.items()
        ),
        DRILLDOWN_TRIALS,
    )
    return sorted(shown)


# -- headline ---------------------------------------------------------------------------------
def headline_rows(data: ReportData) -> list[dict[str, str]]:
    """One row per candidate: the numbers a reader wants first (plain strings)."""
    best = data.best.name if data.best is not None else None
    best_val = best_result(data.best, data.results)

    def promoted_on(r: SplitResult) -> str:
        """For the best shown from a later run: the reward it was promoted on."""
        if data.best is None or r.candidate != best or data.best.result.base_seed == r.base_seed:
            return ""
        return f"; promoted on {fmt(data.best.result.reward)}"

    return [
        {
            "candidate": r.candidate + (" (current best)" if r.candidate == best else ""),
            "run": run_label(r, data) + promoted_on(r),
            "reward ± SE": f"{fmt(r.reward)} ± {fmt(r.stderr)}",
            DELTA_HEADER: delta_cell(best_val, r),
            "95% CI over new tasks": ci_short(r),
            "coverage": f"{r.coverage:.2f} ({r.n_scored}/{r.n_tasks} tasks)",
            "missing at 0 / 1": missing_cell(r),
            "trials": ", ".join(f"{n} {s}" for s, n in result_status_counts(r).items()),
            "evaluated": r.finished_at or "",
        }
        for r in data.results
    ]


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def headline_markdown(data: ReportData, path: Path) -> str:
    """The artifact: the headline table and a link to the HTML file."""
    rows = headline_rows(data)
    lines = [f"# honesteval report: {_md_cell(data.project)} ({data.split})", ""]
    if rows:
        lines.append("| " + " | ".join(rows[0]) + " |")
        lines.append("|" + "---|" * len(rows[0]))
        lines += ["| " + " | ".join(_md_cell(v) for v in row.values()) + " |" for row in rows]
    else:
        lines.append(f"no stored result on {data.split} yet")
    lines += ["", f"Full report: [{path.name}]({path.resolve().as_uri()}) (`{path.resolve()}`)"]
    return "\n".join(lines) + "\n"


# -- HTML pieces ------------------------------------------------------------------------------
def _table(header: list[str], rows: list[list[str]], numeric: Collection[int] = ()) -> str:
    """A table from already-escaped cells."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cut(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    return f"{text[:TEXT_LIMIT]}… ({len(text) - TEXT_LIMIT} more characters in the trial file)"


def _pre(value: Any) -> str:
    if value is None or value == "":
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    return f"<pre>{esc(_cut(text))}</pre>"


def _status_cell(status: str) -> str:
    return f'<span class="st-{"ok" if status == "ok" else "bad"}">{esc(status)}</span>'


def _headline_html(data: ReportData) -> str:
    rows = headline_rows(data)
    if not rows:
        return f"<p>No stored result on {esc(data.split)} yet.</p>"
    return _table([esc(h) for h in rows[0]], [[esc(v) for v in row.values()] for row in rows])


def _coverage_html(data: ReportData) -> str:
    counts = [result_status_counts(r) for r in data.results]
    statuses = ordered_statuses(s for c in counts for s in c)
    rows = [
        [esc(r.candidate), f"{r.coverage:.2f}", f"{r.n_scored}/{r.n_tasks}"]
        + [str(c.get(s, 0)) for s in statuses]
        + [str(sum(c.values()))]
        for r, c in zip(data.results, counts, strict=True)
    ]
    header = ["candidate", "coverage", "scored tasks", *(esc(s) for s in statuses), "trials"]
    table = _table(header, rows, numeric=set(range(1, len(header))))
    plot = plots.coverage_plot([r.candidate for r in data.results], counts)
    return table + plot


def _when(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def _history_html(data: ReportData) -> str:
    promotions = [
        plots.TimePoint(_when(d.timestamp), d.candidate_reward, d.candidate)
        for d in data.decisions
        if d.promoted and d.candidate_reward is not None
    ]
    drift = [
        plots.TimePoint(_when(d.timestamp), d.new_reward, d.status)
        for d in data.drift_checks
        if d.new_reward is not None
    ]
    if not promotions and not drift:
        return "<p>No promotion yet: gate a candidate to set the baseline.</p>"
    rows = [
        [esc(d.timestamp), esc(d.status), esc(d.candidate), esc(d.message)]
        for d in data.drift_checks
    ]
    checks = _table(["time", "drift check", "candidate", "message"], rows) if rows else ""
    return plots.best_over_time_plot(promotions, drift) + checks


def _heatmap_html(data: ReportData) -> str:
    ids = data.task_ids
    if not ids:
        return "<p>No tasks.</p>"
    means = []
    for r in data.results:
        by_id = task_means(r)
        means.append([by_id.get(tid) for tid in ids])
    return plots.heatmap_plot([r.candidate for r in data.results], ids, means)


def _field_text(key: str, value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        return value[:12] if key.endswith("fingerprint") else value
    return json.dumps(value)


def _extra_fields(d: DecisionRecord) -> str:
    """Every field of a decision without a column of its own (so new fields show up)."""
    rows = [
        [esc(k), esc(_field_text(k, v))]
        for k, v in d.model_dump(mode="json").items()
        if k not in _DECISION_COLUMNS and v not in (None, "", [], {})
    ]
    return _table(["field", "value"], rows) if rows else ""


def _reason_cell(d: DecisionRecord) -> str:
    """The reason cut to one line, the whole of it and every other field behind a click."""
    short = d.reason if len(d.reason) <= REASON_CHARS else d.reason[: REASON_CHARS - 1] + "…"
    return (
        f'<details class="why"><summary>{esc(short)}</summary><p>{esc(d.reason)}</p>'
        f"{_extra_fields(d)}</details>"
    )


def _decisions_html(data: ReportData) -> str:
    if not data.decisions:
        return "<p>No gate decision yet.</p>"
    rows = [
        [
            esc(d.timestamp[:16].replace("T", " ")),
            esc(verdict(d)) + (" ✔ promoted" if d.promoted else ""),
            esc(d.candidate),
            esc(d.current or "-"),
            "" if d.delta is None else f"{d.delta:+.4f}",
            esc(fmt(d.se)),
            esc(bar_cell(d)),
            esc(d.n_paired),
            esc(f"{fmt(d.current_coverage, 2)} / {fmt(d.candidate_coverage, 2)}"),
            _reason_cell(d),
        ]
        for d in reversed(data.decisions)
    ]
    header = ["time (UTC)", "verdict", "candidate", "vs", "Δ", "SE", "bar", "n", "coverage"]
    return _table([*header, "reason (click for the whole record)"], rows, numeric={4, 5, 6, 7})


def _task_summary(tid: str, data: ReportData, by_id: list[dict[str, Any]]) -> str:
    parts = []
    for r, tasks in zip(data.results, by_id, strict=True):
        t = tasks.get(tid)
        if t is None:
            parts.append(f"{esc(r.candidate)}: not asked")
            continue
        counts = ", ".join(f"{n} {s}" for s, n in status_counts(t.statuses).items())
        parts.append(f"{esc(r.candidate)}: {esc(fmt(t.mean, 3))} ({esc(counts)})")
    return f"<b>{esc(tid)}</b> — " + "; ".join(parts)


def _drilldown_html(data: ReportData) -> str:
    by_id = [{t.id: t for t in r.per_task} for r in data.results]
    records = {
        name: {task.task_id: task.records for task in tasks} for name, tasks in data.trials.items()
    }
    header = ["candidate", "trial", "seed", "status", "reward", "attempts", "output", "feedback"]
    header.append("error")
    blocks = []
    for tid in sorted({t.task_id for tasks in data.trials.values() for t in tasks}):
        rows = []
        for r in data.results:
            for k, rec in enumerate(records[r.candidate].get(tid, [])):
                if rec is None:
                    missing = ["-"] * 5 + ["trial record missing on disk"]
                    rows.append([esc(r.candidate), str(k), str(r.seeds(tid)[k]), *missing])
                    continue
                rows.append(
                    [
                        esc(r.candidate),
                        str(rec.trial),
                        str(rec.seed),
                        _status_cell(rec.status),
                        esc(fmt(rec.reward)),
                        str(rec.attempts),
                        _pre(rec.rollout),
                        _pre(rec.feedback),
                        _pre("\n".join(rec.errors) if rec.errors else rec.error),
                    ]
                )
        given = data.tasks.get(tid)
        task_input = (
            f'<div class="task-input"><b>task</b>{_pre(given)}</div>'
            if given is not None
            else '<p class="note">this task is no longer in the tasks file</p>'
        )
        blocks.append(
            f'<details class="task" data-task="{esc(tid)}"><summary>'
            f"{_task_summary(tid, data, by_id)}</summary>{task_input}"
            f"{_table(header, rows, numeric={1, 2, 4, 5})}</details>"
        )
    return "".join(blocks)


def _drilldown_note(data: ReportData) -> str:
    """Says so when the drill-down lists only some tasks, which ones, and where the rest is."""
    shown = {t.task_id for tasks in data.trials.values() for t in tasks}
    total = len(data.task_ids)
    if len(shown) == total:
        return ""
    trials = sum(r.n_trials * len(r.per_task) for r in data.results)
    listed = sum(len(t.records) for tasks in data.trials.values() for t in tasks)
    return (
        f'<p class="cut">Listed: {listed:,} of {trials:,} trials ({len(shown):,} of {total:,} '
        f"tasks, each whole, at most {DRILLDOWN_TRIALS:,} trials): the tasks with the most "
        "failed or errored trials first, then those where the candidates differ most, then "
        "the lowest reward. Every trial is in <code>honesteval export --split "
        f"{esc(data.split)}</code> (one row per trial, CSV or JSONL).</p>"
    )


def _delta_html(data: ReportData) -> str:
    """The first plot: what decides promotion, each candidate's paired Δ against the best."""
    best = best_result(data.best, data.results)
    if best is None:
        return "<p>No current best yet: the first candidate gated becomes the baseline.</p>"
    others = [r for r in data.results if r.candidate != best.candidate]
    if not others:
        return "<p>No other candidate has a stored result to compare with the current best.</p>"
    deltas = [delta_vs_best(best, r) for r in others]
    caption = (
        f"<p>Paired Δ = candidate − current best ({esc(best.candidate)}) per task, averaged "
        "over the tasks both scored, from the stored trials: the comparison the gate decides "
        "on. Bars: 95 % Student t interval over tasks (paired SE, assumes roughly normal "
        "per-task differences), clipped to [−1, 1]. A bar clear of 0 is a difference the "
        "data show; the gate's own bar (k_se or alpha) is in the decisions below.</p>"
    )
    return caption + plots.delta_plot(
        [r.candidate for r in others],
        [None if d is None else d.delta for d in deltas],
        [None if d is None else d.ci95 for d in deltas],
        best.candidate,
    )


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document (inline CSS, SVG and JS only)."""
    names = [r.candidate for r in data.results]
    sections = [
        ("Candidates", _headline_html(data)),
        ("Δ vs the current best (what decides promotion)", _delta_html(data)),
        (
            "Reward with its 95 % CI over new tasks (absolute: not what decides promotion)",
            "<p>Each candidate's mean reward on its own, the interval for the mean over new "
            "tasks like these (distribution-free unless the table says Student t). Two "
            "candidates' intervals can overlap while the paired Δ above is clear of 0: both "
            "ran the same tasks, so the task-to-task spread they share cancels in Δ.</p>"
            + plots.reward_plot(
                names, [r.reward for r in data.results], [r.ci95 for r in data.results]
            )
            if data.results
            else "<p>No results.</p>",
        ),
        ("Coverage and trials by status", _coverage_html(data) if data.results else ""),
        ("The current best over time", _history_html(data)),
        ("Candidates × tasks (task mean reward)", _heatmap_html(data)),
        ("Decisions (newest first)", _decisions_html(data)),
        (
            "Every trial",
            _drilldown_note(data)
            + '<p><input id="task-filter" placeholder="filter tasks by id" size="30"></p>'
            + _drilldown_html(data),
        ),
    ]
    body = "".join(
        f"<section><h2>{esc(title)}</h2>{content}</section>" for title, content in sections
    )
    best = (
        f"current best: <span class=best>{esc(data.best.name)}</span> "
        f"(promoted {esc(data.best.promoted_at)})"
        if data.best is not None
        else "no current best yet"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>honesteval report: {esc(data.project)}</title><style>{_CSS}</style></head>"
        f"<body><h1>honesteval report: {esc(data.project)}</h1>"
        f"<p>split {esc(data.split)}; {best}; newest stored result of each candidate; "
        f"generated {esc(data.generated_at)}</p>{body}<script>{_JS}</script></body></html>\n"
    )


def write_report(
    project: str | Path | Project, out: Path | None = None, split: str = "val"
) -> tuple[Path, ReportData]:
    """Render the report of a project's stored state to ``out`` (default
    ``.honesteval/report.html``), atomically; return the path and what it shows."""
    from honesteval.evaluation.plan import check_split

    proj = project if isinstance(project, Project) else load_project(project)
    data = load_report_data(proj, check_split(split, allow_sealed=True))
    path = out if out is not None else proj.state_dir / REPORT_FILE
    atomic_write_text(path, render_html(data))
    return path, data
