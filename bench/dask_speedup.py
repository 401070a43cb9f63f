"""CPU-bound trials: the circle-packing solver in-process, thread runner vs Dask LocalCluster.

Python threads share one GIL, so CPU-bound python targets do not run in parallel on the
thread runner; a 2-worker Dask LocalCluster runs them in two processes. Prints both flow
times and a plain serial loop over the same trials. Run: .venv/bin/python bench/dask_speedup.py
"""

from __future__ import annotations

import os

# One BLAS thread per process: two trials in flight on two cores would otherwise each start a
# BLAS pool and oversubscribe the machine (and last-bit BLAS differences between processes
# would change SLSQP's path). Set before numpy is imported; Dask workers inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import quiet_prefect

quiet_prefect()

from honesteval.evaluation.plan import adapter_for, plan_evaluation  # noqa: E402
from honesteval.evaluation.trial import run_trial_with_retries  # noqa: E402
from honesteval.orchestration.flows import evaluate  # noqa: E402
from honesteval.server.in_process import in_process_runs  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "circle_packing"


def make_project() -> Path:
    """The circle-packing benchmark with an in-process python target (GIL-bound)."""
    root = Path(tempfile.mkdtemp(prefix="honesteval-cp-python-"))
    for name in ("packing.py", "scoring.py"):
        (root / name).write_text((EXAMPLE / name).read_text())
    (root / "candidates" / "restarts").mkdir(parents=True)
    (root / "candidates" / "restarts" / "solver.py").write_text(
        (EXAMPLE / "candidates" / "restarts" / "solver.py").read_text()
    )
    (root / "target.py").write_text(
        "import importlib.util, sys\nfrom pathlib import Path\n"
        "sys.path.insert(0, str(Path(__file__).parent))\n"
        "def run(task, candidate_dir, seed):\n"
        "    spec = importlib.util.spec_from_file_location('s', Path(candidate_dir) / "
        "'solver.py')\n"
        "    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "    return [list(c) for c in m.solve(int(task['input']['n']), seed)]\n"
    )
    ids = [f"n{n}" for n in range(26, 34)]
    (root / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": f"n{n}", "input": {"n": n}}) + "\n" for n in range(26, 34))
    )
    (root / "honesteval.yaml").write_text(
        json.dumps(
            {
                "name": "cp-python",
                "tasks": "tasks.jsonl",
                "splits": {"train": [], "val": ids, "test": []},
                "adapter": {"kind": "python", "target": "target:run", "scorer": "scoring:score"},
                "trials": 4,
                "pass_threshold": 0.97,
                "timeout_s": 600,
            }
        )
    )
    return root


def main() -> None:
    root = make_project()
    plan = plan_evaluation(root, "restarts", "val", fresh=True)
    adapter = adapter_for(str(root))
    t0 = time.perf_counter()
    for spec in plan.todo:
        run_trial_with_retries(adapter, spec, plan.settings)
    serial = time.perf_counter() - t0
    with in_process_runs():
        evaluate(str(root), "restarts", "val", n_trials=1, task_ids=["n26"])  # server up
        t0 = time.perf_counter()
        threads = evaluate(str(root), "restarts", "val", fresh=True, max_concurrency=2)
        t_threads = time.perf_counter() - t0
        t0 = time.perf_counter()
        dask = evaluate(
            str(root), "restarts", "val", fresh=True, max_concurrency=2, task_runner="dask"
        )
        t_dask = time.perf_counter() - t0
        # An existing cluster (the production set-up): started once, warmed by one run.
        from distributed import LocalCluster

        with LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster:
            evaluate(
                str(root),
                "restarts",
                "val",
                n_trials=1,
                task_ids=["n26"],
                fresh=True,
                task_runner="dask",
                dask_address=cluster.scheduler_address,
            )
            t0 = time.perf_counter()
            warm = evaluate(
                str(root),
                "restarts",
                "val",
                fresh=True,
                max_concurrency=2,
                task_runner="dask",
                dask_address=cluster.scheduler_address,
            )
            t_warm = time.perf_counter() - t0
    diffs = [
        abs(x - y)
        for other in (dask, warm)
        for a, b in zip(threads.per_task, other.per_task, strict=True)
        for x, y in zip(a.rewards, b.rewards, strict=True)
    ]
    n = len(plan.todo)
    print(f"circle packing in-process, {n} CPU-bound trials (8 tasks x 4), 2 cores")
    print(f"  plain serial loop          : {serial:.1f} s")
    print(f"  evaluate, thread runner (2): {t_threads:.1f} s = {serial / t_threads:.2f}x serial")
    print(
        f"  evaluate, Dask LocalCluster: {t_dask:.1f} s = {serial / t_dask:.2f}x serial, "
        f"{t_threads / t_dask:.2f}x the thread runner (starts and stops its cluster: ~10 s)"
    )
    print(
        f"  evaluate, existing cluster : {t_warm:.1f} s = {serial / t_warm:.2f}x serial, "
        f"{t_threads / t_warm:.2f}x the thread runner (--dask-address, 2 workers, warm)"
    )
    print(
        f"  reward: threads {threads.reward:.4f}, Dask {dask.reward:.4f}; largest per-trial "
        f"difference {max(diffs):.1e} (OPENBLAS_NUM_THREADS="
        f"{os.environ['OPENBLAS_NUM_THREADS']})"
    )


if __name__ == "__main__":
    main()
