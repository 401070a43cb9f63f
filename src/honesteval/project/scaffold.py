"""``honesteval init``: a minimal working project to start from."""

from __future__ import annotations

import json
from pathlib import Path

from honesteval.errors import HonestevalError
from honesteval.project.config_file import PROJECT_FILE

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
timeout_s: 30                # per trial: the toy model answers at once; raise it for real ones
timeout_is: failure          # past timeout_s the trial is failed (missing: infra_error)
failure_reward: 0.0          # a trial whose target raises (not InfraError) scores this
gate: {{mode: paired, k_se: 1.0, min_coverage: 0.6, no_regression: report}}
"""

_TARGET = '''\
"""Replace with your target and scorer.

The target here is a toy model: it adds two numbers, and slips now and then, more often on
bigger sums and less often when the candidate's prompt asks it to check its work. Asked to
show its working, it crashes on the biggest sums (a failed trial: it scores failure_reward).
"""

import random
from pathlib import Path


def run(task, candidate_dir, seed):
    prompt = (Path(candidate_dir) / "prompt.txt").read_text().lower()
    a, b = (int(word) for word in task["input"].split(" + "))
    # Trial k of EVERY task gets seed base_seed + k (common random numbers across candidates),
    # so mix the task in: random.Random(seed) alone gives every task the same draw.
    rng = random.Random(f"{task['id']}:{seed}")
    if "show your working" in prompt and a + b > 115:  # a candidate that breaks on hard tasks
        raise RuntimeError(f"the working for {a} + {b} ran out of room")
    p_right = 0.9 - (a + b) / 300 + (0.4 if "check" in prompt else 0.0)
    slip = rng.choice((-10, -1, 1, 10))
    return str(a + b) if rng.random() < p_right else str(a + b + slip)


def score(task, output):
    return {"reward": 1.0 if output == task["target"] else 0.0}
'''

_PROMPT = "Answer with the number only.\n"


def _tasks(n: int = 80) -> list[dict[str, str]]:
    """n addition questions, sums from small to large (deterministic: the same for everyone)."""
    rows = []
    for i in range(n):
        a, b = 7 + (i * 37) % 90, 3 + (i * 53) % 97
        rows.append({"id": f"q{i:02d}", "input": f"{a} + {b}", "target": str(a + b)})
    return rows


def scaffold_project(directory: Path) -> Path:
    if (directory / PROJECT_FILE).exists():
        raise HonestevalError(f"{directory / PROJECT_FILE} already exists; not overwriting it")
    (directory / "candidates" / "baseline").mkdir(parents=True, exist_ok=True)
    (directory / PROJECT_FILE).write_text(_PROJECT.format(name=directory.resolve().name or "p"))
    (directory / "target.py").write_text(_TARGET)
    (directory / "candidates" / "baseline" / "prompt.txt").write_text(_PROMPT)
    with (directory / "tasks.jsonl").open("w") as fh:
        for row in _tasks():
            fh.write(json.dumps(row) + "\n")
    return directory / PROJECT_FILE
