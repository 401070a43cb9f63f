"""examples/ci run as a script, no GitHub: its steps, in order, on a throwaway git repository
with two branches. A push to main gates main's candidate (the baseline of a fresh fork) and
saves the state; a pull request on a second branch restores main's state and is gated
against main's best, not made a baseline of its own; it saves nothing.

Actions' own steps are played by what they do: checkout is a fresh clone of the branch,
the cache is a folder of saved states by key (restore takes the newest key under the
prefix), an ``if:`` is read with the event's values; ``setup-python`` and the install step
are the test's environment (the venv's honesteval); ``gh pr comment`` is not called.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from honesteval.project.scaffold import scaffold_project

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "ci" / "honesteval-gate.yml"


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def _condition(expr: str, event: str, work: Path) -> bool:
    """An ``if:`` of this workflow, with the event's values."""
    text = expr.replace("&&", " and ").replace("always()", "True")
    text = text.replace("github.event_name", repr(event))
    has_md = (work / "gate.md").is_file() and (work / "gate.md").stat().st_size > 0
    text = text.replace("hashFiles('gate.md')", repr("hash" if has_md else ""))
    return bool(eval(text, {"__builtins__": {}}))  # the workflow's own text


class Runner:
    """One job run of the workflow for an event on a branch of ``origin``."""

    def __init__(self, origin: Path, cache: Path, env: dict[str, str]):
        self.origin, self.cache, self.env = origin, cache, env
        self.runs = 0
        self.stderr = ""  # the gate step's, last run

    def run(self, event: str, branch: str, tmp: Path) -> dict[str, Any]:
        self.runs += 1
        flow = yaml.safe_load(WORKFLOW.read_text())
        [job] = flow["jobs"].values()
        work = tmp / f"run-{self.runs}"
        outputs: dict[str, dict[str, str]] = {}
        env = {**self.env, **{k: str(v) for k, v in job["env"].items()}}
        ran: list[str] = []
        for step in job["steps"]:
            if "if" in step and not _condition(step["if"], event, work):
                continue
            name = step.get("name", step.get("uses", ""))
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout"):
                _git(tmp, "clone", "-q", "--branch", branch, str(self.origin), work.name)
                env["GITHUB_SHA"] = _git(work, "rev-parse", "HEAD").strip()
            elif uses.startswith("actions/cache/restore"):
                prefix = step["with"]["restore-keys"]
                saved = sorted(p for p in self.cache.iterdir() if p.name.startswith(prefix))
                if saved:
                    shutil.copytree(saved[-1], work, dirs_exist_ok=True)
            elif uses.startswith("actions/cache/save"):
                key = step["with"]["key"].replace("${{ github.run_id }}", f"{self.runs:04d}")
                for pattern in step["with"]["path"].split():
                    for found in work.glob(pattern):
                        shutil.copytree(found, self.cache / key / found.relative_to(work))
            elif uses.startswith("actions/setup-python") or name.startswith("Install"):
                pass  # the test's venv is the job's Python with honesteval installed
            elif "gh pr comment" in step.get("run", ""):
                pass  # no GitHub to comment on
            else:
                script = re.sub(
                    r"\$\{\{ steps\.(\w+)\.outputs\.(\w+) \}\}",
                    lambda m: outputs.get(m[1], {}).get(m[2], ""),
                    step["run"],
                )
                out, summary = work / "github-output", work / "github-summary"
                out.write_text("")
                step_env = {**env, "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}
                done = subprocess.run(
                    ["bash", "-e", "-c", script], cwd=work, env=step_env, capture_output=True,
                    text=True, timeout=600,
                )  # fmt: skip
                if "id" in step:
                    self.stderr = done.stderr
                    lines = out.read_text().splitlines()
                    outputs[step["id"]] = dict(line.split("=", 1) for line in lines if "=" in line)
                if done.returncode != 0:
                    ran.append(name)
                    return {"work": work, "ran": ran, "failed": name, "outputs": outputs}
            ran.append(name)
        return {"work": work, "ran": ran, "failed": None, "outputs": outputs}


def test_a_pull_request_is_gated_against_mains_best(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    origin = tmp_path / "origin"
    evals = origin / "evals"
    evals.mkdir(parents=True)
    scaffold_project(evals)
    (evals / "candidates" / "baseline").rename(evals / "candidates" / "pr")
    _git(origin, "init", "-q", "-b", "main")
    _git(origin, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(origin, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "evals")
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {**cli_env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{cli_env['PATH']}"}
    runner = Runner(origin, cache, env)

    # a push to main of a fresh fork: its candidate becomes the baseline, the state is saved
    main = runner.run("push", "main", tmp_path)
    assert main["failed"] is None, main
    assert main["outputs"]["gate"]["code"] == "0"
    assert (main["work"] / "gate.md").read_text().startswith("# Gate: BASELINE")
    assert [p.name for p in cache.iterdir()] == ["honesteval-state-main-0001"]

    # a pull request edits the candidate on its branch
    _git(origin, "checkout", "-q", "-b", "careful")
    (evals / "candidates" / "pr" / "prompt.txt").write_text("Think it through, then answer.\n")
    _git(origin, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "a new prompt")
    pull = runner.run("pull_request", "careful", tmp_path)
    code = pull["outputs"]["gate"]["code"]
    gate_md = (pull["work"] / "gate.md").read_text()
    assert code in {"0", "1", "3"}, runner.stderr  # a verdict against main's best, not a baseline
    assert gate_md.startswith("# Gate: ") and not gate_md.startswith("# Gate: BASELINE")
    first, second = (f"pr-{_git(origin, 'rev-parse', b).strip()[:12]}" for b in ("main", "careful"))
    assert f"{second!r} against the current best {first!r}" in runner.stderr
    assert "Comment on the pull request" in pull["ran"]
    assert [p.name for p in cache.iterdir()] == ["honesteval-state-main-0001"]  # nothing saved
    assert (pull["failed"] is not None) == (code == "1")  # a rejection fails the check
