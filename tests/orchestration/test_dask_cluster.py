"""Trials on a real Dask cluster (``dask scheduler`` + 2 ``dask worker`` processes on
127.0.0.1, started once for the module): a worker SIGKILLed mid-run costs no trial it
finished a second target call, only the one it had in flight, and every call is counted and
its repeats named (an evaluation, and a gate's confirmation); ``honesteval gate`` runs its
trials there (``--dask-address``); the adapter's rate limit holds across the workers."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("prefect_dask", reason="the [dask] extra is installed by `make test`")
pytestmark = [pytest.mark.usefixtures("prefect_backend"), pytest.mark.slow]

_DASK = str(Path(sys.executable).parent / "dask")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A scheduler and single-threaded workers without nannies (a SIGKILLed worker stays
    dead: no nanny restarts it). Every process it started is stopped by :meth:`stop`, also
    when the start failed partway (the fixture stops what there is)."""

    def __init__(self, env: dict[str, str], log_dir: Path):
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        self.env = env
        self.log_dir = log_dir
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.started = 0

    def start(self) -> None:
        port = self.address.rsplit(":", 1)[1]
        self.scheduler = self._start(
            "scheduler", "scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard"
        )
        self.ensure_workers(2)

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("wb")
        return subprocess.Popen([_DASK, *args], env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def live_workers(self) -> list[subprocess.Popen[bytes]]:
        return [w for w in self.workers if w.poll() is None]

    def ensure_workers(self, n: int) -> None:
        """At least ``n`` live workers (new ones for those a test killed), and the scheduler
        sees them."""
        while len(self.live_workers()) < n:
            name = f"w{self.started}"
            self.started += 1
            args = ("--nthreads", "1", "--no-nanny", "--no-dashboard", "--name", name)
            self.workers.append(self._start(name, "worker", self.address, *args))
        self.wait_for_workers(len(self.live_workers()))

    def kill_workers(self) -> None:
        for worker in self.live_workers():
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            client.wait_for_workers(n, timeout=120)

    def stop(self) -> None:
        for proc in [*self.workers, self.scheduler]:
            if proc is None:
                continue
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(session_cli_env: dict[str, str], tmp_path_factory) -> Iterator[Cluster]:
    running = Cluster(dict(session_cli_env), tmp_path_factory.mktemp("dask-cluster"))
    try:
        running.start()
        yield running
    finally:
        running.stop()


def _calls(root: Path) -> Counter[tuple[str, int]]:
    """Target calls per trial, as the target logged them (one line a call)."""
    path = root / "calls.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter((d["task"], d["seed"]) for d in map(json.loads, lines))


def test_a_lost_worker_costs_no_stored_trial_a_second_call(make_project, cluster):
    from honesteval.orchestration.flows import evaluate

    n_tasks, per_batch = 24, 8
    tasks = [
        {"id": f"t{i:02d}", "input": {"behaviour": "pass", "sleep": 0.3}, "target": "yes"}
        for i in range(n_tasks)
    ]
    root = make_project(tasks=tasks, config={"trials": 1})
    cluster.ensure_workers(2)
    victim = cluster.live_workers()[0]

    def kill_mid_batch() -> None:
        # both workers ~3 trials into their first batch of 8: the victim has stored some
        while sum(_calls(root).values()) < 6:
            time.sleep(0.05)
        os.kill(victim.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_mid_batch, daemon=True)
    killer.start()
    result = evaluate(
        str(root),
        "base",
        "val",
        task_runner="dask",
        dask_address=cluster.address,
        max_concurrency=2,
        batch_size=per_batch,
    )
    killer.join(timeout=5)
    assert victim.poll() == -signal.SIGKILL
    calls = _calls(root)
    twice = [trial for trial, n in calls.items() if n > 1]
    # Every trial ran; at most the one in flight on the single-threaded victim ran again.
    assert len(calls) == n_tasks and max(calls.values()) <= 2 and len(twice) <= 1
    assert result.reward == 1.0 and result.coverage == 1.0
    # every target call counted, the repeat said
    assert result.trials_ran == sum(calls.values()) == n_tasks + len(twice)
    assert result.trials_repeated == len(twice)
    assert result.repeats_by_task == {task: 1 for task, _ in twice}
    # the run's call journal is gone with its run
    assert not list((root / ".honesteval" / "calls").glob("*"))


#: A command target that logs each call (task, seed, candidate, the worker that ran it: the
#: shell's parent) before it works 0.2 s and answers: right always for a candidate of
#: quality 1.0, else on one seed in five.
_COMMAND_TARGET = r"""printf '{"task": "%s", "seed": %s, "candidate": "%s", "pid": %s}\n' \
  "$HONESTEVAL_TASK_ID" "$HONESTEVAL_SEED" "$(basename "$HONESTEVAL_CANDIDATE_DIR")" "$PPID" \
  >> "$(dirname "$0")/calls.log"
sleep 0.2
if [ "$(cat "$HONESTEVAL_CANDIDATE_DIR/quality.txt")" = 1.0 ] || [ $((HONESTEVAL_SEED % 5)) = 0 ]
then echo '{"answer": "yes"}'
else echo '{"answer": "no"}'
fi
"""


def _command_project(make_project: Any, n_tasks: int, trials: int, **kw: Any) -> Path:
    tasks = [{"id": f"q{i:02d}", "input": {}, "target": "yes"} for i in range(n_tasks)]
    root = make_project(tasks=tasks, config={"trials": trials, "retries": 0}, **kw)
    (root / "target.sh").write_text(_COMMAND_TARGET)
    config = yaml.safe_load((root / "honesteval.yaml").read_text())
    command = ["sh", str(root / "target.sh")]
    config["adapter"] = {"kind": "command", "command": command, "scorer": "target:score"}
    # the target counts its calls in the project folder, which the sandbox keeps read-only
    config["sandbox"] = "off"
    (root / "honesteval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def _command_calls(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "calls.log").read_text().splitlines()]


def _repeats_by_task(calls: list[dict[str, Any]]) -> dict[str, int]:
    """Per task, the calls beyond the first of each (candidate, task, seed)."""
    per_trial = Counter((c["candidate"], c["task"], c["seed"]) for c in calls)
    repeats: Counter[str] = Counter()
    for (_, task, _), n in per_trial.items():
        repeats[task] += n - 1
    return {task: n for task, n in sorted(repeats.items()) if n}


def _kill_after(root: Path, worker: subprocess.Popen[bytes], calls: int) -> threading.Thread:
    def kill() -> None:
        while not (root / "calls.log").exists() or len(_command_calls(root)) < calls:
            time.sleep(0.02)
        os.kill(worker.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    return killer


def test_a_worker_lost_mid_run_costs_only_its_call_in_flight(
    make_project, cluster, session_cli_env
):
    """The issue's scenario, smaller: 12 val tasks x 8 trials of 0.2 s, in the batches the
    command picks (8 a batch), on two single-threaded workers; one is SIGKILLed after 40
    calls, by then holding finished batches whose scores have not run."""
    from tests.helpers import run_cli

    root = _command_project(make_project, n_tasks=12, trials=8, candidates={"base": 1.0})
    cluster.ensure_workers(2)
    victim = cluster.live_workers()[0]
    killer = _kill_after(root, victim, 40)
    args = ["evaluate", "--project", str(root), "--candidate", "base", "--json"]
    done = run_cli(*args, "--dask-address", cluster.address, env=session_cli_env)
    killer.join(timeout=5)
    assert done.returncode == 0, done.stderr
    assert victim.poll() == -signal.SIGKILL
    calls = _command_calls(root)
    on_victim = [c for c in calls if c["pid"] == victim.pid]
    assert on_victim and len(on_victim) < len(calls)  # it ran trials, then was lost
    per_trial = Counter((c["task"], c["seed"]) for c in calls)
    assert len(per_trial) == 96
    # at most the one call the single-threaded victim had in flight is paid twice
    assert len(calls) <= 96 + 1
    result = json.loads(done.stdout)
    assert result["trials_ran"] == len(calls)
    assert result["trials_repeated"] == len(calls) - 96
    assert result["repeats_by_task"] == _repeats_by_task(calls)
    assert result["reward"] == 1.0 and result["coverage"] == 1.0


def test_honesteval_gate_runs_its_trials_on_the_cluster(make_project, cluster, session_cli_env):
    from tests.helpers import run_cli

    tasks = [{"id": f"g{i:02d}", "input": {"behaviour": "pass"}, "target": "yes"} for i in range(6)]
    root = make_project(tasks=tasks, config={"trials": 2})
    cluster.ensure_workers(1)
    done = run_cli(
        "gate",
        "--project",
        str(root),
        "--candidate",
        "base",
        "--dask-address",
        cluster.address,
        "--batch-size",
        "4",
        env=session_cli_env,
    )
    assert done.returncode == 0, done.stderr  # the first gate promotes its baseline
    ran_in = {d["pid"] for d in map(json.loads, (root / "calls.log").read_text().splitlines())}
    workers = {w.pid for w in cluster.workers}
    # every one of the 12 trials ran in a Dask worker process, none in the CLI's
    assert len((root / "calls.log").read_text().splitlines()) == 12
    assert ran_in and ran_in <= workers, (ran_in, workers)


def test_progress_moves_per_trial_while_a_batch_runs_on_a_worker(make_project, cluster):
    from honesteval.evaluation import progress
    from honesteval.orchestration.flows import evaluate

    tasks = [{"id": f"p{i}", "input": {"behaviour": "pass", "sleep": 0.3}} for i in range(8)]
    root = make_project(tasks=[{**t, "target": "yes"} for t in tasks], config={"trials": 1})
    cluster.ensure_workers(1)
    seen: list[int] = []

    class Counts:
        def progress(self, snapshot: progress.Snapshot) -> None:
            seen.append(snapshot.done)

        def announce(self, text: str) -> None:
            pass

    with progress.listening(Counts()):
        result = evaluate(
            str(root), "base", "val", dask_address=cluster.address, task_runner="dask",
            max_concurrency=1, batch_size=8,
        )  # fmt: skip
    assert result.trials_ran == 8
    # One batch of 8 on one worker: the count went 1, 2, ... 8 as its trials ran, where the
    # batch's end alone would have moved it from 0 to 8 at once.
    assert sorted(set(seen)) == list(range(9)), seen


def _evaluate_16_trials(
    make_project: Any, cluster: Cluster, env: dict[str, str], config: dict[str, Any], pty_: bool
) -> tuple[Path, Any]:
    """``honesteval evaluate`` of 16 trials of 0.4 s in batches of 8 on the cluster, returned
    once 3 target calls have begun."""
    from tests.interruption_harness import Cli

    tasks = [{"id": f"c{i:02d}", "input": {"behaviour": "pass", "sleep": 0.4}} for i in range(16)]
    root = make_project(tasks=[{**t, "target": "yes"} for t in tasks], config=config)
    cluster.ensure_workers(1)
    args = ["evaluate", "--project", str(root), "--candidate", "base", "--batch-size", "8"]
    cli = Cli([*args, "--dask-address", cluster.address], dict(env), pty_=pty_)
    while sum(_calls(root).values()) < 3:
        time.sleep(0.05)
    return root, cli


def test_ctrl_c_on_a_dask_run_says_what_is_kept(make_project, cluster, session_cli_env):
    from tests.interruption_harness import LINE

    config = {"trials": 1}
    root, cli = _evaluate_16_trials(make_project, cluster, session_cli_env, config, pty_=True)
    cli.ctrl_c()
    assert cli.wait(120) == 130, cli.text()
    found = LINE.search(cli.text())
    assert found, cli.text()
    kept, planned = map(int, found.groups())
    assert planned == 16 and 1 <= kept < 16, cli.text()  # as below
    assert "Traceback" not in cli.text()
    _rerun_calls_only_what_is_missing(root, cluster, session_cli_env, kept)


def test_a_cluster_with_no_live_worker_stops_in_one_line(make_project, cluster, session_cli_env):
    config = {"trials": 1, "dask": {"no_worker_timeout_s": 3}}
    root, cli = _evaluate_16_trials(make_project, cluster, session_cli_env, config, pty_=False)
    cluster.kill_workers()
    killed_at = time.monotonic()
    assert cli.wait(120) == 2, cli.text()
    waited = time.monotonic() - killed_at
    text = cli.text()
    line = re.search(
        rf"error: no live Dask worker at {re.escape(cluster.address)} for (\d+) s; "
        r"(\d+) of 16 trials kept; run the same command to resume",
        text,
    )
    assert line, text
    said_s, kept = map(int, line.groups())
    assert said_s >= 3 and waited >= 3  # the configured wait, not a hang and not at once
    # 3 calls began on at most 2 single-threaded workers: one of them had finished a trial
    assert 1 <= kept < 16
    assert "Traceback" not in text and text.count("error") == 1, text
    _rerun_calls_only_what_is_missing(root, cluster, session_cli_env, kept)


def _rerun_calls_only_what_is_missing(
    root: Path, cluster: Cluster, env: dict[str, str], kept: int
) -> None:
    """The kept count is what is stored: the same command, on a cluster with a worker again,
    calls the target for the other trials only, and completes."""
    from tests.helpers import run_cli

    cluster.ensure_workers(1)
    before = sum(_calls(root).values())
    args = ["evaluate", "--project", str(root), "--candidate", "base", "--batch-size", "8"]
    done = run_cli(*args, "--dask-address", cluster.address, env=env)
    assert done.returncode == 0, done.stderr
    assert sum(_calls(root).values()) - before == 16 - kept


def test_a_cluster_lost_during_the_confirmation_stops_in_one_line(
    make_project, cluster, session_cli_env
):
    """``honesteval gate`` on the cluster: the screen passes, every worker is SIGKILLed once
    the confirmation subflow's trials have begun: one line with the address and the kept
    count, exit 2, no traceback; the rerun calls the target only for what was not kept."""
    from tests.helpers import popen_cli, run_cli, stored_trials

    # 0.8 s a trial: the confirmation's rounds take ~10 s on two workers, so a test process
    # that a loaded machine runs late still kills the workers while they are under way
    tasks = [
        {"id": f"k{i}", "input": {"behaviour": "seeded", "sleep": 0.8}, "target": "yes"}
        for i in range(8)
    ]
    config = {"trials": 2, "dask": {"no_worker_timeout_s": 3}}
    root = make_project(tasks=tasks, candidates={"base": 0.2, "better": 1.0}, config=config)
    baseline = run_cli("gate", "--project", str(root), "--candidate", "base", env=session_cli_env)
    assert baseline.returncode == 0, baseline.stderr
    screen_seeds = {seed for (_, seed) in _calls(root)}  # the screen reuses base's seeds

    def confirmation_calls() -> int:
        return sum(n for (_, seed), n in _calls(root).items() if seed not in screen_seeds)

    cluster.ensure_workers(2)
    args = ["gate", "--project", str(root), "--candidate", "better", "--batch-size", "2"]
    args += ["--dask-address", cluster.address]
    cli = popen_cli(*args, env=session_cli_env)
    deadline = time.monotonic() + 240
    while confirmation_calls() < 3:  # the screen passed and its confirmation is under way
        assert cli.poll() is None and time.monotonic() < deadline, cli.communicate()
        time.sleep(0.05)
    cluster.kill_workers()
    out, err = cli.communicate(timeout=180)
    assert cli.returncode == 2, out + err
    line = re.search(
        rf"error: no live Dask worker at {re.escape(cluster.address)} for \d+ s; "
        r"(\d+) of (\d+) trials kept; run the same command to resume",
        err,
    )
    assert line, err
    assert err.index("screen passed") < line.start()  # it stopped in the confirmation
    kept, planned = map(int, line.groups())
    assert planned == 2 * len(tasks) and 1 <= kept < planned  # round 1: a trial a task a side
    assert "Traceback" not in out + err and err.count("error") == 1, err

    cluster.ensure_workers(1)
    before = confirmation_calls()
    again = run_cli(*args, env=session_cli_env)
    assert again.returncode == 0, again.stderr
    assert "ACCEPT" in again.stdout, again.stdout
    stored = [r for r in stored_trials(root) if r["seed"] not in screen_seeds]
    # every confirmation trial is on disk once; the rerun called the target for all but the
    # kept ones (the screen's trials were all reused)
    assert len({(r["candidate"], r["task_id"], r["seed"]) for r in stored}) == len(stored)
    assert confirmation_calls() - before == len(stored) - kept
    assert {seed for (_, seed) in _calls(root)} - screen_seeds == {r["seed"] for r in stored}


def _api_project(make_project: Any, base_url: str, rate_limit: dict[str, Any] | None) -> Path:
    """20 trials of the openai target against ``base_url``, each graded 1.0 on its reply."""
    from tests.orchestration.test_openai import GRADER

    adapter: dict[str, Any] = {"kind": "openai", "base_url": base_url, "model": "m"}
    adapter |= {"scorer": "target:score"} | ({"rate_limit": rate_limit} if rate_limit else {})
    tasks = [{"id": f"r{i:02d}", "input": {"question": str(i)}, "target": "ok"} for i in range(20)]
    config = {"adapter": adapter, "trials": 1, "timeout_s": 30.0}
    root = make_project(tasks=tasks, config=config, target_code=GRADER)
    (root / "candidates" / "base" / "prompt.md").write_text("{input[question]}")
    return root


def test_the_rate_limit_holds_across_the_workers(make_project, cluster):
    from honesteval.orchestration.flows import evaluate
    from tests.fake_openai import fake_openai, most_in_a_window

    rate, burst = 4.0, 2  # at most 2 + 4 W calls in any W seconds, both workers together
    cluster.ensure_workers(2)
    on_cluster = {"task_runner": "dask", "dask_address": cluster.address, "max_concurrency": 2}
    arrivals = {}
    with fake_openai() as api:
        for limit in (None, {"per_s": rate, "burst": burst}):
            root = _api_project(make_project, api.base_url, limit)
            result = evaluate(str(root), "base", "val", batch_size=10, **on_cluster)
            assert result.trials_ran == 20 and result.reward == 1.0
            arrivals[bool(limit)] = [r["at"] for r in api.requests]
            api.requests.clear()
    limited, free = arrivals[True], arrivals[False]
    assert len(limited) == len(free) == 20
    for window_s in (0.5, 1.0, 2.0, 4.0):
        assert most_in_a_window(limited, window_s) <= burst + rate * window_s, (window_s, limited)
    # without the limit the same workers call faster than it allows (the test can fail): a
    # batch's calls follow each other in ms, even on a loaded machine
    assert most_in_a_window(free, 0.5) > burst + rate * 0.5, free
    # the Prefect UI lists the limit under Concurrency, as set
    from prefect import get_client

    with get_client(sync_client=True) as client:
        kept = client.read_global_concurrency_limit_by_name(f"honesteval-rate-{root.name}-openai")
    assert (kept.limit, kept.slot_decay_per_second) == (burst, rate)


@pytest.mark.timeout(900)  # two gates, each confirmation round a Dask client of its own
def test_a_worker_lost_during_the_confirmation_costs_only_its_call_in_flight(
    make_project, cluster, session_cli_env
):
    """``honesteval gate`` on two workers: one is SIGKILLed once the confirmation's trials
    have begun; the gate decides on the other, every target call is counted in the results
    it stored, and at most the victim's one call in flight was paid twice."""
    from tests.helpers import run_cli

    candidates = {"base": 0.2, "better": 1.0}
    root = _command_project(make_project, n_tasks=8, trials=2, candidates=candidates)
    baseline = run_cli("gate", "--project", str(root), "--candidate", "base", env=session_cli_env)
    assert baseline.returncode == 0, baseline.stderr
    before = len(_command_calls(root))
    screen_seeds = {c["seed"] for c in _command_calls(root)}  # the screen reuses base's seeds
    results = root / ".honesteval" / "results"
    earlier = set(results.glob("*.json"))

    cluster.ensure_workers(2)
    victim = cluster.live_workers()[0]

    def kill_in_confirmation() -> None:
        while sum(c["seed"] not in screen_seeds for c in _command_calls(root)) < 3:
            time.sleep(0.02)
        os.kill(victim.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_in_confirmation, daemon=True)
    killer.start()
    args = ["gate", "--project", str(root), "--candidate", "better"]
    done = run_cli(*args, "--dask-address", cluster.address, env=session_cli_env)
    killer.join(timeout=5)
    assert done.returncode == 0, done.stderr
    assert "ACCEPT" in done.stdout, done.stdout
    assert victim.poll() == -signal.SIGKILL
    calls = _command_calls(root)[before:]
    assert any(c["pid"] == victim.pid and c["seed"] not in screen_seeds for c in calls)
    distinct = {(c["candidate"], c["task"], c["seed"]) for c in calls}
    assert len(calls) <= len(distinct) + 1
    # what the gate's evaluations stored says every call, and names each repeat by task
    stored = [json.loads(p.read_text()) for p in set(results.glob("*.json")) - earlier]
    assert sum(r["trials_ran"] for r in stored) == len(calls)
    assert sum(r["trials_repeated"] for r in stored) == len(calls) - len(distinct)
    named: Counter[str] = Counter()
    for r in stored:
        named.update(r["repeats_by_task"])
    assert dict(named) == _repeats_by_task(calls)
