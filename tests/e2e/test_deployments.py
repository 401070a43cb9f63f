"""Deployments end to end: a real `prefect server`, `honesteval serve`, the literal
`prefect deployment run ... --watch`, read back through the Prefect API. Everything started
here is stopped here (serve by SIGINT, the server by SIGTERM) and checked gone."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from honesteval.server.localserver import LocalServer, stop_group
from tests.helpers import call_counts, stored_trials

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


class Api:
    def __init__(self, url: str):
        self.url = url

    def _request(self, method: str, path: str, body: object = None) -> object:
        # 503 is Prefect's "retry": its server answers it for a retryable database error (a
        # busy SQLite under a loaded machine), and Prefect's own client retries it
        for attempt in range(6):
            resp = httpx.request(method, f"{self.url}{path}", json=body, timeout=30)
            if resp.status_code != 503:
                break
            time.sleep(0.5 * 2**attempt)
        resp.raise_for_status()
        return resp.json() if resp.content else None

    def post(self, path: str, body: dict) -> object:
        return self._request("POST", path, body)

    def get(self, path: str) -> object:
        return self._request("GET", path)

    def deployment(self, name: str) -> dict:
        return self.get(f"/deployments/name/{name}")

    def flow_runs(self, deployment_id: str, *, scheduled: bool = False) -> list[dict]:
        """The deployment's runs, newest first; a Scheduled-type one (a cron's next run, a
        run waiting for a concurrency slot) only with ``scheduled``."""
        runs = self.post(
            "/flow_runs/filter",
            {
                "flow_runs": {"deployment_id": {"any_": [deployment_id]}},
                "sort": "EXPECTED_START_TIME_DESC",
                "limit": 50,
            },
        )
        assert all(r["deployment_id"] == deployment_id for r in runs)
        return [r for r in runs if scheduled or r["state"]["type"] != "SCHEDULED"]

    def artifacts(self, flow_run_id: str) -> dict[str, dict]:
        arts = self.post(
            "/artifacts/filter",
            {"flow_runs": {"id": {"any_": [flow_run_id]}}, "sort": "CREATED_DESC", "limit": 200},
        )
        latest: dict[str, dict] = {}
        for a in arts:
            latest.setdefault(a["key"], a)
        return latest

    def events(self, name: str, resource_id: str) -> list[dict]:
        body = {
            "filter": {"event": {"name": [name]}, "resource": {"id": [resource_id]}},
            "limit": 50,
        }
        return self.post("/events/filter", body)["events"]

    def count_task_runs(
        self,
        flow_run_id: str,
        state_types: list[str] | None = None,
        *,
        names: list[str] | None = None,
        like: str | None = None,
    ) -> int:
        """Task runs of a flow run, by state type, state name or task-run name prefix."""
        body: dict = {"flow_runs": {"id": {"any_": [flow_run_id]}}}
        task_runs: dict = {}
        if state_types:
            task_runs["state"] = {"type": {"any_": state_types}}
        if names:
            task_runs["state"] = {"name": {"any_": names}}
        if like:
            task_runs["name"] = {"like_": like}
        if task_runs:
            body["task_runs"] = task_runs
        return int(self.post("/task_runs/count", body))


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def prefect_run(env, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "prefect"), "deployment", "run", *args],
        env={**env, "COLUMNS": "250"},  # --watch's lines unwrapped
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def stack(tmp_path, make_project, seed_prefect_home):
    """A project, a real server (via `honesteval server`) and `honesteval serve`."""
    tasks = [{"id": f"d{i}", "input": {"behaviour": "seeded"}, "target": "yes"} for i in range(6)]
    root = make_project(
        tasks=tasks,
        candidates={"base": 0.9, "broken": 0.9},
        config={"trials": 2},
        name="deployproj",
    )
    (root / "candidates" / "broken" / "outage.txt").write_text("d0 d1 d2 d3 d4")
    # Leaving the blocks stops serve (SIGINT) and the server (SIGTERM), and fails if either
    # leaves a process behind.
    # the server's database is PREFECT_HOME's, the sitting's: a copy of a migrated one, as a
    # user's second sitting finds it (these tests are not about a first boot)
    home = seed_prefect_home(tmp_path / "prefect-home")
    with LocalServer(home, log=tmp_path / "server.log") as server:
        env = {**server.env, "PREFECT_RUNNER_POLL_FREQUENCY": "1"}
        served = spawn(
            [str(BIN / "honesteval"), "serve", "--project", str(root)], env, tmp_path / "serve.log"
        )
        try:
            api = Api(server.api_url)
            wait_for(lambda: _has_deployment(api, "reevaluate-best/nightly"), 60, "deployments")
            yield root, api, env
        finally:
            # serve pauses its schedules on the way out. Right after a big run the server is
            # still writing that run's events, answers 503 (SQLite busy) and Prefect's client
            # retries after 2, 4, 8, 16, 32 s (±20 %); serve gives that 6 s, then exits
            # saying so. 120 s is generous; a serve that ignores SIGINT still fails.
            stop_group(served, signal.SIGINT, timeout_s=120)


def log_lines(watched: subprocess.CompletedProcess[str]) -> list[str]:
    """The log lines ``--watch`` printed (they start with ``▪``, its events with ``●``)."""
    return [line for line in watched.stdout.splitlines() if line.startswith("▪")]


def _has_deployment(api: Api, name: str) -> bool:
    try:
        api.deployment(name)
        return True
    except httpx.HTTPStatusError:
        return False


@pytest.mark.timeout(600)  # seven deployment runs, each to its end
def test_deployments_end_to_end(stack):
    root, api, env = stack

    # 1. evaluate/val through the literal CLI command
    proc = prefect_run(
        env, "evaluate/val", "-p", "candidate=base", "--watch", "--watch-timeout", "150"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dep = api.deployment("evaluate/val")
    run = api.flow_runs(dep["id"])[0]
    assert run["state"]["type"] == "COMPLETED"
    # evaluate/val and gate/val share the name the mission's command types; their flow,
    # description and tags tell them apart in the UI's deployments list
    gate_dep = api.deployment("gate/val")
    assert dep["name"] == gate_dep["name"] == "val" and dep["flow_id"] != gate_dep["flow_id"]
    assert dep["description"].startswith("evaluate: ") and gate_dep["description"].startswith(
        "gate: "
    )
    assert {"evaluate", "split:val"} <= set(dep["tags"]) and "gate" not in dep["tags"]
    assert {"gate", "split:val"} <= set(gate_dep["tags"]) and "evaluate" not in gate_dep["tags"]
    arts = api.artifacts(run["id"])
    assert arts["progress-deployproj-val-base"]["data"] == 100.0
    rows = json.loads(arts["rollouts-deployproj-val-base"]["data"])
    assert len(rows) == 12 and {r["status"] for r in rows} == {"ok"}
    assert "**coverage:** 1.00 (6/6 tasks scored" in arts["summary-deployproj-val-base"]["data"]
    # --watch ended with the result: the state's message, reward ± SE and coverage
    assert re.fullmatch(r"reward \d\.\d\d ± \d\.\d\d, coverage 6/6", run["state"]["message"])
    assert log_lines(proc)[-1].endswith(run["state"]["message"]), proc.stdout[-3000:]

    # 2. bad parameters are refused by Prefect before any run exists
    before = len(api.flow_runs(dep["id"]))
    for bad in ("split=test", "n_trials=0"):
        refused = prefect_run(env, "evaluate/val", "-p", "candidate=base", "-p", bad)
        assert "Validation failed" in refused.stdout + refused.stderr, bad
    assert len(api.flow_runs(dep["id"])) == before

    # The form: every parameter described; the candidate is a choice of those served.
    props = dep["parameter_openapi_schema"]["properties"]
    assert all(p.get("description") for p in props.values()), props
    assert props["candidate"]["anyOf"][0]["enum"] == ["base", "broken"]
    assert "current best" in props["candidate"]["description"]

    # 3. a candidate whose infrastructure fails on most tasks: LowCoverage + the event
    proc = prefect_run(
        env, "evaluate/val", "-p", "candidate=broken", "--watch", "--watch-timeout", "150"
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr  # --watch says it failed
    run = api.flow_runs(dep["id"])[0]
    assert run["state"]["type"] == "FAILED" and run["state"]["name"] == "LowCoverage"
    # outage on d0..d4, 2 trials each: 10 infra_error trials; d5's 2 trials are graded
    assert (
        run["state"]["message"].startswith("reward ")
        and "coverage 1/6, 10 infra_error" in (run["state"]["message"])
    )
    assert run["name"] == "evaluate-broken-val"
    assert {"honesteval", "candidate:broken", "split:val"} <= set(run["tags"])
    wait_for(
        lambda: api.count_task_runs(run["id"], names=["InfraError"]) == 10,
        60,
        "one InfraError task run per infra_error trial",
    )
    wait_for(lambda: api.count_task_runs(run["id"], like="score-") == 2, 60, "score task runs")
    rows = json.loads(api.artifacts(run["id"])["rollouts-deployproj-val-broken"]["data"])
    assert sum(r["status"] == "infra_error" for r in rows) == 10
    logs = api.post(
        "/logs/filter",
        {"logs": {"flow_run_id": {"any_": [run["id"]]}, "level": {"ge_": 20}}, "limit": 200},
    )
    assert any(
        entry["level"] == 20
        and "coverage so far 0.17 (1/6 finished tasks scored)" in entry["message"]
        for entry in logs
    ), [entry["message"] for entry in logs]
    # the result is persisted as JSON where the run's state points
    data = api.get(f"/flow_runs/{run['id']}")["state"]["data"]
    assert data["serializer"]["type"] == "json"
    persisted = json.loads(Path(data["storage_key"]).read_text())
    assert persisted["__class__"] == "honesteval.models.SplitResult"
    result = persisted["data"]
    assert result["candidate"] == "broken" and result["coverage"] == pytest.approx(1 / 6)
    found = wait_for(
        lambda: api.events("honesteval.coverage.low", "honesteval.project.deployproj"),
        30,
        "the event",
    )
    assert any(
        r["candidate"] == "broken" and r["coverage"] == pytest.approx(1 / 6)
        for e in found
        for r in e["payload"]["results"]
    )

    # 4. the nightly deployment has its cron; a manual run re-evaluates the best, fresh seeds
    nightly = api.deployment("reevaluate-best/nightly")
    assert [s["schedule"]["cron"] for s in nightly["schedules"]] == ["0 3 * * *"]
    assert nightly["schedules"][0]["schedule"]["timezone"] == "UTC"
    proc = prefect_run(env, "gate/val", "-p", "candidate=base", "--watch", "--watch-timeout", "150")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the broken candidate against the best: Indecisive (red), `decide` downstream of both
    proc = prefect_run(
        env, "gate/val", "-p", "candidate=broken", "--watch", "--watch-timeout", "150"
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    gate_run = api.flow_runs(api.deployment("gate/val")["id"])[0]
    assert (gate_run["name"], gate_run["state"]["type"]) == ("gate-broken", "FAILED")
    assert gate_run["state"]["name"] == "Indecisive"
    # --watch ended with the verdict, the reason's first sentence and both coverages: d5 of
    # the 6 tasks scored for broken (d0-d4 are down), all 6 for the best. After it, only
    # Prefect's own line on a Failed-type state whose data is a result, not an exception.
    logged = log_lines(proc)
    verdict = [i for i, line in enumerate(logged) if "INDECISIVE: " in line]
    assert verdict, proc.stdout
    assert logged[verdict[-1]].endswith("(coverage current 1.00, candidate 0.17)"), proc.stdout
    after = logged[verdict[-1] + 1 :]
    assert all("Engine execution exited with unexpected exception" in line for line in after)
    # the default staged screen decides after each of its 2 rounds (trials: 2), and an
    # INDECISIVE round (coverage 1/6 < 0.6 from round 1 on) never stops early: 2 decisions
    wait_for(lambda: api.count_task_runs(gate_run["id"], like="decide") == 2, 60, "decide")

    # 5. gates of the project one at a time (the deployment's concurrency limit is 1): while
    # its slot is held, a gate waits queued in the UI; two gates started at once never overlap;
    # the slot is free again after them
    gate_dep = api.deployment("gate/val")
    gcl = gate_dep["global_concurrency_limit"]
    assert gcl["limit"] == 1
    before = {r["id"] for r in api.flow_runs(gate_dep["id"], scheduled=True)}
    held = api.post(
        "/v2/concurrency_limits/increment-with-lease",
        {"names": [gcl["name"]], "slots": 1, "lease_duration": 120},
    )
    started = prefect_run(env, "gate/val", "-p", "candidate=base")
    assert started.returncode == 0, started.stdout + started.stderr

    def history(run_id: str) -> list[str]:
        return [s["name"] for s in api.get(f"/flow_run_states/?flow_run_id={run_id}")]

    def waiting() -> str | None:
        runs = api.flow_runs(gate_dep["id"], scheduled=True)  # waiting is Scheduled-type
        new = [r["id"] for r in runs if r["id"] not in before]
        return next((i for i in new if "AwaitingConcurrencySlot" in history(i)), None)

    queued = wait_for(waiting, 120, "the gate to wait for the held slot")
    assert api.get(f"/flow_runs/{queued}")["state"]["type"] in ("SCHEDULED", "PENDING")
    started = prefect_run(env, "gate/val", "-p", "candidate=broken")
    assert started.returncode == 0, started.stdout + started.stderr
    api.post("/v2/concurrency_limits/decrement-with-lease", {"lease_id": held["lease_id"]})

    def both_ended() -> list[dict] | None:
        runs = [r for r in api.flow_runs(gate_dep["id"]) if r["id"] not in before]
        ended = [r for r in runs if r["state"]["type"] in ("COMPLETED", "FAILED")]
        return ended if len(ended) == 2 else None

    pair = wait_for(both_ended, 240, "both gates to end")
    first, second = sorted(pair, key=lambda r: r["start_time"])
    assert second["start_time"] >= first["end_time"]  # never two at once
    assert all(history(r["id"]).count("Running") == 1 for r in pair)
    limit = api.get(f"/v2/concurrency_limits/{gcl['id']}")
    assert limit["active_slots"] == 0  # released: the next gate starts at once
    seeds_before = {seed for (_, seed) in call_counts(root)}
    proc = prefect_run(env, "reevaluate-best/nightly", "--watch", "--watch-timeout", "150")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = api.flow_runs(nightly["id"])[0]
    assert run["state"]["type"] == "COMPLETED"
    new_seeds = {seed for (_, seed) in call_counts(root)} - seeds_before
    assert len(new_seeds) == 2  # two trials, two fresh seeds
    md = api.artifacts(run["id"])["drift-deployproj-base"]["data"]
    assert "Re-evaluation of the current best" in md and ("stable" in md or "drifted" in md)


@pytest.mark.parametrize(
    "batch_args,expected",
    [
        # 2,000 trials at the default concurrency 8: 16 batches of 125, each run then
        # scored (one score task run per batch), plus the aggregate.
        ([], 16 + 16 + 1),
        # One run_trial and one score task run per trial: 4,000 task runs at full speed, the
        # load that made a default-configured server drop events (PREFECT-NOTES §5).
        (["--batch-size", "1"], 2000 + 2000 + 1),
    ],
    ids=["batched", "per-trial"],
)
def test_a_2000_trial_run_is_fully_recorded(stack, make_project, batch_args, expected):
    _, api, env = stack
    tasks = [
        {"id": f"n{i:03d}", "input": {"behaviour": "pass"}, "target": "yes"} for i in range(500)
    ]
    big = make_project(tasks=tasks, config={"trials": 4}, name="bigproj")
    args = ["evaluate", "--project", str(big), "--candidate", "base", "--json", *batch_args]
    proc = subprocess.run(
        [str(BIN / "honesteval"), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    not_ok = [r for r in stored_trials(big, "val", "base") if r["status"] != "ok"]
    assert json.loads(proc.stdout)["trials_ok"] == 2000, not_ok
    runs = api.post(
        "/flow_runs/filter",
        {"flows": {"name": {"any_": ["evaluate"]}}, "sort": "START_TIME_DESC", "limit": 1},
    )
    run_id = runs[0]["id"]
    terminal = ["COMPLETED", "FAILED", "CRASHED", "CANCELLED"]
    wait_for(
        lambda: api.count_task_runs(run_id, terminal) == expected,
        240,
        "every task run to be recorded in a terminal state",
    )
    assert api.count_task_runs(run_id) == expected
    assert api.count_task_runs(run_id, ["COMPLETED"]) == expected


def test_prefect_yaml_route_with_a_process_worker(tmp_path, make_project, seed_prefect_home):
    """Route B: deployments/prefect.yaml deployed to a process work pool, run by a worker."""
    root = make_project(["pass", "fail"], config={"trials": 2}, name="workerproj")
    checkout = Path(__file__).resolve().parents[2]
    home = seed_prefect_home(tmp_path / "prefect-home")  # not a first boot
    with LocalServer(home, log=tmp_path / "server.log") as server:
        env = {
            **server.env,
            "PREFECT_WORKER_QUERY_SECONDS": "1",
            "HONESTEVAL_PROJECT": str(root),
            "HONESTEVAL_CHECKOUT": str(checkout),
        }
        deploy_and_run_with_a_worker(Api(server.api_url), env, checkout, root, tmp_path)


def deploy_and_run_with_a_worker(api, client_env, checkout, root, tmp_path):
    worker = None
    try:
        prefect = str(BIN / "prefect")
        for args in (
            ["work-pool", "create", "honesteval", "--type", "process"],
            ["--no-prompt", "deploy", "--all", "--prefect-file", "deployments/prefect.yaml"],
        ):
            done = subprocess.run(
                [prefect, *args],
                env=client_env,
                cwd=checkout,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout + done.stderr
        for name in (
            "evaluate/val",
            "evaluate/train",
            "gate/val",
            "reevaluate-best/nightly",
        ):
            assert api.deployment(name)["work_pool_name"] == "honesteval"
        # the same names, descriptions and tags as serve's
        for name, words in (("evaluate/val", "evaluate"), ("gate/val", "gate")):
            deployed = api.deployment(name)
            assert deployed["description"].startswith(f"{words}: ")
            assert {words, "split:val"} <= set(deployed["tags"])
        gate_limit = api.deployment("gate/val")["global_concurrency_limit"]
        assert gate_limit["limit"] == 1  # prefect.yaml's concurrency_limit, as serve's
        assert api.deployment("evaluate/val")["parameters"] == {
            "project": str(root),
            "split": "val",
        }
        worker = spawn(
            [prefect, "worker", "start", "--pool", "honesteval"],
            client_env,
            tmp_path / "worker.log",
        )
        proc = prefect_run(
            client_env,
            "evaluate/val",
            "-p",
            "candidate=base",
            "--watch",
            "--watch-timeout",
            "150",
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        run = api.flow_runs(api.deployment("evaluate/val")["id"])[0]
        assert run["state"]["type"] == "COMPLETED"
        assert (
            len(json.loads(api.artifacts(run["id"])["rollouts-workerproj-val-base"]["data"])) == 4
        )
    finally:
        if worker is not None:
            # A worker drains on SIGINT (it ignores SIGTERM for a long while).
            stop_group(worker, signal.SIGINT, timeout_s=40)
