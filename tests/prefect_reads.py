"""Read back what a flow run left in Prefect: task runs, artifacts, events (polling)."""

from __future__ import annotations

import json
import time
from typing import Any
from uuid import UUID

import httpx
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterId,
)
from prefect.settings import PREFECT_API_URL


def task_runs(flow_run_id: UUID, expected: int | None = None, wait_s: float = 15) -> list[Any]:
    """Every task run of a flow run; polls until ``expected`` are visible (events lag)."""
    deadline = time.monotonic() + wait_s
    while True:
        with get_client(sync_client=True) as c:
            runs = []
            offset = 0
            while True:
                page = c.read_task_runs(
                    flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                    limit=200,
                    offset=offset,
                )
                runs += page
                if len(page) < 200:
                    break
                offset += 200
        terminal = [r for r in runs if r.state is not None and r.state.is_final()]
        if expected is None or len(terminal) >= expected or time.monotonic() > deadline:
            return runs
        time.sleep(0.25)


def artifacts(flow_run_id: UUID) -> dict[str, Any]:
    """The latest artifact of each key created by a flow run, with table data decoded."""
    with get_client(sync_client=True) as c:
        arts = c.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    out: dict[str, Any] = {}
    for a in sorted(arts, key=lambda a: a.created):
        data = a.data
        if a.type == "table" and isinstance(data, str):
            data = json.loads(data)
        out[a.key] = {"type": a.type, "data": data, "id": a.id}
    return out


def flow_run_logs(flow_run_id: UUID, until: str, wait_s: float = 30) -> list[tuple[int, str]]:
    """(level, message) of a flow run's log lines on the server, oldest first, polling until
    one ends with ``until`` (log lines are shipped in batches)."""
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import LogSort

    deadline = time.monotonic() + wait_s
    while True:
        with get_client(sync_client=True) as c:
            logs = c.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])),
                sort=LogSort.TIMESTAMP_ASC,
            )
        found = [(log.level, log.message) for log in logs]
        if any(m.endswith(until) for _, m in found) or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def latest_artifact(key: str) -> Any:
    with get_client(sync_client=True) as c:
        arts = c.read_latest_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
        )
    return arts[0] if arts else None


def events(
    name: str, resource_id: str, wait_s: float = 30, min_count: int = 1
) -> list[dict[str, Any]]:
    """Events of this name about this resource, polling: the server persists them later."""
    url = f"{PREFECT_API_URL.value().rstrip('/')}/events/filter"
    body = {"filter": {"event": {"name": [name]}, "resource": {"id": [resource_id]}}, "limit": 50}
    deadline = time.monotonic() + wait_s
    while True:
        resp = httpx.post(url, json=body)
        resp.raise_for_status()
        found = resp.json().get("events", [])
        if len(found) >= min_count or time.monotonic() > deadline:
            return found
        time.sleep(0.5)
