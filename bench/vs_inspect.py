"""honesteval against Inspect AI, whole CLI processes in rotation (issue 28's table).

Run: ``python bench/vs_inspect.py --inspect-python PATH [--repeats 3] [--max-load L] [--quick]
[--only CELL ...]``

Same work on both sides: N/4 tasks × 4 trials (Inspect: N/4 samples × 4 epochs), a no-op
target and scorer (Inspect: a no-op solver, ``mockllm/model``), concurrency 32. The cells:

* ``start-4``: 4 trials cold, what a command costs before and around any work;
* ``cold-200``, ``cold-2000``: N trials cold, a new CLI process, nothing stored yet
  (honesteval ``--fresh``; Inspect ``eval`` into an empty log directory);
* ``io-2000``: 2,000 trials of a target that waits 50 ms (ideal: 2000 · 0.05 / 32 s);
* ``rerun-2000``: the 2,000-trial evaluation again, every trial stored (honesteval reuses
  them; Inspect ``eval-set`` finds its log complete and runs nothing).

Inspect runs in both of its fair modes: logging every sample (honesteval persists every
trial, so this is the like-for-like persistence) and ``--no-log-samples`` (the fastest mode a
user can pick). honesteval runs in each of its server modes (``--modes``): the first command
of a sitting (``honesteval server stop`` before each, untimed), later commands of a sitting, a
temporary server per command, ``honesteval server`` already up, the first command in a new
``PREFECT_HOME`` (it creates Prefect's database: the migration), and ``inspect-adapter``: the
same work run by Inspect through honesteval's ``adapter: {kind: inspect}`` (later commands of
a sitting; one ``eval()`` per trial index).

Each round runs every contender once, the order shifted by one each round, so all of them see
the same machine; a ratio is honesteval / Inspect of the same round (below 1 = honesteval
faster), and the table shows the median of those pair ratios. Memory is the peak resident
set of the whole process tree (the CLI, any server it starts, their children) sampled from
/proc every 0.1 s, plus a long-lived server's tree where one serves the command.

The machine may be shared, so the 1-minute load average is recorded when each command starts,
and a round's load is the highest of its commands'. Every figure is the median over rounds with
its min–max beside it. ``--max-load L`` refuses to print a table from a loaded machine: each
command first waits (up to 3 minutes) for the load to fall to ``L``, and the first round (or
warm-up) that still starts above ``L`` stops the bench with one line and exit status 3.
The bench itself keeps a 2-core machine's load at ~1–2 (a command and its server), so on 2
cores ``--max-load 2.5`` means no one else's work ran.

Inspect AI is not installed by this script and should not share honesteval's environment:
install ``inspect-ai`` into a venv of its own and pass its interpreter with
``--inspect-python`` (or ``HONESTEVAL_BENCH_INSPECT_PYTHON``). Without it the script says so
and exits 0, unless ``--honesteval-only`` asks for honesteval's columns alone (no ratios).
``--quick`` runs 2 rounds with 500 trials in place of 2,000.

CPU is printed twice: the command's tree with the long-lived server that serves it (the
reusable server of a sitting, announced in the Prefect home, or ``honesteval server``), and
the command's own tree alone, so the modes compare like for like either way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import make_project

from honesteval.server.localserver import SERVER_FILE
from honesteval.server.sitting import IDLE_VAR, PER_COMMAND, REUSE
from honesteval.server.sitting import MODE_VAR as SERVER_MODE_VAR

INSPECT_TASK = """
import asyncio
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Score, mean, scorer
from inspect_ai.solver import solver


@solver
def wait(seconds: float = 0.0):
    async def solve(state, generate):
        if seconds:
            await asyncio.sleep(seconds)
        return state
    return solve


@scorer(metrics=[mean()])
def one():
    async def score(state, target):
        return Score(value=1.0)
    return score


@task
def bench(n: int = 50, epochs: int = 4, seconds: float = 0.0, candidate_dir: str = "."):
    samples = [Sample(input=f"t{i:05d}", target="x", id=f"t{i:05d}") for i in range(n)]
    return Task(dataset=MemoryDataset(samples), solver=wait(seconds), scorer=one(),
                epochs=epochs)
