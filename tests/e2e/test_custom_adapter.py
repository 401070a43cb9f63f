"""``kind: custom``: a user's own adapter class, run through the CLI as a user would."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_cli

# A user's adapter module, written into the throw-away project. Task "steady" always earns
# 1.0; task "coin" earns offset + 0.5 * (seed % 2); task "down" is an outage (InfraError).
USER_ADAPTER = """
from honesteval import InfraError
from honesteval.models import Rollout, Score


class MyAdapter:
    def __init__(self, offset):
        self.offset = offset

    def run_target(self, task, candidate, *, seed):
        if task.id == "down":
            raise InfraError("backend down")
        return Rollout(output={"task": task.id, "seed": seed, "candidate": candidate.name})

    def score(self, task, rollout):
        if rollout.output["task"] == "steady":
            return Score(reward=1.0, feedback="steady")
        return Score(reward=self.offset + 0.5 * (rollout.output["seed"] % 2))


class NoScore:
    def run_target(self, task, candidate, *, seed):
        return {"seed": seed}


def not_a_class(task, candidate, *, seed):
    return None
"""


def _custom_project(make_project, adapter: dict[str, object]):
    tasks = [{"id": tid, "input": tid} for tid in ("coin", "steady", "down")]
    root = make_project(
        tasks=tasks, config={"adapter": adapter, "trials": 2, "base_seed": 0, "retries": 0}
    )
    (root / "myadapter.py").write_text(USER_ADAPTER)
    return root


@pytest.mark.quick
@pytest.mark.slow
def test_custom_adapter_class_runs_and_scores_through_the_cli(make_project, cli_env):
    root = _custom_project(
        make_project,
        {"kind": "custom", "target": "myadapter:MyAdapter", "options": {"offset": 0.25}},
    )
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", "--json", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    # coin: seeds 0 and 1 -> 0.25 and 0.75, mean 0.5; steady: 1.0; down: unscored.
    assert result["n_tasks"] == 3 and result["n_scored"] == 2
    assert result["reward"] == pytest.approx((0.5 + 1.0) / 2)
    assert result["trials_ok"] == 4 and result["trials_infra_error"] == 2
    per_task = {t["id"]: t for t in result["per_task"]}
    assert per_task["coin"]["mean"] == pytest.approx(0.5)
    assert per_task["down"]["n_ok"] == 0


@pytest.mark.parametrize(
    "adapter,message",
    [
        (
            {"kind": "custom", "target": "myadapter:NoScore"},
            "adapter kind 'custom' brings no scorer",
        ),
        ({"kind": "custom", "target": "myadapter:not_a_class"}, "must be a class"),
        (
            {"kind": "custom", "target": "myadapter:MyAdapter"},
            "building adapter 'myadapter:MyAdapter' raised TypeError",
        ),
        ({"kind": "custom", "target": "myadapter"}, "adapter.target: Value error, must look like"),
        ({"kind": "custom"}, "adapter.target: adapter kind 'custom' needs 'target'"),
        ({"kind": "command", "command": "x", "model": "m"}, "adapter.model: unknown key"),
    ],
)
def test_bad_custom_adapter_is_one_line_exit_2(make_project, adapter, message):
    root = _custom_project(make_project, adapter)
    proc = run_cli("check", "--project", str(root))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (root / ".honesteval" / "trials").exists()
