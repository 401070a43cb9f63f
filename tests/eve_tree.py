"""A copy of an Eve ``configs/`` tree in Eve's layout and keys, and Eve's own way to run it.

The evaluation script follows the contract of Eve's circle_packing ``evaluation.sh`` (run
``python3 evaluate.py`` in ``$EVE_SOLVER_ROOT``, turn its JSON stdout into
``$EVE_EVAL_LOG_ROOT/score.yaml``; when the evaluator fails, write a zero score and
``error.txt`` and still exit 0). Written for these tests, it is not Eve's file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

EVAL_CONFIG = "configs/eve/evaluation/circle_packing.yaml"
EVAL_SCRIPT = "configs/eve/evaluation/circle_packing/evaluation.sh"

# The `evaluation:` block of Eve's circle_packing config: every key Eve has there.
EVE_BLOCK = {
    "steps": [EVAL_SCRIPT],
    "failure_score": {"score": 0.0, "summary": "evaluation failed"},
    "seed_solver_score": None,
    "seed_solver_skip_evaluation": False,
}

EVALUATION_SH = r"""#!/usr/bin/env bash
set -euo pipefail
mkdir -p "$EVE_EVAL_LOG_ROOT"
score_path="$EVE_EVAL_LOG_ROOT/score.yaml"
error_path="$EVE_EVAL_LOG_ROOT/error.txt"
out="$(mktemp)"; err="$(mktemp)"
trap 'rm -f "$out" "$err"' EXIT
status=0
( cd "$EVE_SOLVER_ROOT" && python3 evaluate.py ) >"$out" 2>"$err" || status=$?
cat "$out"; cat "$err" >&2
if [[ $status -ne 0 ]]; then
  printf 'score: 0.0\nsummary: evaluation command failed\n' >"$score_path"
  printf 'Evaluation command failed with exit code %s\n' "$status" >"$error_path"
  exit 0
fi
python3 - "$out" "$score_path" <<'PY'
import json, sys
from pathlib import Path
import yaml
payload = json.loads(Path(sys.argv[1]).read_text())
float(payload["score"])
Path(sys.argv[2]).write_text(yaml.safe_dump(payload, sort_keys=False))
PY
"""

# A circle-packing candidate in Eve's shape: evaluate.py (the task's harness) prints the score
# of candidate.py's packing of 26 circles: k x k grid cells of radius 1/(2k).
EVALUATE_PY = """import json
from candidate import cells_per_side
n = 26
k = cells_per_side(n)
assert k * k >= n, "the grid has too few cells"
total = n / (2 * k)
print(json.dumps({"score": min(1.0, total / 2.635), "summary": f"sum of radii {total:.4f}"}))
"""

CANDIDATES = {
    # ceil(sqrt(26)) = 6: sum 26/12
    "grid": "import math\ndef cells_per_side(n):\n    return math.ceil(math.sqrt(n))\n",
    # one cell more per side: sum 26/14
    "loose": "import math\ndef cells_per_side(n):\n    return math.ceil(math.sqrt(n)) + 1\n",
    # too few cells: evaluate.py fails, the candidate scores 0 (a real failure)
    "broken": "def cells_per_side(n):\n    return 3\n",
}
EXPECTED = {"grid": (26 / 12) / 2.635, "loose": (26 / 14) / 2.635, "broken": 0.0}


def write_eve_tree(root: Path) -> Path:
    """``root/configs/...`` as in Eve's repository; returns ``root``."""
    script = root / EVAL_SCRIPT
    script.parent.mkdir(parents=True)
    script.write_text(EVALUATION_SH)
    text = "# @package _global_\n" + yaml.safe_dump({"evaluation": EVE_BLOCK}, sort_keys=False)
    (root / EVAL_CONFIG).write_text(text)
    return root


def write_candidates(folder: Path) -> None:
    for name, code in CANDIDATES.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "candidate.py").write_text(code)
        (folder / name / "evaluate.py").write_text(EVALUATE_PY)


def eve_reward(script: Path, candidate: Path, workspace: Path) -> float:
    """Score a candidate as Eve's evaluation phase does: a fresh workspace with a read-only
    ``solver/``, ``bash step.sh`` with Eve's variables, the ``score`` of score.yaml."""
    solver = workspace / "solver"
    shutil.copytree(candidate, solver)
    for path in [solver, *solver.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    (workspace / "logs" / "evaluate").mkdir(parents=True)
    env = {
        **os.environ,
        "EVE_WORKSPACE_ROOT": str(workspace),
        "EVE_SOLVER_ROOT": str(solver),
        "EVE_EVAL_LOG_ROOT": str(workspace / "logs" / "evaluate"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    subprocess.run(["bash", str(script)], cwd=workspace, env=env, check=True, capture_output=True)
    score = yaml.safe_load((workspace / "logs" / "evaluate" / "score.yaml").read_text())
    return float(score["score"])
