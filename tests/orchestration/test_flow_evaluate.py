"""The `evaluate` flow end to end on a real (temporary) Prefect server."""

from __future__ import annotations

import json

import pytest
from prefect.exceptions import ParameterTypeError

from honesteval.errors import SealedSplitError
from honesteval.evaluation.plan import plan_evaluation
from honesteval.orchestration.flows import evaluate
from tests.helpers import call_counts, stored_trials
from tests.prefect_reads import artifacts, events, flow_run_logs, latest_artifact, task_runs

pytestmark = pytest.mark.usefixtures("prefect_backend")

FAULTS = ["pass", "fail", "infra", "scorer_error", "flaky", "bug", "hang", "nan"]
EXPECTED_STATUS = {
    "t00": "ok",
    "t01": "ok",
    "t02": "infra_error",
    "t03": "scorer_error",
    "t04": "ok",
    "t05": "failed",
    "t06": "infra_error",
    "t07": "scorer_error",
}
EXPECTED_ATTEMPTS = {"t00": 1, "t01": 1, "t02": 4, "t03": 1, "t04": 3, "t05": 1, "t06": 4, "t07": 1}


def fault_project(make_project):
    tasks = [
        {"id": f"t{i:02d}", "input": {"behaviour": b, "hang_s": 2}, "target": "yes"}
        for i, b in enumerate(FAULTS)
    ]
    # timeout_s well above a loaded machine's scheduling delays (a timed-out first attempt
    # of a quick target would be retried), well below the hang. The hang is the
    # infrastructure's here (timeout_is: missing), so Prefect's retries of it are tested; a
    # hang as the candidate's failure (the default) is tested in test_timeout_is.py.
    return make_project(
        tasks=tasks, config={"timeout_s": 1.0, "trials": 2, "timeout_is": "missing"}
    )


@pytest.mark.parametrize("batch_size", [None, 3], ids=["per-trial", "batched"])
def test_trial_outcomes_through_the_flow(make_project, batch_size):
    root = fault_project(make_project)
    state = evaluate(str(root), "base", "val", batch_size=batch_size, return_state=True)
    r = state.result(raise_on_failure=False)
    # pass: 1, fail: 0, flaky: 1 (after two InfraErrors) are scored; bug (the candidate's own
    # ValueError) is a candidate failure scored 0.0 and counted; the rest are missing data.
    assert r.reward == pytest.approx(2 / 4)
    assert (r.n_tasks, r.n_scored, r.coverage) == (8, 4, 4 / 8)
    assert (r.trials_ok, r.trials_failed, r.trials_infra_error, r.trials_scorer_error) == (
        6,
        2,
        4,
        4,
    )
    assert {t.id: t.statuses[0] for t in r.per_task} == EXPECTED_STATUS
    assert all(len(set(t.statuses)) == 1 for t in r.per_task)
    # Coverage 3/8 < 0.6: a Failed-type state named LowCoverage, the result in one line.
    # Rewards of the scored tasks 1, 0, 1: mean 2/3, sd sqrt(1/3), SE sd/sqrt(3) = 1/3.
    assert state.is_failed() and state.name == "LowCoverage"
    assert state.message == (
        "reward 0.50 ± 0.29, coverage 4/8, 2 failed, 4 infra_error, 4 scorer_error "
        "(coverage < 0.60)"
    )
    calls = call_counts(root)
    for tid, attempts in EXPECTED_ATTEMPTS.items():
        assert calls[(tid, 0)] == attempts and calls[(tid, 1)] == attempts, tid


def test_prefect_retries_only_infra_errors(make_project):
    root = fault_project(make_project)
    state = evaluate(str(root), "base", "val", n_trials=1, return_state=True)
    # 8 run_trial + 5 score (the trials with a rollout) + aggregate
    runs = {r.name: r for r in task_runs(state.state_details.flow_run_id, expected=14)}
    assert runs["t02-t0"].run_count == 4  # InfraError: retried 3 times by Prefect
    assert runs["t04-t0"].run_count == 3  # flaky: succeeded on the third run
    assert runs["t05-t0"].run_count == 1  # ValueError: the candidate failed, never retried
    assert runs["t01-t0"].run_count == 1  # a wrong answer: never retried
    # Missing data ends a task run red, named after its cause; graded trials end Completed.
    # The target's fault shows on run_trial; the scorer's on the score task run downstream,
    # which exists only for trials with a rollout.
    run_state = {
        "ok": "Completed",
        "failed": "Completed",  # the candidate's own failure is a graded result
        "infra_error": "InfraError",
        "scorer_error": "Completed",
    }
    score_state = {"ok": "Completed", "scorer_error": "ScorerError"}
    for tid, status in EXPECTED_STATUS.items():
        assert runs[f"{tid}-t0"].state.name == run_state[status], tid
        assert runs[f"{tid}-t0"].state.is_failed() == (status == "infra_error"), tid
        scored = runs.get(f"score-{tid}-t0")
        assert (scored is None) == (status in ("infra_error", "failed")), tid
        if scored is not None:
            assert scored.state.name == score_state[status], tid
            assert scored.state.is_failed() == (status == "scorer_error"), tid


