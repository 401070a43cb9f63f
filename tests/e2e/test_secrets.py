"""No configured key leaves the process: not in stdout, records, results, artifacts or logs,
even when the server echoes the Authorization header back (proxies and gateways do)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from uuid import UUID

import pytest

from honesteval.redaction import MASK, child_env, redact, register_secret_env
from tests.fake_openai import fake_openai
from tests.helpers import run_cli, run_plain
from tests.orchestration.test_openai import judge_project, openai_project

KEY = "sk-live-7f3c9d2e1b0a-SECRET"
ENV = "HONESTEVAL_TEST_KEY"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    with fake_openai() as fake:
        yield fake


def files_holding(root: Path, needle: str) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``needle``."""
    raw = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and raw in p.read_bytes()]


def answer_and_echo(body):
    """A reply that answers and repeats the key, as an echoing gateway would."""
    question = body["messages"][-1]["content"].split(": ")[1]
    return f"The answer is {eval(question)}. (request had Authorization: Bearer {KEY})"


def test_redact_masks_values_json_forms_and_bearer_tokens(monkeypatch):
    monkeypatch.setenv("HONESTEVAL_TEST_OTHER", 'k"ey\\with-quotes')
    register_secret_env(ENV, "HONESTEVAL_TEST_OTHER")
    monkeypatch.setenv(ENV, KEY)
    assert redact(f"got {KEY}!") == f"got {MASK}!"
    assert redact(json.dumps({"a": 'k"ey\\with-quotes'})) == json.dumps({"a": MASK})
    assert redact("Authorization: Bearer abc.def-ghi") == f"Authorization: Bearer {MASK}"
    assert redact("bearer   xyz123") == f"bearer   {MASK}"
    monkeypatch.setenv(ENV, "abc")  # too short to redact without blanking ordinary words
    assert redact("abc def") == "abc def"


