"""honesteval's reusable server start against Prefect's own ``prefect server start
--background`` (issue 51: use Prefect's server life cycle where it serves).

Run: ``.venv/bin/python bench/server_start.py [--rounds 5]``

Each round runs both, the order shifted every round, each in a Prefect home of its own whose
database an untimed warm-up start made (a later sitting's case): from the start of a fresh
Python process to the first 200 from ``/api/health``, then the server is stopped (SIGTERM, as
``honesteval server stop`` and ``prefect server stop`` do) and its exit awaited, untimed.
``honesteval`` is :func:`honesteval.server.sitting.join_or_start` (what the first command of a
sitting calls); ``prefect`` is the literal CLI command. Prints each start, the medians with
their min–max and the median of the per-round ratios honesteval / Prefect.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from vs_inspect import base_env

#: One start, in a process of its own: prints the seconds to a healthy server, then stops it.
START = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    t0 = time.monotonic()
    from honesteval.server.server_process import free_port, healthy

    def gone(pid):
        while True:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)

    if sys.argv[1] == "prefect":
        port = free_port()
        prefect = os.path.join(os.path.dirname(sys.executable), "prefect")
        cmd = [prefect, "server", "start", "--background", "--port", str(port)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/api"
        while not healthy(url):
            time.sleep(0.02)
        took = time.monotonic() - t0
        pid_file = os.path.join(os.environ["PREFECT_HOME"], "server.pid")
        pid = int(open(pid_file).read())
        os.kill(pid, signal.SIGTERM)
        os.unlink(pid_file)
    else:
        from honesteval.server import sitting
        chosen = sitting.join_or_start(start=True, booting_ok=True)
        while not healthy(chosen.announcement.api_url):
            time.sleep(0.02)
        took = time.monotonic() - t0
        pid = chosen.announcement.pid
        sitting.stop_server(lambda line: None)
    gone(pid)
    print(f"{took:.3f}")
    """
)
KINDS = ("honesteval", "prefect")


def start(kind: str, home: Path) -> float:
    env = base_env(home)
    out = subprocess.run(
        [sys.executable, "-c", START, kind], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout.split()[-1])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    took: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="honesteval-server-start-") as scratch:
        homes = {kind: Path(scratch, kind) for kind in KINDS}
        for kind in KINDS:  # untimed: each home's database made and migrated
            homes[kind].mkdir()
            start(kind, homes[kind])
        for r in range(args.rounds):
            order = KINDS if r % 2 == 0 else KINDS[::-1]
            for kind in order:
                took[kind].append(start(kind, homes[kind]))
                load = os.getloadavg()[0]
                print(
                    f"round {r + 1} {kind}: healthy after {took[kind][-1]:.2f} s (load {load:.1f})"
                )
    ratios = [a / b for a, b in zip(took["honesteval"], took["prefect"], strict=True)]
    print(f"\nhonesteval's reusable server: {spread(took['honesteval'])}")
    print(f"prefect server start --background: {spread(took['prefect'])}")
    print(f"honesteval / Prefect, per round: median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
