"""A spend budget through ``kind: inspect``, offline with a priced ``mockllm/model``: what a
command reports spent is what Inspect's own logs say its ``eval()`` calls spent (every sample
of a call, kept or not), it passes the cap by one call at most, and no sample is paid twice:
the samples of a call the budget did not let start are stored and graded by the rerun.

The fixture task's mock answers with 10 input and 2 output tokens a sample; priced here at
$1 and $2 a million tokens, a sample costs $0.000014 and 12 tokens, a call of the 8 tasks
$0.000112 and 96 tokens. Spend is read back from the Inspect logs, never from honesteval.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelCost, ModelInfo, set_model_info
from inspect_ai.model._model_info import clear_model_info_cache

import honesteval
from honesteval.models import Budget
from honesteval.store.state_dir import Store
from tests.helpers import run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "inspect_fixture"
QUESTIONS = [f"q{i}" for i in range(8)]
SAMPLE_USD, SAMPLE_TOKENS = 10 * 1e-6 + 2 * 2e-6, 12
CALL_USD, CALL_TOKENS = 8 * SAMPLE_USD, 8 * SAMPLE_TOKENS


@pytest.fixture(autouse=True)
def priced_mock() -> Iterator[None]:
    """``mockllm/model`` priced at $1 / $2 a million input / output tokens (Inspect has no
    price for it otherwise)."""
    cost = ModelCost(input=1.0, output=2.0, input_cache_write=0.0, input_cache_read=0.0)
    set_model_info("mockllm/model", ModelInfo(cost=cost))
    yield
    clear_model_info_cache()


def _project(root: Path) -> Path:
    (root / "candidates" / "quick").mkdir(parents=True)
    (root / "candidates" / "quick" / "prompt.txt").write_text("Answer fast.\n")
    rows = [f'{{"id": "{q}", "metadata": {{"inspect_id": "{q}"}}}}' for q in QUESTIONS]
    (root / "tasks.jsonl").write_text("\n".join(rows) + "\n")
    config = {
        "name": "arith",
        "tasks": "tasks.jsonl",
        "splits": {"train": 0.0, "val": 1.0, "test": 0.0},
        "adapter": {
            "kind": "inspect",
            "task": f"{FIXTURE / 'arith_task.py'}@arith",
            "model": "mockllm/model",
        },
        "trials": 3,
    }
    (root / "honesteval.yaml").write_text(yaml.safe_dump(config))
    return root


def _inspect_spend(root: Path) -> tuple[float, int, Counter[tuple[str, int | None]]]:
    """What the project's Inspect logs say was spent, and how often each (sample, seed) ran."""
    usd, tokens, runs = 0.0, 0, Counter[tuple[str, int | None]]()
    for path in sorted((root / ".honesteval" / "inspect-logs").glob("*.eval")):
        log = read_eval_log(str(path))
        assert log.stats is not None and log.plan is not None
        for usage in log.stats.model_usage.values():
            usd += usage.total_cost or 0.0
            tokens += usage.total_tokens
        runs.update((str(s.id), log.plan.config.seed) for s in log.samples or [])
    return usd, tokens, runs


def test_a_usd_budget_counts_every_sample_of_a_call_and_none_twice(tmp_path: Path) -> None:
    root = _project(tmp_path)
    cap = 0.0002  # a call and a bit: the second call passes it
    first = honesteval.evaluate(root, "quick", budget=Budget(usd=cap), orchestration="local")
    usd, _, runs = _inspect_spend(root)
    assert usd == pytest.approx(2 * CALL_USD)  # seed 0's call, then seed 1's
    assert first.budget is not None and first.budget.spent_usd == pytest.approx(usd)
    assert usd - cap < CALL_USD  # past the cap by less than one call
    assert set(runs.values()) == {1}
    kept = first.trials_planned - first.trials_not_started
    assert 8 < kept <= 16  # seed 0 whole, seed 1 as far as the budget let it (the rest stored)

    again = honesteval.evaluate(root, "quick", budget=Budget(usd=1.0), orchestration="local")
    usd, _, runs = _inspect_spend(root)
    assert usd == pytest.approx(3 * CALL_USD)  # only seed 2 ran: seed 1's rest was stored
    assert sorted(runs) == sorted((q, seed) for q in QUESTIONS for seed in (0, 1, 2))
    assert set(runs.values()) == {1}  # no sample paid twice
    assert again.budget is None and again.coverage == 1.0
    assert again.trials_ran == 8  # seed 2; seed 1's stored rollouts were graded, not run


def test_a_token_budget_counts_the_whole_call(tmp_path: Path) -> None:
    root = _project(tmp_path)
    first = honesteval.evaluate(root, "quick", budget=Budget(tokens=100), orchestration="local")
    _, tokens, runs = _inspect_spend(root)
    assert tokens == CALL_TOKENS  # 96: the first call fills the cap, nothing else starts
    assert first.budget is not None and first.budget.spent_tokens == CALL_TOKENS
    assert first.trials_planned - first.trials_not_started == 1
    again = honesteval.evaluate(root, "quick", trials=1, orchestration="local")
    _, tokens, runs = _inspect_spend(root)
    assert tokens == CALL_TOKENS and set(runs.values()) == {1}  # seed 0's 7 others: graded
    assert again.coverage == 1.0
    # each trial names the log and sample its transcript is in (`inspect view`)
    stored = Store(root / ".honesteval").read_trials("val", "quick", again.fingerprint)
    for (task_id, _), record in stored.items():
        log = read_eval_log(str(root / record.rollout["log"]))
        assert record.rollout["sample"] == task_id
        assert task_id in {s.id for s in log.samples or []}


def test_a_usd_budget_on_a_model_inspect_cannot_price_is_refused_before_anything_runs(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    clear_model_info_cache()  # mockllm unpriced, as Inspect ships it
    root = _project(tmp_path)
    done = run_cli(
        "evaluate", "--project", str(root), "--candidate", "quick", "--budget-usd", "1.0",
        env=cli_env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "a USD budget cannot bind: Inspect has no price for mockllm/model" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (root / ".honesteval" / "inspect-logs").exists()  # no eval() ran
    said: list[str] = []
    result = honesteval.evaluate(
        root, "quick", trials=1, budget=Budget(usd=1.0, tokens=10_000), orchestration="local",
        echo=said.append,
    )  # fmt: skip
    assert said[0].startswith("the USD budget cannot bind (Inspect has no price for mockllm")
    assert result.coverage == 1.0