def test_spec_coverage_example(make_project):
    root = make_project(["pass", "fail", "infra", "scorer_error"], config={"trials": 1})
    # Coverage 0.5 < 0.6 ends the run Failed (LowCoverage): the result is the state's data.
    r = evaluate(str(root), "base", "val", return_state=True).result(raise_on_failure=False)
    assert (r.reward, r.coverage, len(r.per_task)) == (0.5, 0.5, 4)
    assert "n_trials=1: within-task variance is unmeasured" in r.warnings


def test_seeds_are_base_seed_plus_k_for_every_candidate(make_project):
    root = make_project(["seeded"] * 3, candidates={"a": 0.3, "b": 0.9})
    ra = evaluate(str(root), "a", "val", n_trials=3, base_seed=10)
    rb = evaluate(str(root), "b", "val", n_trials=3, base_seed=10)
    calls = call_counts(root)
    assert sorted(calls) == sorted((f"t{i:02d}", s) for i in range(3) for s in (10, 11, 12))
    assert all(n == 2 for n in calls.values())  # each seed once per candidate
    assert ra.base_seed == rb.base_seed == 10
    records = stored_trials(root)
    assert {(r["trial"], r["seed"]) for r in records} == {(0, 10), (1, 11), (2, 12)}


def test_artifacts_progress_table_summary(make_project):
    root = make_project(["pass", "fail", "infra"], candidates={"My_Cand": 0.5})
    state = evaluate(str(root), "My_Cand", "val", n_trials=2, return_state=True)
    arts = artifacts(state.state_details.flow_run_id)
    assert arts[f"progress-{root.name}-val-my-cand"]["data"] == 100.0
    rows = arts[f"rollouts-{root.name}-val-my-cand"]["data"]
    assert len(rows) == 6
    assert {(row["task"], row["trial"]) for row in rows} == {
        (f"t0{i}", k) for i in range(3) for k in range(2)
    }
    infra = [row for row in rows if row["task"] == "t02"]
    assert all(row["status"] == "infra_error" and row["attempts"] == 4 for row in infra)
    assert all(row["error"] == "InfraError: backend down" for row in infra)
    by_key = {(row["task"], row["trial"]): row for row in rows}
    right, wrong = by_key[("t00", 0)], by_key[("t01", 1)]
    assert (right["reward"], right["feedback"], right["output"]) == (
        1.0,
        "right",
        '{"answer": "yes"}',
    )
    assert (wrong["reward"], wrong["feedback"]) == (0.0, "wrong answer")
    assert infra[0]["output"] == "" and infra[0]["reused"] is False
    # the file column points at the trial log holding the trial's record, relative to the project
    lines = (root / wrong["file"]).read_text().splitlines()
    stored = [json.loads(line) for line in lines if line]
    assert ("t01", 1, "ok") in {(r["task_id"], r["trial"], r["status"]) for r in stored}
    md = arts[f"summary-{root.name}-val-my-cand"]["data"]
    assert "**coverage:** 0.67 (2/3 tasks scored" in md
    assert "2 infra_error" in md and "| 1 |" in md
    # trials missing data above min_coverage: a Completed-type state that says so
    assert state.is_completed() and state.name == "TrialsMissing"


def test_a_run_whose_candidate_failed_trials_says_so_in_its_state_and_summary(make_project):
    """Full coverage and a green run would hide the crash: the state is named TrialsFailed
    and the summary leads with the failed trials, their seeds and errors."""
    root = make_project(["pass", "bug", "pass"], candidates={"crashy": 1.0})
    state = evaluate(str(root), "crashy", "val", n_trials=2, return_state=True)
    assert state.is_completed() and state.name == "TrialsFailed"
    assert state.message == "reward 0.67 ± 0.33, coverage 3/3, 2 failed"  # 1, 0, 1 by hand
    md = artifacts(state.state_details.flow_run_id)[f"summary-{root.name}-val-crashy"]["data"]
    lines = md.splitlines()
    assert lines[2] == "## Trials that did not end ok: 2"
    rows = [line for line in lines if line.startswith("| t01 |")]
    assert rows == [
        "| t01 | 0 | failed | ValueError: bad value in the target |",
        "| t01 | 1 | failed | ValueError: bad value in the target |",
    ]
    assert md.index("| t01 |") < md.index("**reward:**")
    assert "[rollouts](" in md and f"/artifacts/key/rollouts-{root.name}-val-crashy)" in md


