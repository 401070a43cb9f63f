"""Every Prefect artifact honesteval publishes, and the keys it publishes them under.

Keys are stable: the UI links of a gate decision, the tests and users' automations find the
artifacts by them. Each names the project, so two projects on one server keep their own
(``<project>`` is the project's ``name``). Per evaluation: ``progress-``, ``rollouts-`` and
``summary-<project>-<split>-<candidate>``; per gate: ``gate-decision-<project>`` and
``gate-decision-table-<project>``; per drift check ``drift-<project>-<candidate>``; the
project's report ``honesteval-report-<project>``. Names go through :func:`slug`.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable
from typing import Any, Literal, cast
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from honesteval.evaluation.plan import EvaluationPlan
from honesteval.models import DriftReport, GateDecision, SplitResult, TrialRecord
from honesteval.project.loader import Project
from honesteval.store.reading import not_ok_trials
from honesteval.store.state_dir import Store
from honesteval.views.html import headline_markdown, write_report
from honesteval.views.text import (
    TaskRank,
    decision_markdown,
    decision_rows,
    drift_markdown,
    rollout_rows,
    slug,
    summary_markdown,
    worst_first,
)

EvaluationArtifact = Literal["progress", "rollouts", "summary"]
ProjectArtifact = Literal["gate-decision", "gate-decision-table", "honesteval-report"]


def evaluation_key(kind: EvaluationArtifact, project: str, split: str, candidate: str) -> str:
    """The key of one evaluation's progress bar, rollouts table or summary.

    >>> evaluation_key("rollouts", "My Proj", "val", "baseline")
    'rollouts-my-proj-val-baseline'
    """
    return f"{kind}-{slug(project)}-{split}-{slug(candidate)}"


def project_key(kind: ProjectArtifact, project: str) -> str:
    """The key of a project's gate decision (markdown or table) or report."""
    return f"{kind}-{slug(project)}"


def drift_key(project: str, candidate: str) -> str:
    return f"drift-{slug(project)}-{slug(candidate)}"


def plan_key(kind: EvaluationArtifact, plan: EvaluationPlan) -> str:
    return evaluation_key(kind, plan.project.config.name, plan.split, plan.candidate)


def _flow_thread(target: Callable[..., None], *args: Any, name: str) -> threading.Thread:
    """A started daemon thread that runs ``target`` in a copy of the caller's context: API
    calls there reach the flow run's client and settings."""
    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(target, *args), daemon=True, name=name
    )
    thread.start()
    return thread


class ProgressBar:
    """The evaluation's progress artifact, updated off the flow's thread.

    The flow's thread dispatches the downstream ``score`` task runs as trials finish; an API
    call there (~0.2 s each while the server is busy ingesting events, measured) would hold
    them up. :meth:`update` only records the newest count; one thread posts it, skipping counts
    that were overtaken. :meth:`finish` has it post the last one and end, :meth:`close` waits
    for that: in between the flow aggregates (the last post took ~0.1 s after 2,000 trials,
    while the server was recording them).
    """

    def __init__(self, plan: EvaluationPlan, done: int):
        self.total = plan.trials_planned
        artifact_id = create_progress_artifact(
            progress=100.0 * done / self.total,
            key=plan_key("progress", plan),
            description=f"trials finished for {plan.candidate} on {plan.split} "
            f"({self.total} planned)",
        )
        self.artifact_id = cast(UUID, artifact_id)
        self._latest: int | None = None
        self._wake = threading.Condition()
        self._closed = False
        self._thread = _flow_thread(self._post_loop, name="honesteval-progress")

    def update(self, done: int) -> None:
        with self._wake:
            self._latest = done
            self._wake.notify()

    def finish(self) -> None:
        """The newest count is the last: post it and end (without waiting)."""
        with self._wake:
            self._closed = True
            self._wake.notify()

    def close(self) -> None:
        """Finish, and wait until the last count is posted."""
        self.finish()
        self._thread.join()

    def _post_loop(self) -> None:
        while True:
            with self._wake:
                while self._latest is None and not self._closed:
                    self._wake.wait()
                done, self._latest, closing = self._latest, None, self._closed
            if done is not None:
                progress = 100.0 * done / self.total
                update_progress_artifact(artifact_id=self.artifact_id, progress=progress)
            if closing:
                return


