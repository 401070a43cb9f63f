"""What the sandbox costs a trial: the same target run unconfined, in bwrap and in unshare.

Run: ``.venv/bin/python bench/sandbox_overhead.py [TRIALS]`` (default 40 per arm). One
process, one project; the arms take turns trial by trial (off, bwrap, unshare, off, ...), so
a slower minute of a shared machine slows every arm alike. Two targets: a ``command`` target
(``{python} runner.py``, which loads the candidate's ``solve.py``, as the circle-packing
example does) and an ``isolate: true`` python target. Prints the median wall time of a
trial per arm, the ratio to the unconfined arm, and the difference in ms.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from honesteval.adapters import build_adapter
from honesteval.adapters._sandbox import Bwrap, Engine, Unshare, engine_here
from honesteval.project.loader import load_project

RUNNER = """\
import json, os, runpy, sys
task = json.load(sys.stdin)
solve = runpy.run_path(os.path.join(os.environ["HONESTEVAL_CANDIDATE_DIR"], "solve.py"))
json.dump(solve["solve"](task), sys.stdout)
"""
TARGET = """\
import os, runpy

def run(task, candidate_dir, seed):
    return runpy.run_path(os.path.join(candidate_dir, "solve.py"))["solve"](task)

def score(task, output):
    return 1.0
"""
SOLVE = "def solve(task):\n    return task['input'] * 2\n"

ADAPTERS = {
    "command": {"kind": "command", "command": ["{python}", "runner.py"], "scorer": "target:score"},
    "isolated": {
        "kind": "python",
        "target": "target:run",
        "scorer": "target:score",
        "isolate": True,
    },
}


def project(folder: Path, adapter: dict[str, object]) -> Path:
    folder.mkdir(parents=True)
    (folder / "candidates/base").mkdir(parents=True)
    (folder / "candidates/base/solve.py").write_text(SOLVE)
    (folder / "runner.py").write_text(RUNNER)
    (folder / "target.py").write_text(TARGET)
    (folder / "tasks.jsonl").write_text('{"id": "t", "input": 21}\n')
    config = {
        "name": folder.name,
        "splits": {"train": [], "val": ["t"], "test": []},
        "adapter": adapter,
    }
    (folder / "honesteval.yaml").write_text(yaml.safe_dump(config))
    return folder


def main(trials: int) -> None:
    here = engine_here()
    print(f"sandbox here: {here.name if here else 'none'}; {trials} trials per arm, in turns")
    arms: dict[str, Engine | None] = {"off": None, "bwrap": Bwrap(), "unshare": Unshare()}
    with tempfile.TemporaryDirectory(prefix="honesteval-bench-sandbox-") as tmp:
        for kind, adapter_cfg in ADAPTERS.items():
            proj = load_project(project(Path(tmp) / kind, adapter_cfg))
            target = build_adapter(proj).target
            cand = proj.candidate("base")
            task = proj.all_tasks[0]
            confined = target.sandbox  # type: ignore[attr-defined]
            runs = {
                arm: dataclasses.replace(
                    confined,
                    engine=engine,
                    config=confined.config.model_copy(
                        update={"mode": "off" if engine is None else "auto"}
                    ),
                )
                for arm, engine in arms.items()
            }
            times: dict[str, list[float]] = {arm: [] for arm in arms}
            for _ in range(trials):
                for arm, sandbox in runs.items():
                    target.sandbox = sandbox  # type: ignore[attr-defined]
                    t0 = time.perf_counter()
                    rollout = target.run(task, cand, seed=0, trial=0)
                    times[arm].append(time.perf_counter() - t0)
                    assert rollout.output == 42, (arm, rollout.output)
            base = statistics.median(times["off"])
            for arm, seen in times.items():
                med = statistics.median(seen)
                print(
                    f"{kind:9s} {arm:8s} median {med * 1000:7.1f} ms  "
                    f"ratio {med / base:5.2f}  +{(med - base) * 1000:6.1f} ms a trial"
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
