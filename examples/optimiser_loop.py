"""An optimiser loop on the Python API: propose, gate, keep the best. No CLI, no Prefect.

    python examples/optimiser_loop.py [PROJECT]

Without PROJECT it builds a toy project in a temporary folder: the candidate is one file,
``answer.txt``, and a task is solved when the answer matches its target. The proposer is a
random search over answers; a real one would call an LLM with the last decision's feedback.
Every trial is stored in the project's ``.honesteval/``: run it twice and the second run
reuses what the first paid for.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path

import honesteval
from honesteval.models import GateDecision

TARGET = """\
from pathlib import Path


def run(task, candidate_dir, seed):
    return (Path(candidate_dir) / "answer.txt").read_text().strip()


def score(task, output):
    return {"reward": 1.0 if output == task["target"] else 0.0}
"""


def toy_project(root: Path) -> Path:
    """12 val tasks: 8 want "yes", 4 want "no"; the baseline answers "maybe"."""
    targets = ["yes", "yes", "no"] * 4
    tasks = [{"id": f"t{i:02d}", "input": i, "target": t} for i, t in enumerate(targets)]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    ids = json.dumps([t["id"] for t in tasks])
    (root / "honesteval.yaml").write_text(
        "name: optimiser-loop\ntasks: tasks.jsonl\n"
        f"splits: {{train: [], val: {ids}, test: []}}\n"
        'adapter: {kind: python, target: "target:run", scorer: "target:score"}\n'
        "trials: 2\n"
    )
    (root / "target.py").write_text(TARGET)
    (root / "candidates" / "baseline").mkdir(parents=True)
    (root / "candidates" / "baseline" / "answer.txt").write_text("maybe\n")
    return root


def search(project: Path, rounds: int = 6, seed: int = 0) -> GateDecision:
    """Propose ``rounds`` candidates; the gate promotes only a real gain over the best."""
    rng = random.Random(seed)
    decision = honesteval.gate(project, "baseline", orchestration="local")  # the baseline
    for step in range(rounds):
        proposal = {"answer.txt": rng.choice(["yes", "no", "maybe", "42"]) + "\n"}
        decision = honesteval.gate(project, proposal, orchestration="local")
        verdict = "promoted" if decision.accept else "kept the best"
        print(f"round {step}: {proposal['answer.txt'].strip()!r} -> {verdict}: {decision.reason}")
    return decision


def main() -> None:
    project = Path(sys.argv[1]) if len(sys.argv) > 1 else toy_project(Path(tempfile.mkdtemp()))
    search(project)
    best = honesteval.evaluate(project, orchestration="local")  # None: the current best
    print(f"best: {best.candidate} reward {best.reward:.3f} ± {best.stderr:.3f}")


if __name__ == "__main__":
    main()