"""

TRIALS_PER_TASK = 4
CONCURRENCY = 32
IO_WAIT_S = 0.05
SAMPLE_EVERY_S = 0.1


# -- what is measured ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One row of the table: ``trials`` trials, cold or a rerun with every trial stored."""

    key: str
    label: str
    trials: int
    io_wait_s: float = 0.0
    rerun: bool = False


def cells(big: int) -> list[Cell]:
    """The issue's rows; ``big`` is the trial count of the large rows (2,000; fewer with
    ``--quick``)."""
    n = f"{big:,}"
    return [
        Cell("start-4", "4 trials cold", 4),
        Cell("cold-200", "200 cold", 200),
        Cell(f"cold-{big}", f"{n} cold", big),
        Cell(f"io-{big}", f"{n} × {IO_WAIT_S * 1000:.0f} ms I/O", big, io_wait_s=IO_WAIT_S),
        Cell(f"rerun-{big}", f"rerun of {n}, all stored", big, rerun=True),
    ]


@dataclass(frozen=True)
class Run:
    """One whole command: wall seconds; CPU seconds of its process tree and of the
    long-lived server's tree that served it together (``cpu_s``) and apart (``client_cpu_s``,
    ``server_cpu_s``); peak RSS (MB) of its own tree, of that server's (0 without one) and of
    both together (their sum at the same instant); the 1-minute load average when it
    started."""

    wall_s: float
    cpu_s: float
    tree_mb: float
    server_mb: float
    total_mb: float
    load: float
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0


@dataclass(frozen=True)
class Proc:
    """A process as /proc shows it: parent, resident MB, CPU seconds it used itself."""

    ppid: int
    rss_mb: float
    cpu_s: float


def processes() -> dict[int, Proc]:
    """Every process, from one pass over /proc (Linux)."""
    page, tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # fields after the command's name: [1] ppid, [11] utime, [12] stime, [21] rss
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            found[int(entry.name)] = Proc(
                int(fields[1]), int(fields[21]) * page / 2**20,
                (int(fields[11]) + int(fields[12])) / tick,
            )  # fmt: skip
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we read it
    return found


