"""The fault-injecting target and scorer that tests copy into throw-away projects.

Each task says how its trials behave in ``task["input"]["behaviour"]``; every call of the
target is logged to ``calls.log`` beside this file in the project (one line per call: task id,
seed) so tests can count attempts and calls from outside.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

from honesteval import InfraError, RateLimited

HERE = Path(__file__).parent
_live = 0
_peak = 0
_lock = threading.Lock()


def _log(task_id: str, seed: int) -> None:
    line = json.dumps({"task": task_id, "seed": seed, "pid": os.getpid()}) + "\n"
    with open(HERE / "calls.log", "a") as fh:
        fh.write(line)


def calls(task_id: str, seed: int) -> int:
    """How many times the target was called before for this task and seed."""
    path = HERE / "calls.log"
    if not path.exists():
        return 0
    wanted = (task_id, seed)
    text = path.read_text()
    # another thread's line may still be being appended: only whole lines are calls
    lines = text[: text.rfind("\n") + 1].splitlines()
    return sum(1 for d in map(json.loads, lines) if (d["task"], d["seed"]) == wanted)


def run(task: dict[str, Any], candidate_dir: str, seed: int) -> dict[str, Any]:
    global _live, _peak
    inp = task["input"]
    behaviour = inp["behaviour"]
    previous = calls(task["id"], seed)
    _log(task["id"], seed)
    with _lock:
        _live += 1
        _peak = max(_peak, _live)
        (HERE / "peak.txt").write_text(str(_peak))
    try:
        if inp.get("sleep"):
            time.sleep(inp["sleep"])
        outage = Path(candidate_dir) / "outage.txt"  # this candidate's backend is down here
        if outage.exists() and task["id"] in outage.read_text().split():
            raise InfraError("outage")
        if (HERE / "drift.txt").exists():  # the world changed under the current best
            return {"answer": "drifted"}
        quality = float((Path(candidate_dir) / "quality.txt").read_text())
        if behaviour == "pass":
            return {"answer": task["target"]}
        if behaviour == "fail":
            return {"answer": "wrong"}
        if behaviour == "infra":
            raise InfraError("backend down")
        if behaviour == "flaky":  # fails twice, then works
            if previous < inp.get("failures", 2):
                raise InfraError(f"blip {previous + 1}")
            return {"answer": task["target"]}
        if behaviour == "rate_limited":
            raise RateLimited("429", retry_after=0.01)
        if behaviour == "hang":
            time.sleep(inp.get("hang_s", 5))
            return {"answer": task["target"]}
        if behaviour == "bug":
            raise ValueError("bad value in the target")
        if behaviour == "exits":  # the candidate calls sys.exit: its failure, not the harness's
            raise SystemExit(3)
        if behaviour == "interrupts":
            raise KeyboardInterrupt("candidate gave up")
        if behaviour == "crash_hard":  # returns 0.6 on most tasks, crashes on the hard ones
            if inp.get("hard"):
                raise RuntimeError("cannot handle this task")
            return {"value": 0.6}
        if behaviour == "scorer_error":
            return {"answer": "UNGRADEABLE"}
        if behaviour == "nan":
            return {"answer": "NAN"}
        if behaviour == "seeded":  # passes with probability `quality`, decided by the seed
            ok = random.Random(f"{task['id']}-{seed}").random() < quality
            return {"answer": task["target"] if ok else "wrong"}
        if behaviour == "graded":  # a continuous reward that depends on the seed
            return {"value": min(1.0, quality * random.Random(seed).random() + 0.1)}
        if behaviour == "same":  # ignores its seed
            return {"answer": task["target"]}
        raise AssertionError(behaviour)
    finally:
        with _lock:
            _live -= 1


def score(task: dict[str, Any], output: dict[str, Any]) -> float | dict[str, Any]:
    if "value" in output:
        return {"reward": output["value"], "feedback": "graded"}
    answer = output["answer"]
    if answer == "UNGRADEABLE":
        raise RuntimeError("judge unreachable")
    if answer == "NAN":
        return float("nan")
    return {
        "reward": 1.0 if answer == task["target"] else 0.0,
        "feedback": "right" if answer == task["target"] else "wrong answer",
    }
