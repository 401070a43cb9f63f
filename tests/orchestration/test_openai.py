"""The openai target and judge against a real HTTP server on 127.0.0.1 (SPEC §5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honesteval.evaluation.plan import plan_evaluation
from tests.fake_openai import fake_openai
from tests.helpers import run_plain, stored_trials

KEY = "sk-test-SECRET-4242"
GRADER = (
    "def score(task, output):\n"
    "    return {'reward': 1.0 if str(task['target']) in output else 0.0}\n"
)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("HONESTEVAL_TEST_KEY", KEY)
    with fake_openai() as fake:
        yield fake


def openai_project(
    make_project,
    server,
    *,
    model="m-ok",
    judge=None,
    evaluation=None,
    scorer=True,
    config=None,
    trials=1,
):
    adapter = {
        "kind": "openai",
        "base_url": server.base_url,
        "model": model,
        "api_key_env": "HONESTEVAL_TEST_KEY",
        "temperature": 0.7,
    }
    if scorer:
        adapter["scorer"] = "target:score"
    cfg = {
        "adapter": adapter,
        "trials": trials,
        "retries": 2,
        "retry_backoff_s": 0.0,
        "timeout_s": 1.0,
    }
    if judge is not None:
        cfg["judge"] = {
            "base_url": server.base_url,
            "model": judge,
            "api_key_env": "HONESTEVAL_TEST_KEY",
            "retries": 2,
            "retry_backoff_s": 0.0,
            "timeout_s": 1.0,
        }
    if evaluation is not None:
        cfg["evaluation"] = evaluation
    cfg.update(config or {})
    tasks = [
        {"id": "q1", "input": {"question": "2+2"}, "target": "4"},
        {"id": "q2", "input": {"question": "3+3"}, "target": "6"},
    ]
    root = make_project(tasks=tasks, config=cfg, target_code=GRADER)
    cand = root / "candidates" / "base"
    (cand / "prompt.md").write_text("Answer briefly: {input[question]}")
    return root


def run_all(root):
    return run_plain(root)


@pytest.mark.quick
def test_target_forwards_seed_temperature_and_key(make_project, server):
    server.content = lambda body: (
        "The answer is " + {"2+2": "4", "3+3": "6"}[body["messages"][-1]["content"].split(": ")[1]]
    )
    root = openai_project(make_project, server, config={"base_seed": 40}, trials=2)
    records, result = run_all(root)
    assert [r.status for r in records] == ["ok"] * 4 and result.reward == 1.0
    bodies = [r["body"] for r in server.requests]
    assert sorted(b["seed"] for b in bodies) == [40, 40, 41, 41]
    assert {b["temperature"] for b in bodies} == {0.7} and {b["model"] for b in bodies} == {"m-ok"}
    assert bodies[0]["messages"][-1]["content"] in ("Answer briefly: 2+2", "Answer briefly: 3+3")
    assert {r["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
    assert records[0].rollout.startswith("The answer is") and records[0].tokens == 15
    assert result.tokens == 60


def test_target_rate_limit_then_ok(make_project, server):
    server.script["m-ok"] = ["429", "429"]
    root = openai_project(make_project, server)
    records, _ = run_all(root)
    first = records[0]
    assert first.status == "ok" and first.attempts == 3
    assert first.errors == [f"RateLimited: {server.base_url}/chat/completions: HTTP 429"] * 2


@pytest.mark.parametrize(
    "behaviour,error",
    [("500", "InfraError"), ("hang", "ServiceTimeout"), ("malformed", "malformed chat")],
)
def test_target_faults_end_as_infra_error_after_retries(make_project, server, behaviour, error):
    server.hang_s = 2.0
    server.script["m-bad"] = [behaviour] * 10
    root = openai_project(make_project, server, model="m-bad")
    records, result = run_all(root)
    assert {r.status for r in records} == {"infra_error"}
    assert records[0].attempts == 3 and error in records[0].error
    assert result.coverage == 0.0


JUDGE_EVAL = {
    "steps": [
        {"prompt": "evaluation/judge", "immutable": "evaluation/rubric.md", "name": "assess"}
    ],
    "failure_score": {"score": 0.0},
}


def judge_project(make_project, server, judge_model="j-ok", evaluation=JUDGE_EVAL, files=None):
    root = openai_project(
        make_project, server, judge=judge_model, evaluation=evaluation, scorer=False
    )
    (root / "evaluation" / "judge").mkdir(parents=True)
    (root / "evaluation" / "judge" / "ENTRYPOINT.md").write_text("You grade answers.")
    (root / "evaluation" / "rubric.md").write_text("Full marks for the right number.")
    for rel, text in (files or {}).items():
        (root / rel).write_text(text)
    return root


def test_judge_verdict_is_merged_into_score_yaml(make_project, server):
    def content(body):
        if body["model"] == "j-ok":
            assert "Full marks for the right number." in body["messages"][0]["content"]
            assert "You grade answers." in body["messages"][0]["content"]
            return 'Looks right.\n```yaml\nscore: 0.9\nsummary: "correct"\n```\n'
        return "4"

    server.content = content
    root = judge_project(make_project, server)
    records, result = run_all(root)
    assert [r.status for r in records] == ["ok", "ok"]
    assert records[0].reward == 0.9 and records[0].feedback == "correct"
    assert records[0].tokens == 30  # target 15 + judge 15
    ws = Path(records[0].score["details"]["workspace"])
    assert "score: 0.9" in (ws / "logs/evaluate/score.yaml").read_text()
    assert (ws / "logs/evaluate/steps/step_01_assess/status.txt").read_text().startswith("ok\n")
    assert result.tokens == 60


def test_judge_json_verdict(make_project, server):
    server.content = lambda b: '```json\n{"score": 0.25}\n```' if b["model"] == "j-ok" else "x"
    records, _ = run_all(judge_project(make_project, server))
    assert records[0].reward == 0.25


@pytest.mark.parametrize(
    "behaviours,reason",
    [
        (["429"] * 5, "judge unreachable after 3 attempt(s): RateLimited"),
        (["500"] * 5, "judge unreachable after 3 attempt(s): InfraError"),
        (["hang"] * 5, "judge unreachable after 3 attempt(s): ServiceTimeout"),
        (["malformed"] * 5, "judge unreachable after 3 attempt(s): InfraError"),
        (["noverdict"], "judge step 'assess': no verdict"),
    ],
)
def test_judge_faults_are_scorer_errors(make_project, server, behaviours, reason):
    server.script["j-bad"] = list(behaviours)
    root = judge_project(make_project, server, judge_model="j-bad")
    records, _ = run_all(root)
    assert records[0].status == "scorer_error" and reason in records[0].error
    assert records[0].score["details"]["failure_score"] == {"score": 0.0}


def test_judge_recovers_from_one_rate_limit(make_project, server):
    server.script["j-ok"] = ["429"]
    server.content = lambda b: "```yaml\nscore: 1.0\n```" if b["model"] == "j-ok" else "x"
    records, _ = run_all(judge_project(make_project, server))
    assert records[0].status == "ok" and records[0].reward == 1.0


def test_a_rubric_changed_by_a_shell_step_fails_the_trial(make_project, server):
    server.content = lambda b: "```yaml\nscore: 1.0\n```" if b["model"] == "j-ok" else "x"
    tamper = 'echo "Everything gets full marks." > "$HONESTEVAL_PROJECT/evaluation/rubric.md"\n'
    evaluation = {
        "steps": ["evaluation/tamper.sh", *JUDGE_EVAL["steps"]],
        "failure_score": {"score": 0.0},
    }
    root = judge_project(
        make_project, server, evaluation=evaluation, files={"evaluation/tamper.sh": tamper}
    )
    records, _ = run_all(root)
    assert records[0].status == "failed" and records[0].reward == 0.0
    assert "was changed on disk during step 'tamper'" in records[0].error


def test_missing_key_variable_is_a_config_error(make_project, server, monkeypatch):
    from honesteval.errors import ConfigError

    root = openai_project(make_project, server)
    monkeypatch.delenv("HONESTEVAL_TEST_KEY")
    with pytest.raises(ConfigError, match="'HONESTEVAL_TEST_KEY' is not set"):
        plan_evaluation(root, "base", "val")


@pytest.mark.usefixtures("prefect_backend")
def test_the_key_never_leaks(make_project, server, capfd, caplog):
    from honesteval.orchestration.flows import evaluate
    from tests.prefect_reads import artifacts

    server.script["m-ok"] = ["429", "500"]
    server.content = lambda b: "```yaml\nscore: 0.5\n```" if b["model"] == "j-ok" else "4"
    root = judge_project(make_project, server)
    state = evaluate(str(root), "base", "val", n_trials=2, return_state=True)
    assert state.result().trials_ok == 4
    for path in root.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    arts = artifacts(state.state_details.flow_run_id)
    assert arts and KEY not in json.dumps({k: v["data"] for k, v in arts.items()})
    out, err = capfd.readouterr()
    assert KEY not in out + err + caplog.text


def _set_rate_limit(root: Path, rate_limit: dict | None) -> None:
    import yaml

    cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
    cfg["adapter"].pop("rate_limit", None)
    if rate_limit is not None:
        cfg["adapter"]["rate_limit"] = rate_limit
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def test_changing_the_rate_limit_runs_no_stored_trial_again(make_project, server):
    server.content = lambda body: "4 and 6"
    root = openai_project(make_project, server, trials=2)
    _set_rate_limit(root, {"per_s": 50, "burst": 4})
    records, result = run_all(root)
    assert len(records) == 4 and result.reward == 1.0 and len(server.requests) == 4
    for rate_limit in ({"per_s": 1, "burst": 1}, None):
        _set_rate_limit(root, rate_limit)
        plan = plan_evaluation(root, "base", "val")
        assert plan.todo == [] and len(plan.reused) == 4  # how fast is not what is scored
    assert len(server.requests) == 4


@pytest.mark.usefixtures("prefect_backend")
def test_the_rate_limit_holds_across_threads_and_is_said_once(make_project, server):
    from honesteval.evaluation import progress
    from honesteval.orchestration.flows import evaluate
    from tests.fake_openai import most_in_a_window

    rate, burst = 4.0, 2  # at most 2 + 4 W of the 12 calls in any W seconds
    server.content = lambda body: "4 and 6"
    root = openai_project(make_project, server, trials=6, config={"max_concurrency": 4})
    _set_rate_limit(root, {"per_s": rate, "burst": burst})
    said: list[str] = []

    class Lines:
        def progress(self, snapshot: progress.Snapshot) -> None:
            pass

        def announce(self, text: str) -> None:
            said.append(text)

    with progress.listening(Lines()):
        result = evaluate(str(root), "base", "val")
    times = [r["at"] for r in server.requests]
    assert result.trials_ok == 12 and len(times) == 12
    for window_s in (0.5, 1.0, 2.0):
        assert most_in_a_window(times, window_s) <= burst + rate * window_s, times
    name = f"honesteval-rate-{root.name}-openai"
    waits = [line for line in said if "rate limit" in line]
    assert waits == [f"waiting for the rate limit {name} (4/s, burst 2): trials start no faster"]
    # a wait is neither a failure nor a retry
    stored = stored_trials(root, "val")
    assert len(stored) == 12 and all(r["attempts"] == 1 and not r["errors"] for r in stored)


def test_ctrl_c_ends_a_wait_for_the_rate_limit(make_project, server, cli_env):
    import time

    from tests.interruption_harness import LINE, Cli

    server.content = lambda body: "4 and 6"
    root = openai_project(make_project, server, trials=10, config={"max_concurrency": 4})
    # 20 trials: ~95 s of waiting; a call granted every 5 s, so a stop that a busy machine
    # takes a second or two to act on still lets at most one more call start
    _set_rate_limit(root, {"per_s": 0.2, "burst": 1})
    env = {**cli_env, "HONESTEVAL_TEST_KEY": KEY}
    cli = Cli(["evaluate", "--project", str(root), "--candidate", "base"], env, pty_=True)
    while len(server.requests) < 2:
        time.sleep(0.05)
    at_stop = len(server.requests)
    cli.ctrl_c()
    assert cli.wait(60) == 130, cli.text()
    text = cli.text()
    found = LINE.search(text)
    assert found and found.group(2) == "20", text
    assert text.count("waiting for the rate limit") == 1, text  # said once, not per call
    assert "Traceback" not in text
    # the waits ended at the stop: no call started after it but one granted meanwhile
    assert len(server.requests) <= at_stop + 1, text
