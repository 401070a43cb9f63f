"""One trial, no Prefect: statuses, retries of InfraError only, timeouts, bad rewards."""

from __future__ import annotations

import random

import pytest

from honesteval.evaluation.plan import adapter_for, plan_evaluation
from honesteval.evaluation.trial import (
    checked_score,
    run_target_with_retries,
    run_trial_with_retries,
    score_rollout,
)
from honesteval.models import Rollout, Score, Task
from honesteval.retry import RetryPolicy, backoff_delay, parse_retry_after
from tests.helpers import call_counts, stored_trials


def run_one(root, behaviour_index: int = 0, **kw):
    plan = plan_evaluation(root, "base", "val", n_trials=1, **kw)
    spec = plan.todo[behaviour_index]
    sleeps: list[float] = []
    rec = run_trial_with_retries(adapter_for(str(root)), spec, plan.settings, sleep=sleeps.append)
    return rec, sleeps


@pytest.mark.parametrize(
    "behaviour,status,reward,attempts",
    [
        ("pass", "ok", 1.0, 1),
        ("fail", "ok", 0.0, 1),  # a wrong answer is a real 0, never retried
        ("flaky", "ok", 1.0, 3),  # two InfraErrors, then success
        ("infra", "infra_error", None, 4),  # 1 + retries(3)
        ("rate_limited", "infra_error", None, 4),
        # The candidate's own exception (even SystemExit / KeyboardInterrupt raised by the
        # target) is a candidate failure: scored at failure_reward (0.0), never retried.
        ("bug", "failed", 0.0, 1),
        ("exits", "failed", 0.0, 1),
        ("interrupts", "failed", 0.0, 1),
        ("scorer_error", "scorer_error", None, 1),
        ("nan", "scorer_error", None, 1),
    ],
)
def test_trial_outcomes(make_project, behaviour, status, reward, attempts):
    root = make_project([behaviour])
    rec, _ = run_one(root)
    assert (rec.status, rec.reward, rec.attempts) == (status, reward, attempts)
    assert call_counts(root)[("t00", 0)] == attempts
    stored = stored_trials(root, "val", "base")
    assert [(r["task_id"], r["seed"], r["status"]) for r in stored] == [("t00", 0, status)]


def test_errors_are_recorded_with_type_and_message(make_project):
    rec, _ = run_one(make_project(["bug"]))
    assert rec.error == "ValueError: bad value in the target"
    rec, _ = run_one(make_project(["flaky"]))
    assert rec.errors == ["InfraError: blip 1", "InfraError: blip 2"]
    rec, _ = run_one(make_project(["scorer_error"]))
    assert rec.error == "RuntimeError: judge unreachable" and rec.rollout == {
        "answer": "UNGRADEABLE"
    }


def test_failure_reward_is_configurable_and_error_text_kept(make_project):
    rec, _ = run_one(make_project(["bug"], config={"failure_reward": 0.25}))
    assert (rec.status, rec.reward, rec.attempts) == ("failed", 0.25, 1)
    assert rec.error == "ValueError: bad value in the target"
    rec, _ = run_one(make_project(["exits"]))
    assert rec.error == "SystemExit: 3"


def test_hang_times_out_as_a_failure_never_retried(make_project):
    root = make_project(
        tasks=[{"id": "h", "input": {"behaviour": "hang", "hang_s": 3}}],
        config={"timeout_s": 0.2, "retries": 1, "failure_reward": 0.25},
    )
    rec, _ = run_one(root)
    assert (rec.status, rec.reward, rec.attempts, rec.timeout_s) == ("failed", 0.25, 1, 0.2)
    assert rec.error.startswith("TargetTimeout")


def test_hang_times_out_as_infra_error_when_time_is_the_infrastructures(make_project):
    root = make_project(
        tasks=[{"id": "h", "input": {"behaviour": "hang", "hang_s": 3}}],
        config={"timeout_s": 0.2, "retries": 1, "timeout_is": "missing"},
    )
    rec, _ = run_one(root)
    assert rec.status == "infra_error" and rec.attempts == 2
    assert rec.error.startswith("TargetTimeout")


def test_retry_backoff_honours_retry_after(make_project):
    root = make_project(["rate_limited"], config={"retry_backoff_s": 0.001, "retries": 2})
    _, sleeps = run_one(root)
    assert len(sleeps) == 2 and all(s >= 0.01 for s in sleeps)  # Retry-After: 0.01 s


def test_backoff_is_exponential_with_jitter():
    rng = random.Random(0)
    delays = [backoff_delay(a, 1.0, rng=rng) for a in (1, 2, 3, 4)]
    for a, d in zip((1, 2, 3, 4), delays, strict=True):
        assert 0.5 * 2 ** (a - 1) <= d <= 1.5 * 2 ** (a - 1)
    assert backoff_delay(1, 0.0, retry_after=500) == 120.0  # capped


@pytest.mark.parametrize("reward", [float("nan"), float("inf"), -0.1, 1.5, "0.5", True, None])
def test_bad_rewards_are_scorer_errors(reward):
    s = checked_score(Score.model_construct(reward=reward, errored=False))
    assert s.errored and s.reason


