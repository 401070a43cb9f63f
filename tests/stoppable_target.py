"""The target and scorer the interruption tests copy into throw-away projects.

As a python target (``run``/``score``) or a command target (run as a script: the task as JSON
on stdin, JSON on stdout). Each call sleeps ``task["input"]["sleep"]`` seconds, then appends
one line (candidate, task id, seed) to ``calls.log`` beside this file: a line is a call that
was paid for in full. The scorer sleeps ``task["input"]["score_sleep"]`` seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _paid(candidate: str, task_id: str, seed: int) -> None:
    line = json.dumps({"candidate": candidate, "task": task_id, "seed": seed}) + "\n"
    fd = os.open(HERE / "calls.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write: lines of concurrent calls never mix
    finally:
        os.close(fd)


def _answer(task: dict[str, Any], candidate: str) -> dict[str, Any]:
    with open(HERE / "started.log", "a") as fh:  # a call began (not paid for yet)
        fh.write(f"{task['id']}\n")
    time.sleep(float(os.environ.get("STOPPABLE_SLEEP_S", "0")))
    passes = candidate in task["input"].get("passes", [])
    return {"answer": task["target"] if passes else "wrong"}


def run(task: dict[str, Any], candidate_dir: str, seed: int) -> dict[str, Any]:
    reply = _answer(task, Path(candidate_dir).name)
    _paid(Path(candidate_dir).name, task["id"], seed)
    return reply


def score(task: dict[str, Any], output: dict[str, Any]) -> float:
    time.sleep(float(os.environ.get("STOPPABLE_SCORE_SLEEP_S", "0")))
    return 1.0 if output["answer"] == task["target"] else 0.0


if __name__ == "__main__":
    request = json.loads(sys.stdin.read())
    candidate = os.environ["HONESTEVAL_CANDIDATE"]
    print(json.dumps(_answer(request, candidate)), flush=True)
    _paid(candidate, request["id"], int(os.environ["HONESTEVAL_SEED"]))
    os._exit(0)  # done: paid and answered, nothing after (a stop right here would be a race)
