"""The commands of a sitting: the first one (it starts the server) and a later one (the server
is up), against a temporary server per command (issue 28).

Each rotation, in a rotating order, in throw-away PREFECT_HOMEs set up beforehand (their
databases exist): `honesteval evaluate --fresh` of `--tasks` × 4 no-op trials with
`HONESTEVAL_SERVER_MODE=per-command`; the same with `reuse` after `honesteval server stop`
(the first command of a sitting), timing also how long after the command's start its server
process started (from /proc); then once more with the server up (a later command). Prints
the median wall of each. `--compare-src DIR` adds the first command of a sitting run with
`PYTHONPATH=DIR` (another version's `src`, e.g. one that starts the server later).

Run: .venv/bin/python bench/sitting.py [--rotations 4] [--tasks 50] [--compare-src DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import make_project

SRC = str(Path(__file__).resolve().parents[1] / "src")


def started_ticks(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2 :].split()[19])


def server_of(home: str) -> int | None:
    """The pid of a local server whose environment names ``home``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"honesteval.server.localserver" in (entry / "cmdline").read_bytes() and (
                f"PREFECT_HOME={home}\0".encode() in (entry / "environ").read_bytes()
            ):
                return int(entry.name)
        except OSError:
            continue
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rotations", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--compare-src", help="another version's src folder")
    args = parser.parse_args()
    root = make_project(args.tasks, "pass", name="sitting", trials=4)
    variants = {"per-command": (SRC, "per-command"), "reuse, first command": (SRC, "reuse")}
    if args.compare_src:
        variants[f"reuse, first command ({args.compare_src})"] = (args.compare_src, "reuse")
    homes = {v: tempfile.mkdtemp(prefix="honesteval-sitting-") for v in variants}
    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}

    def env(variant: str) -> dict[str, str]:
        src, mode = variants[variant]
        return {
            **base,
            "PYTHONPATH": src,
            "PREFECT_HOME": homes[variant],
            "HONESTEVAL_SERVER_MODE": mode,
        }

    cli = [sys.executable, "-m", "honesteval.cli"]
    evaluate = [*cli, "evaluate", "--project", str(root), "--candidate", "c", "--fresh"]
    for variant in variants:  # each home's first server sets up its database: not timed
        subprocess.run(evaluate, env=env(variant), capture_output=True, check=True)
    walls: dict[str, list[float]] = {v: [] for v in [*variants, "reuse, later command"]}
    offsets: dict[str, list[float]] = {v: [] for v in variants if v != "per-command"}
    hz = os.sysconf("SC_CLK_TCK")
    for rotation in range(args.rotations):
        order = (
            list(variants)[rotation % len(variants) :] + list(variants)[: rotation % len(variants)]
        )
        for variant in order:
            subprocess.run([*cli, "server", "stop"], env=env(variant), capture_output=True)
            t0 = time.monotonic()
            proc = subprocess.Popen(
                evaluate, env=env(variant), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            cli_start, server = started_ticks(proc.pid), None
            while server is None and proc.poll() is None and variant in offsets:
                server = server_of(homes[variant])
                time.sleep(0.01)
            if proc.wait() != 0:
                raise SystemExit(f"{variant}: the command failed")
            walls[variant].append(time.monotonic() - t0)
            if server is not None:
                offsets[variant].append((started_ticks(server) - cli_start) / hz)
            if variant == "reuse, first command":
                t0 = time.monotonic()
                subprocess.run(evaluate, env=env(variant), capture_output=True, check=True)
                walls["reuse, later command"].append(time.monotonic() - t0)
        print(f"rotation {rotation + 1}: load {os.getloadavg()[0]:.1f}", flush=True)
    for variant in variants:
        subprocess.run([*cli, "server", "stop"], env=env(variant), capture_output=True)
    for variant, xs in walls.items():
        line = (
            f"{variant:<40} wall median {statistics.median(xs):6.2f} s  {[round(x, 2) for x in xs]}"
        )
        if offsets.get(variant):
            line += f"; server started {statistics.median(offsets[variant]):.2f} s in"
        print(line)


if __name__ == "__main__":
    main()
