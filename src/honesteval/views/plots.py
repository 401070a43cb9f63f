"""The report's figures: matplotlib (Agg) rendered to SVG text, ready to inline in HTML.

matplotlib rather than hand-written SVG: axes, ticks, dates, colour maps and text escaping
are done by a library that has done them for twenty years. Text stays text
(``svg.fonttype = none``: small files, the browser's fonts), ids are salted deterministically,
and ``$`` in a task id is never parsed as mathtext (``text.parse_math = False``): ids are
hostile input. The XML prologue and the RDF metadata block are cut, so the inlined SVG holds
no URL but its own namespace declarations.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

#: Colours of the statuses the report knows; a status added later gets a fallback colour.
STATUS_COLOURS = {
    "ok": "#2e7d32",
    "failed": "#ef6c00",
    "infra_error": "#9e9e9e",
    "scorer_error": "#7b1fa2",
}
_FALLBACK_COLOURS = ("#1565c0", "#c62828", "#6d4c41", "#00838f")
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "honesteval-report",
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
#: Above this many tasks the heat map drops its task labels (the drill-down lists them).
MAX_TASK_LABELS = 60


def status_colour(status: str, index: int) -> str:
    return STATUS_COLOURS.get(status, _FALLBACK_COLOURS[index % len(_FALLBACK_COLOURS)])


@contextmanager
def _figure(width: float, height: float) -> Iterator[Any]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(_RC):
        fig = plt.figure(figsize=(width, height))
        try:
            yield fig
        finally:
            plt.close(fig)


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    return _METADATA.sub("", _PROLOGUE.sub("", buf.getvalue(), count=1))


def _height(n_rows: int) -> float:
    return 1.0 + 0.32 * max(n_rows, 1)


def reward_plot(names: Sequence[str], rewards: Sequence[float | None], cis: Sequence[Any]) -> str:
    """Reward with its 95 % CI per candidate (an unscored candidate is labelled, not drawn)."""
    with _figure(7, _height(len(names))) as fig:
        ax = fig.add_subplot()
        ys = list(range(len(names)))[::-1]
        for y, reward, ci in zip(ys, rewards, cis, strict=True):
            if reward is None:
                ax.text(0.5, y, "no scored task", ha="center", va="center", color="#9e9e9e")
                continue
            lo, hi = ci if ci is not None else (reward, reward)
            ax.errorbar(
                [reward], [y], xerr=[[reward - lo], [hi - reward]], fmt="o", capsize=4, color="k"
            )
        ax.set_yticks(ys, list(names))
        ax.set_ylim(-0.7, len(names) - 0.3)
        ax.set_xlabel("reward (mean over scored tasks), 95 % CI over new tasks: absolute")
        ax.grid(axis="x", alpha=0.3)
        return _svg(fig)


def delta_plot(
    names: Sequence[str],
    deltas: Sequence[float | None],
    cis: Sequence[tuple[float, float] | None],
    best: str,
) -> str:
    """Each candidate's paired Δ against the current best with its 95 % interval, a line at 0
    (a candidate with no task scored on both sides is labelled, not drawn)."""
    with _figure(7, _height(len(names))) as fig:
        ax = fig.add_subplot()
        ys = list(range(len(names)))[::-1]
        ax.axvline(0.0, color="#9e9e9e", linewidth=1)
        for y, delta, ci in zip(ys, deltas, cis, strict=True):
            if delta is None:
                ax.text(0.0, y, "no task scored on both sides", ha="center", va="center")
                continue
            lo, hi = ci if ci is not None else (delta, delta)
            colour = "#2e7d32" if lo > 0 else "#c62828" if hi < 0 else "k"
            ax.errorbar(
                [delta], [y], xerr=[[delta - lo], [hi - delta]], fmt="o", capsize=4, color=colour
            )
        ax.set_yticks(ys, list(names))
        ax.set_ylim(-0.7, len(names) - 0.3)
        ax.set_xlabel(f"paired Δ vs the current best ({best}), 95 % t interval over tasks")
        ax.grid(axis="x", alpha=0.3)
        return _svg(fig)


def coverage_plot(names: Sequence[str], counts: Sequence[dict[str, int]]) -> str:
    """Trials by status per candidate, stacked, as a share of the trials planned."""
    statuses = list(dict.fromkeys(s for c in counts for s in c))
    with _figure(7, _height(len(names))) as fig:
        ax = fig.add_subplot()
        ys = list(range(len(names)))[::-1]
        left = [0.0] * len(names)
        for i, status in enumerate(statuses):
            widths = [c.get(status, 0) / max(sum(c.values()), 1) for c in counts]
            ax.barh(ys, widths, left=left, color=status_colour(status, i), label=status)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_yticks(ys, list(names))
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of trials by status")
        if statuses:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=len(statuses))
        return _svg(fig)


@dataclass(frozen=True)
class TimePoint:
    when: datetime
    reward: float
    label: str


def best_over_time_plot(promotions: Sequence[TimePoint], drift: Sequence[TimePoint]) -> str:
    """The current best's val reward as a step line; promotions and drift checks marked."""
    with _figure(8, 3) as fig:
        ax = fig.add_subplot()
        if promotions:
            xs = [p.when for p in promotions]
            ys = [p.reward for p in promotions]
            end = max([*xs, *(d.when for d in drift)])
            ax.step([*xs, end], [*ys, ys[-1]], where="post", color="#1565c0")
            ax.plot(xs, ys, "o", color="#1565c0", label="promotion")
            for p in promotions:
                ax.annotate(p.label, (p.when, p.reward), textcoords="offset points", xytext=(4, 6))
        marks = {"stable": ("s", "#2e7d32"), "drifted": ("X", "#c62828")}
        for status in sorted({d.label for d in drift}):
            points = [d for d in drift if d.label == status]
            shape, colour = marks.get(status, ("D", "#9e9e9e"))
            ax.plot(
                [d.when for d in points],
                [d.reward for d in points],
                shape,
                color=colour,
                label=f"drift check: {status}",
            )
        ax.set_ylabel("val reward of the current best")
        ax.legend(loc="best", fontsize=8)
        fig.autofmt_xdate()
        return _svg(fig)


def heatmap_plot(
    names: Sequence[str], task_ids: Sequence[str], means: Sequence[Sequence[float | None]]
) -> str:
    """Candidates × tasks, each cell the task's mean reward; grey where the task is unscored."""
    import matplotlib
    import numpy as np

    grid = np.array(
        [[np.nan if m is None else m for m in row] for row in means], dtype=float
    ).reshape(len(names), len(task_ids))
    with _figure(min(2 + 0.18 * len(task_ids), 14), 1.2 + 0.3 * len(names)) as fig:
        ax = fig.add_subplot()
        cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#d0d0d0")
        image = ax.imshow(grid, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="none")
        ax.set_yticks(range(len(names)), list(names))
        if len(task_ids) <= MAX_TASK_LABELS:
            ax.set_xticks(range(len(task_ids)), list(task_ids), rotation=90)
        else:
            ax.set_xlabel(f"{len(task_ids)} tasks (sorted by id; see the drill-down)")
        fig.colorbar(image, ax=ax, label="task mean (grey: unscored)")
        return _svg(fig)
