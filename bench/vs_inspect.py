"""honesteval against Inspect AI, whole processes side by side (issue 15's table).

Run: ``python bench/vs_inspect.py [--inspect-python PATH] [--repeats 5] [--only NAME ...]``

Each workload runs as a new process of each tool, alternating (honesteval, Inspect,
honesteval, ...) so both see the same machine load; the table shows medians and the ratio
honesteval / Inspect (below 1 = honesteval faster). No-op target and scorer, concurrency 32:

* ``cold-N``: N trials (N/4 tasks × 4 trials; Inspect: N/4 samples × 4 epochs), a new CLI
  process, nothing stored yet (``--fresh``);
* ``start-4``: one task × 4 trials, cold: what a command costs before and around any work
  (its "start");
* ``io-2000``: 2,000 trials of a target that waits 50 ms (ideal: 2000 · 0.05 / 32 s); with
  ``start-4`` measured too, the script prints it against 1.25 × (ideal + start);
* ``rerun-2000``: the 2,000-trial evaluation again, every trial stored (honesteval reuses
  them; Inspect has no reuse, so it runs them again);
* peak RSS of each whole process tree (the CLI and any Prefect server it starts), 2,000 trials.

honesteval runs twice per workload when ``--server`` is given: as a user starts it (a
temporary Prefect server that dies with the CLI) and with ``honesteval server`` up.

Inspect AI is not installed by this script: install the ``[bench]`` extra, or point
``--inspect-python`` (or ``HONESTEVAL_BENCH_INSPECT_PYTHON``) at an interpreter that has it,
so each tool runs in its own environment. Without it the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import make_project

INSPECT_TASK = """
import asyncio
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Score, mean, scorer
from inspect_ai.solver import solver


@solver
def wait(seconds: float = 0.0):
    async def solve(state, generate):
        if seconds:
            await asyncio.sleep(seconds)
        return state
    return solve


@scorer(metrics=[mean()])
def one():
    async def score(state, target):
        return Score(value=1.0)
    return score


@task
def bench(n: int = 50, epochs: int = 4, seconds: float = 0.0):
    samples = [Sample(input=f"t{i:05d}", target="x", id=f"t{i:05d}") for i in range(n)]
    return Task(dataset=MemoryDataset(samples), solver=wait(seconds), scorer=one(),
                epochs=epochs)
