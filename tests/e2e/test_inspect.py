"""Inspect end to end, offline with ``mockllm/model``: an imported log, then the ``inspect``
adapter running the same task as a target (batched ``eval()`` calls, one per trial index),
then the gate, in this process and through the CLI.

The fixture task (``tests/inspect_fixture/arith_task.py``) answers right by a draw of the
candidate's prompt, the sample, the seed and the epoch; expected values are recomputed from it.
"""

from __future__ import annotations

import re
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import inspect_ai
import pytest

import honesteval
from honesteval.store.state_dir import Store
from tests.helpers import run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "inspect_fixture"
sys.path.insert(0, str(FIXTURE))
from arith_task import right  # noqa: E402

TASK = f"{FIXTURE / 'arith_task.py'}@arith"
QUESTIONS = [f"q{i}" for i in range(8)]
CAREFUL, QUICK = "Be careful: check the sum.", "Answer fast."


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project made by importing one real log of the careful prompt (2 epochs)."""
    tmp = tmp_path_factory.mktemp("inspect")
    prompt = tmp / "careful"
    prompt.mkdir()
    (prompt / "prompt.txt").write_text(CAREFUL + "\n")
    [log] = inspect_ai.eval(
        TASK,
        model="mockllm/model",
        task_args={"candidate_dir": str(prompt)},
        epochs=2,
        log_dir=str(tmp / "logs"),
        display="none",
        fail_on_error=False,
        retry_on_error=0,
    )
    assert log.location
    root = tmp / "proj"
    honesteval.import_inspect(root, [log.location], "careful")
    with (root / "honesteval.yaml").open("a") as fh:  # boom's faults: retried once, at once
        fh.write("retries: 1\nretry_backoff_s: 0.0\n")
    quick = root / "candidates" / "quick"
    quick.mkdir()
    (quick / "prompt.txt").write_text(QUICK + "\n")
    return root


def _inspect_logs(root: Path) -> list[Path]:
    return sorted((root / ".honesteval" / "inspect-logs").glob("*.eval"))


@pytest.mark.quick
def test_the_adapter_runs_one_eval_per_trial_index(project: Path) -> None:
    before = len(_inspect_logs(project))
    result = honesteval.evaluate(project, "quick", trials=3, orchestration="local")
    # one eval() per seed over every task, then boom's one retry (an InfraError) alone
    assert len(_inspect_logs(project)) - before == 3 + 3
    assert (result.n_tasks, result.n_scored, result.trials_ran) == (10, 9, 30)
    assert result.trials_infra_error == 3 and result.trials_failed == 3
    means = [statistics.mean(float(right(QUICK, q, seed)) for seed in (0, 1, 2)) for q in QUESTIONS]
    assert result.reward == pytest.approx(statistics.mean([*means, 0.0]))


def test_imported_trials_are_reused_and_only_the_missing_run(project: Path) -> None:
    before = len(_inspect_logs(project))
    result = honesteval.evaluate(project, "careful", trials=2, orchestration="local")
    # 9 counted tasks x 2 epochs imported; boom (missing data) runs again, alone, and errs
    assert (result.trials_reused, result.trials_ran) == (18, 2)
    assert len(_inspect_logs(project)) - before == 2 * 2  # boom at 2 seeds, retried once
    assert result.trials_infra_error == 2
    trials = Store(project / ".honesteval").read_trials("val", "careful", result.fingerprint)
    assert trials[("q0", 0)].imported and trials[("boom", 0)].imported is None


DOCS = Path(__file__).resolve().parents[2] / "docs" / "inspect.md"


def five_commands() -> list[list[str]]:
    """The walk-through's commands, read from docs/inspect.md (the docs cannot drift)."""
    text = DOCS.read_text()
    section = text[text.index("## From a log to a gate decision") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def _inspect_cli(cwd: Path, prompt: str, log: str) -> None:
    """One run of the Inspect CLI, as a user ran it, its log moved to ``logs/<log>``."""
    inspect = Path(sys.executable).with_name("inspect")
    run = subprocess.run(
        [str(inspect), "eval", "arith.py@arith", "--model", "mockllm/model", "-T",
         f"candidate_dir={prompt}", "--epochs", "3", "--log-dir", f"runs/{log}",
         "--display", "none", "--no-fail-on-error", "--retry-on-error", "0"],
        cwd=cwd, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    [written] = (cwd / "runs" / log).glob("*.eval")
    (cwd / "logs").mkdir(exist_ok=True)
    shutil.move(written, cwd / "logs" / f"{log}.eval")


def test_the_docs_walk_through_from_logs_to_a_gate(tmp_path: Path, cli_env: dict[str, str]) -> None:
    shutil.copy(FIXTURE / "arith_task.py", tmp_path / "arith.py")
    for name, text in (("baseline", QUICK), ("careful", CAREFUL)):
        (tmp_path / "prompts" / name).mkdir(parents=True)
        (tmp_path / "prompts" / name / "prompt.txt").write_text(text + "\n")
        _inspect_cli(tmp_path, f"prompts/{name}", name)
    commands = five_commands()
    assert [c[:2] for c in commands] == [["honesteval", "import"]] * 2 + [
        ["honesteval", "compare"],
        ["honesteval", "gate"],
        ["honesteval", "gate"],
    ]
    outputs = []
    for i, command in enumerate(commands):
        done = run_cli(*command[1:], env=cli_env, cwd=tmp_path, timeout=600)
        outputs.append(done)
        assert done.returncode in (0, 1, 3), done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        if i == 0:  # not the walk-through: boom's faults retried once, at once (test time)
            with (tmp_path / "evals" / "honesteval.yaml").open("a") as fh:
                fh.write("retries: 1\nretry_backoff_s: 0.0\n")
    first, second, compared, baseline, gated = outputs
    assert "created project evals" in first.stderr and first.returncode == 0
    assert "imported 30 trials of careful" in second.stderr
    careful = [
        statistics.mean(float(right(CAREFUL, q, None, e)) for e in (1, 2, 3)) for q in QUESTIONS
    ]
    quick = [statistics.mean(float(right(QUICK, q, None, e)) for e in (1, 2, 3)) for q in QUESTIONS]
    delta = statistics.mean([c - b for c, b in zip(careful, quick, strict=True)] + [0.0])
    assert f"paired Δ {delta:+.4f}" in compared.stdout
    assert baseline.returncode == 0 and baseline.stdout.startswith("BASELINE: baseline")
    # the challenger: screened on the imported trials, confirmed on fresh ones run by Inspect
    assert gated.stdout.startswith("# Gate: ")
    assert "| Δ | SE |" in gated.stdout and "coverage" in gated.stdout
    assert "its confirmation needs fresh trials" in gated.stderr
    # both sides' trials by status, failed ones included (long fails every epoch)
    trials_row = r"\| trials \| (\d+) ok, (\d+) failed, .*? of \d+ \| (\d+) ok, (\d+) failed"
    counts = re.search(trials_row, gated.stdout)
    assert counts is not None and int(counts[2]) > 0 and int(counts[4]) > 0
    assert list((tmp_path / "evals" / ".honesteval" / "inspect-logs").glob("*.eval"))
    verdict = {0: "ACCEPT", 1: "REJECT", 3: "INDECISIVE"}[gated.returncode]
    assert gated.stdout.startswith(f"# Gate: {verdict}")


def test_a_fresh_evaluation_runs_the_stored_tasks_in_the_seeds_batch(project: Path) -> None:
    again = project / "candidates" / "again"
    again.mkdir()
    (again / "prompt.txt").write_text("Answer in one go.\n")
    before = len(_inspect_logs(project))
    honesteval.evaluate(project, "again", trials=1, orchestration="local")
    first = len(_inspect_logs(project)) - before
    fresh = honesteval.evaluate(project, "again", trials=1, orchestration="local", fresh=True)
    # nothing reused: the seed's one eval() takes all ten tasks again, not one call a task
    assert (fresh.trials_reused, fresh.trials_ran) == (0, 10)
    assert first == 1 + 1  # the seed's batch, then boom's one retry alone
    assert len(_inspect_logs(project)) - before - first == 1 + 1
