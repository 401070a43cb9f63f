"""``honesteval.import_inspect``: real Inspect logs (``mockllm/model``, offline) as stored trials.

Two real evaluations run once for the module (``tests/inspect_fixture/arith_task.py``: 8
arithmetic samples, ``boom`` that always errors, ``long`` that always hits its token limit),
one logged as ``.eval``, one as ``.json``. Expected rewards are recomputed from the fixture's
own draw rule, never read back from honesteval.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

import inspect_ai  # the [inspect] extra: `make install` installs it
import pytest

import honesteval
from honesteval import ConfigError
from honesteval.store.state_dir import Store
from tests.helpers import run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "inspect_fixture"
sys.path.insert(0, str(FIXTURE))
from arith_task import right  # noqa: E402

TASK = f"{FIXTURE / 'arith_task.py'}@arith"
EPOCHS = 3
QUESTIONS = [f"q{i}" for i in range(8)]
PROMPTS = {"careful": "Be careful: check the sum.", "quick": "Answer fast."}


def _eval(tmp: Path, name: str, log_format: str) -> Path:
    folder = tmp / "prompts" / name
    folder.mkdir(parents=True)
    (folder / "prompt.txt").write_text(PROMPTS[name] + "\n")
    [log] = inspect_ai.eval(
        TASK,
        model="mockllm/model",
        task_args={"candidate_dir": str(folder)},
        epochs=EPOCHS,
        log_dir=str(tmp / "logs" / name),
        log_format=log_format,
        display="none",
        fail_on_error=False,
        retry_on_error=0,
    )
    assert log.location
    return Path(log.location)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("inspect")
    return {"careful": _eval(tmp, "careful", "eval"), "quick": _eval(tmp, "quick", "json")}


def _expected_reward(prompt: str, drop: set[tuple[str, int]] = frozenset()) -> float:
    """Mean over scored tasks of each task's mean over its counted trials: the q samples by
    the fixture's draw, ``long`` failing (0) every epoch; ``boom`` is missing data."""
    means = [
        statistics.mean(
            float(right(prompt, q, None, e)) for e in range(1, EPOCHS + 1) if (q, e) not in drop
        )
        for q in QUESTIONS
    ]
    return statistics.mean([*means, 0.0])


def test_a_log_becomes_a_project_and_a_result(logs: dict[str, Path], tmp_path: Path) -> None:
    project = tmp_path / "proj"
    summary = honesteval.import_inspect(project, [logs["careful"]], "careful")
    result = summary.result
    assert summary.created_project and summary.created_candidate
    # the candidate folder is a copy of the one the log's task ran with
    assert (project / "candidates" / "careful" / "prompt.txt").read_text().startswith("Be careful")
    assert (result.n_tasks, result.n_scored, result.n_trials) == (10, 9, EPOCHS)
    assert result.coverage == pytest.approx(0.9)  # boom errored every epoch: missing data
    assert result.trials_infra_error == EPOCHS and result.trials_failed == EPOCHS
    assert result.reward == pytest.approx(_expected_reward(PROMPTS["careful"]))
    by_task = {t.id: t for t in result.per_task}
    assert by_task["boom"].statuses == ["infra_error"] * EPOCHS and by_task["boom"].mean is None
    assert by_task["long"].statuses == ["failed"] * EPOCHS and by_task["long"].mean == 0.0
    assert any("imported from 1 Inspect log" in w for w in result.warnings)
    # stored: one record per sample and epoch, marked imported, tokens kept
    store = Store(project / ".honesteval")
    trials = store.read_trials("val", "careful", result.fingerprint)
    assert len(trials) == 10 * EPOCHS
    record = trials[("q0", 1)]
    assert record.trial == 1 and "epoch 2" in (record.imported or "")
    assert record.tokens == 12
    assert trials[("long", 0)].error and "token limit" in trials[("long", 0)].error
    assert trials[("boom", 0)].error and "provider unreachable" in trials[("boom", 0)].error


def test_a_json_log_and_errors_as_failures(logs: dict[str, Path], tmp_path: Path) -> None:
    result = honesteval.import_inspect(
        tmp_path / "proj", [logs["quick"]], "quick", errors="failure"
    ).result
    assert result.coverage == 1.0 and result.trials_failed == 2 * EPOCHS
    expected = _expected_reward(PROMPTS["quick"]) * 9 / 10  # boom now a counted 0
    assert result.reward == pytest.approx(expected)


