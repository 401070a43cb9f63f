"""The ``command`` target: one process per trial, the task as JSON on stdin, JSON on stdout."""

from __future__ import annotations

import json
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
    from honesteval.project.loader import Project

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
        text = out.decode("utf-8", "replace").strip()
        try:
            output = json.loads(text) if text else None
        except json.JSONDecodeError:
            output = text
        return Rollout(output=output, metadata={"exit_code": 0, "stderr": stderr_tail})


class CommandTargetConfig(TargetConfig):
    """``kind: command``: ``command`` (a string split like a shell would, or a list) per trial."""

    kind: Literal["command"]
    command: str | list[str] = Field(min_length=1)
    infra_exit_codes: list[int] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    def build(self, project: Project) -> AdapterParts:
        return AdapterParts(
            CommandTarget(
                project.root,
                self.command,
                timeout_s=project.config.timeout_s,
                infra_exit_codes=self.infra_exit_codes,
                env=self.env,
            )
        )
