"""The Python API: evaluate, gate, rescore and finalize a candidate from your own code.

The CLI's commands that run trials are a thin layer over these functions (parse, one call
here, print; docs/architecture.md lists what each command calls); the Prefect flows run the
same engine (:mod:`honesteval.evaluation`, :mod:`honesteval.gating`). Each function
takes ``orchestration``:

- ``"local"``: trials run on a thread pool in this process. Prefect is never imported and no
  server is needed: the choice for an optimiser loop.
- ``"prefect"``: trials run as Prefect task runs of a flow run, recorded in a long-lived
  server if one is up (``honesteval server``, ``PREFECT_API_URL``, the reusable server of the
  sitting), else in a reusable server started now (``HONESTEVAL_SERVER_MODE=per-command``: a
  temporary one that lives as long as the call).
- ``"auto"`` (default, what the CLI does): ``"prefect"``, except that an evaluation with no
  target to run (every trial stored; rollouts awaiting their score are graded) is finished
  in this process: a rerun that runs nothing is not a flow run, server or not.

A candidate is a name (a ``str``: a folder or file in the project's candidates folder), a
path to any file or folder (an ``os.PathLike`` such as :class:`pathlib.Path`), or files in
memory, ``{relative path: text or bytes}``. A path or in-memory candidate is stored once by
content under ``.honesteval/candidates/`` and named ``@<fingerprint[:16]>``: the same files are
the same candidate (its stored trials are reused), and the current best stays what was
promoted even if the original is edited or deleted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import ValidationError

from honesteval.errors import ConfigError, invalid_setting
from honesteval.evaluation.budget import guard_for, unpriced_line
from honesteval.evaluation.local import all_reused, nothing_to_run, run_plans_locally
from honesteval.evaluation.plan import (
    EvaluationPlan,
    check_positive,
    check_split,
    plan_evaluation,
    plan_rescore,
)
from honesteval.gating.ledger import check_not_sealed
from honesteval.gating.run import GatePlan, run_finalize, run_gate
from honesteval.gating.run import prepare_gate as _prepare_gate
from honesteval.gating.spend import search_spent
from honesteval.imports.inspect_logs import ImportSummary, import_inspect_logs
from honesteval.models import (
    Budget,
    EvaluateRequest,
    GateDecision,
    GateMode,
    GateOverrides,
    GateRequest,
    SplitResult,
)
from honesteval.models.requests import R, flow_parameters
from honesteval.project.loader import Project, load_project
from honesteval.store.fingerprints import fingerprint_counts, fingerprint_path
from honesteval.store.state_dir import Store, atomic_write_bytes
from honesteval.views.text import confirmation_notice

Orchestration = Literal["auto", "local", "prefect"]
CandidateRef = str | os.PathLike[str] | Mapping[str, str | bytes]
Echo = Callable[[str], None]
ORCHESTRATIONS: tuple[str, ...] = ("auto", "local", "prefect")

__all__ = [
    "CandidateRef",
    "EvaluateRequest",
    "GateOverrides",
    "GatePlan",
    "GateRequest",
    "Orchestration",
    "evaluate",
    "finalize",
    "gate",
    "import_inspect",
    "load_project",
    "prepare_gate",
    "rescore",
]


def _project(project: Project | str | os.PathLike[str]) -> Project:
    return project if isinstance(project, Project) else load_project(Path(project))


def _root(project: Project | str | os.PathLike[str]) -> Path:
    """A project's folder, without loading it (its ``honesteval.yaml`` named: its folder)."""
    if isinstance(project, Project):
        return project.root
    path = Path(project).expanduser().resolve()
    return path.parent if path.is_file() else path


def _orchestration(value: str) -> Orchestration:
    if value not in ORCHESTRATIONS:
        raise ConfigError(
            f"orchestration must be one of {', '.join(ORCHESTRATIONS)}, got {value!r}"
        )
    return value  # type: ignore[return-value]


def _quiet(_line: str) -> None:
    pass


