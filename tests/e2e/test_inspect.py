"""Inspect end to end, offline with ``mockllm/model``: an imported log, then the ``inspect``
adapter running the same task as a target (batched ``eval()`` calls, one per trial index),
then the gate, in this process and through the CLI.

The fixture task (``tests/inspect_fixture/arith_task.py``) answers right by a draw of the
candidate's prompt, the sample, the seed and the epoch; expected values are recomputed from it.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import inspect_ai
import pytest

import honesteval
from honesteval.store.state_dir import Store

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
