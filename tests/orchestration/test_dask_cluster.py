"""Trials on a real Dask cluster (``dask scheduler`` + 2 ``dask worker`` processes on
127.0.0.1, started once for the module): a worker SIGKILLed mid-batch costs no stored trial a
second target call, and the one call it had in flight is counted and said; ``honesteval gate``
runs its trials there (``--dask-address``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prefect_dask", reason="the [dask] extra is installed by `make test`")
pytestmark = [pytest.mark.usefixtures("prefect_backend"), pytest.mark.slow]

_DASK = str(Path(sys.executable).parent / "dask")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A scheduler and two single-threaded workers without nannies (a SIGKILLed worker stays
    dead: no nanny restarts it)."""

    def __init__(self, env: dict[str, str], log_dir: Path):
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        self.env = env
        self.log_dir = log_dir
        port = self.address.rsplit(":", 1)[1]
        self.scheduler = self._start(
            "scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard"
        )
        self.workers = [self._start_worker(name) for name in ("w0", "w1")]
        self.wait_for_workers(2)

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("wb")
        return subprocess.Popen(
            [_DASK, "scheduler" if name == "scheduler" else "worker", *args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def _start_worker(self, name: str) -> subprocess.Popen[bytes]:
        return self._start(
            name,
            self.address,
            "--nthreads",
            "1",
            "--no-nanny",
            "--no-dashboard",
            "--name",
            name,
        )

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            client.wait_for_workers(n, timeout=120)

    def stop(self) -> None:
        for proc in [*self.workers, self.scheduler]:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(session_cli_env: dict[str, str], tmp_path_factory) -> Iterator[Cluster]:
    running = Cluster(dict(session_cli_env), tmp_path_factory.mktemp("dask-cluster"))
    try:
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
    victim = cluster.workers[0]

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
    # the journals of the batches are gone with their batches
    assert not list((root / ".honesteval" / "batches").glob("*"))


def test_honesteval_gate_runs_its_trials_on_the_cluster(make_project, cluster, session_cli_env):
    from tests.helpers import run_cli

    tasks = [{"id": f"g{i:02d}", "input": {"behaviour": "pass"}, "target": "yes"} for i in range(6)]
    root = make_project(tasks=tasks, config={"trials": 2})
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