def test_missing_samples_lower_coverage_never_the_reward(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(logs["careful"]))
    assert log.samples is not None
    log.samples = [s for s in log.samples if s.id != "q5" and not (s.id == "q3" and s.epoch == 2)]
    cut = tmp_path / "cut.eval"
    write_eval_log(log, str(cut))
    result = honesteval.import_inspect(tmp_path / "proj", [cut], "careful").result
    assert result.n_tasks == 10 and result.n_scored == 8  # q5 and boom missing
    kept = [q for q in QUESTIONS if q != "q5"]
    means = [
        statistics.mean(
            float(right(PROMPTS["careful"], q, None, e))
            for e in range(1, EPOCHS + 1)
            if (q, e) != ("q3", 2)
        )
        for q in kept
    ]
    assert result.reward == pytest.approx(statistics.mean([*means, 0.0]))
    assert {t.id: len([s for s in t.statuses if s == "ok"]) for t in result.per_task}["q3"] == 2


def test_a_score_outside_0_1_is_refused_and_nothing_written(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(logs["careful"]))
    assert log.samples is not None
    sample = next(s for s in log.samples if s.id == "q2")
    assert sample.scores is not None
    sample.scores["match"].value = 3.0
    bad = tmp_path / "bad.json"
    write_eval_log(log, str(bad), format="json")
    project = tmp_path / "proj"
    with pytest.raises(ConfigError, match=r"sample 'q2' epoch \d: score value 3\.0 is outside"):
        honesteval.import_inspect(project, [bad], "careful")
    assert Store(project / ".honesteval").read_results() == []
    assert not list((project / ".honesteval").glob("trials/**/*.jsonl"))


def test_two_candidates_compare_on_shared_tasks(logs: dict[str, Path], tmp_path: Path) -> None:
    from honesteval.views.compare import compare_candidates, compare_markdown

    project = tmp_path / "proj"
    honesteval.import_inspect(project, [logs["careful"]], "careful")
    second = honesteval.import_inspect(project, [logs["quick"]], "quick")
    assert not second.created_project
    report = compare_candidates(project, ["careful", "quick"])
    [pair] = report["pairs"]
    deltas = [
        statistics.mean(float(right(PROMPTS["quick"], q, None, e)) for e in (1, 2, 3))
        - statistics.mean(float(right(PROMPTS["careful"], q, None, e)) for e in (1, 2, 3))
        for q in QUESTIONS
    ] + [0.0]  # long: 0 on both sides; boom is unscored on both
    assert pair["delta"] == pytest.approx(statistics.mean(deltas))
    assert pair["n_paired"] == 9
    # the pull-request comment (compare --format markdown) carries the same figures
    comment = compare_markdown(report)
    se = statistics.stdev(deltas) / 3  # sd of the 9 paired Δs / √9
    assert f"| quick vs careful | {statistics.mean(deltas):+.4f} ± {se:.4f} | 9 |" in comment
    assert "| careful | " in comment and "infra_error=3" in comment


def test_bad_input_is_one_clear_error(logs: dict[str, Path], tmp_path: Path) -> None:
    not_a_log = tmp_path / "x.eval"
    not_a_log.write_text("hello")
    with pytest.raises(ConfigError, match="not an Inspect log"):
        honesteval.import_inspect(tmp_path / "p", [not_a_log], "c")
    with pytest.raises(ConfigError, match="no such Inspect log"):
        honesteval.import_inspect(tmp_path / "p", [tmp_path / "none.eval"], "c")
    with pytest.raises(ConfigError, match="no score 'nope'"):
        honesteval.import_inspect(tmp_path / "p", [logs["careful"]], "c", scorer="nope")
    with pytest.raises(ConfigError, match="errors must be one of"):
        honesteval.import_inspect(tmp_path / "p", [logs["careful"]], "c", errors="zero")


def test_a_created_project_file_loads(logs: dict[str, Path], tmp_path: Path) -> None:
    project = tmp_path / "proj"
    honesteval.import_inspect(project, [logs["careful"]], "careful")
    loaded = honesteval.load_project(project)
    assert loaded.config.adapter.kind == "inspect"
    assert sorted(t.id for t in loaded.tasks("val")) == sorted([*QUESTIONS, "boom", "long"])
    assert loaded.tasks("train") == [] and loaded.tasks("test") == []