def candidate_name(project: Project, candidate: CandidateRef | None) -> str | None:
    """The name the engine and the flows know ``candidate`` by (None: the current best).

    A ``str`` is a name (in the candidates folder, or ``@<fingerprint[:16]>``); files in
    memory and a path (``os.PathLike``) are stored once by content under
    ``.honesteval/candidates/`` and named ``@<fingerprint[:16]>``."""
    if candidate is None or isinstance(candidate, str):
        return candidate
    if isinstance(candidate, Mapping):
        return "@" + _store_files(project, _in_memory(candidate))
    if isinstance(candidate, os.PathLike):
        return "@" + _store_path(project, Path(candidate).expanduser())
    raise ConfigError(f"a candidate is a name, a path or a mapping of files, got {candidate!r}")


def _in_memory(files: Mapping[str, str | bytes]) -> dict[str, bytes]:
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
    return blobs


def _store_path(project: Project, path: Path) -> str:
    """Snapshot a file or folder (what its fingerprint covers) into the project's store."""
    if path.is_file():
        data = path.read_bytes()
        key = hashlib.sha256(data).hexdigest()[:16]
        final = project.snapshots_dir / f"{key}{path.suffix}"
        if not final.exists():
            final.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(final, data)
        return key
    if not path.is_dir():
        raise ConfigError(f"candidate {str(path)!r}: no such file or folder")
    files = {
        p.relative_to(path).as_posix(): p.read_bytes()
        for p in path.rglob("*")
        if p.is_file() and fingerprint_counts(p.relative_to(path))
    }
    return _store_files(project, files)


