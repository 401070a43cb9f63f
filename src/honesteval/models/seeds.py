"""The seed contract: the seed trial k of a task runs at (the target gets it as ``seed``).

Two schemes, both the same for every candidate (a paired comparison runs both sides of a pair
at one seed):

* ``shared`` (evaluations, the gate's screen, nightly re-runs): trial k of **every** task runs
  at ``base_seed + k`` (common random numbers across candidates).
* ``per_task`` (the gate's confirmations): trial k of task t runs at a seed derived from
  (``base_seed``, t, k) by a stable hash, so the tasks of one confirmation round run at
  different seeds. The confirmation's level assumes that, given the past, a round's trials are
  independent; under ``shared`` seeds a target whose randomness ignores the task
  (``random.Random(seed)``) gives every task of a round the same draw, and a candidate no
  better than the best was promoted in 22 % of confirmations at alpha_j = 1e−2 (12 tasks × 30
  rounds, ``bench/round_dependence.py``).

Per-task seeds lie in [2^48, 2^53): exact as a JSON number (a double), and above any shared
seed a project uses, so a confirmation never reuses a screen's trial.
"""

from __future__ import annotations

import hashlib
from typing import Literal

__all__ = ["PER_TASK_SEED_HIGH", "PER_TASK_SEED_LOW", "Seeding", "trial_seed"]

Seeding = Literal["shared", "per_task"]

PER_TASK_SEED_LOW = 2**48
PER_TASK_SEED_HIGH = 2**53


def trial_seed(base_seed: int, task_id: str, trial: int, seeding: Seeding = "shared") -> int:
    """The seed of trial ``trial`` (0-based) of task ``task_id`` under ``seeding``.

    >>> trial_seed(7, "t1", 2)
    9
    >>> trial_seed(7, "t1", 2, "per_task") == trial_seed(7, "t1", 2, "per_task")
    True
    >>> trial_seed(7, "t1", 2, "per_task") != trial_seed(7, "t2", 2, "per_task")
    True
    """
    if seeding == "shared":
        return base_seed + trial
    # blake2b, not hash(): Python salts str hashes per process, and a resumed confirmation
    # must find its stored trials at the same seeds. The fields cannot run into each other:
    # the two integers hold no "|", so the task id is everything between the first and last.
    key = f"{base_seed}|{task_id}|{trial}".encode()
    digest = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
    return PER_TASK_SEED_LOW + digest % (PER_TASK_SEED_HIGH - PER_TASK_SEED_LOW)
