"""A target's output larger than what a record keeps is scored as returned, never as stored.

The record keeps at most ``MAX_OUTPUT_BYTES`` of the output (and says it cut it); the scorer
grades the whole output, in process and through Prefect's task runs (one trial a task run,
and batches).
"""

from __future__ import annotations

import json

import pytest

from honesteval import api
from honesteval.evaluation.trial import MAX_OUTPUT_BYTES
from tests.helpers import stored_trials

pytestmark = pytest.mark.usefixtures("prefect_backend")

#: "42" then 5 MiB: the scorer passes only the whole output, so a cut one scores 0.0.
FIVE_MIB = 5 * 2**20
BIG_OUTPUT = f"""
def run(task, candidate_dir, seed):
    return "42" + "x" * {FIVE_MIB}

def score(task, output):
    whole = isinstance(output, str) and output == "42" + "x" * {FIVE_MIB}
    return 1.0 if whole else 0.0
"""


@pytest.fixture
def big_project(make_project):
    tasks = [{"id": f"t{i}", "input": {}} for i in range(2)]
    return make_project(tasks=tasks, target_code=BIG_OUTPUT, config={"trials": 2})


@pytest.mark.parametrize(
    "how",
    [
        {"orchestration": "local"},
        {"orchestration": "prefect"},
        {"orchestration": "prefect", "batch_size": 3},
    ],
    ids=["local", "prefect", "prefect-batches"],
)
def test_a_5_mib_output_scores_as_returned_and_its_record_says_it_was_cut(big_project, how):
    res = api.evaluate(big_project, "base", **how)
    assert res.reward == 1.0 and res.trials_ok == 4 and res.coverage == 1.0
    records = stored_trials(big_project, "val")
    assert len(records) == 4
    whole = len(json.dumps("42" + "x" * FIVE_MIB))  # the output as JSON text, by hand
    for rec in records:
        assert rec["status"] == "ok" and rec["reward"] == 1.0
        assert len(rec["rollout"]) == MAX_OUTPUT_BYTES
        assert rec["notes"] == [
            f"output of {whole} bytes cut to the first {MAX_OUTPUT_BYTES} (as text)"
        ]