def test_two_projects_on_one_server_keep_their_own_artifacts(make_project):
    """The keys name the project: the same candidate of two projects evaluated on one server
    leaves two rollouts tables and two summaries, each of its own project's trials."""
    right = make_project(["pass", "pass"], candidates={"baseline": 1.0}, name="right-proj")
    wrong = make_project(["fail"] * 3, candidates={"baseline": 1.0}, name="wrong-proj")
    for root in (right, wrong):
        evaluate(str(root), "baseline", "val", n_trials=1)
    right_rows = latest_artifact("rollouts-right-proj-val-baseline").data
    wrong_rows = latest_artifact("rollouts-wrong-proj-val-baseline").data
    assert [(r["task"], r["reward"]) for r in json.loads(right_rows)] == [
        ("t00", 1.0),
        ("t01", 1.0),
    ]
    assert [(r["task"], r["reward"]) for r in json.loads(wrong_rows)] == [
        ("t00", 0.0),
        ("t01", 0.0),
        ("t02", 0.0),
    ]
    assert "2/2 tasks scored" in latest_artifact("summary-right-proj-val-baseline").data
    assert "3/3 tasks scored" in latest_artifact("summary-wrong-proj-val-baseline").data


def test_the_runs_last_log_line_is_its_result(make_project):
    """What `prefect deployment run --watch` ends with: the state's one-line result, logged
    at INFO by the flow run's logger after every other line."""
    root = make_project(["pass", "bug", "pass"], candidates={"crashy": 1.0})
    state = evaluate(str(root), "crashy", "val", n_trials=2, return_state=True)
    logs = flow_run_logs(state.state_details.flow_run_id, until=state.message)
    assert logs[-1] == (20, "reward 0.67 ± 0.33, coverage 3/3, 2 failed")  # 1, 0, 1 by hand


def test_low_coverage_emits_event(make_project):
    root = make_project(["pass", "infra", "infra"], name="lowcov-project")
    state = evaluate(str(root), "base", "val", n_trials=1, return_state=True)
    assert state.name == "LowCoverage"
    found = events("honesteval.coverage.low", "honesteval.project.lowcov-project")
    assert found, "no honesteval.coverage.low event"
    payload = found[0]["payload"]
    assert payload["results"][0]["coverage"] == pytest.approx(1 / 3)
    assert payload["min_coverage"] == 0.6


def test_resume_reuses_ok_trials_and_reruns_errored(make_project):
    root = make_project(["pass", "fail", "infra"])
    first = evaluate(str(root), "base", "val")
    before = call_counts(root)
    second = evaluate(str(root), "base", "val")
    after = call_counts(root)
    assert second.trials_reused == 6  # pass and fail: ok trials, reused
    assert {k: after[k] - before[k] for k in after} == {
        ("t00", 0): 0,
        ("t00", 1): 0,
        ("t00", 2): 0,
        ("t01", 0): 0,
        ("t01", 1): 0,
        ("t01", 2): 0,
        ("t02", 0): 4,
        ("t02", 1): 4,
        ("t02", 2): 4,
    }
    assert second.reward == first.reward and second.coverage == first.coverage

    fresh = evaluate(str(root), "base", "val", fresh=True)
    assert fresh.trials_reused == 0

    (root / "candidates" / "base" / "quality.txt").write_text("0.51")  # a new fingerprint
    changed = evaluate(str(root), "base", "val")
    assert changed.trials_reused == 0 and changed.fingerprint != first.fingerprint


def test_concurrency_is_bounded(make_project):
    tasks = [
        {"id": f"s{i}", "input": {"behaviour": "pass", "sleep": 0.05}, "target": "yes"}
        for i in range(12)
    ]
    root = make_project(tasks=tasks)
    evaluate(str(root), "base", "val", n_trials=2, max_concurrency=3)
    peak = int((root / "peak.txt").read_text())
    assert 2 <= peak <= 3


def test_test_split_is_sealed_in_the_core_and_the_flow(make_project):
    root = make_project(["pass"])
    with pytest.raises(SealedSplitError):
        plan_evaluation(root, "base", "test")
    with pytest.raises(ParameterTypeError, match="split"):
        evaluate(str(root), "base", "test")


