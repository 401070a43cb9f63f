"""Regenerate the README screenshots: a real Prefect server, real flow runs, headless Chromium.

Needs Debian's chromium (`apt-get install chromium`). Run from the checkout:

    .venv/bin/python docs/screenshots.py

It starts `honesteval server` on a free port with a throw-away PREFECT_HOME, evaluates and
gates the circle-packing candidates, runs one candidate whose infrastructure fails (a
`LowCoverage` run), screenshots the Prefect UI (v2) pages and the `honesteval report` HTML
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

from honesteval.orchestration.serving import LocalServer

CHECKOUT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
OUT = CHECKOUT / "docs" / "img"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
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


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="honesteval-shots-"))
    project = work / "circle_packing"
    shutil.copytree(
        CHECKOUT / "examples" / "circle_packing",
        project,
        ignore=shutil.ignore_patterns(".honesteval", "__pycache__", "eve"),
    )
    broken = project / "candidates" / "outage"
    broken.mkdir()
    (broken / "solver.py").write_text(
        "import sys\n\ndef solve(n, seed):\n"
        "    if n % 4:\n        sys.exit(75)  # the backend is down: an infra exit code\n"
        "    from packing import optimise\n    import numpy as np\n"
        "    return optimise(n, np.random.default_rng(seed))\n"
    )
    cfg = yaml.safe_load((project / "honesteval.yaml").read_text())
    cfg["adapter"]["infra_exit_codes"] = [75]
    cfg["retries"] = 1
    cfg["retry_backoff_s"] = 0.1
    (project / "honesteval.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    with LocalServer(work / "prefect-home") as server:
        shoot_all(server.ui_url, server.api_url, server.env, project)


def shoot_all(ui: str, api: str, client: dict[str, str], project: Path) -> None:
    honesteval(client, "gate", "--project", str(project), "--candidate", "seed")
    honesteval(client, "gate", "--project", str(project), "--candidate", "restarts")
    gate_run = latest_run(api, "gate")
    honesteval(client, "evaluate", "--project", str(project), "--candidate", "restarts", "--fresh")
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
    shoot(ui, "/v2/runs", "runs-list.png")
    for run, key, name in (
        (evaluate_run, "summary-val-restarts", "summary-artifact.png"),
        (gate_run, "gate-decision", "gate-decision-artifact.png"),
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
    shoot(report.as_uri(), "", "report.png", window="1300,2300")
    summary = {
        "evaluate": evaluate_run["id"],
        "gate": gate_run["id"],
        "low_coverage": low_run["id"],
        "low_state": low_run["state"]["name"],
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