"""

TRIALS_PER_TASK = 4
CONCURRENCY = 32


def has_inspect(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import inspect_ai"], capture_output=True)
    return probe.returncode == 0


def tree_rss_mb(root_pid: int) -> float:
    """Resident memory of a process and all its descendants, in MB (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            pid = int(entry.name)
            children.setdefault(int(fields[1]), []).append(pid)
            rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / 2**20


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of the whole process tree of ``cmd``."""
    peak = 0.0
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_mb(proc.pid))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}: {err.decode()[-500:]}")
    return wall, peak


class Runner:
    def __init__(self, inspect_python: str, work: Path, server_url: str | None):
        self.work = work
        self.inspect_cli = [inspect_python, "-m", "inspect_ai._cli.main"]
        (work / "inspect_task.py").write_text(INSPECT_TASK)
        base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        base.update(
            PREFECT_HOME=str(work / "prefect"),
            DO_NOT_TRACK="1",
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            INSPECT_LOG_DIR=str(work / "inspect-logs"),
            # A loaded 2-core machine can take over a minute to create Prefect's database.
            PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="600",
        )
        self.env = base
        self.server_env = None if server_url is None else {**base, "PREFECT_API_URL": server_url}
        self.projects: dict[tuple[int, str], Path] = {}

    def project(self, n_trials: int, body: str) -> Path:
        key = (n_trials, body)
        if key not in self.projects:
            self.projects[key] = make_project(
                n_trials // TRIALS_PER_TASK, body, name=f"vs{n_trials}", trials=TRIALS_PER_TASK
            )
        return self.projects[key]

    def honesteval(
        self, n_trials: int, body: str, *, fresh: bool, server: bool
    ) -> tuple[float, float]:
        cmd = [sys.executable, "-m", "honesteval.cli", "evaluate", "--project"]
        cmd += [str(self.project(n_trials, body)), "--candidate", "c", "--json"]
        cmd += ["--max-concurrency", str(CONCURRENCY)] + (["--fresh"] if fresh else [])
        env = self.server_env if server and self.server_env else self.env
        return timed(cmd, env, self.work)

    def inspect(self, n_trials: int, seconds: float) -> tuple[float, float]:
        cmd = [*self.inspect_cli, "eval", "inspect_task.py"]  # relative to cwd (Inspect wants it)
        cmd += ["--model", "mockllm/model", "--max-samples", str(CONCURRENCY)]
        cmd += ["-T", f"n={n_trials // TRIALS_PER_TASK}", "-T", f"epochs={TRIALS_PER_TASK}"]
        cmd += ["-T", f"seconds={seconds}", "--display", "none"]
        return timed(cmd, self.env, self.work)


def workloads(r: Runner, server: bool) -> dict[str, Callable[[], tuple[float, float]]]:
    """name -> the honesteval run; Inspect's counterpart is in :func:`inspect_for`."""
    return {
        "start-4": lambda: r.honesteval(4, "pass", fresh=True, server=server),
        "cold-200": lambda: r.honesteval(200, "pass", fresh=True, server=server),
        "cold-2000": lambda: r.honesteval(2000, "pass", fresh=True, server=server),
        "cold-10000": lambda: r.honesteval(10000, "pass", fresh=True, server=server),
        "io-2000": lambda: r.honesteval(2000, "time.sleep(0.05)", fresh=True, server=server),
        "rerun-2000": lambda: r.honesteval(2000, "pass", fresh=False, server=server),
    }


def inspect_for(r: Runner, name: str) -> tuple[float, float]:
    n = int(name.split("-")[1])
    return r.inspect(n, 0.05 if name.startswith("io") else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--inspect-python",
        default=os.environ.get("HONESTEVAL_BENCH_INSPECT_PYTHON", sys.executable),
        help="an interpreter with inspect-ai installed (default: this one)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", nargs="*", help="workload names, e.g. cold-200 rerun-2000")
    parser.add_argument(
        "--server", action="store_true", help="also run honesteval with `honesteval server` up"
    )
    args = parser.parse_args()
    if not has_inspect(args.inspect_python):
        print(
            f"skipped: inspect-ai is not importable by {args.inspect_python}; install the "
            "[bench] extra or pass --inspect-python /path/to/python-with-inspect-ai"
        )
        return
    work = Path(tempfile.mkdtemp(prefix="honesteval-vs-inspect-"))
    server = None
    try:
        server_url = None
        if args.server:
            from honesteval.server.localserver import LocalServer

            # Its own PREFECT_HOME: the "temporary server" runs must not find it.
            server = LocalServer(work / "prefect-server").__enter__()
            server_url = server.api_url
        run(Runner(args.inspect_python, work, server_url), args)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


def run(r: Runner, args: argparse.Namespace) -> None:
    variants = {"temporary server": workloads(r, server=False)}
    if args.server:
        variants["`honesteval server` up"] = workloads(r, server=True)
    names = args.only or list(variants["temporary server"])
    # Warm-up (not measured): bytecode caches, Prefect's databases, Inspect's caches.
    for variant in variants.values():
        variant["cold-200"]()
    inspect_for(r, "cold-200")
    for name in names:
        if name.startswith("rerun"):  # every trial stored before the measured reruns
            r.honesteval(int(name.split("-")[1]), "pass", fresh=True, server=False)
    rows = []
    for name in names:
        times: dict[str, list[float]] = {v: [] for v in variants}
        rss: dict[str, list[float]] = {v: [] for v in variants}
        ins_t: list[float] = []
        ins_m: list[float] = []
        for _ in range(args.repeats):  # alternate: both tools see the same load
            for v, variant in variants.items():
                t, m = variant[name]()
                times[v].append(t)
                rss[v].append(m)
            t, m = inspect_for(r, name)
            ins_t.append(t)
            ins_m.append(m)
        ins = statistics.median(ins_t)
        for v in variants:
            he = statistics.median(times[v])
            rows.append((name, v, he, ins, he / ins, max(rss[v]), max(ins_m)))
        print(f"done {name}", file=sys.stderr, flush=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"\n{stamp}, {platform.machine()} with {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, median of {args.repeats} alternating runs, "
        f"concurrency {CONCURRENCY}, ideal for io-2000 = {2000 * 0.05 / CONCURRENCY:.3g} s\n"
    )
    print(
        "peak RSS: the whole process tree of each command (with `honesteval server` up, the "
        "server itself is not part of the CLI's tree)\n"
    )
    print("| work | honesteval with | honesteval | Inspect AI | ratio | peak RSS he / Inspect |")
    print("|---|---|---|---|---|---|")
    for name, v, he, ins, ratio, he_m, ins_m in rows:
        print(
            f"| {name} | {v} | {he:.2f} s | {ins:.2f} s | {ratio:.2f}× | "
            f"{he_m:.0f} / {ins_m:.0f} MB |"
        )
    ideal = 2000 * 0.05 / CONCURRENCY
    median = {(name, v): he for name, v, he, *_ in rows}
    for v in variants:
        if ("io-2000", v) in median and ("start-4", v) in median:
            start, io = median[("start-4", v)], median[("io-2000", v)]
            print(
                f"\nio-2000, {v}: {io:.2f} s = {io / (ideal + start):.2f}x (ideal {ideal:.3g} s "
                f"+ start {start:.2f} s); target <= 1.25x"
            )
    print(json.dumps({"rows": rows}), file=sys.stderr)


if __name__ == "__main__":
    main()
