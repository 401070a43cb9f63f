"""The ``command`` target: one process per trial, the task as JSON on stdin, JSON on stdout."""

from __future__ import annotations

import json
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from honesteval.errors import CandidateFailure, InfraError, TargetTimeout
from honesteval.models import Candidate, Rollout, Task
from honesteval.redaction import child_env

from ._base import AdapterParts, TargetConfig
from ._process import run_isolated

if TYPE_CHECKING:
    from honesteval.adapters.project_view import ProjectView

_TAIL = 2000


class CommandTarget:
    """Run ``command`` per trial (cwd: the project folder; ``{python}`` in it is replaced by
    the interpreter running honesteval).

    Environment: ``HONESTEVAL_SEED``, ``HONESTEVAL_TRIAL``, ``HONESTEVAL_TASK_ID``,
    ``HONESTEVAL_CANDIDATE_DIR`` (plus the adapter's ``env``). Outcomes:

    * exit 0: stdout parsed as JSON is the output (text that is not JSON is kept as a string);
    * an exit code listed in ``infra_exit_codes``, or death by a signal: ``InfraError``;
    * past ``timeout_s``: everything the command started is killed (``_process``),
      ``TargetTimeout``: the candidate's failure unless the project says ``timeout_is:
      missing``; stdout is a file, so a detached grandchild cannot stall the trial;
    * any other exit code: the candidate ran and failed: :class:`CandidateFailure`, so the
      trial is ``failed`` (scored at ``failure_reward``, counted, never retried), with the exit
      code and stderr tail as its error text.
    """

    enforces_timeout = True

    def __init__(
        self,
        root: Path,
        command: str | list[str],
        *,
        timeout_s: float,
        infra_exit_codes: list[int],
        env: dict[str, str],
    ):
        self.root = root
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        # "{python}" is the interpreter running honesteval: the project's venv, wherever it is.
        self.argv = [sys.executable if a == "{python}" else a for a in argv]
        self.timeout_s = timeout_s
        self.infra_exit_codes = set(infra_exit_codes)
        self.env = env

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        env = child_env(self.env) | {
            "HONESTEVAL_SEED": str(seed),
            "HONESTEVAL_TRIAL": str(trial),
            "HONESTEVAL_TASK_ID": task.id,
            "HONESTEVAL_CANDIDATE_DIR": candidate.path,
            "HONESTEVAL_CANDIDATE": candidate.name,
        }
        with tempfile.TemporaryDirectory(prefix="honesteval-command-") as tmp:
            io = Path(tmp)
            (io / "task.json").write_text(task.model_dump_json(), encoding="utf-8")
            try:
                done = run_isolated(
                    self.argv,
                    cwd=self.root,
                    env=env,
                    stdin=io / "task.json",
                    stdout=io / "stdout",
                    stderr=io / "stderr",
                    timeout_s=self.timeout_s,
                )
            except OSError as exc:
                raise InfraError(f"cannot start {self.argv[0]!r}: {exc.strerror}") from None
            out = (io / "stdout").read_bytes()
            err = (io / "stderr").read_bytes()
        if done.timed_out:
            raise TargetTimeout(f"command ran past timeout_s={self.timeout_s:g}")
        stderr_tail = err.decode("utf-8", "replace")[-_TAIL:]
        code = done.returncode
        if code < 0:
            raise InfraError(f"command killed by signal {-code}: {stderr_tail[-300:]}")
        if code in self.infra_exit_codes:
            raise InfraError(f"command exited {code} (an infra exit code): {stderr_tail[-300:]}")
        if code != 0:
            raise CandidateFailure(f"command exited {code}: {stderr_tail[-300:]}")
        text, notes = utf8_text(out, "stdout")
        text = text.strip()
        try:
            output = json.loads(text) if text else None
        except json.JSONDecodeError:
            output = text
        return Rollout(output=output, metadata={"exit_code": 0, "stderr": stderr_tail}, notes=notes)


#: A byte that is not UTF-8, as ``surrogateescape`` decodes it (U+DC80 to U+DCFF).
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def utf8_text(data: bytes, what: str) -> tuple[str, list[str]]:
    """``data`` as text, each byte that is not UTF-8 replaced by U+FFFD, and a note saying
    how many were replaced and where the first was (nothing when every byte is UTF-8).

    >>> text, [note] = utf8_text(b"ok \xff\xfe!", "stdout")
    >>> text
    'ok \ufffd\ufffd!'
    >>> note
    'stdout: 2 bytes not UTF-8 replaced by U+FFFD (the first, 0xff, at byte 3)'
    """
    text = data.decode("utf-8", "surrogateescape")
    first = _ESCAPED_BYTE.search(text)
    if first is None:
        return text, []
    n_bad = len(_ESCAPED_BYTE.findall(text))
    offset = len(text[: first.start()].encode("utf-8", "surrogateescape"))
    note = (
        f"{what}: {n_bad} byte{'s' * (n_bad != 1)} not UTF-8 replaced by U+FFFD "
        f"(the first, 0x{data[offset]:02x}, at byte {offset})"
    )
    return _ESCAPED_BYTE.sub("\ufffd", text), [note]


class CommandTargetConfig(TargetConfig):
    """``kind: command``: ``command`` (a string split like a shell would, or a list) per trial."""

    kind: Literal["command"]
    command: str | list[str] = Field(min_length=1)
    infra_exit_codes: list[int] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    def build(self, project: ProjectView) -> AdapterParts:
        return AdapterParts(
            CommandTarget(
                project.root,
                self.command,
                timeout_s=project.config.timeout_s,
                infra_exit_codes=self.infra_exit_codes,
                env=self.env,
            )
        )
