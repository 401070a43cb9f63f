"""``honesteval report``: numbers against the trial files, no network, escaping, size, flows."""

from __future__ import annotations

import html
import json
import re
from collections import Counter, defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pytest

from honesteval.models import TrialRecord
from honesteval.store.state_dir import Store
from honesteval.views.html import write_report
from tests.helpers import (
    ProjectFactory,
    paired_by_hand,
    run_cli,
    stored_trials,
    task_means_on_disk,
)
from tests.synthetic_state import synthetic_state

#: The key users and the UI find the report artifact under (a contract, not a lookup).

HOSTILE_ID = "<script>alert('id')</script>$x$"
HOSTILE_OUTPUT = '<img src="http://evil.example/x.png" onerror="alert(1)"></pre><b>'


class Page(HTMLParser):
    """The parts of a report the tests read: tables (cell texts), task blocks, tags, styles."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[tuple[str | None, list[list[str]]]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.styles: list[str] = []
        self.scripts = 0
        self._task: str | None = None
        self._cell: list[str] | None = None
        self._in_style = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("style"):
            self.styles.append(a["style"] or "")
        if tag == "details":
            self._task = a.get("data-task")
        elif tag == "table":
            self.tables.append((self._task, []))
        elif tag == "tr":
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "style":
            self._in_style = True
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "details":
            self._task = None
        elif tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_style:
            self.styles.append(data)

    def table(self, *columns: str) -> list[dict[str, str]]:
        """The rows of the first table whose header has all these columns."""
        for _, rows in self.tables:
            if rows and set(columns) <= set(rows[0]):
                return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
        raise AssertionError(f"no table with columns {columns}")


def files_of(root: Path) -> dict[str, list[dict]]:
    """Every stored trial on val, by candidate (read from the trial logs on disk)."""
    out: dict[str, list[dict]] = defaultdict(list)
    for rec in stored_trials(root, "val"):
        out[rec["candidate"]].append(rec)
    return out


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three candidates gated in turn on 12 tasks (one with a hostile id), a drift check, a
    decision carrying a field this code does not know, and a trial with a hostile output."""
    ids = [HOSTILE_ID] + [f"t{i:02d}" for i in range(11)]
    root = synthetic_state(
        tmp_path_factory.mktemp("report"), 12, {"a": 0.3, "b": 0.8, "c": 0.5}, task_ids=ids
    )
    store = Store(root / ".honesteval")
    rec = TrialRecord.model_validate(files_of(root)["b"][0])
    store.write_trial(rec.model_copy(update={"rollout": HOSTILE_OUTPUT}))
    last = store.read_decisions()[-1].model_dump(mode="json")
    extra = dict(last, alpha_level=0.0123, timestamp="2099-01-01T00:00:00Z")
    with (store.root / "decisions.jsonl").open("a") as fh:
        fh.write(json.dumps(extra) + "\n")
    return root


@pytest.fixture(scope="module")
def page(state: Path) -> tuple[str, Page]:
    path, _ = write_report(state)
    text = path.read_text(encoding="utf-8")
    return text, Page(text)


def test_headline_and_coverage_match_the_trial_files(state: Path, page) -> None:
    _, doc = page
    files = files_of(state)
    headline = {r["candidate"].split(" ")[0]: r for r in doc.table("candidate", "reward ± SE")}
    assert sorted(headline) == ["a", "b", "c"]
    for cand, recs in files.items():
        ok: dict[str, list[float]] = defaultdict(list)
        for r in recs:
            ok.setdefault(r["task_id"], [])
            if r["status"] in ("ok", "failed"):  # a candidate failure counts
                ok[r["task_id"]].append(r["reward"])
        means = [sum(v) / len(v) for v in ok.values() if v]
        reward = sum(means) / len(means)
        assert headline[cand]["reward ± SE"].startswith(f"{reward:.4f} ± ")
        assert f"({len(means)}/{len(ok)} tasks)" in headline[cand]["coverage"]
        counts = Counter(r["status"] for r in recs)
        for status, n in counts.items():
            assert f"{n} {status}" in headline[cand]["trials"]
    coverage = doc.table("candidate", "scored tasks")
    assert sorted(r["candidate"] for r in coverage) == ["a", "b", "c"]
    for row in coverage:
        counts = Counter(r["status"] for r in files[row["candidate"]])
        for status, n in counts.items():
            assert int(row[status]) == n
        assert int(row["trials"]) == sum(counts.values())


