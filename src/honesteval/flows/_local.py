"""Settings for flow runs that live and die inside the caller's process (CLI, demo, bench)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings


@contextmanager
def in_process_runs() -> Iterator[None]:
    """Turn off flow-run heartbeats for flows called in this process.

    Heartbeats let a server notice that a *deployed* run's process died; a flow the CLI calls
    in its own process dies with the CLI, so they buy nothing here. They cost up to a second
    per flow run (the heartbeat thread sleeps in 1 s steps and is joined on exit), which on a
    2,000-trial evaluation is as much as all the rest of Prefect's overhead. Deployed runs
    (``honesteval serve``, workers) keep them.
    """
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield
