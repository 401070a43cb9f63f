"""A flow run's process that ``honesteval serve`` started: it leaves serve's session and
notes itself where serve finds it (:mod:`honesteval.server.live_runs`).

Prefect's runner starts each run's process (``python -m prefect.engine``) in serve's own
process group, where a terminal's Ctrl-C reaches it too. Serve asks each run to stop exactly
once (SIGINT to its process group): a second signal stops a run at once, before it records
what it kept. So the run, as soon as honesteval's code runs in it, moves to a session of its
own and then tells serve its pid.
"""

from __future__ import annotations

import atexit
import os
import signal

from honesteval import interrupts
from honesteval.server.live_runs import SERVED_BY, forget_mine, note

_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def leave_serves_session() -> None:
    """If serve started this process (its parent is the pid :data:`SERVED_BY` names): a
    session of its own, then a note for serve (dropped when the process exits). Once per
    process: a gate's subflows run in it too.

    Call it with the run's handlers of SIGINT and SIGTERM installed
    (:func:`honesteval.interrupts.stop_on_signals`). A Ctrl-C that reached this process while
    it was still in serve's process group asked it to stop already: then it is not noted,
    and serve does not ask it a second time.
    """
    served_by = os.environ.get(SERVED_BY)
    if served_by != str(os.getppid()) or os.getpgid(0) == os.getpid():
        return
    from prefect.runtime import flow_run
    from prefect.settings import PREFECT_API_URL

    flow_run_id = flow_run.get_id()
    if flow_run_id is None:
        return
    # Blocking runs the handler of a signal already delivered (it may raise KeyboardInterrupt
    # here); one arriving later waits, and is seen pending once out of serve's group.
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        os.setsid()
        if not (_SIGNALS & signal.sigpending()) and not interrupts.requested():
            note(flow_run_id, str(PREFECT_API_URL.value()), served_by=int(served_by))
            atexit.register(forget_mine)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