def tree(procs: dict[int, Proc], root: int) -> list[int]:
    """``root`` and every descendant of it that runs."""
    children: dict[int, list[int]] = {}
    for pid, p in procs.items():
        children.setdefault(p.ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out


@dataclass(frozen=True)
class Invocation:
    """A whole command, and the long-lived server outside its tree that serves it (pid)."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    server_pid: int | None = None


def measure(call: Invocation) -> Run:
    """Run the command to its end, sampling /proc every 0.1 s: its wall time, the peak memory
    of its process tree and of the serving server's tree, and the CPU time both used meanwhile
    (a process's own CPU time when last seen; one that lived under 0.1 s is not seen)."""
    peak_tree = peak_server = peak_total = 0.0
    before = processes()
    server = tree(before, call.server_pid) if call.server_pid else []
    cpu_before = {pid: before[pid].cpu_s for pid in server}
    cpu_seen: dict[int, float] = {}
    server_pids = set(server)  # the server's processes, whenever seen
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        call.argv, env=call.env, cwd=call.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_tree, peak_server, peak_total
        while not done.is_set():
            now = processes()
            mine = tree(now, proc.pid)
            theirs = tree(now, call.server_pid) if call.server_pid else []
            server_pids.update(theirs)
            for pid in mine + theirs:
                cpu_seen[pid] = now[pid].cpu_s
            rss_mine = sum(now[pid].rss_mb for pid in mine)
            rss_theirs = sum(now[pid].rss_mb for pid in theirs)
            peak_tree, peak_server = max(peak_tree, rss_mine), max(peak_server, rss_theirs)
            peak_total = max(peak_total, rss_mine + rss_theirs)
            done.wait(SAMPLE_EVERY_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    if proc.returncode not in (0, 3):  # honesteval's 3: indecisive / low coverage
        raise RuntimeError(
            f"{' '.join(call.argv[:3])} exited {proc.returncode}: {err.decode()[-800:]}"
        )
    used = {pid: seen - cpu_before.get(pid, 0.0) for pid, seen in cpu_seen.items()}
    server_cpu = sum(used[pid] for pid in used if pid in server_pids)
    cpu = sum(used.values())
    return Run(wall, cpu, peak_tree, peak_server, peak_total, load, cpu - server_cpu, server_cpu)


# -- the contenders -----------------------------------------------------------------------------


@dataclass
class Contender:
    """A column: how to run a cell as one whole command, and what to do first."""

    key: str
    header: str
    is_baseline: bool
    #: the whole command for a cell (with the long-lived server that serves it, if any)
    command: Callable[[Cell], Invocation]
    #: untimed, once before the measured runs of a cell (e.g. store every trial of a rerun)
    prepare: Callable[[Cell], None] = lambda cell: None
    #: untimed, before each measured run (e.g. stop a server so the command starts one)
    before_each: Callable[[], None] = lambda: None
    #: untimed, after each measured run (e.g. check a rerun ran nothing)
    after_each: Callable[[Cell], None] = lambda cell: None


def _script(python: str, name: str) -> list[str]:
    """The console script ``name`` beside ``python`` (what a user types), else ``-m``."""
    beside = Path(python).parent / name
    return [str(beside)] if beside.exists() else [python, "-m", name]


def base_env(home: Path) -> dict[str, str]:
    """The environment of every timed command: this one's, minus a configured Prefect API and
    minus ``PYTHONDONTWRITEBYTECODE``. With that variable set, nothing writes bytecode caches:
    an editable install (``make install``) then compiles every honesteval module from source
    at every command, and py-key-value's modules (beartype rewrites them on import) in every
    Prefect server boot, while ``pip install`` precompiled Inspect's. Without it the warm-up
    writes them, as a user's first run does: a later command's CPU 0.88× (5 pairs, 0.86-0.91,
    load 15), docs/performance.md."""
    drop = {"PREFECT_API_URL", "PYTHONDONTWRITEBYTECODE"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        PREFECT_HOME=str(home),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        # A loaded 2-core machine can take over a minute to create Prefect's database.
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="600",
    )
    return env


class HonestevalSide:
    """honesteval in one server mode: its own Prefect home and projects, so one mode's
    stored trials and flow runs never reach another's."""

    def __init__(self, work: Path, mode: str):
        self.mode = mode
        self.work = work / f"he-{mode}"
        self.work.mkdir(parents=True)
        self.homes = 0
        self.env = base_env(self.work / "prefect")
        self.env[SERVER_MODE_VAR] = PER_COMMAND if mode == "temporary" else REUSE
        # A sitting lasts the whole bench: its server must not retire between two commands
        # while the machine is slow (the default is 10 minutes idle).
        self.env[IDLE_VAR] = "7200"
        self.server_pid: int | None = None
        self.projects: dict[tuple[int, float], Path] = {}
        self.cli = _script(sys.executable, "honesteval")

    def project(self, cell: Cell) -> Path:
        key = (cell.trials, cell.io_wait_s)
        if key not in self.projects:
            body = f"time.sleep({cell.io_wait_s})" if cell.io_wait_s else "pass"
            n_tasks = max(1, cell.trials // TRIALS_PER_TASK)
            self.projects[key] = make_project(
                n_tasks, body, name=f"vs{cell.trials}", trials=TRIALS_PER_TASK
            )
            if self.mode == INSPECT_ADAPTER:
                _through_inspect(self.projects[key], n_tasks, cell.io_wait_s)
        return self.projects[key]

    def argv(self, cell: Cell, *, fresh: bool) -> list[str]:
        cmd = [*self.cli, "evaluate", "--project", str(self.project(cell)), "--candidate", "c"]
        cmd += ["--json", "--max-concurrency", str(CONCURRENCY)]
        return cmd + (["--fresh"] if fresh else [])

    def serving_pid(self) -> int | None:
        """The server outside the command's process tree that serves it: ``honesteval
        server``, or in a later command of a sitting the server an earlier one started (its
        pid announced in the Prefect home)."""
        if self.server_pid is not None or self.mode not in ("later", INSPECT_ADAPTER):
            return self.server_pid
        try:
            announced = Path(self.env["PREFECT_HOME"]) / SERVER_FILE
            return int(json.loads(announced.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def stop_server(self) -> None:
        """``honesteval server stop``: the next command is the first of a sitting."""
        stop = [*self.cli, "server", "stop"]
        subprocess.run(stop, env=self.env, cwd=self.work, capture_output=True, check=True)

    def new_home(self) -> None:
        """Stop this side's server and point it at a new, empty ``PREFECT_HOME`` (the old one
        removed): the next command creates Prefect's database and starts the server."""
        self.stop_server()
        shutil.rmtree(self.env["PREFECT_HOME"], ignore_errors=True)
        self.homes += 1
        self.env["PREFECT_HOME"] = str(self.work / f"prefect-{self.homes}")

    def command(self, cell: Cell) -> Invocation:
        return Invocation(
            self.argv(cell, fresh=not cell.rerun), self.env, self.work, self.serving_pid()
        )

    def store_all(self, cell: Cell) -> None:
        if cell.rerun:
            measure(
                Invocation(self.argv(cell, fresh=True), self.env, self.work, self.serving_pid())
            )


def _through_inspect(root: Path, n_tasks: int, seconds: float) -> None:
    """The same work run through ``adapter: {kind: inspect}``: Inspect's own task as the
    target (the same samples, a trial index per ``eval()`` call over every task)."""
    (root / "inspect_task.py").write_text(INSPECT_TASK)
    config = json.loads((root / "honesteval.yaml").read_text())
    config["adapter"] = {
        "kind": "inspect",
        "task": "inspect_task.py@bench",
        "model": "mockllm/model",
        "task_args": {"n": n_tasks, "seconds": seconds},
    }
    (root / "honesteval.yaml").write_text(json.dumps(config))


class InspectSide:
    """Inspect AI in one logging mode: ``eval`` into a new log directory for a cold cell,
    ``eval-set`` on a complete log directory for a rerun."""

    def __init__(self, work: Path, python: str, log_samples: bool):
        self.work = work / ("inspect-log" if log_samples else "inspect-nolog")
        self.work.mkdir(parents=True)
        (self.work / "inspect_task.py").write_text(INSPECT_TASK)
        self.env = base_env(work / "prefect-unused")
        self.cli = _script(python, "inspect")
        self.log_samples = log_samples
        self.runs = 0

    def argv(self, cell: Cell, verb: str, log_dir: Path) -> list[str]:
        cmd = [*self.cli, verb, "inspect_task.py", "--model", "mockllm/model"]  # cwd-relative
        cmd += ["--max-samples", str(CONCURRENCY), "--display", "none"]
        cmd += ["-T", f"n={max(1, cell.trials // TRIALS_PER_TASK)}"]
        cmd += ["-T", f"epochs={TRIALS_PER_TASK}", "-T", f"seconds={cell.io_wait_s}"]
        cmd += ["--log-dir", str(log_dir)]
        return cmd + ([] if self.log_samples else ["--no-log-samples"])

    def set_dir(self, cell: Cell) -> Path:
        return self.work / f"set-{cell.key}"

    def command(self, cell: Cell) -> Invocation:
        if cell.rerun:
            return Invocation(self.argv(cell, "eval-set", self.set_dir(cell)), self.env, self.work)
        self.runs += 1
        log_dir = self.work / f"logs-{self.runs}"
        shutil.rmtree(self.work / f"logs-{self.runs - 1}", ignore_errors=True)
        return Invocation(self.argv(cell, "eval", log_dir), self.env, self.work)

    def store_all(self, cell: Cell) -> None:
        if cell.rerun:
            measure(
                Invocation(self.argv(cell, "eval-set", self.set_dir(cell)), self.env, self.work)
            )

    def ran_nothing(self, cell: Cell) -> None:
        """A rerun must find the log complete: still exactly one log in its directory."""
        if cell.rerun and len(list(self.set_dir(cell).glob("*.eval"))) != 1:
            raise RuntimeError(f"inspect eval-set ran {cell.key} again instead of reusing it")


#: honesteval's server modes and their column headers
HONESTEVAL_MODES: dict[str, str] = {
    "first": "first command of a sitting",
    "later": "later commands of a sitting",
    "temporary": "temporary server per command",
    "server-up": "`honesteval server` up",
    # later commands of a sitting, the trials run by Inspect through the inspect adapter
    "inspect-adapter": "later commands, through the Inspect adapter",
    "new-home": "first command in a new `PREFECT_HOME`",
}
INSPECT_ADAPTER = "inspect-adapter"


def honesteval_contenders(work: Path, modes: Sequence[str], stack: ExitStack) -> list[Contender]:
    """A contender per mode; a server a mode needs stays up until ``stack`` closes."""
    from honesteval.server.localserver import LocalServer

    out = []
    for mode in modes:
        side = HonestevalSide(work, mode)
        contender = Contender(f"he-{mode}", HONESTEVAL_MODES[mode], False, side.command)
        contender.prepare = side.store_all
        if mode == "server-up":  # announced in the side's own Prefect home
            server = stack.enter_context(LocalServer(Path(side.env["PREFECT_HOME"])))
            side.env["PREFECT_API_URL"] = server.api_url
            side.server_pid = server.proc.pid
        elif mode in ("first", "later", "new-home", INSPECT_ADAPTER):
            stack.callback(side.stop_server)
            if mode == "first":
                contender.before_each = side.stop_server
            elif mode == "new-home":
                contender.before_each = side.new_home
        out.append(contender)
    return out


def inspect_contenders(work: Path, python: str) -> list[Contender]:
    out = []
    for log_samples, header in (
        (False, "Inspect `--no-log-samples`"),
        (True, "Inspect, logging samples"),
    ):
        side = InspectSide(work, python, log_samples)
        key = "inspect-log" if log_samples else "inspect-nolog"
        out.append(
            Contender(key, header, True, side.command, side.store_all, after_each=side.ran_nothing)
        )
    return out


def rotation(contenders: Sequence[Contender], rounds: int) -> Iterator[tuple[int, Contender]]:
    """``(round, contender)``: every contender once a round, the order shifted by one each
    round, so none always follows the same one."""
    k = len(contenders)
    for r in range(rounds):
        for i in range(k):
            yield r, contenders[(r + i) % k]


#: Exit status of a bench that refused to report: a round ran above ``--max-load``.
EXIT_TOO_LOADED = 3


class TooLoaded(Exception):
    """A command started at a 1-minute load average above ``--max-load``."""


def check_load(load: float, max_load: float | None, where: str) -> None:
    """Refuse (:class:`TooLoaded`) what started at ``load``, above ``max_load`` (None: no
    limit)."""
    if max_load is not None and load > max_load:
        raise TooLoaded(
            f"refused: {where} started at a 1-minute load average of {load:.2f}, above "
            f"--max-load {max_load:g}; no table from a loaded machine (rerun when it is quiet)"
        )


#: How long a command waits for the load to fall to ``--max-load`` before it is refused.
QUIET_WAIT_S = 180.0


def wait_for_quiet(
    max_load: float | None,
    wait_s: float = QUIET_WAIT_S,
    load: Callable[[], float] = lambda: os.getloadavg()[0],
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Before a timed command: wait (at most ``wait_s``) while the 1-minute load is above
    ``max_load``. The bench's own previous command and the idle servers of its other modes
    lift a 2-core machine's load past 2.5 now and then; the average falls back within
    seconds of quiet, so a command waits for it rather than the whole bench refusing (the
    load at the command's start is still checked, :func:`check_load`)."""
    waited = 0.0
    while max_load is not None and load() > max_load and waited < wait_s:
        sleep(2.0)
        waited += 2.0


def run_cell(
    cell: Cell, contenders: Sequence[Contender], rounds: int, max_load: float | None = None
) -> dict[str, list[Run]]:
    for c in contenders:
        c.prepare(cell)
    runs: dict[str, list[Run]] = {c.key: [] for c in contenders}
    for r, c in rotation(contenders, rounds):
        c.before_each()
        wait_for_quiet(max_load)
        run = measure(c.command(cell))
        runs[c.key].append(run)
        c.after_each(cell)
        check_load(run.load, max_load, f"round {r + 1} of {cell.key} ({c.key})")
    return runs


def round_loads(runs: dict[str, list[Run]]) -> list[float]:
    """Each round's load: the highest 1-minute load average at which one of its commands
    started (every contender's ``i``-th run belongs to round ``i``)."""
    return [max(r.load for r in same_round) for same_round in zip(*runs.values(), strict=True)]


# -- the table (pure) ---------------------------------------------------------------------------


def pair_ratios(mine: Sequence[float], theirs: Sequence[float]) -> list[float]:
    """Ratio of the same round's two measurements, round by round."""
    if len(mine) != len(theirs) or not mine:
        raise ValueError(f"pairs need equal, non-empty rounds: {len(mine)} vs {len(theirs)}")
    return [a / b for a, b in zip(mine, theirs, strict=True)]


def spread(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """``a`` when all rounds agree to the format, else ``min–max``."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def time_cell(runs: Sequence[Run], baselines: Sequence[Sequence[Run]], metric: str) -> str:
    """``median s [min–max] (ratio [min–max] vs each baseline)`` of ``metric`` (a :class:`Run`
    field: ``wall_s`` or ``cpu_s``) over rounds; a ratio is the median of the pair ratios,
    its min–max theirs."""
    mine = [getattr(r, metric) for r in runs]
    text = f"{statistics.median(mine):.2f} s [{spread(mine)}]"
    if baselines:
        pairs = [pair_ratios(mine, [getattr(r, metric) for r in b]) for b in baselines]
        text += " (" + " / ".join(f"{statistics.median(p):.2f}× [{spread(p)}]" for p in pairs)
        text += ")"
    return text


def memory_cell(runs: Sequence[Run], baselines: Sequence[Sequence[Run]]) -> str:
    """Median peak of the whole tree, with a long-lived server's share, and its ratios."""
    total = statistics.median(r.total_mb for r in runs)
    text = f"{total:.0f} MB"
    if any(r.server_mb for r in runs):
        client = statistics.median(r.tree_mb for r in runs)
        server = [r.server_mb for r in runs]
        text += f" ({client:.0f} client + {spread(server, '{:.0f}')} server)"
    if baselines:
        ratios = [total / statistics.median(r.total_mb for r in b) for b in baselines]
        text += " (" + " / ".join(f"{x:.2f}×" for x in ratios) + ")"
    return text


def build_table(
    rows: Sequence[tuple[Cell, dict[str, list[Run]]]],
    contenders: Sequence[tuple[str, str, bool]],
    memory_of: str | None,
    metric: str = "wall_s",
) -> list[str]:
    """The markdown table of ``metric``: a row per cell, a column per contender (``key,
    header, is_baseline``); honesteval's cells carry their ratios against each baseline column
    in order; a last row of peak RSS at the cell ``memory_of`` (None: no such row)."""
    base = [key for key, _, is_base in contenders if is_base]
    head = "| cell | " + " | ".join(h for _, h, _ in contenders) + " | load |"
    lines = [head, "|" + "---|" * (len(contenders) + 2)]
    for cell, runs in rows:
        cols = [
            time_cell(runs[key], [] if is_base else [runs[b] for b in base], metric)
            for key, _, is_base in contenders
        ]
        loads = [r.load for key, _, _ in contenders for r in runs[key]]
        lines.append(f"| {cell.label} | " + " | ".join(cols) + f" | {spread(loads, '{:.1f}')} |")
    for cell, runs in rows:
        if cell.key == memory_of:
            cols = [
                memory_cell(runs[key], [] if is_base else [runs[b] for b in base])
                for key, _, is_base in contenders
            ]
            loads = [r.load for key, _, _ in contenders for r in runs[key]]
            lines.append(
                f"| peak RSS of the process tree at {cell.trials:,} | "
                + " | ".join(cols)
                + f" | {spread(loads, '{:.1f}')} |"
            )
    return lines


# -- the script ---------------------------------------------------------------------------------


def inspect_version(python: str) -> str | None:
    probe = subprocess.run(
        [python, "-c", "import inspect_ai; print(inspect_ai.__version__)"],
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--inspect-python",
        default=os.environ.get("HONESTEVAL_BENCH_INSPECT_PYTHON"),
        help="the interpreter of a venv with inspect-ai (or HONESTEVAL_BENCH_INSPECT_PYTHON)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the rotation")
    parser.add_argument("--quick", action="store_true", help="2 rounds, 500 in place of 2,000")
    parser.add_argument("--only", nargs="*", help="cell keys, e.g. cold-200 rerun-2000")
    parser.add_argument(
        "--modes",
        nargs="*",
        default=list(HONESTEVAL_MODES),
        choices=list(HONESTEVAL_MODES),
        help="honesteval's server modes (columns)",
    )
    parser.add_argument(
        "--honesteval-only",
        action="store_true",
        help="only honesteval's columns (no Inspect needed; no ratios)",
    )
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    parser.add_argument(
        "--max-load",
        type=float,
        help="refuse to report (exit 3) once a command starts above this 1-minute load average",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    version = inspect_version(args.inspect_python) if args.inspect_python else None
    if args.honesteval_only:
        version = None
    elif version is None:
        print(
            "skipped: no interpreter with inspect-ai given; install inspect-ai into a venv of "
            "its own and pass --inspect-python /path/to/venv/bin/python "
            "(or HONESTEVAL_BENCH_INSPECT_PYTHON)"
        )
        return
    work = Path(tempfile.mkdtemp(prefix="honesteval-vs-inspect-"))
    try:
        run_all(args, version, work)
    except TooLoaded as exc:
        print(exc, file=sys.stderr)
        sys.exit(EXIT_TOO_LOADED)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_all(args: argparse.Namespace, version: str | None, work: Path) -> None:
    rounds, big = (2, 500) if args.quick else (args.repeats, 2000)
    chosen = [c for c in cells(big) if not args.only or c.key in args.only]
    check_load(os.getloadavg()[0], args.max_load, "the bench")
    with ExitStack() as stack:
        contenders = honesteval_contenders(work, args.modes, stack)
        if version is not None:
            contenders += inspect_contenders(work, args.inspect_python)
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        # Warm-up, not measured: bytecode caches, Prefect's databases, Inspect's caches.
        warm = Cell("warm-up", "warm-up", 200)
        for c in contenders:
            wait_for_quiet(args.max_load)
            check_load(measure(c.command(warm)).load, args.max_load, f"the warm-up ({c.key})")
        rows = []
        for cell in chosen:
            rows.append((cell, run_cell(cell, contenders, rounds, args.max_load)))
            print(f"done {cell.key}", file=sys.stderr, flush=True)
        ended = datetime.now(UTC).strftime("%H:%M UTC")
    memory_of = next((c.key for c in chosen if c.key == f"cold-{big}"), None)
    report(version, f"{started}–{ended}", rounds, rows, contenders, memory_of, args.max_load)
    if args.json:
        raw = {c.key: {k: [asdict(r) for r in v] for k, v in runs.items()} for c, runs in rows}
        args.json.write_text(json.dumps(raw, indent=1))


def report(
    version: str | None,
    when: str,
    rounds: int,
    rows: Sequence[tuple[Cell, dict[str, list[Run]]]],
    contenders: Sequence[Contender],
    memory_of: str | None,
    max_load: float | None = None,
) -> None:
    limit = "" if max_load is None else f" (every one at or below --max-load {max_load:g})"
    print(
        f"\n{when}, {platform.machine()} with {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, "
        + (f"Inspect AI {version}" if version else "honesteval only")
        + f"; {rounds} rounds of whole CLI "
        f"processes in rotation, concurrency {CONCURRENCY}, {TRIALS_PER_TASK} trials a task."
    )
    print(
        "honesteval: median wall [min–max over rounds]"
        + (
            " (median of pair ratios [their min–max] vs Inspect `--no-log-samples` / vs "
            "Inspect logging samples). Reruns: Inspect `eval-set` finding its log complete."
            if version
            else "."
        )
        + " Memory: peak RSS of the whole process tree, a long-lived server's included. "
        "load: 1-minute load average at the commands' starts (min–max); each round's (the "
        f"highest at its commands' starts){limit}: "
        + "; ".join(
            f"{cell.key} " + ", ".join(f"{x:.2f}" for x in round_loads(runs)) for cell, runs in rows
        )
        + ".\n"
    )
    columns = [(c.key, c.header, c.is_baseline) for c in contenders]
    print("\n".join(build_table(rows, columns, memory_of)))
    print(
        "\nCPU seconds of the same commands (the whole process tree and a long-lived server's "
        "tree, each process's own time when last sampled); on a loaded machine a command "
        "with more processes gets more of the cores, so compare these too:\n"
    )
    print("\n".join(build_table(rows, columns, None, metric="cpu_s")))
    print(
        "\nCPU seconds of the command's own process tree alone (the CLI and what it starts, a "
        "long-lived server's share left out; the same for every column that has one):\n"
    )
    print("\n".join(build_table(rows, columns, None, metric="client_cpu_s")))


if __name__ == "__main__":
    main()
