"""The Python API: evaluate, gate, rescore and finalize a candidate from your own code.

The CLI is a thin layer over these functions (parse, one call here, print); the Prefect flows
run the same engine (:mod:`honesteval.evaluation`, :mod:`honesteval.ledger`). Each function
takes ``orchestration``:

- ``"local"``: trials run on a thread pool in this process. Prefect is never imported and no
  server is needed: the choice for an optimiser loop.
- ``"prefect"``: trials run as Prefect task runs of a flow run, recorded in a long-lived
  server if one is up (``honesteval server``, ``PREFECT_API_URL``), else in a temporary one
  that lives as long as the call.
- ``"auto"`` (default, what the CLI does): ``"prefect"``, except that an evaluation with no
  target to run (every trial stored; rollouts awaiting their score are graded) is finished
  in this process: a rerun that runs nothing is not a flow run, server or not.

A candidate is a name in the project's candidates folder, a path to any file or folder (a
``str`` with a path separator or an ``os.PathLike``; its name is then its absolute path), or
files in memory, ``{relative path: text or bytes}``, written once under
``.honesteval/candidates/<fingerprint[:16]>/`` (content-addressed: the same files are the same
candidate, its stored trials are reused).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from honesteval.errors import ConfigError
from honesteval.evaluation.local import all_reused, nothing_to_run, run_plans_locally
from honesteval.evaluation.plan import EvaluationPlan, plan_evaluation, plan_rescore
from honesteval.ledger.gate_ledger import check_not_sealed
from honesteval.ledger.gate_steps import run_finalize, run_gate
from honesteval.models import GateDecision, SplitResult
from honesteval.project.loader import Project, fingerprint_path, load_project
from honesteval.store.state_dir import Store

Orchestration = Literal["auto", "local", "prefect"]
CandidateRef = str | os.PathLike[str] | Mapping[str, str | bytes]
Echo = Callable[[str], None]
ORCHESTRATIONS: tuple[str, ...] = ("auto", "local", "prefect")

__all__ = [
    "CandidateRef",
    "Orchestration",
    "evaluate",
    "finalize",
    "gate",
    "load_project",
    "rescore",
]


def _project(project: Project | str | os.PathLike[str]) -> Project:
    return project if isinstance(project, Project) else load_project(Path(project))


def _orchestration(value: str) -> Orchestration:
    if value not in ORCHESTRATIONS:
        raise ConfigError(
            f"orchestration must be one of {', '.join(ORCHESTRATIONS)}, got {value!r}"
        )
    return value  # type: ignore[return-value]


def _quiet(_line: str) -> None:
    pass


def candidate_name(project: Project, candidate: CandidateRef | None) -> str | None:
    """The name the engine and the flows know ``candidate`` by (None: the current best)."""
    if candidate is None:
        return None
    if isinstance(candidate, Mapping):
        return str(_materialise(project, candidate))
    if isinstance(candidate, os.PathLike):
        return str(Path(candidate).expanduser().resolve())
    if not isinstance(candidate, str):
        raise ConfigError(f"a candidate is a name, a path or a mapping of files, got {candidate!r}")
    if "/" in candidate or os.sep in candidate:
        return str(Path(candidate).expanduser().resolve())
    return candidate


def _materialise(project: Project, files: Mapping[str, str | bytes]) -> Path:
    """Write in-memory files once, under ``.honesteval/candidates/<fingerprint[:16]>/``."""
    if not files:
        raise ConfigError("an in-memory candidate needs at least one file")
    blobs: dict[str, bytes] = {}
    for rel, content in files.items():
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
            raise ConfigError(f"in-memory candidate: {rel!r} is not a relative file path")
        blobs[PurePosixPath(*parts).as_posix()] = (
            content.encode() if isinstance(content, str) else bytes(content)
        )
    folder = project.state_dir / "candidates"
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder, prefix=".new-"))
    try:
        for rel, data in blobs.items():
            path = staging.joinpath(*PurePosixPath(rel).parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        final = folder / fingerprint_path(staging)[:16]
        if final.exists():
            shutil.rmtree(staging)
        else:
            os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def evaluate(
    project: Project | str | os.PathLike[str],
    candidate: CandidateRef | None = None,
    *,
    split: str = "val",
    trials: int | None = None,
    base_seed: int | None = None,
    ks: Sequence[int] | None = None,
    task_ids: Sequence[str] | None = None,
    fresh: bool = False,
    max_concurrency: int | None = None,
    batch_size: int | None = None,
    task_runner: Literal["thread", "dask"] = "thread",
    dask_address: str | None = None,
    orchestration: Orchestration = "auto",
    echo: Echo | None = None,
) -> SplitResult:
    """Evaluate a candidate on ``train`` or ``val``: every trial stored, reward ± SE, 95 % CI,
    coverage, pass^k / pass@k. Stored trials of the same candidate version, seeds, task and
    scorer are reused; only the missing ones run.

    ``candidate`` None means the current best. ``trials`` (per task), ``base_seed`` (trial k
    uses ``base_seed + k``) default to the project's. ``task_runner``, ``dask_address`` and
    ``batch_size`` apply to Prefect orchestration. ``echo`` receives the lines a user should
    see (which server is used, trials reused). Bad input raises :class:`ConfigError` before
    anything runs; the sealed test split raises :class:`SealedSplitError`.

    >>> import tempfile, honesteval
    >>> from pathlib import Path
    >>> from honesteval.project.scaffold import scaffold_project
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = scaffold_project(root)
    >>> result = honesteval.evaluate(root, {"answer.txt": "42\\n"}, orchestration="local")
    >>> result.n_tasks, result.n_trials, result.coverage
    (5, 3, 1.0)
    >>> 0.5 < result.reward < 1.0  # the scaffold's target answers right 80 % of the time
    True
    >>> again = honesteval.evaluate(root, {"answer.txt": "42\\n"})  # all stored: no Prefect
    >>> again.trials_reused, again.reward == result.reward
    (15, True)
    """
    mode = _orchestration(orchestration)
    proj = _project(project)
    name = candidate_name(proj, candidate)
    say = echo or _quiet

    def make_plan() -> EvaluationPlan:
        return plan_evaluation(
            proj,
            name,
            split,
            n_trials=trials,
            base_seed=base_seed,
            ks=ks,
            task_ids=task_ids,
            fresh=fresh,
        )

    with _alone(make_plan, say) as plan:
        if mode == "local":
            return run_plans_locally([plan], max_concurrency=max_concurrency)[0]
        if mode == "auto" and nothing_to_run(plan):
            graded = len(plan.to_score)
            say(
                f"{len(plan.reused)} trials reused from disk, {graded} graded from stored "
                "rollouts: no Prefect flow run"
                if graded
                else f"all {plan.trials_planned} trials reused from disk: no Prefect flow run"
            )
            return all_reused(plan, max_concurrency)
        from honesteval.orchestration.flow_runs import flow_result, flow_runs

        with flow_runs(plan, echo=say):
            from honesteval.orchestration.flows import evaluate as evaluate_flow

            state = evaluate_flow(
                project=str(proj.root),
                candidate=name,
                split=split,
                n_trials=trials,
                base_seed=base_seed,
                ks=None if ks is None else list(ks),
                task_ids=None if task_ids is None else list(task_ids),
                max_concurrency=max_concurrency,
                fresh=fresh,
                batch_size=batch_size,
                task_runner=task_runner,
                dask_address=dask_address,
                return_state=True,
            )
            result: SplitResult = flow_result(state)
        return result


@contextlib.contextmanager
def _alone(make_plan: Callable[[], EvaluationPlan], say: Echo) -> Iterator[EvaluationPlan]:
    """Plan an evaluation and hold its candidate's evaluation lock while it runs.

    Two evaluations of one candidate at once would each run (and pay for) every trial: the
    second waits for the first, then plans again, reusing the trials the first stored."""
    plan = make_plan()
    cand = plan.settings.candidate
    lock = Store(plan.project.state_dir).evaluation_lock(plan.split, cand.name, cand.fingerprint)
    if not lock.acquire_now():
        say(
            f"waiting for another evaluate of {cand.name} on {plan.split} to finish "
            "(its trials are then reused, not paid for again)"
        )
        lock.acquire()
        plan = make_plan()
    try:
        yield plan
    finally:
        lock.release()


def gate(
    project: Project | str | os.PathLike[str],
    candidate: CandidateRef,
    *,
    trials: int | None = None,
    base_seed: int | None = None,
    mode: str | None = None,
    k_se: float | None = None,
    alpha: float | None = None,
    confirm: bool | None = None,
    confirm_trials: int | None = None,
    max_concurrency: int | None = None,
    orchestration: Orchestration = "auto",
    echo: Echo | None = None,
) -> GateDecision:
    """Gate a candidate against the current best on val; promote it only for a real gain.

    Both run on the same seeds (the screen); a screen pass is confirmed on fresh seeds at the
    search's online level unless ``confirm=False``; the decision is appended to the decisions
    log and, when accepted, the candidate becomes the current best. The first gate of a
    project promotes its baseline. ``mode``, ``k_se``, ``alpha``, ``confirm_trials`` override
    the project's gate config. Returns the recorded :class:`GateDecision` (``accept``,
    ``indecisive``, ``reason``). ``"auto"`` orchestration is ``"prefect"`` here: a gate always
    records a decision.

    >>> import tempfile, honesteval
    >>> from pathlib import Path
    >>> from honesteval.project.scaffold import scaffold_project
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = scaffold_project(root)
    >>> first = honesteval.gate(root, "baseline", orchestration="local")
    >>> first.accept  # the first gate of a project promotes its baseline
    True
    >>> worse = honesteval.gate(root, {"answer.txt": "41\\n"}, orchestration="local")
    >>> worse.accept, worse.indecisive
    (False, False)
    """
    how = _orchestration(orchestration)
    proj = _project(project)
    name = candidate_name(proj, candidate)
    assert name is not None
    overrides: dict[str, Any] = dict(
        mode=mode, k_se=k_se, alpha=alpha, confirm=confirm, confirm_trials=confirm_trials
    )
    if how == "local":

        def run_plans(plans: Sequence[EvaluationPlan]) -> list[SplitResult]:
            return run_plans_locally(plans, max_concurrency=max_concurrency)

        return run_gate(
            proj, name, run_plans=run_plans, n_trials=trials, base_seed=base_seed, **overrides
        ).decision
    from honesteval.ledger.gate_ledger import prepare_gate
    from honesteval.orchestration.flow_runs import flow_result, flow_runs

    _, _, plan = prepare_gate(proj, name, n_trials=trials, base_seed=base_seed, **overrides)
    with flow_runs(plan, echo=echo):
        from honesteval.orchestration.flows import gate as gate_flow

        state = gate_flow(
            project=str(proj.root),
            candidate=name,
            n_trials=trials,
            base_seed=base_seed,
            max_concurrency=max_concurrency,
            return_state=True,
            **overrides,
        )
        decision: GateDecision = flow_result(state)
    return decision


def rescore(
    project: Project | str | os.PathLike[str],
    candidate: CandidateRef | None = None,
    *,
    split: str = "val",
    trials: int | None = None,
    base_seed: int | None = None,
    orchestration: Orchestration = "auto",
    echo: Echo | None = None,
) -> SplitResult:
    """Re-grade a candidate's stored rollouts with the current scorer (no target runs);
    stored infra errors stay missing data. A trial never run is an error: evaluate first."""
    how = _orchestration(orchestration)
    proj = _project(project)
    name = candidate_name(proj, candidate)
    plan = plan_rescore(proj, name, split, n_trials=trials, base_seed=base_seed)
    if how == "local":
        return run_plans_locally([plan])[0]
    from honesteval.orchestration.flow_runs import flow_result, flow_runs

    with flow_runs(echo=echo):
        from honesteval.orchestration.flows import rescore as rescore_flow

        state = rescore_flow(
            project=str(proj.root),
            candidate=name,
            split=plan.split,
            n_trials=trials,
            base_seed=base_seed,
            return_state=True,
        )
        result: SplitResult = flow_result(state)
    return result


def finalize(
    project: Project | str | os.PathLike[str],
    candidate: CandidateRef | None = None,
    *,
    trials: int | None = None,
    max_concurrency: int | None = None,
    orchestration: Orchestration = "auto",
    echo: Echo | None = None,
) -> SplitResult:
    """Score the sealed test split once (default: the current best), then seal it: a second
    call raises :class:`TestSealedError`. The seal is written only after the result."""
    how = _orchestration(orchestration)
    proj = _project(project)
    name = candidate_name(proj, candidate)
    if how == "local":
        return run_finalize(
            proj,
            name,
            n_trials=trials,
            run_plan=lambda plan: run_plans_locally([plan], max_concurrency=max_concurrency)[0],
        )
    from honesteval.orchestration.flow_runs import flow_runs

    check_not_sealed(proj)
    plan = plan_evaluation(proj, name, "test", n_trials=trials, allow_sealed=True)
    with flow_runs(plan, echo=echo):
        from honesteval.orchestration.flows import finalize as finalize_flow

        sealed: SplitResult = finalize_flow(
            project=str(proj.root),
            candidate=name,
            n_trials=trials,
            max_concurrency=max_concurrency,
        )
    return sealed
