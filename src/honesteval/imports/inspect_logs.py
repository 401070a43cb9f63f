"""``honesteval import inspect``: Inspect AI logs (``.eval`` or ``.json``) as stored trials.

Each log is read with ``inspect_ai.log.read_eval_log`` (its format is Inspect's business):

- sample id → task (the id as text; the sample's own id kept in the task's metadata), epoch
  e → trial e − 1, stored at seed ``base_seed + e − 1`` and marked ``imported``: it ran
  outside honesteval, so that seed is where it is filed, not a seed the run was given;
- the sample's outcome by :func:`honesteval.adapters.inspect_eval.sample_outcome` (a limit is
  the candidate's failure, an error is missing data, both configurable; a score outside
  [0, 1] refuses the import, naming the sample);
- the header's sample list is the denominator: a sample (or an epoch of it) the log lacks is
  missing data and lowers coverage, never a zero.

Without a project file in the folder, the first import writes one: its tasks are the header's
samples (all in val), its adapter ``kind: inspect`` runs the log's task and model again, so a
gate can confirm on fresh trials. The imported candidate is a folder of the candidates folder:
an existing one of that name, else a copy of the folder the log's ``candidate_arg`` task
argument names, else one file, ``inspect-eval.json``, holding the eval's task, model and
arguments. The stored result is what ``compare``, ``report``, ``export`` and ``gate`` read.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from honesteval.adapters.inspect_eval import (
    SAMPLE_ID_KEY,
    ErrorsAre,
    InspectTargetConfig,
    LimitsAre,
    OutOfRangeScore,
    choose_scorer,
    require_inspect,
    sample_outcome,
)
from honesteval.errors import ConfigError
from honesteval.evaluation.plan import finish_evaluation, plan_evaluation
from honesteval.models import SplitResult, Task, TrialRecord, utc_now
from honesteval.project.config_file import PROJECT_FILE
from honesteval.project.loader import Project, load_project
from honesteval.store import trial_log
from honesteval.store.fingerprints import trial_context
from honesteval.store.state_dir import Store, atomic_write_text

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog

#: The file an imported candidate is made of when the log names no folder of its own.
EVAL_SPEC_FILE = "inspect-eval.json"


@dataclass(frozen=True)
class ImportSummary:
    """What an import stored: the result, and the counts a user is told."""

    result: SplitResult
    logs: int
    trials: int
    created_project: bool
    created_candidate: bool
    skipped: int  # samples of tasks outside the split imported into


def import_inspect_logs(
    project: Path,
    logs: Sequence[Path],
    candidate: str,
    *,
    scorer: str | None = None,
    errors: ErrorsAre = "missing",
    limits: LimitsAre = "failure",
) -> ImportSummary:
    """Store the samples of ``logs`` (one candidate's run, in one or more logs) as trials of
    ``candidate`` on val, then its result; see the module docstring for the mapping."""
    require_inspect()
    if not logs:
        raise ConfigError("name at least one Inspect log")
    read = [_read(Path(p)) for p in logs]
    tasks = {log.eval.task for log in read}
    if len(tasks) > 1:
        raise ConfigError(f"the logs are of different tasks ({', '.join(sorted(tasks))})")
    created_project = not (project / PROJECT_FILE).is_file()
    if created_project:
        _write_project(project, read[0])
    proj = load_project(project)
    created_candidate = _ensure_candidate(proj, candidate, read[0])
    n_trials = max(_epochs(log) for log in read)
    plan = plan_evaluation(proj, candidate, "val", n_trials=n_trials, fresh=True)
    wanted = {t.id: t for t in plan.tasks}
    _check_samples_are_tasks(proj, read)
    names = sorted({n for log in read for s in log.samples or [] for n in s.scores or {}})
    chosen = choose_scorer(names, scorer)
    fingerprint = plan.settings.candidate.fingerprint
    records: dict[tuple[str, int], TrialRecord] = {}

    def record(task: Task, k: int, **fields: Any) -> None:
        records[(task.id, k)] = TrialRecord(
            task_id=task.id,
            candidate=candidate,
            fingerprint=fingerprint,
            split="val",
            trial=k,
            seed=plan.seed(task.id, k),
            context=trial_context(proj.scoring, task),
            **fields,
        )

    skipped = 0
    for path, log in sorted(zip(logs, read, strict=True), key=lambda pl: pl[1].eval.created):
        for sample in log.samples or []:
            task = wanted.get(str(sample.id))
            if task is None:
                skipped += 1
                continue
            try:
                outcome = sample_outcome(sample, chosen, errors=errors, limits=limits)
            except OutOfRangeScore as exc:
                raise ConfigError(
                    f"{path}: sample {sample.id!r} epoch {sample.epoch}: {exc}; a reward is a "
                    "number in [0, 1] (choose another score with --scorer)"
                ) from None
            failed = outcome.status == "failed"
            record(
                task,
                sample.epoch - 1,
                status=outcome.status,
                reward=proj.config.failure_reward if failed else outcome.reward,
                error=outcome.reason,
                attempts=1 + len(sample.error_retries or []),
                started_at=str(sample.started_at or log.eval.created),
                target_s=float(sample.total_time or 0.0),
                rollout={"answer": outcome.answer, "value": outcome.value},
                score=None if outcome.reward is None else {"reward": outcome.reward},
                tokens=outcome.tokens,
                cost=outcome.cost,
                imported=f"{path.name} (sample {sample.id!r}, epoch {sample.epoch})",
            )
    for task in plan.tasks:  # in the header, not in any log: missing data, never a zero
        for k in range(n_trials):
            if (task.id, k) not in records:
                record(
                    task,
                    k,
                    status="infra_error",
                    error=f"epoch {k + 1} of this sample is in none of the Inspect logs",
                    started_at=utc_now(),
                    imported=", ".join(p.name for p in logs),
                )
    store = Store(proj.state_dir)
    lock = store.evaluation_lock("val", candidate, fingerprint)
    lock.acquire()
    try:
        with trial_log.deferred_sync():
            for trial in records.values():
                store.write_trial(trial)
        result = finish_evaluation(plan, list(records.values()), write=False)
        result = result.model_copy(
            update=dict(
                trials_ran=0,
                warnings=[
                    *result.warnings,
                    f"imported from {len(read)} Inspect log(s): these trials ran outside "
                    "honesteval (no seed contract); a gate's confirmation runs fresh trials",
                ],
            )
        )
        store.write_result(result)
    finally:
        lock.release()
    return ImportSummary(
        result, len(read), len(records), created_project, created_candidate, skipped
    )


def _read(path: Path) -> EvalLog:
    from inspect_ai.log import read_eval_log

    if not path.is_file():
        raise ConfigError(f"no such Inspect log: {path}")
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # not a log Inspect can read: say so in one line
        raise ConfigError(f"{path}: not an Inspect log ({type(exc).__name__}: {exc})") from None
    if log.eval.dataset.sample_ids is None:
        raise ConfigError(f"{path}: the log's header has no sample list (an Inspect too old?)")
    return log


def _epochs(log: EvalLog) -> int:
    epochs = log.eval.config.epochs or 1
    return max([epochs, *(s.epoch for s in log.samples or [])])


def _check_samples_are_tasks(proj: Project, logs: Sequence[EvalLog]) -> None:
    """Every sample of the logs' headers is a task of the project (else these are another
    benchmark's logs, or the tasks file is stale)."""
    for log in logs:
        ids = [str(i) for i in log.eval.dataset.sample_ids or []]
        unknown = [i for i in ids if i not in proj.task_ids]
        if unknown:
            raise ConfigError(
                f"samples {unknown[:5]} of the log are not tasks of {proj.root / proj.config.tasks}"
            )


def _write_project(folder: Path, log: EvalLog) -> None:
    """A project whose tasks are the log's samples, all in val, run by ``kind: inspect``."""
    spec = log.eval
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        json.dumps({"id": str(sid), "metadata": {SAMPLE_ID_KEY: sid}})
        for sid in spec.dataset.sample_ids or []
    ]
    atomic_write_text(folder / "tasks.jsonl", "\n".join(rows) + "\n")
    candidate_arg = InspectTargetConfig.model_fields["candidate_arg"].default
    task_args = {k: v for k, v in spec.task_args.items() if k != candidate_arg}
    task = _task_ref(spec, folder)
    adapter: dict[str, Any] = {"kind": "inspect", "task": task, "model": spec.model}
    if task_args:
        adapter["task_args"] = task_args
    config = {
        "name": spec.task,
        "tasks": "tasks.jsonl",
        "splits": {"train": 0.0, "val": 1.0, "test": 0.0},
        "adapter": adapter,
        "trials": _epochs(log),
    }
    (folder / "candidates").mkdir(exist_ok=True)
    text = (
        f"# Written by `honesteval import inspect` from the log of {spec.task} ({utc_now()}):\n"
        "# its samples are the tasks, all in val; adapter runs the log's task and model.\n"
    )
    atomic_write_text(folder / PROJECT_FILE, text + yaml.safe_dump(config, sort_keys=False))


