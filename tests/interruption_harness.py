"""Start the real CLI, stop it with a real signal, and look at what it left.

Ctrl-C goes through a pseudo-terminal (``pty.fork()``, then ``\\x03`` to the master) as a
user types it: the terminal sends SIGINT to the foreground process group. SIGTERM and SIGKILL
go to the CLI's pid. The projects use ``tests/stoppable_target.py``, whose ``calls.log`` has
one line per target call paid for in full.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

TARGET = (Path(__file__).parent / "stoppable_target.py").read_text()
LINE = re.compile(r"interrupted: (\d+) of (\d+) trials kept; run the same command to resume")

#: a terminal control sequence (cursor moves, line clears, colours)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def make_project(
    root: Path,
    *,
    n_tasks: int,
    trials: int,
    kind: str = "command",
    passes: dict[str, list[int]] | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    """A project of ``n_tasks`` val tasks; candidate ``c`` passes the tasks listed for it in
    ``passes`` (by index), others none. ``kind``: command, python, or isolated."""
    passes = passes or {"c1": list(range(n_tasks))}
    (root / "candidates").mkdir(parents=True)
    for name in passes:
        (root / "candidates" / name).mkdir()
        (root / "candidates" / name / "notes.txt").write_text(name)
    tasks = [
        {
            "id": f"q{i:03d}",
            "input": {"passes": [c for c, idx in passes.items() if i in idx]},
            "target": "yes",
        }
        for i in range(n_tasks)
    ]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (root / "target.py").write_text(TARGET)
    adapter: dict[str, Any]
    if kind == "command":
        adapter = {
            "kind": "command",
            "command": ["{python}", str(root / "target.py")],
            "scorer": "target:score",
        }
    else:
        adapter = {"kind": "python", "target": "target:run", "scorer": "target:score"}
        if kind == "isolated":
            adapter["isolate"] = True
    cfg: dict[str, Any] = {
        "name": root.name,
        "tasks": "tasks.jsonl",
        "splits": {"train": [], "val": [t["id"] for t in tasks], "test": []},
        "adapter": adapter,
        "trials": trials,
        "retries": 0,
        "timeout_s": 60.0,
        "max_concurrency": 8,
        # Unconfined: the target logs the calls paid for in the project, and the command
        # target runs target.py, the scorer's module, which a sandbox hides.
        "sandbox": "off",
    }
    cfg.update(config or {})
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return root


def paid_calls(root: Path) -> Counter[tuple[str, str, int]]:
    """(candidate, task id, seed) -> how many target calls were paid for in full."""
    path = root / "calls.log"
    if not path.exists():
        return Counter()
    lines = path.read_text().splitlines()
    return Counter((d["candidate"], d["task"], d["seed"]) for d in map(json.loads, lines))


def left_running(marker: str) -> list[int]:
    """Pids of live processes whose command line or environment mentions ``marker`` (a
    project folder), or that run inside it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat[stat.rfind(")") + 2] in "ZX":
                continue
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            text += os.readlink(entry / "cwd").encode()
        except OSError:
            continue
        if marker.encode() in text:
            found.append(int(entry.name))
    return found


def wait_gone(marker: str, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    left = left_running(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = left_running(marker)
    return left


class Cli:
    """One CLI process: under a pseudo-terminal (``pty=True``) or with plain pipes."""

    def __init__(self, args: list[str], env: dict[str, str], *, pty_: bool):
        argv = [sys.executable, "-m", "honesteval.cli", *args]
        self.output = bytearray()
        self.code: int | None = None
        self.pty = pty_
        if pty_:
            pid, fd = pty.fork()
            if pid == 0:  # the child: the CLI, with the pty as its terminal
                try:
                    os.execve(sys.executable, argv, env)
                finally:
                    os._exit(127)
            self.pid, self.fd = pid, fd
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
        else:
            self.proc = subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            self.pid = self.proc.pid
            self._reader = threading.Thread(target=self._read_pipe, daemon=True)
            self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    def _read_pipe(self) -> None:
        assert self.proc.stdout is not None
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
            self.output += chunk

    def ctrl_c(self) -> None:
        os.write(self.fd, b"\x03")

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout_s: float) -> int:
        """The exit code (negative: killed by that signal); raises after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.pty:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.code = os.waitstatus_to_exitcode(status)
                    break
            elif self.proc.poll() is not None:
                self.code = self.proc.returncode
                break
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                raise TimeoutError(f"the CLI did not exit within {timeout_s} s: {self.text()}")
            time.sleep(0.02)
        self._reader.join(5)
        return self.code

    def text(self) -> str:
        """What the terminal shows, as lines: the progress bar's cursor moves and colours
        (ANSI CSI sequences) taken out, so a line printed after the bar starts with its text."""
        raw = self.output.decode("utf-8", "replace").replace("\r\n", "\n")
        return _ANSI.sub("", raw)


def wait_for_starts(root: Path, n: int, cli: Cli, timeout_s: float = 120) -> None:
    """Until ``n`` target calls have begun (``started.log``)."""
    path = root / "started.log"
    deadline = time.monotonic() + timeout_s
    while not path.exists() or len(path.read_text().splitlines()) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{n} starts not reached: {cli.text()[-2000:]}")
        time.sleep(0.02)


def wait_for_calls(root: Path, n: int, cli: Cli, timeout_s: float = 120) -> None:
    """Until ``calls.log`` has ``n`` lines (raises if the CLI exits first or time runs out)."""
    deadline = time.monotonic() + timeout_s
    while sum(paid_calls(root).values()) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{n} calls not reached: {cli.text()[-2000:]}")
        time.sleep(0.02)
