#!/usr/bin/env bash
# An Eve-style evaluation step: reads the solver's output under $EVE_SOLVER_ROOT, writes
# $EVE_EVAL_LOG_ROOT/score.yaml, and exits 0 even when the candidate failed (score 0).
set -euo pipefail
"${HONESTEVAL_PYTHON:-python3}" - <<'PY'
import json, os, sys
from pathlib import Path

sys.path.insert(0, str(Path(os.environ["HONESTEVAL_PROJECT"]).parent))
from scoring import score  # the parent project's validator and reference sums

task = json.loads(Path(os.environ["HONESTEVAL_TASK"]).read_text())
output = json.loads(Path(os.environ["EVE_SOLVER_ROOT"], "output.json").read_text())
result = score(task, output)
log_root = Path(os.environ["EVE_EVAL_LOG_ROOT"])
(log_root / "score.yaml").write_text(
    f"score: {result['reward']!r}\nsummary: {json.dumps(result['feedback'])}\n"
)
if result["reward"] == 0.0:
    (log_root / "error.txt").write_text(result["feedback"] + "\n")
PY