def test_python_scorer_values(make_project):
    from honesteval.adapters._python import score_from_value

    assert score_from_value(0.25).reward == 0.25
    assert score_from_value({"reward": 1, "feedback": "ok"}).feedback == "ok"
    assert score_from_value({"errored": True, "reason": "judge down"}).errored
    assert score_from_value({"feedback": "no reward"}).errored
    assert score_from_value("high").errored
    assert score_from_value(float("nan")).errored


def test_scorer_exception_is_an_errored_score(make_project):
    adapter = adapter_for(str(make_project(["pass"])))
    s = score_rollout(
        adapter, Task(id="x", target="yes"), Rollout(output={"answer": "UNGRADEABLE"})
    )
    assert s.errored and "judge unreachable" in (s.reason or "")


@pytest.mark.parametrize(
    "exit_code,status,reward,attempts",
    [
        (0, "ok", 0.5, 1),
        (5, "failed", 0.0, 1),  # the candidate exited non-zero: its failure, never retried
        (75, "infra_error", None, 2),  # listed in infra_exit_codes: retried, then missing data
    ],
)
def test_command_exit_codes(make_project, exit_code, status, reward, attempts):
    code = f"import sys; print(0.5); sys.exit({exit_code})"
    adapter = {
        "kind": "command",
        "command": ["{python}", "-c", code],
        "scorer": "target:score",
        "infra_exit_codes": [75],
    }
    scorer = "def score(task, output):\n    return float(output)\n"
    root = make_project(["pass"], config={"adapter": adapter, "retries": 1}, target_code=scorer)
    rec, _ = run_one(root)
    assert (rec.status, rec.reward, rec.attempts) == (status, reward, attempts)
    if status == "failed":
        assert rec.error.startswith("command exited 5")


def test_one_retry_policy_for_prefect_and_in_process_retries():
    # Prefect gets the same doubling schedule the in-process retries use: 1, 2, 4 s.
    options = RetryPolicy(retries=3, backoff_s=1.0).prefect_options()
    assert options == {
        "retries": 3,
        "retry_delay_seconds": [1.0, 2.0, 4.0],
        "retry_jitter_factor": 0.5,
    }
    assert RetryPolicy(retries=0, backoff_s=0.0).prefect_options()["retry_delay_seconds"] == 0.0
    policy = RetryPolicy(retries=2, backoff_s=0.0)
    assert [policy.allows(a) for a in (1, 2, 3)] == [True, True, False]
    assert policy.delay(1, retry_after=7.0) == 7.0 and policy.delay(1, retry_after=900) == 120.0


@pytest.mark.parametrize(
    "header,seconds", [("5", 5.0), ("0.5", 0.5), ("-3", 0.0), (None, None), ("Wed, 21 Oct", None)]
)
def test_retry_after_header(header, seconds):
    assert parse_retry_after(header) == seconds


def test_a_command_output_that_is_not_utf8_is_noted_in_its_record(make_project):
    # A real child writes "café 42" in Latin-1 (0xe9 is no UTF-8) and two more stray bytes.
    code = r"import sys; sys.stdout.buffer.write(b'\"caf\xe9 42\xff\xfe\"')"
    adapter = {"kind": "command", "command": ["{python}", "-c", code], "scorer": "target:score"}
    scorer = "def score(task, output):\n    return float(output == 'caf\\ufffd 42\\ufffd\\ufffd')\n"
    root = make_project(["pass"], config={"adapter": adapter}, target_code=scorer)
    rec, _ = run_one(root)
    assert (rec.status, rec.reward, rec.rollout) == ("ok", 1.0, "caf\ufffd 42\ufffd\ufffd")
    # 3 bytes replaced; the first, 0xe9, is byte 4 of stdout (after '"caf').
    assert rec.notes == [
        "stdout: 3 bytes not UTF-8 replaced by U+FFFD (the first, 0xe9, at byte 4)"
    ]


def test_a_utf8_command_output_has_no_note(make_project):
    code = "print('\"caf\\u00e9\"')"
    adapter = {"kind": "command", "command": ["{python}", "-c", code], "scorer": "target:score"}
    scorer = "def score(task, output):\n    return float(output == 'caf\\u00e9')\n"
    root = make_project(["pass"], config={"adapter": adapter}, target_code=scorer)
    rec, _ = run_one(root)
    assert (rec.reward, rec.notes) == (1.0, [])


def test_a_rollout_stored_cut_before_its_score_runs_again_and_is_never_graded_cut(make_project):
    big = "def run(task, candidate_dir, seed):\n    return '42' + 'x' * 2_000_000\n"
    big += "def score(task, output):\n    return float(output == '42' + 'x' * 2_000_000)\n"
    root = make_project(["pass"], target_code=big)
    plan = plan_evaluation(root, "base", "val", n_trials=1)
    # The run stops between the target and its scorer: the rollout is stored, cut.
    stored = run_target_with_retries(adapter_for(str(root)), plan.todo[0], plan.settings)
    assert stored.status == "scorer_error" and "cut to the first" in stored.notes[0]
    again = plan_evaluation(root, "base", "val", n_trials=1)
    assert again.to_score == [] and [s.seed for s in again.todo] == [plan.todo[0].seed]
    rec, _ = run_one(root)
    assert (rec.status, rec.reward) == ("ok", 1.0)