def _store_files(project: Project, blobs: Mapping[str, bytes]) -> str:
    """Write files once, as the folder ``.honesteval/candidates/<fingerprint[:16]>/``."""
    folder = project.snapshots_dir
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder, prefix=".new-"))
    try:
        for rel, data in blobs.items():
            path = staging.joinpath(*PurePosixPath(rel).parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        key = fingerprint_path(staging)[:16]
        final = folder / key
        if final.exists():
            shutil.rmtree(staging)
        else:
            os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return key


def evaluate(
    project: Project | str | os.PathLike[str],
    candidate: CandidateRef | None = None,
    *,
    split: Literal["train", "val"] = "val",
    trials: int | None = None,
    base_seed: int | None = None,
    ks: Sequence[int] | None = None,
    task_ids: Sequence[str] | None = None,
    fresh: bool = False,
    max_concurrency: int | None = None,
    batch_size: int | None = None,
    task_runner: Literal["thread", "dask"] = "thread",
    dask_address: str | None = None,
    budget: Budget | None = None,
    request: EvaluateRequest | None = None,
    orchestration: Orchestration = "auto",
    echo: Echo | None = None,
    verbose: bool = False,
) -> SplitResult:
    """Evaluate a candidate on ``train`` or ``val``: every trial stored, reward ± SE, 95 % CI,
    coverage, pass^k / pass@k. Stored trials of the same candidate version, seeds, task and
    scorer are reused; only the missing ones run.

    The keywords from ``split`` to ``budget`` build an :class:`EvaluateRequest` (its
    fields say what each means); pass a ``request`` instead to give them all at once.
    ``candidate`` None means the current best. ``task_runner``, ``dask_address`` and
    ``batch_size`` apply to Prefect orchestration. ``echo`` receives the lines a user should
    see (which server is used, trials reused). Prefect's run logs (two INFO lines a trial) go
    to the server and its UI, not the terminal; ``verbose=True`` prints them too. Bad input
    raises :class:`ConfigError` before anything runs; the sealed test split raises
    :class:`SealedSplitError`.

    >>> import tempfile, honesteval
    >>> from pathlib import Path
    >>> from honesteval.project.scaffold import scaffold_project
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = scaffold_project(root)
    >>> prompt = {"prompt.txt": "Answer with the number only.\\n"}  # a candidate in memory
    >>> result = honesteval.evaluate(root, prompt, orchestration="local")
    >>> result.n_tasks, result.n_trials, result.coverage
    (20, 3, 1.0)
    >>> 0.3 < result.reward < 0.9  # the scaffold's toy model slips on bigger sums
    True
    >>> again = honesteval.evaluate(root, prompt)  # all stored: no Prefect
    >>> again.trials_reused, again.reward == result.reward
    (60, True)
    """
    how, proj, name = _iv(project, candidate, orchestration)
    check_split(split)  # the sealed test split and a misspelt one: their own errors
    req = request_of(
        EvaluateRequest,
        request,
        candidate=name,
        split=split,
        trials=trials,
        base_seed=base_seed,
        ks=None if ks is None else list(ks),
        task_ids=None if task_ids is None else list(task_ids),
        fresh=fresh,
        max_concurrency=max_concurrency,
        batch_size=batch_size,
        task_runner=task_runner,
        dask_address=dask_address,
        budget=budget,
    )
    say = echo or _quiet
    _say_unpriced(proj, req.budget, say)
    make_plan = functools.partial(
        plan_evaluation,
        proj,
        req.candidate,
        req.split,
        n_trials=req.trials,
        base_seed=req.base_seed,
        ks=req.ks,
        task_ids=req.task_ids,
        fresh=req.fresh,
    )
    with _alone(make_plan, say) as plan:
        if how == "local":
            guard = guard_for(proj, req.budget)
            return run_plans_locally([plan], max_concurrency=req.max_concurrency, guard=guard)[0]
        if how == "auto" and nothing_to_run(plan):
            say(_no_flow_run_line(plan))
            return all_reused(plan, req.max_concurrency)
        result: SplitResult = _flow_result(
            lambda flows: flows.evaluate_of(plan, req), proj, req, say, verbose
        )
        return result


def _say_unpriced(project: Project, budget: Budget | None, say: Echo) -> None:
    """Before anything runs: a USD budget the target cannot price is refused (exit 2) or,
    with a token budget beside it, said in one line (:func:`unpriced_line`)."""
    line = unpriced_line(project, budget)
    if line is not None:
        say(line)


def request_of(cls: type[R], request: R | None = None, **keywords: object) -> R:
    """A call's request: ``request`` as given, or the one its keywords build; both at once
    is refused (:class:`ConfigError`), as is a setting out of range (one line naming it).

    >>> request_of(EvaluateRequest, split="train", trials=5).trials
    5
    >>> request_of(EvaluateRequest, trials=0)
    Traceback (most recent call last):
    ...
    honesteval.errors.ConfigError: trials: Input should be greater than or equal to 1 (got 0)
    >>> request_of(EvaluateRequest, EvaluateRequest(), trials=5)
    Traceback (most recent call last):
    ...
    honesteval.errors.ConfigError: pass a request or its settings, not both (got trials)
    """
    if request is None:
        try:
            return cls.model_validate(keywords)
        except ValidationError as exc:
            raise invalid_setting(exc) from None
    fields = cls.model_fields
    given = [
        k
        for k, v in keywords.items()
        if v is not None and v != fields[k].get_default(call_default_factory=True)
    ]
    if given:
        raise ConfigError(f"pass a request or its settings, not both (got {', '.join(given)})")
    return request


def _iv(
    project: Project | str | os.PathLike[str], candidate: CandidateRef | None, orchestration: str
) -> tuple[Orchestration, Project, str | None]:
    """What a call checks before anything runs (:class:`ConfigError` on bad input): the
    orchestration, the project and the candidate."""
    how = _orchestration(orchestration)
    return how, *_project_and_name(project, candidate)


def _project_and_name(
    project: Project | str | os.PathLike[str], candidate: CandidateRef | None
) -> tuple[Project, str | None]:
    proj = _project(project)
    return proj, candidate_name(proj, candidate)


def _no_flow_run_line(plan: EvaluationPlan) -> str:
    """Said when every trial is on disk (graded or still to grade): no Prefect flow runs."""
    graded = len(plan.to_score)
    if graded:
        return (
            f"{len(plan.reused)} trials reused from disk, {graded} graded from stored "
            "rollouts: no Prefect flow run"
        )
    return f"all {plan.trials_planned} trials reused from disk: no Prefect flow run"


def _flow_result(
    planned: Callable[[Any], Any],
    project: Project,
    parameters: EvaluateRequest | GateRequest | Mapping[str, Any],
    echo: Echo | None,
    verbose: bool,
) -> Any:
    """Run a flow in this process, its Prefect API found or started, and return its result.

    ``planned(flows)`` is the flow object (of :mod:`honesteval.orchestration.flows`, imported
    while a server boots) that runs a plan already made; ``parameters`` (a request, or the
    flow's own) are what the flow run records. Prefect's run logs go to the server, and to
    the terminal only when ``verbose``."""
    from honesteval.orchestration.flow_runs import flow_result, flow_runs

    if isinstance(parameters, EvaluateRequest | GateRequest):
        parameters = flow_parameters(parameters)
    with flow_runs(echo=echo, verbose=verbose):
        from honesteval.orchestration import flows

        state = planned(flows)(project=str(project.root), **parameters, return_state=True)
        return flow_result(state)


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
    candidate: CandidateRef | None = None,
    *,
    trials: int | None = None,
    base_seed: int | None = None,
    mode: GateMode | None = None,
    k_se: float | None = None,
    alpha: float | None = None,
    confirm: bool | None = None,
    confirm_trials: int | None = None,
    max_concurrency: int | None = None,
    batch_size: int | None = None,
    task_runner: Literal["thread", "dask"] = "thread",
    dask_address: str | None = None,
    budget: Budget | None = None,
    request: GateRequest | None = None,
    plan: GatePlan | None = None,
    orchestration: Orchestration = "auto",
    echo: Echo | None = None,
    verbose: bool = False,
) -> GateDecision:
    """Gate a candidate against the current best on val; promote it only for a real gain.

    Both run on the same seeds (the screen); a screen pass is confirmed on fresh seeds at the
    search's online level unless ``confirm=False``; the decision is appended to the decisions
    log and, when accepted, the candidate becomes the current best. The first gate of a
    project promotes its baseline. The keywords from ``trials`` to ``budget`` build a
    :class:`GateRequest` (``mode``, ``k_se``, ``alpha``, ``confirm``, ``confirm_trials``: its
    :class:`GateOverrides` of the project's gate config); pass a ``request`` instead to give
    them all at once, or the ``plan`` :func:`prepare_gate` made (the gate is then not planned
    again). Returns the recorded :class:`GateDecision` (``accept``, ``indecisive``,
    ``reason``). ``"auto"`` orchestration is ``"prefect"`` here: a gate always records a
    decision. ``batch_size``, ``task_runner`` and ``dask_address`` apply to Prefect
    orchestration, as for :func:`evaluate`.

    >>> import tempfile, honesteval
    >>> from pathlib import Path
    >>> from honesteval.project.scaffold import scaffold_project
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = scaffold_project(root)
    >>> first = honesteval.gate(root, "baseline", orchestration="local")
    >>> first.accept  # the first gate of a project promotes its baseline
    True
    >>> same = {"prompt.txt": "Answer quickly.\\n"}  # no better: the same answers
    >>> no_better = honesteval.gate(root, same, orchestration="local")
    >>> no_better.accept, no_better.indecisive  # a tie rejects
    (False, False)
    """
    how = _orchestration(orchestration)
    if plan is None:
        proj, name = _project_and_name(project, candidate)
        req = request_of(
            GateRequest,
            request,
            candidate=name,
            trials=trials,
            base_seed=base_seed,
            overrides=gate_overrides(
                mode=mode, k_se=k_se, alpha=alpha, confirm=confirm, confirm_trials=confirm_trials
            ),
            max_concurrency=max_concurrency,
            batch_size=batch_size,
            task_runner=task_runner,
            dask_address=dask_address,
            budget=budget,
        )
        plan = prepare_gate(proj, req)
    elif request is not None or candidate is not None:
        raise ConfigError("pass a gate's plan or its request, not both")
    elif _root(project) != plan.project.root:
        raise ConfigError(f"this gate was planned for the project in {plan.project.root}")
    gate_plan = plan
    _say_unpriced(gate_plan.project, gate_plan.request.budget, echo or _quiet)
    if how == "local":
        # one for the whole gate, screen and confirmation; a search's spend from the ledger
        proj, req = gate_plan.project, gate_plan.request
        guard = guard_for(proj, req.budget, search_spent=search_spent(proj))
        run_plans = functools.partial(
            run_plans_locally, max_concurrency=req.max_concurrency, guard=guard
        )
        return run_gate(
            gate_plan, run_plans=run_plans, confirmation_notice=confirmation_notice
        ).decision
    decision: GateDecision = _flow_result(
        lambda flows: flows.gate_of(gate_plan), gate_plan.project, gate_plan.request, echo, verbose
    )
    return decision


