#!/usr/bin/env bash
# Programmatic step: 1.0 when the completion's last number is the target, else 0.0.
set -euo pipefail
"${HONESTEVAL_PYTHON:-python3}" - <<'PY'
import json, os, re
from pathlib import Path

task = json.loads(Path(os.environ["HONESTEVAL_TASK"]).read_text())
text = json.loads(Path(os.environ["HONESTEVAL_OUTPUT"]).read_text()) or ""
numbers = re.findall(r"-?\d+", str(text))
exact = 1.0 if numbers and numbers[-1] == str(task["target"]) else 0.0
Path(os.environ["EVE_EVAL_LOG_ROOT"], "score.yaml").write_text(f"exact: {exact}\nscore: {exact}\n")
PY
