"""Latency of `prefect deployment run evaluate/val --watch` for a 200-trial project.

Starts `honesteval server` (free port, throw-away PREFECT_HOME) and `honesteval serve`, then
times the literal command three times per runner poll interval, split (from the API) into
scheduling latency (flow run created → started) and flow time (started → ended). Everything
it starts, it stops. Run: .venv/bin/python bench/deployment.py
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _common import make_project

from honesteval.server.localserver import LocalServer, stop_group

BIN = Path(sys.executable).parent


def ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def wait(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("timed out")


def measure(poll_s: int, runs: int = 3) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix="honesteval-bench-home-"))
    project = make_project(50, "pass", name="deploy", trials=4)  # 200 trials
    with LocalServer(home) as server:
        api = server.api_url
        client = {
            **server.env,
            "PREFECT_LOGGING_LEVEL": "WARNING",
            "PREFECT_RUNNER_POLL_FREQUENCY": str(poll_s),
        }
        served = subprocess.Popen(
            [str(BIN / "honesteval"), "serve", "--project", str(project)],
            env=client,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            return time_runs(api, client, runs)
        finally:
            stop_group(served, signal.SIGINT)


def time_runs(api: str, client: dict[str, str], runs: int) -> dict[str, float]:
    wait(lambda: httpx.get(f"{api}/deployments/name/evaluate/val").status_code == 200, 60)
    dep = httpx.get(f"{api}/deployments/name/evaluate/val").json()["id"]
    walls, latencies, flows = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [
                str(BIN / "prefect"),
                "deployment",
                "run",
                "evaluate/val",
                "-p",
                "candidate=c",
                "-p",
                "fresh=true",
                "--watch",
            ],
            env=client,
            check=True,
            capture_output=True,
        )
        walls.append(time.perf_counter() - t0)
        run = httpx.post(
            f"{api}/flow_runs/filter",
            json={
                "flow_runs": {"deployment_id": {"any_": [dep]}},
                "sort": "START_TIME_DESC",
                "limit": 1,
            },
        ).json()[0]
        latencies.append(ts(run["start_time"]) - ts(run["created"]))
        flows.append(ts(run["end_time"]) - ts(run["start_time"]))
    return {
        "wall": statistics.median(walls),
        "latency": statistics.median(latencies),
        "flow": statistics.median(flows),
    }


def main() -> None:
    print("prefect deployment run evaluate/val --watch, 200 trials (50 tasks x 4), median of 3")
    for poll in (10, 1):
        m = measure(poll)
        print(
            f"  runner poll {poll:>2} s: command to Completed {m['wall']:.1f} s = scheduling "
            f"latency {m['latency']:.1f} s + flow {m['flow']:.1f} s (+ CLI start/watch)"
        )


if __name__ == "__main__":
    main()
