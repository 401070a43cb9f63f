"""A project's state folder written directly with store.py (no target runs): for report tests
and bench/report_size.py. Statuses and rewards come from a seeded RNG."""

from __future__ import annotations

import random
from pathlib import Path

from honesteval.gating.ledger import read_best, record_decision
from honesteval.models import TaskTrials, TrialRecord, utc_now
from honesteval.project.loader import load_project
from honesteval.stats import aggregate, baseline_decision, decide, drift_report
from honesteval.store.state_dir import Store
from honesteval.store.trial_log import deferred_sync
from tests.helpers import ProjectFactory

#: (status, probability) of a synthetic trial; the rest are ok.
ERROR_RATES = (("infra_error", 0.04), ("scorer_error", 0.03), ("failed", 0.03))
FAILURE_REWARD = 0.0


def _status(rng: random.Random) -> str:
    u = rng.random()
    for status, p in ERROR_RATES:
        if u < p:
            return status
        u -= p
    return "ok"


def _task_trials(
    store: Store, name: str, fp: str, quality: float, tid: str, n_trials: int, output_chars: int
) -> TaskTrials:
    """Store the seeded trials of one task and return them as the aggregate's input."""
    statuses, rewards = [], []
    for k in range(n_trials):
        rng = random.Random(f"{name}/{tid}/{k}")
        status = _status(rng)
        reward = (
            float(rng.random() < quality)
            if status == "ok"
            else FAILURE_REWARD
            if status == "failed"
            else None
        )
        store.write_trial(
            TrialRecord(
                task_id=tid,
                candidate=name,
                fingerprint=fp,
                split="val",
                trial=k,
                seed=k,
                status=status,  # type: ignore[arg-type]
                reward=reward,
                feedback=None if reward is None else f"graded {reward:g}",
                error=None if status == "ok" else f"{status} on {tid}",
                errors=[] if status == "ok" else [f"{status} on {tid}"],
                started_at=utc_now(),
                rollout={"answer": "x" * output_chars, "seed": k},
            )
        )
        statuses.append(status)
        rewards.append(reward)
    return TaskTrials(id=tid, statuses=statuses, rewards=rewards)


def synthetic_state(
    base: Path,
    n_tasks: int,
    candidates: dict[str, float],
    *,
    n_trials: int = 3,
    output_chars: int = 100,
    task_ids: list[str] | None = None,
    stored_results: int = 1,
) -> Path:
    """A project with ``n_tasks`` val tasks and every candidate evaluated on val (trial files
    and a stored result each; ``stored_results`` > 1: the same version rerun, each rerun
    storing its result again); the first candidate is the baseline, each later one is gated
    against the current best, and one drift check of the final best is recorded. Trials are
    appended as a run's batches do (one fsync per candidate, :func:`deferred_sync`)."""
    ids = task_ids or [f"task-{i:04d}" for i in range(n_tasks)]
    tasks = [{"id": t, "input": {"behaviour": "seeded"}, "target": "yes"} for t in ids]
    root = ProjectFactory(base)(tasks=tasks, candidates=candidates)
    proj = load_project(root)
    proj.frozen_split()  # frozen on first use, before anything is stored, as in a real run
    store = Store(proj.state_dir)
    results = {}
    for name, quality in candidates.items():
        fp = proj.candidate(name).fingerprint
        with deferred_sync():
            inputs = [
                _task_trials(store, name, fp, quality, tid, n_trials, output_chars) for tid in ids
            ]
        result = aggregate(inputs, candidate=name, fingerprint=fp, split="val", n_trials=n_trials)
        for _ in range(stored_results):
            result = result.model_copy(update={"finished_at": utc_now()})
            store.write_result(result)
        results[name] = result
    cfg = proj.gate_config
    cfg = proj.gate_config
    for result in results.values():
        best = read_best(proj)
        decision = (
            baseline_decision(result, cfg)
            if best is None
            else decide(results[best.name], result, cfg)
        )
        record_decision(proj, decision, result, best)
    best = read_best(proj)
    assert best is not None
    store.append_drift_check(drift_report(best.result, results[best.name], cfg))
    return root
