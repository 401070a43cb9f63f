"""Read a process census (tests/census/sitecustomize.py) and print, per test file, the CLI
processes and the Prefect server boots its tests started, and their CPU seconds.

    HONESTEVAL_CENSUS=/tmp/census.jsonl PYTHONPATH=tests/census:src pytest tests/e2e ...
    python tests/census_table.py /tmp/census.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def _kind(argv: list[str]) -> str:
    joined = " ".join(argv)
    if "honesteval.server.localserver" in joined:
        return "server"
    if "uvicorn" in joined or "prefect.server" in joined or "prefect server" in joined:
        return "server"
    if "honesteval.cli" in joined:
        return "cli"
    return "other"


def table(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    starts = {r["pid"]: r for r in lines if r["event"] == "start"}
    cpu = {r["pid"]: r["cpu"] for r in lines if r["event"] == "exit"}
    tests: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in lines:
        if r["event"] == "test":
            tests[r["pid"]].append(r)

    def owner(pid: int, t: float) -> str:
        seen = set()
        while pid in starts and pid not in tests and pid not in seen:
            seen.add(pid)
            pid = starts[pid]["ppid"]
        for test in tests.get(pid, []):
            if test["t0"] <= t <= test["t1"]:
                return test["nodeid"]
        return "?"

    rows: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"cli": 0, "cli_no_api": 0, "server": 0, "server_fresh_home": 0, "cpu": 0.0}
    )
    for pid, r in starts.items():
        kind = _kind(r["argv"])
        if kind == "other" or pid in tests:
            continue
        row = rows[owner(pid, r["t"]).split("::")[0]]
        row[kind] += 1
        row["cpu"] += cpu.get(pid, 0.0)
        if kind == "cli" and not r["api_url"]:
            row["cli_no_api"] += 1
        if kind == "server" and not r["home_has_db"] and not r["db_url"]:
            row["server_fresh_home"] += 1
    return [{"file": f, **v} for f, v in sorted(rows.items())]


if __name__ == "__main__":
    text = Path(sys.argv[1]).read_text()
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    print(
        "| file | CLI processes | of them with no server URL | server boots "
        "| boots in an empty home | their CPU s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    total = defaultdict(float)
    for row in table(records):
        print(
            f"| {row['file']} | {row['cli']} | {row['cli_no_api']} | {row['server']} | "
            f"{row['server_fresh_home']} | {row['cpu']:.0f} |"
        )
        for k in ("cli", "cli_no_api", "server", "server_fresh_home", "cpu"):
            total[k] += row[k]
    print(
        f"| total | {total['cli']:.0f} | {total['cli_no_api']:.0f} | {total['server']:.0f} | "
        f"{total['server_fresh_home']:.0f} | {total['cpu']:.0f} |"
    )
