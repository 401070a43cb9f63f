"""The report answers "which is better, by how much, how sure" in a page a reader can scan:
short decision rows (the rest folded), which run each number comes from, each task's input,
and ``honesteval report`` saying where the file is and how big, opening it on request."""

from __future__ import annotations

import html
import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from honesteval.views.html import REASON_CHARS, write_report
from tests.e2e.test_report import page, state  # noqa: F401  (module fixtures: one state, one page)
from tests.helpers import run_cli

DECISION_HEADER = [
    "time (UTC)",
    "verdict",
    "candidate",
    "vs",
    "Δ",
    "SE",
    "bar",
    "n",
    "coverage",
    "reason (click for the whole record)",
]


def section(text: str, title: str) -> str:
    start = text.index(f"<h2>{title}")
    return text[start : text.index("</section>", start)]


def test_decision_rows_are_short_and_the_record_is_folded(state: Path, page) -> None:  # noqa: F811
    text, _ = page
    part = section(text, "Decisions")
    header = re.findall(r"<th>(.*?)</th>", part[: part.index("</thead>")])
    assert [html.unescape(h) for h in header] == DECISION_HEADER
    stored = [
        json.loads(x) for x in (state / ".honesteval/decisions.jsonl").read_text().splitlines()
    ]
    folded = re.findall(
        r'<details class="why"><summary>(.*?)</summary><p>(.*?)</p>(.*?)</details>', part
    )
    assert len(folded) == len(stored) == 4
    for (summary, whole, _), d in zip(folded, reversed(stored), strict=True):
        reason = d["reason"]
        assert html.unescape(whole) == reason
        shown = html.unescape(summary)
        assert shown == reason if len(reason) <= REASON_CHARS else shown == reason[:89] + "…"
        assert len(shown) <= REASON_CHARS
    # a field this code does not know is still there, in the folded record of its row
    assert "<td>alpha_level</td><td>0.0123</td>" in folded[0][2]
    # nothing but the folded record holds key=value blobs or JSON
    visible = re.sub(r'<details class="why">.*?</details>', "", part)
    assert "=" not in re.sub(r"<[^>]+>", "", visible) and "{" not in visible


def test_each_task_shows_its_input(state: Path, page) -> None:  # noqa: F811
    text, _ = page
    tasks = [json.loads(x) for x in (state / "tasks.jsonl").read_text().splitlines()]
    for t in tasks[1:]:  # the first has a hostile id: tested for escaping elsewhere
        block = text[text.index(f'data-task="{t["id"]}"') :]
        block = block[: block.index("</details>")]
        given = {"input": t["input"]} | ({"target": t["target"]} if "target" in t else {})
        shown = re.search(r'<div class="task-input"><b>task</b><pre>(.*?)</pre>', block, re.S)
        assert shown is not None and json.loads(html.unescape(shown.group(1))) == given


def size_words(n: int) -> str:
    # by hand: 1,000 bytes a KB, 1,000,000 a MB
    return f"{n} bytes" if n < 1000 else f"{n / 1000:.1f} KB" if n < 10**6 else f"{n / 1e6:.2f} MB"


@pytest.mark.slow
def test_report_prints_path_and_size_and_opens_it(state: Path, tmp_path: Path) -> None:  # noqa: F811
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(
        f"#!{sys.executable}\nimport sys\nopen({str(opened)!r}, 'w').write(sys.argv[1])\n"
    )
    browser.chmod(browser.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "r.html"
    env = dict(os.environ, BROWSER=f"{browser} %s")
    proc = run_cli("report", "--project", str(state), "--out", str(out), "--open", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote {out.resolve()} ({size_words(out.stat().st_size)})"
    for _ in range(100):  # the browser is started, not waited for
        if opened.exists() and opened.read_text():
            break
        __import__("time").sleep(0.1)
    assert opened.read_text() == out.resolve().as_uri()


def test_sizes_are_said_in_words() -> None:
    from honesteval.cli.views import _size_text

    assert [_size_text(n) for n in (812, 41_300, 1_850_000)] == ["812 bytes", "41.3 KB", "1.85 MB"]


@pytest.mark.usefixtures("prefect_backend")
def test_the_best_shown_from_a_nightly_run_says_so(make_project) -> None:
    """After a nightly re-evaluation the candidates table shows its number, labelled, with
    the reward the best was promoted on beside it."""
    from honesteval.flows import gate, reevaluate_best
    from tests.e2e.test_report import Page
    from tests.orchestration.test_flow_gate import gate_project

    root = gate_project(make_project, candidates={"base": 0.5})
    promoted = gate(str(root), "base")
    drift = reevaluate_best(str(root))
    path, _ = write_report(root)
    row = Page(path.read_text()).table("candidate", "run")[0]
    assert row["candidate"] == "base (current best)"
    assert row["run"] == (
        f"nightly re-evaluation {drift.timestamp[:10]} (seeds from {drift.new_base_seed}); "
        f"promoted on {promoted.candidate_reward:.4f}"
    )
    assert row["reward ± SE"].startswith(f"{drift.new_reward:.4f} ± ")