def _task_ref(spec: Any, folder: Path) -> str:
    """The log's task as ``kind: inspect`` names it: its file (found from here, as Inspect
    names it relative to where it ran) relative to the project folder, ``@`` its name."""
    if not spec.task_file:
        return str(spec.task_registry_name or spec.task)
    file = Path(spec.task_file)
    if file.is_file():
        file = Path(os.path.relpath(file.resolve(), folder.resolve()))
    return f"{file.as_posix()}@{spec.task}"


def _ensure_candidate(proj: Project, name: str, log: EvalLog) -> bool:
    """The candidate folder ``name``, made from the log when it does not exist; True if made."""
    if name in proj.candidate_names() or name.startswith("@"):
        return False
    if not name or "/" in name or name.startswith((".", "_")):
        raise ConfigError(f"{name!r} cannot name a candidate folder")
    folder = proj.candidates_dir / name
    cfg = proj.config.adapter
    arg = cfg.candidate_arg if isinstance(cfg, InspectTargetConfig) else None
    source = log.eval.task_args.get(arg) if arg else None
    if isinstance(source, str) and Path(source).is_dir():
        shutil.copytree(source, folder)
        return True
    spec = log.eval
    described = {"task": spec.task, "model": spec.model, "task_args": spec.task_args}
    folder.mkdir(parents=True)
    atomic_write_text(folder / EVAL_SPEC_FILE, json.dumps(described, indent=2, default=str) + "\n")
    return True