def test_a_screen_on_imported_trials_only_says_its_confirmation_needs_fresh_ones(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    from honesteval.gating.ledger import read_best
    from honesteval.gating.run import best_screen_trials, prepare_gate, screen_is_imported_only
    from honesteval.models import GateRequest
    from honesteval.project.loader import load_project
    from honesteval.views.text import gate_plan_notice

    project = tmp_path / "proj"
    honesteval.import_inspect(project, [logs["careful"]], "careful")
    honesteval.import_inspect(project, [logs["quick"]], "quick")
    proj = load_project(project)

    def imported_only(name: str) -> bool:
        plan = prepare_gate(proj, GateRequest(candidate=name, trials=EPOCHS)).screen
        assert best is not None
        return screen_is_imported_only(plan, best_screen_trials(proj, best, plan)[0])

    # no current best yet: promote careful's baseline (imported) through a local gate
    honesteval.gate(project, "careful", trials=EPOCHS, orchestration="local")
    best = read_best(proj)
    assert best is not None and imported_only("quick")
    notice = gate_plan_notice("quick", "careful", 10, EPOCHS, 9, imported_only=True)
    assert "its confirmation needs fresh trials" in notice
    # a candidate honesteval runs itself is no import: nothing to say
    fresh = project / "candidates" / "own"
    fresh.mkdir()
    (fresh / "prompt.txt").write_text("Own words.\n")
    assert not imported_only("own")


ASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match


@task
def {name}() -> Task:  # no sample ids: Inspect numbers them 1..N
    return Task(dataset=[Sample(input=q, target=a) for q, a in {pairs!r}], scorer=match())
"""
SUMS = [("14 + 3", "17"), ("2 + 2", "4")]
CAPITALS = [("capital of France", "Paris"), ("capital of Peru", "Lima")]


def _log_of(tmp: Path, name: str, pairs: list[tuple[str, str]], file: str) -> Path:
    (tmp / file).write_text(ASK.format(name=name, pairs=pairs))
    [log] = inspect_ai.eval(
        f"{tmp / file}@{name}", model="mockllm/model", log_dir=str(tmp / file[:-3]),
        display="none",
    )  # fmt: skip
    assert log.location
    return Path(log.location)


def test_a_log_of_another_task_is_refused_even_when_its_ids_match(tmp_path: Path) -> None:
    root = tmp_path / "arith"
    honesteval.import_inspect(root, [_log_of(tmp_path, "arith", SUMS, "arith.py")], "base")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    other = _log_of(tmp_path, "capitals", CAPITALS, "capitals.py")  # ids 1, 2 as well
    done = run_cli("import", "inspect", str(other), "--project", str(root), "--candidate", "c")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "is a log of task 'capitals', not of the project's 'arith'" in done.stderr
    # the same name over another dataset: its inputs tell
    renamed = _log_of(tmp_path, "arith", CAPITALS, "arith_capitals.py")
    done = run_cli("import", "inspect", str(renamed), "--project", str(root), "--candidate", "c")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "sample 1 asks another question than the project's task 1" in done.stderr
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # nothing written


def test_a_report_row_names_its_inspect_log_and_sample(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    from honesteval.views.html import write_report

    project = tmp_path / "proj"
    result = honesteval.import_inspect(project, [logs["careful"]], "careful").result
    record = Store(project / ".honesteval").read_trials("val", "careful", result.fingerprint)[
        ("q3", 2)
    ]
    log = os.path.relpath(logs["careful"], project)  # where `inspect view` finds it
    assert record.rollout["log"] == log
    assert (record.rollout["sample"], record.rollout["epoch"]) == ("q3", 3)
    page = write_report(project)[0].read_text()
    folder = os.path.dirname(log)
    assert f"<code>{log}</code>, sample <code>q3</code>" in page
    assert f"<code>inspect view --log-dir {folder}</code>" in page


PLAIN = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match


@task
def plain() -> Task:
    return Task(dataset=[Sample(id="a", input="2 + 2", target="4")], scorer=match())
"""


def test_candidates_of_logs_that_ran_other_solvers_differ(tmp_path: Path) -> None:
    from inspect_ai.solver import generate, system_message

    (tmp_path / "plain.py").write_text(PLAIN)

    def log_with(prompt: str) -> Path:
        [log] = inspect_ai.eval(
            f"{tmp_path / 'plain.py'}@plain", model="mockllm/model", display="none",
            solver=[system_message(prompt), generate()], log_dir=str(tmp_path / prompt[:4]),
        )  # fmt: skip
        assert log.location
        return Path(log.location)

    project = tmp_path / "proj"
    careful, quick = log_with("Be careful."), log_with("Be quick.")
    one = honesteval.import_inspect(project, [careful], "careful").result.fingerprint
    other = honesteval.import_inspect(project, [quick], "quick").result.fingerprint
    again = honesteval.import_inspect(project, [careful], "careful-again").result.fingerprint
    assert one != other  # same task and model, another prompt: another candidate
    assert one == again  # the same run: the same candidate