def test_drilldown_lists_every_trial_as_stored(state: Path, page) -> None:
    _, doc = page
    seen = {}
    for task, rows in doc.tables:
        if task is None or not rows or rows[0][:2] != ["candidate", "trial"]:
            continue
        for r in rows[1:]:
            row = dict(zip(rows[0], r, strict=True))
            seen[(row["candidate"], task, int(row["seed"]))] = row
    files = files_of(state)
    assert len(seen) == sum(len(v) for v in files.values()) == 3 * 12 * 3
    for cand, recs in files.items():
        for rec in recs:
            row = seen[(cand, rec["task_id"], rec["seed"])]
            assert row["status"] == rec["status"]
            assert row["attempts"] == str(rec["attempts"])
            want = "n/a" if rec["reward"] is None else f"{rec['reward']:.4f}"
            assert row["reward"] == want
            out = rec["rollout"]
            assert row["output"] == (out if isinstance(out, str) else json.dumps(out, indent=1))
            assert row["error"] == "\n".join(rec["errors"])


def test_decisions_log_shows_every_decision_and_unknown_fields(state: Path, page) -> None:
    text, _ = page
    part = text[text.index("<h2>Decisions") :]
    part = part[: part.index("</section>")]
    stored = [
        json.loads(x) for x in (state / ".honesteval/decisions.jsonl").read_text().splitlines()
    ]
    # each row: time, verdict, ...; the reason and every other field folded in its last cell
    outer = re.sub(r'<details class="why">.*?</details>', "", part)
    verdicts = re.findall(r"<tr><td>[^<]*</td><td>([^<]*)</td>", outer)
    reasons = re.findall(r'<details class="why"><summary>.*?</summary><p>(.*?)</p>', part)
    assert len(verdicts) == len(stored) == 4
    assert [html.unescape(r) for r in reasons] == [d["reason"] for d in reversed(stored)]
    assert "<td>alpha_level</td><td>0.0123</td>" in part
    assert verdicts[-1] == "BASELINE ✔ promoted"  # the first one gated becomes the best


def test_drift_checks_and_plots_are_there(state: Path, page) -> None:
    text, doc = page
    stored = (state / ".honesteval" / "drift_checks.jsonl").read_text().splitlines()
    checks = doc.table("time", "drift check")
    assert [r["drift check"] for r in checks] == [json.loads(x)["status"] for x in stored]
    # Δ vs the best, reward, coverage, best over time, heat map
    assert text.count("<svg") == 5


def test_the_report_makes_no_external_request(page) -> None:
    text, doc = page
    for tag, attrs in doc.tags:
        assert tag not in ("link", "iframe", "object", "embed"), tag
        for name in ("src", "href", "xlink:href", "data", "action", "poster", "srcset"):
            value = (attrs.get(name) or "").strip().lower()
            assert not re.match(r"(https?:)?//", value), (tag, name, value)
            assert not value.startswith(("http", "ftp:", "file:")), (tag, name, value)
    css = "\n".join(doc.styles)
    assert "@import" not in css
    for target in re.findall(r"url\(\s*['\"]?([^)'\"]*)", css):
        assert target.startswith(("#", "data:")), target
    assert not re.search(r"<(link|iframe)\b", text)


def test_hostile_strings_are_escaped(page) -> None:
    text, doc = page
    assert doc.scripts == 1  # the report's own filter, nothing a task id or output brought
    assert "<script>alert" not in text
    assert '<img src="http://evil' not in text
    assert HOSTILE_ID in {task for task, _ in doc.tables if task}
    outputs = [c for _, rows in doc.tables for r in rows for c in r if "evil.example" in c]
    assert HOSTILE_OUTPUT in outputs  # shown as text, intact