def prepare_gate(project: Project | str | os.PathLike[str], request: GateRequest) -> GatePlan:
    """Plan a gate: every check it makes before it spends anything (bad input, a tampered or
    sealed state: :class:`ConfigError`), the current best, the gate settings and the
    candidate's screen. :func:`gate` runs the plan (``plan=``) without planning again, so
    what you read in it (``plan.best``, ``plan.screen.todo``, ``plan.cfg``) is what runs.

    >>> import tempfile, honesteval
    >>> from pathlib import Path
    >>> from honesteval.project.scaffold import scaffold_project
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = scaffold_project(root)
    >>> plan = prepare_gate(root, GateRequest(candidate="baseline"))
    >>> plan.best is None, len(plan.screen.todo)  # the first gate: the baseline's 20 x 3
    (True, 60)
    >>> honesteval.gate(root, plan=plan, orchestration="local").accept
    True
    """
    return _prepare_gate(_project(project), request)


def gate_overrides(**settings: object) -> GateOverrides:
    """The gate settings a call gives, checked (a bad one: :class:`ConfigError` ``gate …``)."""
    try:
        return GateOverrides.model_validate(settings)
    except ValidationError as exc:
        raise invalid_setting(exc, "gate ") from None


def rescore(
    project: Project | str | os.PathLike[str],
    candidate: CandidateRef | None = None,
    *,
    split: str = "val",
    trials: int | None = None,
    base_seed: int | None = None,
    orchestration: Orchestration = "auto",
    echo: Echo | None = None,
    verbose: bool = False,
) -> SplitResult:
    """Re-grade a candidate's stored rollouts with the current scorer (no target runs);
    stored infra errors stay missing data. A trial never run is an error: evaluate first."""
    how, proj, name = _iv(project, candidate, orchestration)
    plan = plan_rescore(proj, name, split, n_trials=trials, base_seed=base_seed)
    if how == "local":
        return run_plans_locally([plan])[0]
    parameters = dict(candidate=name, split=plan.split, n_trials=trials, base_seed=base_seed)
    result: SplitResult = _flow_result(
        lambda flows: flows.rescore_of(plan), proj, parameters, echo, verbose
    )
    return result