#: Rows of the rollouts table at most: every run posts it into Prefect's database (~250 bytes
#: a row, kept with the run), so a 50,000-trial run would post 12 MB (bench/scale.py).
ROLLOUT_ROWS = 1000


def rollouts_table(
    plan: EvaluationPlan, records: list[TrialRecord]
) -> tuple[list[dict[str, Any]], str]:
    """The rollouts table's rows and description for ``records`` and the plan's reused trials
    (:class:`RolloutsSample`)."""
    sample = RolloutsSample(plan)
    sample.add(records)
    return sample.table()


class RolloutsSample:
    """The rollouts table of one evaluation, chosen as its trials finish: one row per trial,
    reused ones included, each with the trial log that holds it; past :data:`ROLLOUT_ROWS`
    trials, the tasks :func:`worst_first` picks (whole), and the description says how to get
    every trial.

    What it holds is bounded whatever the evaluation's size: the rows of the best tasks so far
    (at most twice what the table shows) and the records of the tasks not all of whose trials
    have finished. A finished task has ``n_trials`` rows, so :func:`worst_first` shows the
    first ``ROLLOUT_ROWS // n_trials`` tasks in its order: a finished task past twice that
    many never will be, and its rows are dropped.
    """

    def __init__(self, plan: EvaluationPlan):
        self.plan = plan
        self._store = Store(plan.project.state_dir)
        self._logs: dict[tuple[str, str, str], str] = {}  # a handful of logs, many rows
        self._open: dict[str, list[TrialRecord]] = {}  # tasks still running
        self._kept: dict[str, tuple[TaskRank, list[dict[str, Any]]]] = {}  # finished tasks
        self._room = 2 * (ROLLOUT_ROWS // plan.n_trials)
        self.n_trials = self.n_finished_tasks = 0
        self.add(plan.reused.values())

    def add(self, records: Iterable[TrialRecord]) -> None:
        for r in records:
            self.n_trials += 1
            trials = self._open.setdefault(r.task_id, [])
            trials.append(r)
            if len(trials) == self.plan.n_trials:
                self._finish(self._open.pop(r.task_id))

    def _finish(self, records: list[TrialRecord]) -> None:
        self.n_finished_tasks += 1
        if not self._room:
            return  # a task's rows are more than the table holds
        task_id = records[0].task_id
        self._kept[task_id] = (_rank(task_id, records), self._rows(records))
        if len(self._kept) > self._room:
            best = worst_first((rank for rank, _ in self._kept.values()), ROLLOUT_ROWS)
            self._kept = {tid: self._kept[tid] for tid in best}

    def _rows(self, records: list[TrialRecord]) -> list[dict[str, Any]]:
        reused = {key for r in records if (key := (r.task_id, r.trial)) in self.plan.reused}
        return rollout_rows(records, reused, self._trial_file)

    def _trial_file(self, r: TrialRecord) -> str:
        key = (r.split, r.candidate, r.fingerprint)
        if key not in self._logs:
            path = self._store.trial_log(*key).relative_to(self.plan.project.root)
            self._logs[key] = str(path)
        return self._logs[key]

    def table(self) -> tuple[list[dict[str, Any]], str]:
        """The table's rows, by task and trial, and its description."""
        ranks = [rank for rank, _ in self._kept.values()]
        ranks += [_rank(tid, recs) for tid, recs in self._open.items()]
        shown = worst_first(ranks, ROLLOUT_ROWS)
        rows = [
            row
            for tid in shown
            for row in (self._kept[tid][1] if tid in self._kept else self._rows(self._open[tid]))
        ]
        rows.sort(key=lambda row: (row["task"], row["trial"]))
        plan, n_tasks = self.plan, self.n_finished_tasks + len(self._open)
        what = f"{plan.candidate} on {plan.split}"
        if len(rows) == self.n_trials:
            return rows, f"one row per trial: {what}"
        return rows, (
            f"{len(rows)} of {self.n_trials} trials of {what} ({len(shown)} of {n_tasks} "
            "tasks, each whole: failed or errored trials first, then where trials disagree, "
            "then the lowest reward); every trial: honesteval export --split "
            f"{plan.split} --candidate {plan.candidate}"
        )


def _rank(task_id: str, records: list[TrialRecord]) -> TaskRank:
    rewards = [r.reward for r in records if r.reward is not None]
    not_ok = sum(r.status != "ok" for r in records)
    spread = max(rewards) - min(rewards) if rewards else 0.0
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    return task_id, not_ok, spread, mean, len(records)


class RolloutsTable:
    """The rollouts table of one evaluation (:class:`RolloutsSample`), posted from its own
    thread as soon as every trial is final, so the flow aggregates meanwhile; :meth:`wait`
    joins it (the flow run ends only after its artifacts exist)."""

    def __init__(self, plan: EvaluationPlan, sample: RolloutsSample):
        self._error: BaseException | None = None
        self._thread = _flow_thread(self._post, plan, sample, name="honesteval-rollouts")

    def _post(self, plan: EvaluationPlan, sample: RolloutsSample) -> None:
        try:
            rows, description = sample.table()
            create_table_artifact(
                table=rows,
                key=plan_key("rollouts", plan),
                description=description,
            )
        except BaseException as exc:  # raised in the flow's thread by wait()
            self._error = exc

    def wait(self) -> None:
        """Block until the table is posted; an error posting it is raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error


def publish_summary(plan: EvaluationPlan, result: SplitResult) -> None:
    """The evaluation's summary: the trials that did not end ok first, with their errors,
    then reward ± SE, coverage with counts, pass^k, warnings; links to its other artifacts."""
    not_ok = not_ok_trials(Store(plan.project.state_dir), result)
    links = {kind: artifact_url(plan_key(kind, plan)) for kind in ("rollouts", "progress")}
    create_markdown_artifact(
        markdown=summary_markdown(result, not_ok, links),
        key=plan_key("summary", plan),
        description=f"{plan.candidate} on {plan.split}: reward ± SE, coverage, pass^k",
    )


def summary_links(project: str, results: list[SplitResult]) -> dict[str, str]:
    """Where each evaluation's summary artifact is in the UI."""
    return {
        f"{r.candidate} on {r.split}": artifact_url(
            evaluation_key("summary", project, r.split, r.candidate)
        )
        for r in results
    }


def artifact_url(key: str) -> str:
    """An artifact's page in the UI, as a path: it opens on whichever server's UI shows the
    artifact (a sitting's runs move from the reusable server to `honesteval server`, on
    another port, with the same database)."""
    return f"/artifacts/key/{key}"


def publish_decision(project: str, decision: GateDecision, results: list[SplitResult]) -> None:
    """The gate decision as markdown (linking the evaluations it decided on) and a table."""
    description = f"gate decision for {decision.candidate}"
    create_markdown_artifact(
        markdown=decision_markdown(decision, results, summary_links(project, results)),
        key=project_key("gate-decision", project),
        description=description,
    )
    create_table_artifact(
        table=decision_rows(decision),
        key=project_key("gate-decision-table", project),
        description=description,
    )


def publish_drift(project: str, report: DriftReport) -> None:
    create_markdown_artifact(
        markdown=drift_markdown(report),
        key=drift_key(project, report.candidate),
        description="re-evaluation of the current best with fresh seeds",
    )


def publish_report(project: Project) -> None:
    """End of a ``gate`` / ``reevaluate-best`` run: write ``.honesteval/report.html`` and
    publish its headline table and a link.

    A report that fails to render is logged as a warning: the decision is already recorded,
    and a broken picture of it must not turn the run red.
    """
    try:
        path, data = write_report(project)
        markdown = headline_markdown(data, path)
    except Exception as exc:  # a rendering bug must not undo a recorded decision
        get_run_logger().warning("honesteval report not written: %s: %s", type(exc).__name__, exc)
        return
    create_markdown_artifact(
        markdown=markdown,
        key=project_key("honesteval-report", project.config.name),
        description="honesteval report",
    )
