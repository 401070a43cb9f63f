"""The ``python`` target out of process (``adapter.isolate: true``): ``timeout_s`` holds.

A thread cannot be killed: a hung python target keeps its thread (and a retry runs beside
it), and one that holds the GIL delays even the timeout check. With ``isolate: true`` each
trial runs ``module:function`` in a fresh interpreter in its own process group; past
``timeout_s`` the whole group is killed (``TargetTimeout``) and nothing is left running.
It costs one interpreter start per trial (a few hundred ms), so it is opt-in. When the trial
ends, everything the target started is swept as for a command target (``_process``): its
process group and every process carrying its tag, one that left the group with ``setsid``
included. The child runs in the project's sandbox (:mod:`._sandbox`).

Protocol: the parent writes ``{"root", "ref", "task", "candidate_dir", "seed"}`` as JSON on
the child's stdin; the child says ``ready`` once the target is loaded (the timeout starts
then), and answers one JSON object on its stdout, ``{"output": ...}`` or
``{"raised": {"type", "message", "infra", "retry_after"}}``. Whatever the target prints goes
to the child's stderr, never into the answer.

A child that ends after ``ready`` without answering, by an exit of its own (``os._exit``,
any exit code), is the candidate ending its interpreter: a :class:`CandidateFailure`, like a
raised ``SystemExit``. One that dies before ``ready`` (the interpreter could not load the
target) or by a signal (the OOM killer) is an ``InfraError``, as for the ``command`` target.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from honesteval import interrupts
from honesteval.errors import CandidateFailure, InfraError, RateLimited, TargetTimeout
from honesteval.models import Candidate, Rollout, Task

from ._loading import load_callable
from ._process import start_swept
from ._sandbox import Sandbox

_STDERR_TAIL = 300
_STARTUP_S = 120.0
#: Seconds a child that closed its stdout gets to exit, so its exit code is its own.
_EXIT_S = 5.0
READY = b"ready\n"


class TargetRaised(Exception):
    """The isolated target raised an exception that is not an ``InfraError``; the message
    starts with the original type's name."""


class IsolatedPythonTarget:
    """``run(task: dict, candidate_dir: str, seed: int) -> output``, one process per trial."""

    enforces_timeout = True

    def __init__(self, root: Path, ref: str, *, sandbox: Sandbox, timeout_s: float):
        load_callable(root, ref)  # a bad module:function is a config error now, not per trial
        self.root = root
        self.ref = ref
        self.sandbox = sandbox
        self.timeout_s = timeout_s

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        request = json.dumps(
            {
                "root": str(self.root),
                "ref": self.ref,
                "task": task.model_dump(mode="json"),
                "candidate_dir": candidate.path,
                "seed": seed,
            }
        )
        with (
            tempfile.TemporaryFile() as stdin,
            tempfile.TemporaryFile() as stderr,
            self.sandbox.trial(candidate.path) as jail,
        ):
            stdin.write(request.encode())
            stdin.seek(0)
            child = start_swept(
                jail.argv([sys.executable, "-m", "honesteval.adapters._isolated"]),
                cwd=jail.cwd,
                env=jail.env({}),
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=stderr,
                bufsize=0,  # unbuffered: reading "ready" must not swallow the answer after it
            )
            proc = child.proc
            try:
                with interrupts.child_group(proc.pid):  # Ctrl-C / SIGTERM stops it at once
                    out, ready = self._answer(proc)
                if not out.endswith(b"\n"):  # stdout closed: the child is ending by itself
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(_EXIT_S)
            finally:
                child.sweep()  # nothing of the trial outlives it, setsid grandchildren included
            code = jail.exit_code(proc.returncode)
            if code != 0 and interrupts.requested():
                raise interrupts.TrialAbandoned  # stopped by the stop, not a result
            stderr.seek(0)
            tail = stderr.read().decode("utf-8", "replace")[-_STDERR_TAIL:]
        try:
            answer = json.loads(out.decode("utf-8"))
        except ValueError:
            if ready and code >= 0:
                raise CandidateFailure(
                    f"the target ended its interpreter (exit code {code}) without an answer: {tail}"
                ) from None
            raise InfraError(
                f"python target process ended with code {code} and no answer: {tail}"
            ) from None
        if "output" in answer:
            return Rollout(output=answer["output"])
        raised = answer["raised"]
        if raised["infra"]:
            if raised["retry_after"] is not None:
                raise RateLimited(raised["message"], retry_after=raised["retry_after"])
            raise InfraError(raised["message"])
        raise TargetRaised(f"{raised['type']}: {raised['message']}")

    def _answer(self, proc: subprocess.Popen[bytes]) -> tuple[bytes, bool]:
        """The child's answer line, and whether the target was loaded ("ready") first. The
        clock starts at "ready" and stops at the answer: the interpreter's start and exit are
        not the target's time."""
        first = _read_line(proc, _STARTUP_S)
        if first is None:
            raise InfraError(f"python target process did not start within {_STARTUP_S:g} s")
        if first != READY:
            return first, False  # it died while loading: no answer (its stderr says why)
        answer = _read_line(proc, self.timeout_s)
        if answer is None:
            raise TargetTimeout(f"target ran past timeout_s={self.timeout_s:g}")
        return answer, True


def _read_line(proc: subprocess.Popen[bytes], timeout_s: float) -> bytes | None:
    """One line from the child's stdout within ``timeout_s``; None on timeout; what there is
    when the child closes its stdout."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return None
            chunk = os.read(fd, 1 if not buf.startswith(b"{") else 65536)
            if not chunk:
                break
            buf += chunk
    return buf


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    return repr(value)


def child_main() -> None:
    """The child side: run the target once and answer on the real stdout."""
    answer_to = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the target's prints (and its children's) go to stderr
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read())
    fn = load_callable(Path(request["root"]), request["ref"])
    answer_to.write(READY.decode())
    answer_to.flush()
    try:
        output = fn(request["task"], request["candidate_dir"], request["seed"])
        answer: dict[str, Any] = {"output": output}
    except BaseException as exc:  # a candidate's SystemExit is an answer too
        answer = {
            "raised": {
                "type": type(exc).__name__,
                "message": str(exc),
                "infra": isinstance(exc, InfraError),
                "retry_after": getattr(exc, "retry_after", None),
            }
        }
    answer_to.write(json.dumps(answer, default=_jsonable) + "\n")
    answer_to.flush()


if __name__ == "__main__":
    child_main()
