"""The README's first hour, run as written: every command of its "The first hour" section,
from a fresh project, to a confirmed promotion, a report, a server with the deployments, and a
nightly run. Then what a user sees, in Debian's headless chromium: the UI's runs list (the
sitting's runs, the one whose candidate crashed told apart by its state), that run's summary
artifact (the failed trials first, with their errors, and links), the report (a readable
decisions table, figures at page width) and the nightly run's page in the Prefect UI (v2).

The commands are read from README.md, so the README cannot drift from what works.
"""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from honesteval.server.localserver import free_port, stop_group, wait_healthy
from tests.browser import chromium, page_text, runs_page_dom
from tests.helpers import stored_trials

README = Path(__file__).resolve().parents[2] / "README.md"
#: The README's commands that end with another exit code than 0, as its comments say.
EXPECTED_EXIT = {"honesteval gate --project myproj --candidate verbose": 1}
#: The most lines a default screen prints on stdout (issue 50).
GATE_LINES, EVALUATE_LINES = 6, 8


def first_hour_commands() -> list[str]:
    """The shell commands of the README's first-hour section, comments dropped, continued
    lines joined."""
    text = README.read_text()
    section = text[text.index("## The first hour") : text.index("## The Python API")]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.split(r"\s{2,}#", line)[0].strip()
            if command:
                commands.append(command)
    return commands


#: Measures what the reader sees and leaves it in the DOM for --dump-dom to carry out.
MEASURE = """<script>
window.addEventListener('load', () => {
  const rows = [...document.querySelectorAll('h2')].find(h => h.textContent.startsWith('Decisions'))
    .parentElement.querySelectorAll(':scope > table > tbody > tr');
  const svgs = [...document.querySelectorAll('section svg')]
    .map(s => s.getBoundingClientRect().width);
  const main = document.body.getBoundingClientRect().width;
  const figures = [...document.querySelectorAll('section svg')].map(s => ({
    title: (s.closest('section').querySelector('h2') || {textContent: ''}).textContent,
    height: s.getBoundingClientRect().height}));
  document.body.dataset.measured = JSON.stringify({
    rowHeights: [...rows].map(r => r.getBoundingClientRect().height), figures: figures,
    svgWidths: svgs, bodyWidth: main, pageHeight: document.documentElement.scrollHeight});
});
</script>"""


def measured_report(report: Path, work: Path) -> dict:
    page = work / "measured.html"
    page.write_text(report.read_text().replace("</body>", MEASURE + "</body>"))
    dom = chromium(page.as_uri(), "--window-size=1300,1000", "--dump-dom")
    found = re.search(r'data-measured="([^"]*)"', dom)
    assert found is not None, "the page did not load in chromium"
    return json.loads(html.unescape(found.group(1)))


def run_state_in_list(texts: list[str], name: str) -> str:
    """The state shown in the UI's runs list on the row of the run ``name``: the first text
    after it that is a state name (a row reads: flow, /, name, tags, state, start time...)."""
    row = texts[texts.index(name) + 1 :][:12]
    states = [t for t in row if re.fullmatch(r"[A-Z][A-Za-z]+", t)]
    assert states, row
    return states[0]


def failing_val_tasks(project: Path) -> dict[str, str]:
    """The val tasks the toy model crashes on when asked to show its working (sums over 115,
    from ``init``'s target.py), with the error each trial raises, from the task file."""
    val = set(json.loads((project / ".honesteval" / "splits.json").read_text())["val"])
    failing = {}
    for line in (project / "tasks.jsonl").read_text().splitlines():
        task = json.loads(line)
        a, b = (int(word) for word in task["input"].split(" + "))
        if task["id"] in val and a + b > 115:
            failing[task["id"]] = f"RuntimeError: the working for {a} + {b} ran out of room"
    return failing


