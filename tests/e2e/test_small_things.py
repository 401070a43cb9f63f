"""Small things a newcomer hits: compare's columns, status listing a result once and saying
what the search guarantees in plain words, export's CSV and what it says it wrote."""

from __future__ import annotations

import csv
import io
import os

import pytest

from honesteval.views.compare import compare_candidates, compare_lines
from honesteval.views.status import project_status, status_lines
from tests.helpers import run_cli, run_plain

STRING_TARGET = """
def run(task, candidate_dir, seed):
    return "42" if seed % 2 == 0 else "41"  # a string output, as most targets give


def score(task, output):
    return 1.0 if output == "42" else 0.0
"""


def test_compare_columns_line_up(make_project):
    root = make_project(["pass", "fail", "seeded"], candidates={"base": 0.5, "longer-name": 1.0})
    run_plain(root, "base")
    run_plain(root, "longer-name")
    lines = compare_lines(compare_candidates(root, ["base", "longer-name"]))
    table = lines[lines.index("") + 1 :]
    table = table[table.index("") + 1 :] if "" in table else table
    header, rows = table[0], table[1:]
    assert len(rows) == 3
    # every number column ends where its header ends, every text column starts where its
    # header starts: the columns are aligned whatever the widths of names and counts
    for title in ("base mean", "longer-name mean", "Δ vs base"):
        end = header.index(title) + len(title)
        assert all(row[end - 1] != " " and (len(row) == end or row[end] == " ") for row in rows)
    for title in ("base trials", "longer-name trials"):
        start = header.index(title)
        assert all(row[start - 1] == " " and row[start] != " " for row in rows)


def test_status_lists_a_result_once_and_says_the_guarantee_plainly(make_project):
    root = make_project(["pass", "seeded"], candidates={"base": 0.5})
    run_plain(root, "base")
    run_plain(root, "base")  # a rerun: every trial reused, the same numbers stored again
    lines = status_lines(project_status(root))
    history = lines[lines.index("coverage history:") + 1 :]
    rows = [line for line in history if " base " in line]
    assert len(rows) == 1 and rows[0].endswith("(the same result stored 2×: reruns reuse trials)")
    plain = next(line for line in lines if line.startswith("In plain words:"))
    assert "at most 5% of the promotions are expected to be false" in plain
    assert "LORD++" not in plain and "alpha_j" not in plain


@pytest.mark.slow
def test_export_csv_holds_string_outputs_as_text_and_says_what_it_wrote(make_project, tmp_path):
    root = make_project(["a", "b"], target_code=STRING_TARGET)
    run_plain(root, "base")
    out = tmp_path / "trials.csv"
    proc = run_cli("export", "--project", str(root), "--format", "csv", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    # seeds 0, 1, 2 on 2 tasks: "42", "41", "42" each, as plain text in the cell
    assert sorted(r["output"] for r in rows) == ["41", "41", "42", "42", "42", "42"]
    assert '"""' not in out.read_text()
    size = out.stat().st_size  # said in KB above 1,000 bytes (by hand: 1,000 bytes a KB)
    said = f"{size / 1000:.1f} KB" if size >= 1000 else f"{size} bytes"
    assert proc.stdout.strip() == f"wrote 6 trials as csv to {out.resolve()} ({said})"
    to_stdout = run_cli("export", "--project", str(root), env=dict(os.environ))
    assert to_stdout.returncode == 0 and len(to_stdout.stdout.splitlines()) == 6
    assert to_stdout.stderr.strip() == "exported 6 trials as jsonl"
