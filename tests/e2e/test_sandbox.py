"""A candidate's program sees its own folder and its task, nothing else (``sandbox:``).

The probe is a candidate written as an attacker would: it reads the tasks file (the test
task's input is a secret), writes into ``.honesteval/``, another candidate's folder, the scorer
and ``honesteval.yaml``, reads a secret from its environment and leaves a process running.
Each attempt is tried for real and reported in the output; the scorer gives any answer 1.0.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from honesteval.adapters._sandbox import _said_no_sandbox, engine_here
from honesteval.errors import ConfigError
from honesteval.evaluation import progress
from honesteval.evaluation.plan import adapter_for
from honesteval.project.loader import load_project
from tests.helpers import run_cli, run_plain

SECRET_TASK = f"TEST-ANSWER-{uuid.uuid4().hex}"
SECRET_ENV = "HONESTEVAL_SANDBOX_TEST_TOKEN"
SECRET_VALUE = f"env-secret-{uuid.uuid4().hex}"

RUNNER = """\
import json, os, runpy, sys
task = json.load(sys.stdin)
solve = runpy.run_path(os.path.join(os.environ["HONESTEVAL_CANDIDATE_DIR"], "solve.py"))
json.dump(solve["solve"](task, os.environ["HONESTEVAL_CANDIDATE_DIR"]), sys.stdout)
"""

#: The same probe behind an ``isolate: true`` python target.
ISOLATED_TARGET = """\
import os, runpy

def run(task, candidate_dir, seed):
    return runpy.run_path(os.path.join(candidate_dir, "solve.py"))["solve"](task, candidate_dir)
"""

PROBE = """\
import os, subprocess, sys
from pathlib import Path

def attempt(action):
    try:
        return action()
    except OSError as exc:
        return f"refused: {exc.strerror}"

def append(path):
    with open(path, "a") as fh:
        fh.write("# written by the probe\\n")
    return "written"

def solve(task, candidate_dir):
    project = Path(candidate_dir).parents[1]
    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "MARKER"],
        start_new_session=True,
    )
    return {
        "tasks_file": attempt(lambda: (project / "tasks.jsonl").read_text()),
        "state": attempt(lambda: append(project / ".honesteval" / "splits.json")),
        "other_candidate": attempt(lambda: append(project / "candidates/other/quality.txt")),
        "scorer": attempt(lambda: append(project / "scoring.py")),
        "project_file": attempt(lambda: append(project / "honesteval.yaml")),
        "scratch": attempt(lambda: append("note.txt")),
        "secret": os.environ.get("SECRET_ENV"),
        "declared": os.environ.get("DECLARED"),
        "cwd": os.getcwd(),
    }
""".replace("SECRET_ENV", SECRET_ENV)

SCORING = "def score(task, output):\n    return 1.0 if isinstance(output, dict) else 0.0\n"


COMMAND = {
    "kind": "command",
    "command": ["{python}", "runner.py"],
    "scorer": "scoring:score",
    "env": {"DECLARED": "passed"},
}
ISOLATED = {"kind": "python", "target": "target:run", "scorer": "scoring:score", "isolate": True}


def probe_project(make_project, adapter=COMMAND, **config: object) -> tuple[Path, str]:
    """The probe's project: 3 val tasks and a test task whose input is a secret; the probe is
    candidate ``base`` (run by ``runner.py``, or by ``target.py`` for an isolated python
    target); returns its folder and the marker of the process the probe leaves."""
    tasks = [{"id": f"v{i}", "input": i, "target": "x"} for i in range(3)]
    tasks.append({"id": "sealed", "input": SECRET_TASK, "target": "x"})
    marker = f"probe-left-{uuid.uuid4().hex}"
    root = make_project(
        tasks=tasks,
        candidates={"base": 0.5, "other": 0.5},
        config={
            "splits": {"train": [], "val": ["v0", "v1", "v2"], "test": ["sealed"]},
            "adapter": adapter,
            "trials": 1,
            "timeout_s": 60,
            **config,
        },
    )
    (root / "runner.py").write_text(RUNNER)
    (root / "target.py").write_text(ISOLATED_TARGET)
    (root / "scoring.py").write_text(SCORING)
    (root / "candidates/base/solve.py").write_text(PROBE.replace("MARKER", marker))
    return root, marker


def contents(root: Path) -> dict[str, str]:
    """sha256 of every file of the project outside its state folder."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and ".honesteval" not in p.parts and "__pycache__" not in p.parts
    }


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture
def only_tools(monkeypatch, tmp_path) -> Iterator[Callable[..., None]]:
    """``only_tools("unshare")``: PATH holds these programs and nothing else, and the
    sandbox is looked for again (a machine without bwrap, or without either)."""

    def only(*tools: str) -> None:
        folder = tmp_path / "bin"
        folder.mkdir()
        for tool in tools:
            (folder / tool).symlink_to(shutil.which(tool) or tool)
        monkeypatch.setenv("PATH", str(folder))
        engine_here.cache_clear()
        _said_no_sandbox.cache_clear()

    yield only
    engine_here.cache_clear()
    _said_no_sandbox.cache_clear()


