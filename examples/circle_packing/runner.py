"""Command target: the task as JSON on stdin, the candidate's packing as JSON on stdout.

honesteval runs this once per trial with HONESTEVAL_SEED and HONESTEVAL_CANDIDATE_DIR set.
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the shared optimiser, packing.py


def main() -> None:
    task = json.load(sys.stdin)
    solver_file = Path(os.environ["HONESTEVAL_CANDIDATE_DIR"]) / "solver.py"
    spec = importlib.util.spec_from_file_location("candidate_solver", solver_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    packing = module.solve(int(task["input"]["n"]), int(os.environ["HONESTEVAL_SEED"]))
    json.dump([list(map(float, c)) for c in packing], sys.stdout)


if __name__ == "__main__":
    main()
