"""Issue 28 §2: a rerun that runs no target is not a flow run, even with a server up."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.helpers import run_cli


def _evaluate_runs(since: datetime) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterStartTime,
    )

    with get_client(sync_client=True) as client:
        return len(
            client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    name=FlowRunFilterName(any_=["evaluate-base-val"]),
                    start_time=FlowRunFilterStartTime(after_=since),
                )
            )
        )


@pytest.mark.quick
def test_a_rerun_with_a_server_up_prints_the_stored_result_without_a_flow_run(
    make_project, cli_env
):
    root = make_project(["pass", "fail", "pass"], config={"trials": 2})
    args = ["evaluate", "--project", str(root), "--candidate", "base", "--json"]
    since = datetime.now(UTC)
    first = run_cli(*args, env=cli_env)
    assert first.returncode == 0, first.stderr
    assert _evaluate_runs(since) == 1
    again = run_cli(*args, env=cli_env)  # the long-lived server is still up
    assert again.returncode == 0, again.stderr
    assert "all 6 trials reused from disk: no Prefect flow run" in again.stderr
    assert "using the Prefect server" not in again.stderr  # not even asked
    assert _evaluate_runs(since) == 1  # the UI keeps the run that produced the trials
    one, two = json.loads(first.stdout), json.loads(again.stdout)
    assert two["trials_reused"] == 6
    assert (two["reward"], two["coverage"]) == (one["reward"], one["coverage"]) == (2 / 3, 1.0)
