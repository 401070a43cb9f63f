"""Trials on a Dask LocalCluster give the same totals as the thread runner."""

from __future__ import annotations

import pytest

from honesteval.orchestration.flows import evaluate
from tests.orchestration.test_flow_evaluate import FAULTS

pytest.importorskip("prefect_dask", reason="the [dask] extra is installed by `make test`")
pytestmark = [pytest.mark.usefixtures("prefect_backend"), pytest.mark.slow]


@pytest.mark.quick
def test_dask_local_cluster_matches_threads(make_project):
    tasks = [
        {"id": f"t{i:02d}", "input": {"behaviour": b, "hang_s": 2}, "target": "yes"}
        for i, b in enumerate(FAULTS)
    ]
    # the hang as missing data, as in test_flow_evaluate's fault project
    root = make_project(
        tasks=tasks, config={"timeout_s": 0.3, "trials": 2, "timeout_is": "missing"}
    )
    # Coverage 3/8 ends both runs LowCoverage (Failed-type): the result is the state's data.
    on_dask = evaluate(
        str(root),
        "base",
        "val",
        task_runner="dask",
        max_concurrency=2,
        batch_size=4,
        return_state=True,
    ).result(raise_on_failure=False)
    on_threads = evaluate(
        str(root), "base", "val", fresh=True, batch_size=4, return_state=True
    ).result(raise_on_failure=False)

    def totals(r):
        return (
            r.reward,
            r.coverage,
            r.n_scored,
            r.trials_ok,
            r.trials_infra_error,
            r.trials_scorer_error,
            r.trials_failed,
            [(t.id, t.statuses, t.mean) for t in r.per_task],
        )

    assert totals(on_dask) == totals(on_threads)
    # Scored: pass (1), fail (0), flaky (1, after its retries) and bug (a candidate failure: 0).
    assert on_dask.reward == pytest.approx(2 / 4) and on_dask.coverage == 4 / 8


def test_api_gate_runs_its_trials_on_dask_in_batches(make_project):
    """``api.gate`` takes the gate flow's runner settings (it lacked them): the same decision
    on Dask with batches as on threads one trial a task run."""
    from honesteval import ConfigError, api

    tasks = [{"id": f"t{i}", "input": {"behaviour": "pass"}, "target": "yes"} for i in range(4)]
    root = make_project(tasks=tasks, config={"trials": 2})
    on_dask = api.gate(
        root, "base", orchestration="prefect", task_runner="dask", batch_size=3, max_concurrency=2
    )
    assert on_dask.baseline and on_dask.accept
    best = api.load_project(root).state_dir / "best.json"
    assert '"base"' in best.read_text()
    with pytest.raises(ConfigError, match=r"batch.size"):
        api.gate(root, "base", orchestration="prefect", batch_size=0)
