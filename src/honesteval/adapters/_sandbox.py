"""The sandbox a candidate's program runs in (``sandbox:`` in ``honesteval.yaml``).

A ``command`` target, an ``isolate: true`` python target and the shell steps of an evaluation
run the candidate's code. In the sandbox (Linux user, mount and PID namespaces) that code sees:

* the system (``/usr``, ``/etc``, ``/opt``) and the interpreter running honesteval, read-only;
* the project folder read-only, without ``honesteval.yaml``, ``.honesteval/``, the tasks file,
  the candidates folder and the scorer (its module, the evaluation's steps and prompts; a step
  sees its own files);
* the candidate's own folder, read-only;
* a scratch folder of its own per trial, writable: its cwd (a step's cwd is its workspace,
  writable too), ``HOME`` and ``TMPDIR``; ``/tmp`` is empty and its own;
* the network only with ``sandbox.network: true`` (the default); its own process IDs, so
  nothing it starts outlives it.

Its environment holds the few variables of :data:`KEPT_ENV`, what the adapter's ``env``
declares and honesteval's own: never a key of the judge's, the scorer's or the shell's.

bubblewrap (``bwrap``) makes the sandbox; ``unshare`` (util-linux) with a mount script and
``chroot`` is the fallback where bwrap is missing. ``sandbox: off`` runs as before the sandbox
(cwd the project, the environment without the keys honesteval knows); where neither tool can
make namespaces, ``auto`` says so once and runs unconfined, ``required`` is a config error.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from honesteval.errors import ConfigError
from honesteval.models import StrictModel
from honesteval.redaction import child_env

from ._loading import module_file
from .eve.config import step_files

if TYPE_CHECKING:
    from honesteval.adapters.project_view import ProjectView

SandboxMode = Literal["auto", "required", "off"]

#: The variables of honesteval's environment a sandboxed program keeps: where programs are
#: and how text is spoken. Anything else (a key above all) only through the adapter's ``env``.
KEPT_ENV = ("PATH", "PYTHONPATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
#: The system a sandboxed program sees read-only (a symlink, e.g. merged-usr ``/bin``, is
#: made again as the same symlink).
_SYSTEM = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Seconds the tool may take to show once that it can make a sandbox here.
_PROBE_S = 20.0
#: bwrap and the fallback's shell exit 128 + N when the program was killed by signal N.
_SIGNALLED = 128


class SandboxConfig(StrictModel):
    """``sandbox:``: ``auto`` (the default: a sandbox where the machine allows one),
    ``required`` (none here is a config error, exit 2) or ``off``; or a mapping with ``mode``,
    ``network`` (whether a sandboxed program may reach the network; default true) and
    ``show`` (folders outside the project, relative to it, that it may read: shared code)."""

    mode: SandboxMode = "auto"
    network: bool = True
    show: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        # YAML reads a bare `off` as false.
        if value is False or isinstance(value, str):
            return {"mode": "off" if value is False else value}
        if isinstance(value, dict) and value.get("mode") is False:
            return {**value, "mode": "off"}
        return value


@dataclass(frozen=True)
class Mount:
    """One step of building what a sandboxed program sees: ``ro``/``rw`` bind ``path`` onto
    itself, ``hide`` it (an empty folder, or an empty file), or make it a ``symlink``."""

    kind: Literal["ro", "rw", "hide", "symlink"]
    path: Path
    target: str = ""


class Bwrap:
    """bubblewrap: one program, every namespace, the mounts as arguments."""

    name = "bwrap"

    def wrap(
        self, mounts: list[Mount], argv: list[str], cwd: Path, network: bool, base: Path
    ) -> list[str]:
        args = ["bwrap", "--unshare-all", "--die-with-parent", *(["--share-net"] * network)]
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for m in mounts:
            p = str(m.path)
            if m.kind == "symlink":
                args += ["--symlink", m.target, p]
            elif m.kind == "hide":
                args += ["--tmpfs", p] if m.path.is_dir() else ["--ro-bind", str(_empty(base)), p]
            else:
                args += ["--ro-bind" if m.kind == "ro" else "--bind", p, p]
        for folder in _hidden_folders(mounts):  # after what is bound inside them
            args += ["--remount-ro", str(folder)]
        return [*args, "--chdir", str(cwd), "--", *argv]


class Unshare:
    """util-linux ``unshare``: new namespaces, then a shell script mounts the same view in an
    empty tmpfs under ``base`` and runs the program in it with ``chroot``."""

    name = "unshare"

    def wrap(
        self, mounts: list[Mount], argv: list[str], cwd: Path, network: bool, base: Path
    ) -> list[str]:
        root = base / "root"
        root.mkdir(exist_ok=True)
        q = shlex.quote
        # The mount tools from the system, whatever PATH the program is to get.
        lines = ["set -e", 'P="$PATH"', "PATH=/usr/sbin:/usr/bin:/sbin:/bin", f"R={q(str(root))}"]
        lines.append('mount -t tmpfs none "$R"')
        lines += ['mkdir -p "$R/dev/shm" "$R/proc" "$R/tmp"', 'mount -t tmpfs none "$R/dev/shm"']
        for dev in ("null", "zero", "full", "random", "urandom"):
            lines.append(f'touch "$R/dev/{dev}"; mount --bind /dev/{dev} "$R/dev/{dev}"')
        lines += ['ln -s /proc/self/fd "$R/dev/fd"', 'mount -t proc proc "$R/proc"']
        lines.append('mount -t tmpfs none "$R/tmp"')
        # `spot PATH d|f`: a folder or a file to mount on at PATH in the new root, unless there.
        lines.append(
            'spot() { [ -e "$R$1" ] || if [ "$2" = d ]; then mkdir -p "$R$1"; '
            'else mkdir -p "$(dirname "$R$1")" && touch "$R$1"; fi; }'
        )
        for m in mounts:
            path, at = q(str(m.path)), f'"$R"{q(str(m.path))}'
            spot = f"spot {path} {'d' if m.path.is_dir() else 'f'}; "
            if m.kind == "symlink":
                lines.append(f"ln -s {q(m.target)} {at}")
            elif m.kind == "hide" and m.path.is_dir():
                lines.append(f"{spot}mount -t tmpfs none {at}")
            else:
                source = q(str(_empty(base))) if m.kind == "hide" else path
                lines.append(f"{spot}mount --rbind {source} {at}")
                if m.kind != "rw":
                    lines.append(f"mount -o remount,bind,ro {at}")
        lines += [f'mount -o remount,ro "$R"{q(str(p))}' for p in _hidden_folders(mounts)]
        # Not exec: this shell stays PID 1 of the namespace, so the program gets signals.
        lines += ['C="$(command -v chroot)"', 'PATH="$P"']
        lines.append(f'"$C" "$R" /bin/sh -c \'cd "$0" && exec "$@"\' {q(str(cwd))} "$@"')
        flags = ["--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child"]
        flags += ["--ipc", "--uts", *(["--net"] * (not network))]
        return ["unshare", *flags, "--", "/bin/sh", "-c", "\n".join(lines), "sh", *argv]


Engine = Bwrap | Unshare


def _empty(base: Path) -> Path:
    """An empty file to show where a hidden file is (/dev/null would take writes)."""
    empty = base / "empty"
    empty.touch()
    return empty


def _hidden_folders(mounts: list[Mount]) -> list[Path]:
    """The hidden folders: empty, and read-only once what is shown inside them is bound."""
    return [m.path for m in mounts if m.kind == "hide" and m.path.is_dir()]


@functools.cache
def _system_mounts() -> tuple[Mount, ...]:
    mounts = []
    for name in _SYSTEM:
        path = Path(name)
        if path.is_symlink():
            mounts.append(Mount("symlink", path, os.readlink(path)))
        elif path.is_dir():
            mounts.append(Mount("ro", path))
    resolv = Path("/etc/resolv.conf").resolve()  # often a link into /run, which stays hidden
    if resolv.is_file() and not resolv.is_relative_to("/etc"):
        mounts.append(Mount("ro", resolv))
    return tuple(mounts)


@functools.cache
def engine_here() -> Engine | None:
    """The first tool that makes a sandbox on this machine (tried once per process)."""
    for engine in (Bwrap(), Unshare()):
        if shutil.which(engine.name) is None:
            continue
        with tempfile.TemporaryDirectory(prefix="honesteval-sandbox-probe-") as tmp:
            argv = engine.wrap(
                list(_system_mounts()), ["/bin/sh", "-c", ":"], Path("/"), False, Path(tmp)
            )
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                done = subprocess.run(argv, capture_output=True, timeout=_PROBE_S, check=False)
                if done.returncode == 0:
                    return engine
    return None


NO_SANDBOX = (
    "no sandbox: neither bwrap nor unshare can make a user namespace on this machine, so "
    "candidate programs can read and write the project's files (install bubblewrap; "
    "`sandbox: off` says it is meant)"
)


def outermost(paths: Iterable[Path]) -> list[Path]:
    """The paths none of the others contains, shortest first.

    >>> outermost([Path("/a/b"), Path("/a"), Path("/c")])
    [PosixPath('/a'), PosixPath('/c')]
    """
    kept: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def _interpreter_paths(project_root: Path) -> list[Path]:
    """Where the interpreter and its packages are (an editable install's source included);
    never a folder holding the project (``python -m`` run from it puts it on ``sys.path``)."""
    found = (Path(p).resolve() for p in (sys.prefix, sys.base_prefix, *sys.path) if p)
    return [p for p in found if p.exists() and not project_root.is_relative_to(p)]


#: Where the line "trials run unconfined" goes: the evaluation layer's progress listeners
#: (:func:`say_unconfined_with`); the adapters import nothing above them.
_unconfined_sink: list[Callable[[str], None]] = []


def say_unconfined_with(say: Callable[[str], None]) -> None:
    """Send the sandbox's one line "trials run unconfined" to ``say``."""
    _unconfined_sink[:] = [say]


@functools.cache
def _said_no_sandbox() -> None:
    """Say once per process that trials run unconfined (at the first trial of a run)."""
    for say in _unconfined_sink:
        say(NO_SANDBOX)


@dataclass(frozen=True)
class Sandbox:
    """How a project's candidate programs run: ``confined`` (not ``sandbox: off``), in
    ``engine``'s sandbox (None: none could be made here), seeing ``visible`` read-only
    (besides the system) but not ``hidden``."""

    config: SandboxConfig
    root: Path
    engine: Engine | None
    visible: list[Path]
    hidden: list[Path]

    @property
    def confined(self) -> bool:
        return self.config.mode != "off"

    @contextlib.contextmanager
    def trial(
        self,
        candidate_path: str | None,
        *,
        cwd: Path | None = None,
        writable: Iterable[Path] = (),
    ) -> Iterator[Jail]:
        """A jail for one trial: a fresh scratch folder (its cwd unless ``cwd`` is given; the
        project folder when the sandbox is off), removed afterwards with whatever the program
        left in it."""
        if self.confined and self.engine is None:
            _said_no_sandbox()
        with tempfile.TemporaryDirectory(prefix="honesteval-trial-") as tmp:
            scratch = Path(tmp) / "scratch"
            scratch.mkdir()
            mounts = [
                *_system_mounts(),
                *(Mount("ro", p) for p in self.visible),
                *(Mount("hide", p) for p in self.hidden if p.exists()),
                *([Mount("ro", Path(candidate_path))] if candidate_path else []),
                *(Mount("rw", p) for p in (scratch, *writable)),
            ]
            where = cwd or (scratch if self.confined else self.root)
            yield Jail(self, Path(tmp), scratch, where, mounts)


@dataclass(frozen=True)
class Jail:
    """One trial's sandbox: what to run (:meth:`argv`), in ``cwd``, with :meth:`env`."""

    sandbox: Sandbox
    base: Path
    scratch: Path
    cwd: Path
    mounts: list[Mount]

    @property
    def _engine(self) -> Engine | None:
        return self.sandbox.engine if self.sandbox.confined else None

    def argv(self, argv: list[str]) -> list[str]:
        if self._engine is None:
            return argv
        network = self.sandbox.config.network
        return self._engine.wrap(self.mounts, argv, self.cwd, network, self.base)

    def env(self, declared: Mapping[str, str]) -> dict[str, str]:
        """The program's environment: :data:`KEPT_ENV`, HOME and TMPDIR in the scratch folder,
        then ``declared`` (the adapter's ``env`` and honesteval's variables). With the
        sandbox off: honesteval's environment without the keys it knows, then ``declared``."""
        if not self.sandbox.confined:
            return child_env(declared)
        kept = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
        return kept | {"HOME": str(self.scratch), "TMPDIR": str(self.scratch)} | dict(declared)

    def exit_code(self, code: int) -> int:
        """The program's own exit code; -N when signal N killed it, as without a sandbox."""
        if self._engine is None:
            return code
        return -(code - _SIGNALLED) if _SIGNALLED < code <= _SIGNALLED + 64 else code


def scorer_paths(project: ProjectView) -> list[Path]:
    """The scorer's files a candidate's program must not see: the ``scorer:`` module (unless
    the target lives in the same file) and the evaluation's steps, prompts and rubrics."""
    config = project.config
    target_files = {
        module_file(project.root, ref.partition(":")[0])
        for ref in config.adapter.module_refs()
        if ref != config.adapter.scorer
    }
    scorer = config.adapter.scorer
    scorer_file = None if scorer is None else module_file(project.root, scorer.partition(":")[0])
    files = [] if scorer_file is None or scorer_file in target_files else [scorer_file]
    return files + step_files(project.root, config.evaluation)


def project_sandbox(
    project: ProjectView, *, runs_steps: bool = False, also_visible: Iterable[Path] = ()
) -> Sandbox:
    """The sandbox of a project's candidate programs: a target's (``runs_steps``: the
    evaluation's shell steps, which see the scorer's files), with the folders of the
    programs it names (``also_visible``) read-only too. Raises ``ConfigError`` under
    ``sandbox: required`` where no sandbox can be made."""
    config: SandboxConfig = project.config.sandbox
    shown = [(project.root / folder).resolve() for folder in config.show]
    folders = [project.root, *also_visible, *shown]
    hidden = [
        *(folder / name for folder in folders for name in (".honesteval", "honesteval.yaml")),
        project.root / project.config.tasks,
        project.candidates_dir,
        *([] if runs_steps else scorer_paths(project)),
    ]
    return make_sandbox(config, project.root, folders, hidden)


def make_sandbox(
    config: SandboxConfig, root: Path, folders: list[Path], hidden: list[Path]
) -> Sandbox:
    """A sandbox showing ``folders`` (the first, ``root``, is the cwd with the sandbox off),
    the system and the interpreter read-only, and not ``hidden``. Raises ``ConfigError``
    under ``sandbox: required`` where no sandbox can be made."""
    engine = engine_here() if config.mode != "off" else None
    if config.mode == "required" and engine is None:
        raise ConfigError(f"sandbox: required, but {NO_SANDBOX.removeprefix('no sandbox: ')}")
    system = [m.path for m in _system_mounts() if m.kind == "ro"]
    visible = outermost([*system, *folders, *_interpreter_paths(root)])
    real = [p.resolve() for p in hidden]
    seen = [p for p in real if any(p.is_relative_to(v) for v in visible)]
    return Sandbox(config, root, engine, [p for p in visible if p not in system], seen)


def sandbox_line(project: ProjectView) -> tuple[bool, str] | None:
    """What ``check`` says of the sandbox: (confined as configured, the line); None when the
    project runs no program of a candidate's (a python target in honesteval's process)."""
    adapter = project.config.adapter
    runs_programs = adapter.kind == "command" or getattr(adapter, "isolate", False)
    if not runs_programs and project.config.evaluation is None:
        return None
    config: SandboxConfig = project.config.sandbox
    if config.mode == "off":
        return True, "off (sandbox: off): candidate programs run with the project as cwd"
    engine = engine_here()
    if engine is None:
        return False, NO_SANDBOX
    network = "with" if config.network else "without"
    return True, (
        f"{engine.name}: candidate programs see their own folder, a scratch folder and the "
        f"system, {network} the network; not the tasks, the scorer or .honesteval/"
    )