def val_result_line(project: Path, candidate: str, seeds: set[int]) -> str:
    """``reward m ± se, coverage n/n`` of a candidate's val trials on ``seeds``, computed from
    the trial logs on disk: the mean of the task means and its standard error."""
    by_task: dict[str, dict[int, float]] = {}
    for rec in stored_trials(project, "val", candidate):
        if rec["seed"] in seeds and rec["status"] == "ok":
            by_task.setdefault(rec["task_id"], {})[rec["seed"]] = rec["reward"]
    assert all(len(rewards) == len(seeds) for rewards in by_task.values()), by_task
    means = [statistics.fmean(rewards.values()) for rewards in by_task.values()]
    se = statistics.stdev(means) / len(means) ** 0.5
    return f"reward {statistics.fmean(means):.2f} ± {se:.2f}, coverage {len(means)}/{len(means)}"


class Shell:
    """Runs the README's commands as a user would, one terminal after another."""

    def __init__(self, work: Path, env: dict[str, str]):
        self.work = work
        self.env = env
        self.port = free_port()
        self.background: list[subprocess.Popen[bytes]] = []
        self.outputs: dict[str, subprocess.CompletedProcess[str]] = {}
        bin_dir = Path(sys.executable).parent
        self.env["PATH"] = f"{bin_dir}{os.pathsep}{self.env.get('PATH', '')}"
        browser = work / "browser"
        browser.write_text(f"#!{sys.executable}\nimport sys\nprint('opened', sys.argv[1])\n")
        browser.chmod(0o755)
        self.env["BROWSER"] = f"{browser} %s"
        self.env["COLUMNS"] = "200"  # `--watch` lines unwrapped, as in a wide terminal

    def line(self, command: str) -> str:
        honest = f"{shlex.quote(sys.executable)} -m honesteval.cli"
        command = command.replace("4200", str(self.port))
        return re.sub(r"(^|\s)honesteval ", rf"\1{honest} ", command)

    def run(self, command: str) -> None:
        words = shlex.split(command)
        if words[0] == "export":
            key, value = words[1].split("=", 1)
            self.env[key] = value.replace("4200", str(self.port))
        elif words[:2] == ["honesteval", "server"]:
            self.start(self.line(command) + f" --port {self.port}")
            assert wait_healthy(f"http://127.0.0.1:{self.port}/api", timeout_s=120)
        elif words[:2] == ["honesteval", "serve"]:
            self.start(self.line(command))
            self.wait_for_deployments(["evaluate/val", "reevaluate-best/nightly"])
        else:
            proc = subprocess.run(
                ["bash", "-c", self.line(command)],
                cwd=self.work,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            self.outputs[command] = proc
            want = EXPECTED_EXIT.get(command, 0)
            assert proc.returncode == want, f"{command}\n{proc.stdout}\n{proc.stderr}"

    def start(self, command: str) -> None:
        self.background.append(
            subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=self.work,
                env=dict(self.env),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def wait_for_deployments(self, names: list[str], timeout_s: float = 180) -> None:
        """Until ``honesteval serve`` has registered these ``flow/deployment`` names."""
        wanted = {n.split("/")[1] for n in names}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                found = httpx.post(f"{self.api}/deployments/filter", json={}, timeout=30).json()
            except httpx.HTTPError:  # a busy server: ask again
                found = []
            if wanted <= {d["name"] for d in found}:
                return
            time.sleep(1)
        raise AssertionError(f"deployments {names} never appeared")

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def stop(self) -> None:
        for proc in reversed(self.background):  # serve first, then the server
            stop_group(proc, signal.SIGINT, 60)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a dozen commands, two servers, a deployment run
def test_the_first_hour_as_the_readme_tells_it(tmp_path: Path) -> None:
    commands = first_hour_commands()
    # the walk-through covers init -> check -> evaluate -> a second candidate -> gate ->
    # report -> server and UI -> nightly
    for step in ("init", "check", "evaluate", "mkdir", "gate", "report", "server", "serve"):
        assert any(re.search(rf"\b{step}\b", c) for c in commands), step
    assert commands[-1].startswith("prefect deployment run reevaluate-best/nightly")

    # A newcomer's shell: no server configured and the default server mode (the suite's
    # per-command mode is dropped), so the first command starts the reusable server that the
    # later ones use, as the README says, until `honesteval server` replaces it on the same
    # database.
    drop = ("PREFECT_API_URL", "HONESTEVAL_SERVER_MODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), DO_NOT_TRACK="1")
    shell = Shell(tmp_path, env)
    try:
        for command in commands:
            shell.run(command)
        outputs = {c.split(" --")[0]: p for c, p in shell.outputs.items()}
        # the first evaluate started the server (printing how it stops), the gate reused it
        first = next(p for c, p in shell.outputs.items() if c.startswith("honesteval evaluate"))
        assert "for this and later commands" in first.stderr, first.stderr
        assert "using the Prefect server at" in outputs["honesteval gate"].stderr

        # `honesteval ui` opened the one server's runs page, and it lists the sitting's runs:
        # the evaluate and the gates of steps 2-4 ran on the reusable server before it
        runs_page = f"http://127.0.0.1:{shell.port}/v2/runs"
        assert outputs["honesteval ui"].stdout.splitlines() == [runs_page, f"opened {runs_page}"]
        texts = page_text(runs_page_dom(f"http://127.0.0.1:{shell.port}"))
        for name in ("evaluate-baseline-val", "gate-baseline", "gate-careful"):
            assert name in texts, f"{name} is not in the UI's runs list"
        # the run whose candidate crashed on some tasks is told apart in the list, by its state
        assert run_state_in_list(texts, "evaluate-verbose-val") == "TrialsFailed"
        assert run_state_in_list(texts, "evaluate-baseline-val") == "Completed"

        # ... and `evaluate` named its failures (what the README quotes)
        project = tmp_path / "myproj"
        failing = failing_val_tasks(project)
        assert len(failing) == 5, failing  # the README: "5 of 20 val tasks fail"
        verbose = shell.outputs["honesteval evaluate --project myproj --candidate verbose"]
        first = min(failing)
        assert f"failed: 15 trials on 5 tasks, e.g. {first} (seed 0): {failing[first]}" in (
            verbose.stdout
        ), verbose.stdout

        # its summary artifact, in the UI: the failed trials first, each with its error, then
        # the reward; links to the run's other artifacts. That evaluation's own (its first run:
        # the later gate's screen of verbose wrote a newer one under the same key)
        key = "summary-myproj-val-verbose"
        evaluation = httpx.post(
            f"{shell.api}/flow_runs/filter",
            json={
                "flow_runs": {"name": {"any_": ["evaluate-verbose-val"]}},
                "sort": "START_TIME_ASC",
            },
            timeout=30,
        ).json()[0]
        [summary] = httpx.post(
            f"{shell.api}/artifacts/filter",
            json={
                "artifacts": {
                    "key": {"any_": [key]},
                    "flow_run_id": {"any_": [evaluation["id"]]},
                }
            },
            timeout=30,
        ).json()
        dom = chromium(
            f"http://127.0.0.1:{shell.port}/v2/artifacts/artifact/{summary['id']}",
            "--window-size=1400,1000",
            "--dump-dom",
            budget_ms=20000,
        )
        texts = page_text(dom)
        heading = texts.index("Trials that did not end ok: 15")
        rows = texts[heading:]
        shown = [(rows[i], rows[i + 3]) for i in range(len(rows) - 3) if rows[i] in failing]
        assert sorted(shown) == sorted((t, e) for t, e in failing.items() for _ in range(3))
        assert heading < texts.index("reward:"), texts
        assert 'href="/artifacts/key/rollouts-myproj-val-verbose"' in dom
        assert 'href="/artifacts/key/progress-myproj-val-verbose"' in dom

        # `prefect deployment run ... --watch` ended with the run's result: reward ± SE and
        # coverage, as the stored trials of its seeds give them
        watch = shell.outputs["prefect deployment run evaluate/val -p candidate=careful --watch"]
        logged = [line for line in watch.stdout.splitlines() if line.startswith("▪")]
        want = val_result_line(project, "careful", {0, 1, 2})
        assert logged[-1].endswith(want), (want, watch.stdout[-3000:])

        # the default screens: the answer in a few lines, progress on stderr
        def shown(candidate: str, command: str = "gate") -> list[str]:
            key = f"honesteval {command} --project myproj --candidate {candidate}"
            return shell.outputs[key].stdout.splitlines()

        for candidate in ("baseline", "verbose"):
            assert 3 <= len(shown(candidate, "evaluate")) <= EVALUATE_LINES
        assert shown("baseline", "evaluate")[0].startswith("baseline on val: reward ")
        # a confirmed promotion of the README's second candidate, its verdict first
        accept = shown("careful")
        assert len(accept) <= GATE_LINES, accept
        assert accept[0].startswith("ACCEPT: careful beats baseline by +"), accept
        assert accept[0].endswith(" on 20 tasks, confirmed on fresh seeds"), accept
        assert accept[1].startswith("  evidence  screen passed; confirmed on fresh seeds in ")
        assert accept[-1] == "  best      careful is now the best (was baseline)"
        gate = shell.outputs["honesteval gate --project myproj --candidate careful"]
        assert "screen passed" in gate.stderr  # it said what it would run, and why
        # the crashing candidate rejected: its failed trials named, the best kept
        reject = shown("verbose")
        assert len(reject) <= GATE_LINES, reject
        assert reject[0].startswith("REJECT: verbose does not beat careful: Δ -"), reject
        failed = next(line for line in reject if line.startswith("  failed    verbose "))
        assert all(task in failed for task in sorted(failing)[:5]), (failed, failing)
        assert reject[-1] == "  best      careful stays the best"
        # what the README shows of them is what they print
        readme = README.read_text()
        for line in (*shown("baseline", "evaluate")[1:], *accept[2:]):
            assert line in readme, line

        report = tmp_path / "myproj" / ".honesteval" / "report.html"
        shown = outputs["honesteval report"].stdout.splitlines()
        assert shown[0].startswith(f"wrote {report} (") and shown[1] == f"opened {report.as_uri()}"

        # the nightly run, named and tagged for the best, read back from the API
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        runs = httpx.post(
            f"{shell.api}/flow_runs/filter",
            json={"flow_runs": {"name": {"any_": [f"reevaluate-careful-{day}"]}}},
            timeout=30,
        ).json()
        assert len(runs) == 1 and runs[0]["state"]["type"] == "COMPLETED"
        assert {"honesteval", "candidate:careful"} <= set(runs[0]["tags"])

        # the Prefect UI's page of that run shows its name and state
        dom = chromium(
            f"http://127.0.0.1:{shell.port}/v2/runs/flow-run/{runs[0]['id']}",
            "--window-size=1400,1000",
            "--dump-dom",
            budget_ms=20000,
        )
        assert f"reevaluate-careful-{day}" in dom and "Completed" in dom

        # the report in chromium: the decisions table reads in short rows, figures fill the
        # page's width, the page is not kilometres long
        seen = measured_report(report, tmp_path)
        # the first figure drawn is what decided: the paired Δ against the current best
        assert seen["figures"][0]["title"].startswith("Δ vs the current best"), seen["figures"]
        assert seen["figures"][0]["height"] > 50, seen["figures"]
        assert len(seen["rowHeights"]) == 3  # BASELINE, ACCEPT and REJECT
        assert max(seen["rowHeights"]) < 80, seen["rowHeights"]
        assert all(w > 0.9 * seen["bodyWidth"] for w in seen["svgWidths"]), seen
        assert seen["pageHeight"] < 6000, seen["pageHeight"]
    finally:
        shell.stop()
        # the reusable server, if the walk-through stopped before `honesteval server` took over
        stopped = subprocess.run(
            [sys.executable, "-m", "honesteval.cli", "server", "stop"],
            env={k: v for k, v in env.items() if k != "PREFECT_API_URL"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert "no honesteval Prefect server is running" in stopped.stderr, stopped.stderr
