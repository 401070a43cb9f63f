"""The first command of a sitting, taken apart and paired: two set-ups in alternation.

Run: ``python bench/first_command.py [--rounds 6] [--trials 4] [--a-python PY] [--b-python PY]
[--a-env K=V ...] [--b-env K=V ...]``

Each round stops the reusable server (``honesteval server stop``, untimed), then runs one
``honesteval evaluate --fresh`` per set-up, the order shifted every round, each in the same
Prefect home (migrated by an untimed warm-up command), in the environment of
``bench/vs_inspect.py`` (bytecode caches written, as a user's first run writes them). Per
command it reports: its wall time; when the server it started first answers ``/health``
(seconds from the command's start); CPU seconds of the command's own process tree (``client``),
of the server until it answers (``boot``) and until the command's requests are served
(``server``: read 1.5 s after the command ends, once the last events are recorded); and
``total`` (client + server), what the machine spent on the command. The two set-ups differ by
their interpreter (``--a-python``, ``--b-python``: e.g. two checkouts' virtual environments)
and their environment (``--a-env``, ``--b-env``). Ratios are B / A within a round (below 1: B
cheaper), their median and min–max over rounds. CPU seconds are what to trust on a shared
machine (the 1-minute load is printed per command); the wall only on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import make_project
from vs_inspect import base_env

from honesteval.server.localserver import SERVER_FILE
from honesteval.server.sitting import IDLE_VAR

#: Seconds after the command's end before the server's CPU is read (its recorder flushes
#: every second).
SETTLE_S = 1.5


@dataclass(frozen=True)
class Setup:
    """One side of the pairing: its ``honesteval`` script and its environment."""

    name: str
    cli: str
    env: dict[str, str]


@dataclass(frozen=True)
class FirstCommand:
    """One whole first command: seconds of wall, CPU seconds, the load when it started."""

    wall_s: float
    ready_s: float
    client_cpu_s: float
    boot_cpu_s: float
    server_cpu_s: float
    load: float

    @property
    def total_cpu_s(self) -> float:
        return self.client_cpu_s + self.server_cpu_s


def cpu_of(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def announced(home: Path) -> dict[str, object] | None:
    try:
        found = json.loads((home / SERVER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def answers(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=0.5) as reply:
            return bool(reply.status == 200)
    except (OSError, ValueError):
        return False


def first_command(setup: Setup, project: Path) -> FirstCommand:
    """Stop the server, then time one whole first command of a sitting."""
    home = Path(setup.env["PREFECT_HOME"])
    subprocess.run([setup.cli, "server", "stop"], env=setup.env, capture_output=True, check=True)
    argv = [setup.cli, "evaluate", "--project", str(project), "--candidate", "c", "--json"]
    argv += ["--fresh", "--max-concurrency", "32"]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv, env=setup.env, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    pid: int | None = None
    ready_s = boot_cpu = float("nan")
    while proc.poll() is None:
        found = announced(home) if pid is None or ready_s != ready_s else None
        if found is not None:
            pid = int(str(found["pid"]))
            if answers(str(found["api_url"])):
                ready_s, boot_cpu = time.monotonic() - t0, cpu_of(pid) or float("nan")
        time.sleep(0.01)
    wall = time.monotonic() - t0
    _, err = proc.communicate()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{' '.join(argv[:2])} exited {proc.returncode}: {err[-800:]!r}")
    time.sleep(SETTLE_S)
    server_cpu = (cpu_of(pid) if pid is not None else None) or float("nan")
    client = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return FirstCommand(wall, ready_s, client, boot_cpu, server_cpu, load)


def parse_env(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--a-env/--b-env take KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def cli_beside(python: str) -> str:
    beside = Path(python).parent / "honesteval"
    if not beside.exists():
        raise SystemExit(f"no honesteval script beside {python}")
    return str(beside)


def spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--trials", type=int, default=4, help="trials in all (4 a task)")
    parser.add_argument("--a-python", default=sys.executable)
    parser.add_argument("--b-python", default=sys.executable)
    parser.add_argument("--a-env", nargs="*", default=[], metavar="K=V")
    parser.add_argument("--b-env", nargs="*", default=[], metavar="K=V")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="honesteval-first-"))
    base = {**base_env(work / "prefect"), IDLE_VAR: "7200"}
    setups = [
        Setup("A", cli_beside(args.a_python), {**base, **parse_env(args.a_env)}),
        Setup("B", cli_beside(args.b_python), {**base, **parse_env(args.b_env)}),
    ]
    project = make_project(max(1, args.trials // 4), "pass", name="first", trials=4)
    for setup in setups:  # untimed: the database, and each set-up's first boot
        first_command(setup, project)
    runs: dict[str, list[FirstCommand]] = {s.name: [] for s in setups}
    for r in range(args.rounds):
        for setup in setups[r % 2 :] + setups[: r % 2]:
            run = first_command(setup, project)
            runs[setup.name].append(run)
            print(
                f"round {r + 1} {setup.name}: wall {run.wall_s:.2f} s, answers at "
                f"{run.ready_s:.2f} s, CPU client {run.client_cpu_s:.2f} boot "
                f"{run.boot_cpu_s:.2f} server {run.server_cpu_s:.2f} total "
                f"{run.total_cpu_s:.2f} (load {run.load:.1f})",
                flush=True,
            )
    subprocess.run([setups[0].cli, "server", "stop"], env=setups[0].env, capture_output=True)
    print(f"\n{args.trials} trials, {args.rounds} rounds; median [min–max]; B/A paired by round")
    print(f"A: {args.a_python} {' '.join(args.a_env)}\nB: {args.b_python} {' '.join(args.b_env)}")
    metrics = ("wall_s", "ready_s", "client_cpu_s", "boot_cpu_s", "server_cpu_s", "total_cpu_s")
    for metric in metrics:
        a = [getattr(x, metric) for x in runs["A"]]
        b = [getattr(x, metric) for x in runs["B"]]
        ratios = [y / x for x, y in zip(a, b, strict=True)]
        print(f"{metric:13s} A {spread(a)}  B {spread(b)}  B/A {spread(ratios)}")


if __name__ == "__main__":
    main()
