"""The flow's watch on a Dask cluster: each trial reported as a worker finishes it, a stop
(Ctrl-C, SIGTERM) reaching the workers, and a cluster left with no live worker said in one
line instead of a run that waits for ever.

A worker runs a batch of trials in its own process, where no evaluation is registered with
:mod:`honesteval.evaluation.progress`: its reports go to the progress relay, which sends them
as Dask events (``Worker.log_event`` on :data:`PROGRESS_TOPIC`) through the scheduler to the
flow's client (``Client.subscribe_topic``), whose handler counts them as the flow's own. A
stopping run sets a Dask ``Event`` named for its flow run, which a worker's batch reads before
each trial: the signal reaches the CLI's process only, and a batch on a worker would otherwise
go on paying for its trials after the run said what it kept. Only the ``distributed`` API,
imported once a cluster is in use.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from honesteval.errors import HonestevalError
from honesteval.evaluation import progress

#: The Dask event topic of trials' progress reports.
PROGRESS_TOPIC = "honesteval-progress"
#: How often the flow asks the scheduler for its workers while no trial finishes.
CHECK_EVERY_S = 1.0
#: The name of the Failed state of a run stopped for want of a worker.
NO_LIVE_WORKER = "NoLiveWorker"


class NoLiveWorker(HonestevalError):
    """The Dask cluster had no live worker, and no trial finished, for the configured time."""


def _worker() -> Any | None:
    """The Dask worker running this task, or None (no Dask here, or not a task on a worker)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        return get_worker()
    except ValueError:
        return None


def _stop_event(run_id: str, client: Any | None = None) -> Any:
    from distributed import Event

    return Event(f"honesteval-stop-{run_id}", client=client)


def stop_asked(run_id: str | None) -> bool:
    """In a Dask worker: whether the flow run ``run_id`` is stopping (start no trial)."""
    if run_id is None or _worker() is None:
        return False
    return bool(_stop_event(run_id).is_set())


def relay_from_worker(kind: str, label: str, status: str | None) -> None:
    """A trial's progress report in a Dask worker, sent to the flow's client; anywhere else
    nothing (the report's evaluation is not this process's)."""
    worker = _worker()
    if worker is not None:
        worker.log_event(PROGRESS_TOPIC, {"kind": kind, "label": label, "status": status})


def _count(event: tuple[float, dict[str, Any]]) -> None:
    msg = event[1]
    if msg["kind"] == "ran":
        progress.trial_ran(msg["label"], msg["status"])
    else:
        progress.trial_graded(msg["label"], msg["status"])


class ClusterWatch:
    """Counts the workers' reports and asks the scheduler for its workers while nothing
    finishes: :meth:`check` raises :class:`NoLiveWorker` once there has been no worker, and
    no trial finished, for ``timeout_s`` seconds; its line ends with ``kept()`` (what is
    stored, read then)."""

    def __init__(self, client: Any, timeout_s: float, kept: Callable[[], str], run_id: str | None):
        self.client = client
        self.run_id = run_id
        self.timeout_s = timeout_s
        self.kept = kept
        self.address: str = client.scheduler.address
        self._quiet_since = time.monotonic()
        self._no_worker_since: float | None = None
        self._lock = threading.Lock()
        client.subscribe_topic(PROGRESS_TOPIC, self._report)

    def _report(self, event: tuple[float, dict[str, Any]]) -> None:
        self.heard()
        _count(event)

    def heard(self) -> None:
        """A trial finished (a worker's report, or a task run that ended)."""
        with self._lock:
            self._quiet_since = time.monotonic()

    def stop_workers(self) -> None:
        """The run is stopping: its batches on the workers start no further trial."""
        if self.run_id is not None:
            _stop_event(self.run_id, self.client).set()

    def workers(self) -> int:
        """Live workers as the scheduler sees them (0 when it does not answer)."""
        try:
            return len(self.client.nthreads())
        except Exception:  # a scheduler that is gone has no worker either
            return 0

    def check(self) -> None:
        """Raise :class:`NoLiveWorker` when the cluster has had no worker, and no trial
        finished, for ``timeout_s``."""
        now = time.monotonic()
        if self.workers():
            self._no_worker_since = None
            return
        if self._no_worker_since is None:
            self._no_worker_since = now
        with self._lock:
            waited = now - max(self._no_worker_since, self._quiet_since)
        if waited >= self.timeout_s:
            raise NoLiveWorker(
                f"no live Dask worker at {self.address} for {waited:.0f} s; {self.kept()}"
            )


__all__ = [
    "NO_LIVE_WORKER",
    "PROGRESS_TOPIC",
    "ClusterWatch",
    "NoLiveWorker",
    "relay_from_worker",
    "stop_asked",
]
