"""Flow runs started from this process (the CLI, the Python API): a Prefect API to record them
in, found or started (the caller hands its plans to the flow itself: ``flows.<flow>_of``).

No Prefect import at module level: a temporary server starts *before* Prefect is imported,
so it boots while the client imports.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

#: Set while a :func:`flow_runs` block is open in this context (nested blocks share its API).
_open: contextvars.ContextVar[bool] = contextvars.ContextVar("flow_runs_open", default=False)


def _quiet(_line: str) -> None:
    pass


#: A server that keeps a command waiting longer than this is announced (a first boot in a
#: new PREFECT_HOME sets up its database: 7–20 s here, longer on a busy machine).
SLOW_BOOT_S = 3.0
SLOW_BOOT = (
    "starting a temporary Prefect server for this run (the first one in a new PREFECT_HOME "
    "sets up its database; `honesteval server` in another terminal saves this wait)…"
)
SLOW_SERVER = (
    "waiting for the Prefect server to answer (its first start in a new PREFECT_HOME sets up "
    "its database; later commands reuse it)…"
)


@contextlib.contextmanager
def _said_after(seconds: float, message: str, say: Callable[[str], None]) -> Iterator[None]:
    """Say ``message`` if the block is still running after ``seconds``."""
    timer = threading.Timer(seconds, say, args=(message,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


@contextlib.contextmanager
def flow_runs(echo: Callable[[str], None] | None = None, verbose: bool = False) -> Iterator[None]:
    """Everything a flow run called from this process needs: a Prefect API (configured or
    announced, else a reusable or a temporary server started now: ``PrefectApi``), no
    heartbeats.

    Nested blocks reuse the outer block's API (``honesteval demo``: one server for several
    evaluations). ``echo`` receives the lines a user should see (the server's address).
    Prefect's run logs below WARNING go to the server, not the terminal, unless ``verbose``.
    """
    if _open.get():
        yield
        return
    from honesteval.server.localserver import PrefectApi

    with PrefectApi(echo=echo or _quiet) as api:
        import honesteval.orchestration.flows  # noqa: F401  (imports Prefect while the server boots)
        from honesteval.server.in_process import imports_meanwhile, prefect_client_made_now
        from honesteval.server.watch import server_watch

        # A server that outlives this process records the last task runs after it exits; a
        # temporary one is waited for. While a server boots, the flow's first-use imports are
        # done meanwhile, and the client its runs use is made (a running server answers at
        # once, and both are done before the flow all the same).
        quiet = quiet_in_process_runs(wait_for_recording=api.temporary, verbose=verbose)
        with quiet:
            with imports_meanwhile():
                client = prefect_client_made_now()
                # say so if the server's boot keeps us waiting (this command's own imports,
                # done by now, are not the server's wait)
                waiting: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
                if api.may_still_boot and echo is not None:
                    line = SLOW_BOOT if api.temporary else SLOW_SERVER
                    waiting = _said_after(SLOW_BOOT_S, line, echo)
                with waiting:
                    api.ready()
            # A server that is not this command's own can go away mid-run: that ends the run
            # at once, in one line (watched only once it answers: a boot refuses connections).
            watch = contextlib.nullcontext() if api.temporary else server_watch(api.api_url)
            token = _open.set(True)
            try:
                with client, watch:
                    yield
            finally:
                _open.reset(token)


def quiet_in_process_runs(
    *, wait_for_recording: bool = True, verbose: bool = True
) -> AbstractContextManager[None]:
    """:func:`honesteval.server.in_process.in_process_runs` with the flows' own lines and
    Prefect's lines about InfraError/ScorerError task runs kept off the terminal (the server
    package sits below this one, so the names are handed down from here); not ``verbose``:
    Prefect's INFO lines too (they still reach the server)."""
    from honesteval.orchestration.flows._execute import LOGGER_NAME
    from honesteval.orchestration.tasks import FAILED_STATE_NAMES
    from honesteval.server.in_process import in_process_runs

    return in_process_runs(
        wait_for_recording=wait_for_recording,
        quiet_states=tuple(FAILED_STATE_NAMES.values()),
        quiet_loggers=(LOGGER_NAME,),
        terminal_level=logging.NOTSET if verbose else logging.WARNING,
    )


def flow_result(state: Any) -> Any:
    """The flow's result, also from a Failed-type LowCoverage/Indecisive state; a crash raises,
    a run stopped by Ctrl-C or SIGTERM (``Cancelled``) raises its one line."""
    from honesteval import interrupts
    from honesteval.errors import HonestevalError

    if state.is_cancelled():
        raise interrupts.Stopped(state.message or interrupts.STOPPED_LINE)
    from honesteval.orchestration.dask_watch import NO_LIVE_WORKER

    # a full disk, a read-only state folder, a cluster with no worker: one line, once
    if state.name in (interrupts.STORAGE_ERROR, NO_LIVE_WORKER):
        raise HonestevalError(state.message)
    out = state.result(raise_on_failure=False)
    if isinstance(out, BaseException):
        raise out
    return out
