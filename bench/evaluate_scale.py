"""What ``honesteval evaluate`` costs the client at 2,000 / 10,000 / 50,000 / 200,000 trials:
peak RSS and CPU, and whether both grow linearly with the trials (issue 28 §3).

Run from the checkout, under ``nice`` on a shared machine:
``nice -n 10 .venv/bin/python bench/evaluate_scale.py [--sizes 2000 10000 50000 200000]``
(``--quick``: 2,000 and 10,000; ``--compare-src DIR``: each size also run with
``PYTHONPATH=DIR``, another version's ``src``, e.g. main's, on the same project, up to
``--compare-up-to N`` trials if given).

For each size: a val-only project of N/4 tasks × 4 trials whose python target does nothing
and scores 1.0 (``_common.make_project``), then ``honesteval evaluate --fresh --json
--max-concurrency 32`` in its own process under ``/usr/bin/time -v``: wall, CPU (user +
system) and peak RSS of the client. Every command talks to one reusable ``honesteval``
server in a scratch PREFECT_HOME, started (and its database made) by an untimed first
command and stopped at the end, so no row pays a server's boot and no row's RSS holds the
server. The last lines are the slopes between sizes: CPU ms and RSS KB per trial; a cost
linear in the work has a flat CPU slope and an RSS slope that does not grow.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import itertools

from _common import make_project, quiet_prefect, timed_cli

SRC = str(Path(__file__).resolve().parents[1] / "src")
TRIALS_PER_TASK = 4
CONCURRENCY = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000, 50_000, 200_000])
    parser.add_argument("--quick", action="store_true", help="2,000 and 10,000 trials only")
    parser.add_argument("--compare-src", help="another version's src folder, run beside this one")
    parser.add_argument(
        "--compare-up-to", type=int, help="run --compare-src only up to this many trials"
    )
    args = parser.parse_args()
    sizes = [2_000, 10_000] if args.quick else args.sizes
    quiet_prefect()
    variants = {"this": SRC}
    if args.compare_src:
        variants["compare"] = str(Path(args.compare_src).resolve())
    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    envs = {name: {**base, "PYTHONPATH": src} for name, src in variants.items()}
    cli = [sys.executable, "-m", "honesteval.cli"]
    warm = make_project(4, "pass", name="warm-up", trials=1)
    evaluate = ["evaluate", "--candidate", "c", "--fresh", "--json"]
    evaluate += ["--max-concurrency", str(CONCURRENCY)]
    subprocess.run(
        [*cli, *evaluate, "--project", str(warm)], env=envs["this"], check=True, capture_output=True
    )  # starts the server, makes its database: untimed
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {TRIALS_PER_TASK} trials per "
        f"task, no-op python target, concurrency {CONCURRENCY}, one reusable server; "
        + ", ".join(f"{name}: {src}" for name, src in variants.items())
    )
    print(
        f"{'trials':>7} {'src':>8} | {'wall s':>7} {'CPU s':>7} {'RSS MB':>7} | "
        f"{'CPU ms/trial':>12} {'load':>5}"
    )
    rows: dict[str, list[tuple[int, float, float]]] = {name: [] for name in variants}
    try:
        for n in sizes:
            root = make_project(n // TRIALS_PER_TASK, "pass", name="scale", trials=TRIALS_PER_TASK)
            try:
                for name in variants:
                    if name == "compare" and n > (args.compare_up_to or n):
                        continue
                    wall, cpu, rss, out = timed_cli([*evaluate, "--project", str(root)], envs[name])
                    result = json.loads(out)
                    done = result["trials_ok"]
                    assert done == n and result["coverage"] == 1.0, (done, result["coverage"])
                    rows[name].append((n, cpu, rss))
                    print(
                        f"{n:>7} {name:>8} | {wall:>7.1f} {cpu:>7.1f} {rss:>7.0f} | "
                        f"{1e3 * cpu / n:>12.2f} {os.getloadavg()[0]:>5.1f}",
                        flush=True,
                    )
            finally:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        subprocess.run([*cli, "server", "stop"], env=envs["this"], capture_output=True)
        shutil.rmtree(warm, ignore_errors=True)
        shutil.rmtree(os.environ["PREFECT_HOME"], ignore_errors=True)
    print("slopes between sizes (what one more trial costs):")
    for name, points in rows.items():
        for (n0, cpu0, rss0), (n1, cpu1, rss1) in itertools.pairwise(points):
            print(
                f"  {name:>8} {n0:>7} -> {n1:>7}: CPU {1e3 * (cpu1 - cpu0) / (n1 - n0):.3f} "
                f"ms/trial, RSS {1024 * (rss1 - rss0) / (n1 - n0):.2f} KB/trial"
            )


if __name__ == "__main__":
    main()
