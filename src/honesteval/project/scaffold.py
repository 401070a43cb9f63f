"""``honesteval init``: a minimal working project to start from."""

from __future__ import annotations

import json
from pathlib import Path

from honesteval.errors import HonestevalError
from honesteval.project.loader import PROJECT_FILE

_PROJECT = """\
name: {name}
tasks: tasks.jsonl
splits: {{seed: 0, train: 0.5, val: 0.25, test: 0.25}}
adapter:
  kind: python
  target: target:run        # run(task, candidate_dir, seed) -> output
  scorer: target:score      # score(task, output) -> float in [0, 1]
candidates: candidates
trials: 3
base_seed: 0
pass_threshold: 1.0
retries: 3
timeout_s: 600
timeout_is: failure          # past timeout_s the trial is failed (missing: infra_error)
failure_reward: 0.0          # a trial whose target raises (not InfraError) scores this
gate: {{mode: paired, k_se: 1.0, min_coverage: 0.6, no_regression: report}}
"""

_TARGET = '''\
"""Replace with your target and scorer."""

import random
from pathlib import Path


def run(task, candidate_dir, seed):
    prompt = (Path(candidate_dir) / "answer.txt").read_text().strip()
    # Trial k of EVERY task gets seed base_seed + k (common random numbers across candidates),
    # so mix the task in: random.Random(seed) alone gives every task the same draw.
    rng = random.Random(f"{task['id']}:{seed}")
    return prompt if rng.random() < 0.8 else "noise"


def score(task, output):
    return {"reward": 1.0 if output == task["target"] else 0.0}
'''


def scaffold_project(directory: Path) -> Path:
    if (directory / PROJECT_FILE).exists():
        raise HonestevalError(f"{directory / PROJECT_FILE} already exists; not overwriting it")
    (directory / "candidates" / "baseline").mkdir(parents=True, exist_ok=True)
    (directory / PROJECT_FILE).write_text(_PROJECT.format(name=directory.resolve().name or "p"))
    (directory / "target.py").write_text(_TARGET)
    (directory / "candidates" / "baseline" / "answer.txt").write_text("42\n")
    with (directory / "tasks.jsonl").open("w") as fh:
        for i in range(20):
            fh.write(json.dumps({"id": f"q{i:02d}", "input": i, "target": "42"}) + "\n")
    return directory / PROJECT_FILE