@pytest.mark.parametrize(
    "tool,adapter", [("bwrap", COMMAND), ("unshare", COMMAND), ("bwrap", ISOLATED)]
)
def test_the_probe_reads_no_task_changes_no_file_sees_no_secret(
    make_project, monkeypatch, only_tools, tool, adapter
):
    if tool == "unshare":
        only_tools("unshare")  # bwrap missing: the fallback makes the sandbox
    engine = engine_here()
    assert engine is not None and engine.name == tool, "`make sandbox` installs bubblewrap"
    monkeypatch.setenv(SECRET_ENV, SECRET_VALUE)
    root, marker = probe_project(make_project, adapter)
    load_project(root).frozen_split()  # .honesteval/ is there for the probe to write into
    before = contents(root)
    state_before = (root / ".honesteval" / "splits.json").read_bytes()
    records, result = run_plain(root)

    assert [r.status for r in records] == ["ok"] * 3 and result.reward == 1.0, records[0].error
    for record in records:
        seen = record.rollout
        assert seen["tasks_file"] == ""  # an empty file where the tasks are
        for target in ("state", "other_candidate", "scorer", "project_file"):
            assert seen[target].startswith("refused:"), (target, seen[target])
        assert seen["scratch"] == "written"  # its own cwd is writable
        assert seen["secret"] is None
        assert seen["declared"] == adapter.get("env", {}).get("DECLARED")  # only what it says
        assert not Path(seen["cwd"]).is_relative_to(root)
    assert contents(root) == before
    assert (root / ".honesteval" / "splits.json").read_bytes() == state_before
    assert processes_with(marker) == []


def test_sandbox_off_runs_the_probe_as_before(make_project, monkeypatch):
    """The control: without the sandbox every attempt of the probe works (so the test above
    fails if the sandbox stops holding), which is why it is on by default."""
    monkeypatch.setenv(SECRET_ENV, SECRET_VALUE)
    root, marker = probe_project(make_project, sandbox="off")
    records, _ = run_plain(root)
    seen = records[0].rollout
    assert SECRET_TASK in seen["tasks_file"]
    assert {seen[t] for t in ("state", "other_candidate", "scorer", "project_file")} == {"written"}
    assert seen["secret"] == SECRET_VALUE and Path(seen["cwd"]) == root
    assert processes_with(marker) == []  # swept with its process group, as before


def test_no_sandbox_is_said_once_and_required_refuses(make_project, only_tools):
    only_tools()  # neither bwrap nor unshare
    root, _ = probe_project(make_project)
    said: list[str] = []

    class Listener:
        def announce(self, text: str) -> None:
            said.append(text)

        def __getattr__(self, name: str) -> Callable[..., None]:
            return lambda *a, **k: None

    with progress.listening(Listener()):  # type: ignore[arg-type]
        records, _ = run_plain(root)
    assert [r.status for r in records] == ["ok"] * 3
    assert [s for s in said if s.startswith("no sandbox:")] == [said[0]] and len(said) == 1
    assert records[0].rollout["scratch"] == "written"
    assert records[0].rollout["secret"] is None  # the environment is still only the declared

    strict, _ = probe_project(make_project, sandbox={"mode": "required"})
    with pytest.raises(ConfigError, match="sandbox: required, but neither bwrap nor unshare"):
        adapter_for(load_project(strict))


def test_check_says_which_sandbox(make_project, tmp_path):
    root, _ = probe_project(make_project)
    shown = run_cli("check", "--project", str(root))
    assert shown.returncode == 0, shown.stderr
    engine = engine_here()
    assert engine is not None
    assert f"OK   sandbox: {engine.name}: candidate programs see their own folder" in shown.stdout

    off, _ = probe_project(make_project, sandbox=False)  # YAML's bare `off`
    assert "OK   sandbox: off (sandbox: off)" in run_cli("check", "--project", str(off)).stdout

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": str(tmp_path)}
    unconfined = run_cli("check", "--project", str(root), env={**os.environ, **env})
    assert "WARN sandbox: no sandbox: neither bwrap nor unshare" in unconfined.stdout
    strict, _ = probe_project(make_project, sandbox="required")
    refused = run_cli("check", "--project", str(strict), env={**os.environ, **env})
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0 and "sandbox: required, but" in refused.stderr


def test_sandbox_setting_is_checked(make_project):
    root, _ = probe_project(make_project, sandbox={"mode": "sometimes"})
    shown = run_cli("check", "--project", str(root))
    assert shown.returncode == 2 and "sandbox.mode" in shown.stderr


# An Eve shell step runs the candidate's code: here that code tries its step file, the tasks
# and the environment, and records what it got in the workspace (its own, writable).
STEP = """
logs="$EVE_EVAL_LOG_ROOT"
if echo "echo score: 1.0 > $logs/score.yaml" >> "$HONESTEVAL_PROJECT/evaluation/step.sh"
then echo yes > "$logs/wrote_step"; fi
cat "$HONESTEVAL_PROJECT/tasks.jsonl" > "$logs/tasks_seen" || true
echo "${SECRET_ENV:-}" > "$logs/secret_seen"
echo "score: 0.7" > "$logs/score.yaml"
""".replace("SECRET_ENV", SECRET_ENV)


def test_an_eve_step_keeps_its_workspace_and_nothing_else(make_project, monkeypatch):
    from tests.unit.test_steps import steps_project

    monkeypatch.setenv(SECRET_ENV, SECRET_VALUE)
    root = steps_project(
        make_project,
        {"step.sh": STEP},
        {"steps": ["evaluation/step.sh"]},
        tasks=[{"id": "a", "input": SECRET_TASK}],
        extra={"trials": 1},
    )
    step_before = (root / "evaluation/step.sh").read_bytes()
    records, _ = run_plain(root)
    assert [(r.status, r.reward) for r in records] == [("ok", 0.7)], records[0].error
    logs = Path(records[0].score["details"]["workspace"]) / "logs/evaluate"
    assert not (logs / "wrote_step").exists()
    assert (logs / "tasks_seen").read_text() == ""
    assert (logs / "secret_seen").read_text() == "\n"
    assert (root / "evaluation/step.sh").read_bytes() == step_before
    assert not (root / ".honesteval/evaluator_tamper.json").exists()
