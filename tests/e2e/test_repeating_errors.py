"""Errors that repeat per seed (a content filter) through the ``inspect`` adapter and a whole
gate: each errored trial is retried once, in the next round, then left missing; each round
makes one ``eval()`` per side and seed; and the gate ends ACCEPT or INDECISIVE, never a
REJECT bought by the missing trials. The errors are recomputed from the fixture's hash."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import honesteval
from honesteval.models import trial_seed

FIXTURE = Path(__file__).resolve().parents[1] / "inspect_fixture"
sys.path.insert(0, str(FIXTURE))
from filtered_task import refused  # noqa: E402

PROMPTS = {"quick": "Answer fast.", "careful": "Be careful: check the sum."}
SAMPLES = [f"q{i}" for i in range(10)]


def filtered_project(root: Path) -> Path:
    (root / "filtered.py").write_text((FIXTURE / "filtered_task.py").read_text())
    (root / "tasks.jsonl").write_text("".join(json.dumps({"id": s}) + "\n" for s in SAMPLES))
    config = {
        "name": "filtered",
        "tasks": "tasks.jsonl",
        "splits": {"train": [], "val": SAMPLES, "test": []},
        "adapter": {"kind": "inspect", "task": "filtered.py@filtered", "model": "mockllm/model"},
        "trials": 3,
        "retries": 0,
        "retry_backoff_s": 0.0,
    }
    (root / "honesteval.yaml").write_text(json.dumps(config))
    for name, prompt in PROMPTS.items():
        (root / "candidates" / name).mkdir(parents=True)
        (root / "candidates" / name / "prompt.txt").write_text(prompt + "\n")
    return root


def eval_calls(root: Path) -> int:
    """The ``eval()`` calls made so far: Inspect writes one log each."""
    return len(list((root / ".honesteval" / "inspect-logs").glob("*.eval")))


def test_errors_repeating_per_seed_are_retried_once_and_cost_one_call_per_round_and_side(
    tmp_path: Path,
) -> None:
    root = filtered_project(tmp_path)
    honesteval.gate(root, "quick", orchestration="local")  # the baseline
    before = eval_calls(root)
    d = honesteval.gate(root, "careful", orchestration="local")
    calls = eval_calls(root) - before
    assert d.stage == "confirm" and d.confirm_rounds is not None
    assert d.accept or d.indecisive  # the missing trials never make a REJECT
    # the seeds this call ran: the screen's rounds (every task at base seed + k) and the
    # confirmation's (each task at its own seeds, honesteval.models.trial_seed)
    screen_rounds = d.screen_round or 3
    confirm = [
        (s, trial_seed(d.confirm_base_seed, s, r, "per_task"))
        for s in SAMPLES
        for r in range(d.confirm_rounds)
    ]
    ran = [(s, seed) for s in SAMPLES for seed in range(screen_rounds)] + confirm
    refusals = sum(refused(p, s, seed) for p in PROMPTS.values() for s, seed in ran)
    assert refusals > 0  # the world has them (8 % of samples)
    # one eval() a round, side and seed (the screen's round has one seed, the confirmation's
    # one a task), and each refused trial retried at most once, alone
    batches = 2 * (screen_rounds + len(SAMPLES) * d.confirm_rounds)
    assert calls <= batches + refusals
    if d.indecisive:
        assert d.confirm_short in ("budget", "missing") and d.confirm_settle is not None
