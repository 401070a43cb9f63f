"""Regenerate the screenshots in docs/img: a real Prefect server, real flow runs, headless
Chromium.

Needs Debian's chromium (`make browser`). Run from the checkout:

    .venv/bin/python docs/screenshots.py

It starts `honesteval server` on a free port with a throw-away PREFECT_HOME, walks the README's
first hour on the `init` template (baseline, then `careful`: ACCEPT; a candidate no better:
Rejected), runs one candidate whose backend fails on most tasks (a `LowCoverage` run) and the
nightly re-evaluation, screenshots the Prefect UI (v2) pages and the `honesteval report` HTML
file into docs/img/, and stops the server.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from honesteval.server.localserver import LocalServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.browser
from tests.browser import HEADLESS_FLAGS

CHECKOUT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
OUT = CHECKOUT / "docs" / "img"
CHROMIUM_FLAGS = [
    *HEADLESS_FLAGS,
    "--disable-quic",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=15000",
]


def honesteval(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "honesteval"), *args], env=env, capture_output=True, text=True, timeout=600
    )


def latest_run(api: str, flow: str) -> dict:
    return httpx.post(
        f"{api}/flow_runs/filter",
        json={"flows": {"name": {"any_": [flow]}}, "sort": "START_TIME_DESC", "limit": 1},
    ).json()[0]


def shoot(ui: str, path: str, name: str, window: str = "1400,1000") -> None:
    profile = tempfile.mkdtemp(prefix="chromium-")
    subprocess.run(
        [
            "chromium",
            *CHROMIUM_FLAGS,
            f"--window-size={window}",
            f"--user-data-dir={profile}",
            f"--screenshot={OUT / name}",
            f"{ui}{path}",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    shutil.rmtree(profile, ignore_errors=True)
    print("wrote", OUT / name)


#: The template's target, plus a backend that is down for a candidate whose prompt says so.
OUTAGE = """
from honesteval import InfraError

_run = run


def run(task, candidate_dir, seed):
    prompt = (Path(candidate_dir) / "prompt.txt").read_text()
    if "OUTAGE" in prompt and int(task["id"][1:]) % 4:
        raise InfraError("backend down (503)")
    return _run(task, candidate_dir, seed)
"""


def main() -> None:
    from honesteval.project.scaffold import scaffold_project

    work = Path(tempfile.mkdtemp(prefix="honesteval-shots-"))
    project = work / "myproj"
    scaffold_project(project)
    prompts = {
        "careful": "Work it out, check your work, then answer with the number only.",
        "terse": "Number only.",
        "outage": "OUTAGE: Answer with the number only.",
    }
    for name, prompt in prompts.items():
        (project / "candidates" / name).mkdir()
        (project / "candidates" / name / "prompt.txt").write_text(prompt + "\n")
    target = project / "target.py"
    target.write_text(target.read_text() + OUTAGE)
    cfg = yaml.safe_load((project / "honesteval.yaml").read_text())
    cfg["retries"] = 1
    cfg["retry_backoff_s"] = 0.1
    (project / "honesteval.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    with LocalServer(work / "prefect-home") as server:
        shoot_all(server.ui_url, server.api_url, server.env, project)


def shoot_all(ui: str, api: str, client: dict[str, str], project: Path) -> None:
    honesteval(client, "gate", "--project", str(project), "--candidate", "baseline")
    honesteval(client, "gate", "--project", str(project), "--candidate", "careful")
    gate_run = latest_run(api, "gate")
    honesteval(client, "gate", "--project", str(project), "--candidate", "terse")
    honesteval(client, "evaluate", "--project", str(project), "--candidate", "careful", "--fresh")
    evaluate_run = latest_run(api, "evaluate")
    honesteval(client, "evaluate", "--project", str(project), "--candidate", "outage")
    low_run = latest_run(api, "evaluate")
    subprocess.run(  # the nightly re-evaluation, as the deployment runs it
        [
            sys.executable,
            "-c",
            f"from honesteval.flows import reevaluate_best; reevaluate_best({str(project)!r})",
        ],
        env=client,
        capture_output=True,
        timeout=900,
        check=False,
    )
    nightly_run = latest_run(api, "reevaluate-best")
    time.sleep(5)  # let the server record the last task runs
    shoot(ui, f"/v2/runs/flow-run/{evaluate_run['id']}", "evaluate-run.png")
    shoot(ui, f"/v2/runs/flow-run/{evaluate_run['id']}?tab=Artifacts", "evaluate-artifacts.png")
    shoot(ui, f"/v2/runs/flow-run/{gate_run['id']}?tab=Artifacts", "gate-artifacts.png")
    shoot(ui, f"/v2/runs/flow-run/{low_run['id']}", "low-coverage-run.png")
    shoot(ui, f"/v2/runs/flow-run/{low_run['id']}?tab=Logs", "low-coverage-logs.png")
    shoot(ui, f"/v2/runs/flow-run/{nightly_run['id']}", "nightly-run.png")
    shoot(ui, "/v2/runs", "runs-list.png", window="1400,1700")
    for run, key, name in (
        (evaluate_run, "summary-myproj-val-careful", "summary-artifact.png"),
        (gate_run, "gate-decision-myproj", "gate-decision-artifact.png"),
    ):
        arts = httpx.post(
            f"{api}/artifacts/filter",
            json={
                "flow_runs": {"id": {"any_": [run["id"]]}},
                "artifacts": {"key": {"any_": [key]}},
            },
        ).json()
        shoot(ui, f"/artifacts/artifact/{arts[0]['id']}", name)
    report = project / ".honesteval" / "report.html"
    honesteval(client, "report", "--project", str(project), "--out", str(report))
    shoot(report.as_uri(), "", "report.png", window="1300,2600")
    summary = {
        "evaluate": evaluate_run["id"],
        "gate": gate_run["id"],
        "low_coverage": low_run["id"],
        "low_state": low_run["state"]["name"],
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