def finalize(
    project: Project | str | os.PathLike[str],
    candidate: CandidateRef | None = None,
    *,
    trials: int | None = None,
    max_concurrency: int | None = None,
    orchestration: Orchestration = "auto",
    echo: Echo | None = None,
    verbose: bool = False,
) -> SplitResult:
    """Score the sealed test split once (default: the current best), then seal it: a second
    call raises :class:`TestSealedError`. The seal is written only after the result."""
    check_positive("max_concurrency", max_concurrency)
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
    check_not_sealed(proj)  # bad input and a sealed split: refused before Prefect starts
    plan = plan_evaluation(proj, name, "test", n_trials=trials, allow_sealed=True)
    parameters = dict(candidate=name, n_trials=trials, max_concurrency=max_concurrency)
    sealed: SplitResult = _flow_result(
        lambda flows: flows.finalize_of(plan, max_concurrency), proj, parameters, echo, verbose
    )
    return sealed


def import_inspect(
    project: str | os.PathLike[str],
    logs: Sequence[str | os.PathLike[str]],
    candidate: str,
    *,
    scorer: str | None = None,
    errors: Literal["missing", "failure"] = "missing",
    limits: Literal["failure", "missing"] = "failure",
) -> ImportSummary:
    """Store Inspect AI logs (``.eval``/``.json``, one candidate's run) as that candidate's
    trials on val, and its result: sample → task, epoch → trial, a sample error → missing data
    (``errors="failure"``: the candidate's), a limit → the candidate's failure
    (``limits="missing"``: missing data), the chosen score's value → reward (``scorer``:
    ``name`` or ``name/key`` when the log has several; a value outside [0, 1] is refused). A
    sample of the header the log lacks is missing data. A folder without ``honesteval.yaml``
    becomes a project of the log's samples run by ``adapter: {kind: inspect}``. Needs the
    ``inspect`` extra; see docs/inspect.md."""
    for name, value, allowed in (
        ("errors", errors, ("missing", "failure")),
        ("limits", limits, ("failure", "missing")),
    ):
        if value not in allowed:
            raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return import_inspect_logs(
        Path(project).expanduser(),
        [Path(p).expanduser() for p in logs],
        candidate,
        scorer=scorer,
        errors=errors,
        limits=limits,
    )