@pytest.mark.quick
def test_report_cli_and_bad_input(state: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    proc = run_cli("report", "--project", str(state), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0 and str(out) in proc.stdout
    bad = run_cli("report", "--project", str(state), "--split", "dev")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "unknown split 'dev'" in bad.stderr
    missing = run_cli("report", "--project", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no honesteval.yaml" in missing.stderr


def test_report_of_a_project_with_nothing_stored(tmp_path: Path) -> None:
    root = ProjectFactory(tmp_path)(["pass"])
    path, _ = write_report(root)
    doc = Page(path.read_text())
    assert doc.scripts == 1
    assert "No stored result on val yet." in path.read_text()


def test_a_200_task_5_candidate_report_is_under_5_mb(tmp_path: Path) -> None:
    root = synthetic_state(
        tmp_path, 200, {"c0": 0.2, "c1": 0.4, "c2": 0.5, "c3": 0.6, "c4": 0.8}, output_chars=300
    )
    path, _ = write_report(root)
    size = path.stat().st_size
    assert size < 5 * 1024 * 1024, size
    doc = Page(path.read_text())
    assert sum(1 for tag, a in doc.tags if tag == "details" and a.get("data-task")) == 200
    rows = sum(
        len(rows) - 1 for task, rows in doc.tables if task and rows[0][:2] == ["candidate", "trial"]
    )
    assert rows == 200 * 5 * 3


@pytest.mark.usefixtures("prefect_backend")
def test_gate_and_reevaluate_best_publish_the_report(make_project) -> None:
    from honesteval.orchestration.flows import gate, reevaluate_best
    from tests.prefect_reads import artifacts

    # 24 tasks: the confirmation's e-value can reach 1/alpha_1 (6 tasks never could).
    tasks = [{"id": f"g{i}", "input": {"behaviour": "seeded"}, "target": "yes"} for i in range(24)]
    root = make_project(tasks=tasks, candidates={"base": 0.5, "better": 1.0})
    gate(str(root), "base")
    state = gate(str(root), "better", return_state=True)
    md = artifacts(state.state_details.flow_run_id)[f"honesteval-report-{root.name}"]["data"]
    report = root / ".honesteval" / "report.html"
    assert report.as_uri() in md
    assert "| better (current best) |" in md and "| base |" in md
    first = report.read_text()
    assert "better" in first
    state = reevaluate_best(str(root), return_state=True)
    md = artifacts(state.state_details.flow_run_id)[f"honesteval-report-{root.name}"]["data"]
    assert report.as_uri() in md
    checks = (root / ".honesteval" / "drift_checks.jsonl").read_text().splitlines()
    assert [json.loads(c)["status"] for c in checks] == [state.result().status]
    assert "drift check" in report.read_text()


def test_delta_vs_best_column_is_the_paired_delta_of_the_trial_files(state: Path, page) -> None:
    text, doc = page
    best = json.loads((state / ".honesteval" / "best.json").read_text())["name"]
    means = task_means_on_disk(state)
    headline = {r["candidate"].split(" ")[0]: r for r in doc.table("candidate", "Δ vs best ± SE")}
    assert headline[best]["Δ vs best ± SE"] == "(current best)"
    for cand in set(means) - {best}:
        mean, se, n = paired_by_hand(means[cand], means[best])
        assert headline[cand]["Δ vs best ± SE"] == f"{mean:+.4f} ± {se:.4f} (n={n})"
    # The first plot is the paired Δ (what decides promotion); the absolute rewards come second.
    titles = re.findall(r"<h2>(.*?)</h2>", text)
    assert titles[1].startswith("Δ vs the current best") and "absolute" in titles[2]
    assert text.index("paired Δ vs the current best") < text.index("95 % CI over new tasks")
