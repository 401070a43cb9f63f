"""``compare`` and ``export`` read the stored records: checked against the trial JSON files."""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from honesteval.views.export import COLUMNS
from tests.helpers import ProjectFactory, run_cli, run_plain, stored_trials

# t01 is down for b and t02 for c (their outage.txt): scored on one side only.
BEHAVIOURS = ["seeded"] * 6 + ["scorer_error", "pass", "fail", "seeded", "bug"]
COUNTED = ("ok", "failed")  # a candidate failure counts, at failure_reward (0.0 here)
OUTAGES = {"b": "t01", "c": "t02 t03"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three candidates evaluated on val (no Prefect); the tests only read the state."""
    make_project = ProjectFactory(tmp_path_factory.mktemp("compare"))
    root = make_project(BEHAVIOURS, candidates={"a": 0.3, "b": 0.7, "c": 0.5, "idle": 0.5})
    for cand, ids in OUTAGES.items():
        (root / "candidates" / cand / "outage.txt").write_text(ids)
    for cand in ("a", "b", "c"):
        run_plain(root, cand)
    return root


def trial_files(root: Path, candidate: str) -> list[dict]:
    """Every stored trial of a candidate on val, straight from its trial log on disk."""
    return stored_trials(root, "val", candidate)


def means_from_files(root: Path, candidate: str) -> dict[str, float | None]:
    rewards: dict[str, list[float]] = defaultdict(list)
    for rec in trial_files(root, candidate):
        rewards.setdefault(rec["task_id"], [])
        if rec["status"] in COUNTED:
            rewards[rec["task_id"]].append(rec["reward"])
    return {t: (sum(r) / len(r) if r else None) for t, r in rewards.items()}


def statuses_from_files(root: Path, candidate: str) -> dict[str, Counter]:
    out: dict[str, Counter] = defaultdict(Counter)
    for rec in trial_files(root, candidate):
        out[rec["task_id"]][rec["status"]] += 1
    return out


@pytest.mark.quick
def test_compare_json_matches_the_trial_files(project: Path) -> None:
    proc = run_cli("compare", "a", "b", "c", "--project", str(project), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    means = {c: means_from_files(project, c) for c in "abc"}
    statuses = {c: statuses_from_files(project, c) for c in "abc"}
    assert [c["name"] for c in report["candidates"]] == ["a", "b", "c"]
    for cand in report["candidates"]:
        total = sum((statuses[cand["name"]][t] for t in statuses[cand["name"]]), Counter())
        assert cand["statuses"] == dict(total)
        scored = [m for m in means[cand["name"]].values() if m is not None]
        assert cand["reward"] == pytest.approx(sum(scored) / len(scored))
    by_task = {row["task"]: row for row in report["tasks"]}
    assert sorted(by_task) == sorted(means["a"])
    for tid, row in by_task.items():
        for c in "abc":
            assert row["candidates"][c]["mean"] == pytest.approx(means[c][tid])
            assert row["candidates"][c]["statuses"] == dict(statuses[c][tid])
    for pair, other in zip(report["pairs"], "bc", strict=True):
        assert (pair["baseline"], pair["candidate"]) == ("a", other)
        d = [
            means[other][t] - means["a"][t]
            for t in sorted(means["a"])
            if means["a"][t] is not None and means[other][t] is not None
        ]
        n = len(d)
        mean = sum(d) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
        assert pair["n_paired"] == n
        assert pair["delta"] == pytest.approx(mean)
        assert pair["se"] == pytest.approx(sd / math.sqrt(n))
        assert (pair["wins"], pair["losses"], pair["ties"]) == (
            sum(x > 0 for x in d),
            sum(x < 0 for x in d),
            sum(x == 0 for x in d),
        )
        one_sided = sorted(
            t for t in means["a"] if (means["a"][t] is None) != (means[other][t] is None)
        )
        assert [m["task"] for m in pair["missing_decides"]] == one_sided
        for m in pair["missing_decides"]:
            side = "a" if means["a"][m["task"]] is not None else other
            assert m["scored_on"] == side
    # The outages chosen above really are what decides: t01 for b, t02 and t03 for c.
    assert [m["task"] for m in report["pairs"][0]["missing_decides"]] == ["t01"]
    assert [m["task"] for m in report["pairs"][1]["missing_decides"]] == ["t02", "t03"]


def test_compare_csv_has_one_row_per_task_with_the_file_means(project: Path) -> None:
    proc = run_cli("compare", "a", "c", "--project", str(project), "--csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    means = {c: means_from_files(project, c) for c in "ac"}
    statuses = {c: statuses_from_files(project, c) for c in "ac"}
    assert [r["task"] for r in rows] == sorted(means["a"])
    for r in rows:
        t = r["task"]
        for c in "ac":
            want = means[c][t]
            assert (r[f"{c}.mean"] == "") if want is None else float(r[f"{c}.mean"]) == want
            for status in ("ok", "failed", "infra_error", "scorer_error"):
                assert int(r[f"{c}.{status}"]) == statuses[c][t][status]
        if means["a"][t] is None or means["c"][t] is None:
            assert r["c.delta"] == ""
        else:
            assert float(r["c.delta"]) == pytest.approx(means["c"][t] - means["a"][t])
        assert r["missing_decides"] == ("c" if t in ("t02", "t03") else "")


def test_compare_human_output_names_the_pair(project: Path) -> None:
    proc = run_cli("compare", "a", "b", "--project", str(project))
    assert proc.returncode == 0, proc.stderr
    assert "b vs a: paired Δ" in proc.stdout
    assert "missing data decides 1 task(s): t01" in proc.stdout


def test_compare_markdown_is_a_table_with_the_json_figures(project: Path) -> None:
    report = json.loads(run_cli("compare", "a", "b", "--project", str(project), "--json").stdout)
    [pair] = report["pairs"]
    proc = run_cli("compare", "a", "b", "--project", str(project), "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| b vs a |"))
    assert f"{pair['delta']:+.4f} ± {pair['se']:.4f}" in row


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a", "nosuch"], "unknown candidate 'nosuch'"),
        (["a", "idle"], "no stored result for 'idle' on val"),
        (["a"], "at least two candidates"),
        (["a", "a"], "named twice"),
        (["a", "b", "--split", "dev"], "unknown split 'dev'"),
        (["a", "b", "--split", "train"], "no stored result for 'a' on train"),
        (["a", "b", "--json", "--csv"], "exclude each other"),
        (["a", "b", "--format", "html"], "unknown --format 'html'"),
        (["a", "b", "--json", "--format", "markdown"], "exclude each other"),
    ],
)
def test_compare_bad_input_is_one_line_and_exit_2(
    project: Path, args: list[str], message: str
) -> None:
    proc = run_cli("compare", *args, "--project", str(project))
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


@pytest.mark.quick
def test_export_jsonl_is_every_stored_trial(project: Path) -> None:
    proc = run_cli("export", "--project", str(project), "--format", "jsonl")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    files = [rec for c in "abc" for rec in trial_files(project, c)]
    assert len(rows) == len(files) == 3 * len(BEHAVIOURS) * 3
    assert all(list(r) == list(COLUMNS) for r in rows)
    key = lambda r: (r["candidate"], r["task_id"], r["seed"])  # noqa: E731
    by_key = {key(r): r for r in rows}
    for rec in files:
        row = by_key[key(rec)]
        for col in ("status", "reward", "attempts", "error", "feedback", "trial", "fingerprint"):
            assert row[col] == rec[col], col
        assert row["output"] == rec["rollout"]
        assert row["errors"] == rec["errors"]


def test_export_csv_filters_and_parses_back(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "trials.csv"
    proc = run_cli(
        "export",
        "--project",
        str(project),
        "--format",
        "csv",
        "--candidate",
        "b",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    with out.open() as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = list(reader)
    files = trial_files(project, "b")
    assert len(rows) == len(files)
    by_key = {(r["task_id"], int(r["seed"])): r for r in rows}
    for rec in files:
        row = by_key[(rec["task_id"], rec["seed"])]
        assert row["status"] == rec["status"]
        assert row["candidate"] == "b" and row["split"] == "val"
        assert (
            (row["reward"] == "")
            if rec["reward"] is None
            else float(row["reward"]) == rec["reward"]
        )
        assert json.loads(row["output"]) == rec["rollout"]
        assert int(row["attempts"]) == rec["attempts"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "xml"], "unknown --format 'xml'"),
        (["--split", "dev"], "unknown split 'dev'"),
        (["--candidate", "idle"], "no stored results for 'idle'"),
    ],
)
def test_export_bad_input_is_one_line_and_exit_2(
    project: Path, args: list[str], message: str
) -> None:
    proc = run_cli("export", "--project", str(project), *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_evaluate_csv_is_one_row_per_trial_of_this_run(make_project, cli_env) -> None:
    root = make_project(["seeded", "infra", "pass"], candidates={"base": 0.5})
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", "--csv", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    files = trial_files(root, "base")
    assert len(rows) == len(files) == 9
    by_key = {(r["task_id"], int(r["seed"])): r for r in rows}
    for rec in files:
        row = by_key[(rec["task_id"], rec["seed"])]
        assert row["status"] == rec["status"]
        assert int(row["attempts"]) == rec["attempts"]
        assert (row["error"] or None) == rec["error"]


# -- CSV injection -----------------------------------------------------------------------------
FORMULA_IDS = ["+SUM(1+1)*cmd|x", "@SUM(1)", "=1+1", "-2+3", "\tTAB", "plain"]
FORMULA_FEEDBACK = '=HYPERLINK("http://evil.example","click")'
FORMULA_TARGET = f"""
def run(task, candidate_dir, seed):
    return task["input"]

def score(task, output):
    return {{"reward": 0.5, "feedback": {FORMULA_FEEDBACK!r}}}
"""


def _formula_cells(text: str) -> list[str]:
    """Cells a spreadsheet would run as a formula (OWASP: first character = + - @ tab CR),
    plain numbers aside."""
    bad = []
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                try:
                    float(cell)
                except ValueError:
                    bad.append(cell)
    return bad


def test_csv_outputs_neutralise_formula_cells(make_project) -> None:
    tasks = [{"id": tid, "input": tid} for tid in FORMULA_IDS]
    root = make_project(
        tasks=tasks,
        candidates={"=evil": 0.5, "base": 0.5},
        config={"trials": 1},
        target_code=FORMULA_TARGET,
    )
    for cand in ("base", "=evil"):
        run_plain(root, cand)
    export = run_cli("export", "--project", str(root), "--format", "csv")
    compare = run_cli("compare", "base", "=evil", "--project", str(root), "--csv")
    assert export.returncode == 0 and compare.returncode == 0, export.stderr + compare.stderr
    assert _formula_cells(export.stdout) == [] and _formula_cells(compare.stdout) == []
    rows = list(csv.DictReader(io.StringIO(export.stdout)))
    quoted = {tid if tid == "plain" else "'" + tid for tid in FORMULA_IDS}
    assert {r["task_id"] for r in rows} == quoted  # OWASP: a leading single quote, text kept
    assert {r["feedback"] for r in rows} == {"'" + FORMULA_FEEDBACK}
    assert {r["candidate"] for r in rows} == {"base", "'=evil"}
    assert {r["reward"] for r in rows} == {"0.5"}  # numbers stay numbers
    # a string output is the string itself (not JSON inside CSV), guarded like any text cell
    assert {r["output"] for r in rows} == quoted
    by_task = {r["task"]: r for r in csv.DictReader(io.StringIO(compare.stdout))}
    assert set(by_task) == quoted
    assert {float(r["=evil.delta".replace("=", "'=")]) for r in by_task.values()} == {0.0}