def test_echoed_key_never_reaches_a_trial_record(make_project, server):
    server.script["m-ok"] = ["echo401", "echo200", "echo500"] * 2  # q1 and q2: 3 echoes each
    server.content = answer_and_echo
    root = openai_project(make_project, server)
    records, result = run_plain(root)
    assert {r.status for r in records} == {"infra_error"}
    assert records[0].attempts == 3 and len(records[0].errors) == 3
    echoed = [e for r in records for e in r.errors if "HTTP 500" not in e]  # 5xx keeps no body
    assert len(echoed) == 4 and all(MASK in e for e in echoed)
    assert files_holding(root, KEY) == []
    # The key really went out on every request: the echo was there to be leaked.
    assert {r["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
    records, result = run_plain(root)  # the errored trials rerun; now the replies echo the key
    assert {r.status for r in records} == {"ok"} and result.reward == 1.0
    assert MASK in records[0].rollout and KEY not in records[0].rollout
    assert files_holding(root, KEY) == []


def test_echoing_judge_leaks_nothing(make_project, server):
    server.script["j-bad"] = ["echo401"] * 10
    root = judge_project(make_project, server, judge_model="j-bad")
    records, _ = run_plain(root)
    assert {r.status for r in records} == {"scorer_error"}
    assert "judge unreachable" in records[0].error and MASK in records[0].error
    assert files_holding(root, KEY) == []


def test_children_do_not_inherit_the_key_variable(make_project, monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    register_secret_env(ENV)
    assert ENV not in child_env() and child_env()["PATH"] == os.environ["PATH"]
    assert child_env({ENV: "passed on purpose"})[ENV] == "passed on purpose"
    show_env = '{python} -c "import json, os; print(json.dumps(dict(os.environ)))"'
    root = make_project(
        ["pass"],
        config={
            "adapter": {"kind": "command", "command": show_env, "scorer": "target:score"},
            "judge": {"base_url": "http://127.0.0.1:9/v1", "model": "j", "api_key_env": ENV},
        },
        target_code="def score(task, output):\n    return 1.0\n",
    )
    records, _ = run_plain(root)
    seen = records[0].rollout
    assert seen["HONESTEVAL_SEED"] == "0" and ENV not in seen and KEY not in json.dumps(seen)


def flow_run_logs(flow_run_id: UUID, until: str = "", wait_s: float = 20) -> list[str]:
    """The flow run's log lines on the server, polling until one contains ``until``
    (log lines are shipped in batches)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    deadline = time.monotonic() + wait_s
    while True:
        with get_client(sync_client=True) as c:
            logs = c.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
            )
        if not until or any(until in m.message for m in logs) or time.monotonic() > deadline:
            return [log.message for log in logs]
        time.sleep(0.25)


@pytest.mark.slow
def test_flows_artifacts_and_logs_hold_no_key(make_project, server, prefect_backend):
    from honesteval.orchestration.flows import evaluate, gate
    from tests.prefect_reads import artifacts

    server.script["m-ok"] = ["echo401", "echo200"] * 4  # every attempt of both trials
    server.content = answer_and_echo
    root = openai_project(make_project, server, config={"retries": 3})
    (root / "candidates" / "base" / "prompt.md").write_text("Answer: {input[question]}")
    state = evaluate(project=str(root), candidate="base", return_state=True)
    # Both trials are missing data: the run ends Failed-type (LowCoverage) with its result.
    assert state.is_failed() and state.name == "LowCoverage"
    result = state.result(raise_on_failure=False)
    assert result.trials_infra_error == 2
    run_id = state.state_details.flow_run_id
    arts = artifacts(run_id)
    table = arts[f"rollouts-{root.name}-val-base"]["data"]
    assert any(MASK in row["error"] for row in table)  # the echoed errors are in the table
    assert KEY not in json.dumps(arts, default=str)
    assert not [line for line in flow_run_logs(run_id) if KEY in line]

    gated = gate(project=str(root), candidate="base", return_state=True)
    assert gated.result().accept  # the baseline, from replies that all echo the key
    assert KEY not in json.dumps(artifacts(gated.state_details.flow_run_id), default=str)
    assert not [line for line in flow_run_logs(gated.state_details.flow_run_id) if KEY in line]
    assert files_holding(root, KEY) == []


def test_log_lines_sent_to_prefect_are_redacted(server, prefect_backend):
    from prefect import flow, get_run_logger

    from honesteval.orchestration.flows import evaluate  # noqa: F401  (installs the redaction)

    @flow
    def chatty() -> None:
        get_run_logger().warning("calling the API with Bearer %s and key %s", "tok-123456", KEY)

    register_secret_env(ENV)
    state = chatty(return_state=True)
    logs = flow_run_logs(state.state_details.flow_run_id, until="calling the API")
    assert f"calling the API with Bearer {MASK} and key {MASK}" in logs, logs


@pytest.mark.quick
@pytest.mark.slow
def test_cli_output_holds_no_key(make_project, server, cli_env):
    server.script["m-ok"] = ["echo401"] * 2 + ["echo200", "echo500"] * 4
    server.content = answer_and_echo
    root = openai_project(make_project, server, config={"retries": 1})
    env = {**cli_env, ENV: KEY}
    probe = run_cli("check", "--project", str(root), env=env)
    assert probe.returncode == 1, probe.stderr  # the target probe failed ...
    assert "HTTP 401" in probe.stdout and MASK in probe.stdout  # ... saying why, redacted
    runs = [
        run_cli("evaluate", "--project", str(root), "--candidate", "base", "--json", env=env),
        run_cli("gate", "--project", str(root), "--candidate", "base", env=env),
        run_cli("status", "--project", str(root), "--json", env=env),
    ]
    assert [r.returncode for r in runs] == [3, 3, 0], [r.stderr for r in runs]
    for proc in (probe, *runs):
        assert KEY not in proc.stdout and KEY not in proc.stderr
    assert files_holding(root, KEY) == []


@pytest.mark.slow
def test_a_key_in_the_judges_successful_reply_is_in_no_file(make_project, server, cli_env):
    # The judge succeeds and repeats the key in its verdict and its reply; the workspace's
    # score.yaml, the judge step's score.yaml, transcript.json and stdout.txt are honesteval's.
    def content(body):
        if body["model"] == "j-ok":
            return f"Saw {KEY} in the headers.\n```yaml\nscore: 0.9\nsummary: key {KEY}\n```\n"
        return "4"

    server.content = content
    root = judge_project(make_project, server)
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    workspaces = root / ".honesteval" / "workspaces"
    judge_dirs = list(workspaces.rglob("steps/step_01_assess"))
    assert len(judge_dirs) == 2  # two trials, both judged
    for step_dir in judge_dirs:
        assert {p.name for p in step_dir.iterdir()} >= {"score.yaml", "transcript.json"}
        assert f"summary: key {MASK}" in (step_dir / "score.yaml").read_text()
    assert files_holding(root, KEY) == []
    assert KEY not in proc.stdout + proc.stderr
    # the key really was in the replies: there was something to leak
    assert {r["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