def test_progress_listeners_see_every_trial_finish(make_project):
    from honesteval.evaluation.progress import Snapshot, listening

    seen: list[tuple[str, int, int, int]] = []

    class Recorder:
        def progress(self, snapshot: Snapshot) -> None:
            graded = sum(snapshot.statuses.values())
            seen.append((snapshot.label, snapshot.done, snapshot.total, graded))

        def announce(self, text: str) -> None:
            pass

    root = make_project(["pass", "fail", "infra"])
    with listening(Recorder()):
        evaluate(str(root), "base", "val", n_trials=2)
    done = [d for _, d, _, _ in seen]
    # every trial's end is heard, in order, and at the end all 6 are graded
    assert done == sorted(done) and sorted(set(done)) == list(range(0, 7))
    assert seen[-1][1:] == (6, 6, 6)
    assert {(label, total) for label, _, total, _ in seen} == {("base on val", 6)}


@pytest.mark.parametrize("batch_size", [None, 2], ids=["per-trial", "batched"])
def test_a_crashed_task_run_is_missing_data_on_disk(make_project, monkeypatch, batch_size):
    import honesteval.orchestration.tasks as tasks_module

    def broken(root, scoring=None):
        raise RuntimeError("worker lost its file system")

    root = make_project(["pass", "pass"])
    monkeypatch.setattr(tasks_module, "adapter_for", broken)
    state = evaluate(str(root), "base", "val", n_trials=2, batch_size=batch_size, return_state=True)
    r = state.result(raise_on_failure=False)
    assert state.name == "LowCoverage" and r.trials_infra_error == 4 and r.reward is None
    records = stored_trials(root)
    assert len(records) == 4
    assert all(rec["status"] == "infra_error" for rec in records)
    assert all("task run crashed: RuntimeError: worker lost" in rec["error"] for rec in records)


@pytest.mark.parametrize("batch_size", [None, 3], ids=["per-trial", "batched"])
def test_the_result_is_the_aggregate_of_every_trial_on_disk(make_project, batch_size):
    """The flow tallies each trial as it finishes and keeps no list of records: its result is,
    field by field, what aggregating every trial of the evaluation read back from the trial
    log gives (a resumed run: reused trials and trials run again)."""
    from honesteval.models import TaskTrials
    from honesteval.project.loader import load_project
    from honesteval.stats import aggregate

    root = fault_project(make_project)
    evaluate(str(root), "base", "val", batch_size=batch_size, return_state=True)
    state = evaluate(str(root), "base", "val", batch_size=batch_size, return_state=True)
    result = state.result(raise_on_failure=False)
    assert state.name == "LowCoverage"

    trials: dict[str, dict[int, dict]] = {}
    for rec in stored_trials(root, "val", "base"):
        if rec["fingerprint"] == result.fingerprint:
            trials.setdefault(rec["task_id"], {})[rec["trial"]] = rec
    ids = [f"t{i:02d}" for i in range(len(FAULTS))]  # the split's order
    inputs = []
    for tid in ids:
        recs = [trials[tid][k] for k in range(2)]
        feedback = [r["feedback"] for r in recs if r.get("feedback")]
        inputs.append(
            TaskTrials(
                id=tid,
                statuses=[r["status"] for r in recs],
                rewards=[r["reward"] for r in recs],
                feedback=feedback[-1] if feedback else None,
            )
        )
    cfg = load_project(root).config
    expected = aggregate(
        inputs,
        None,
        cfg.pass_threshold,
        stderr_method=cfg.stderr_method,
        min_coverage=0.6,
        candidate="base",
        fingerprint=result.fingerprint,
        split="val",
        base_seed=cfg.base_seed,
        n_trials=2,
        failure_reward=cfg.failure_reward,
    )
    # what the run did, not the trials: when, and which trials it took as stored
    run_fields = {"started_at", "finished_at", "wall_s", "scorer"}
    by_hand = {"trials_reused", "trials_ran", "trials_graded", "tokens", "cost", "step_seconds"}
    got = result.model_dump(exclude=run_fields | by_hand)
    assert got == expected.model_dump(exclude=run_fields | by_hand)
    # pass, fail, flaky (ok on its third attempt), bug (failed): counted, reused; the rest ran
    assert (result.trials_reused, result.trials_ran, result.trials_graded) == (8, 8, 0)
    assert (result.tokens, result.cost, result.step_seconds) == (None, None, None)
