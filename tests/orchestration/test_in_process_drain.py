"""The end of an in-process run drains Prefect's event and log workers without their progress
lines reaching the user's terminal (seen on a loaded machine: ``EventsWorker - Still
processing items: 40 items remaining...`` under a CLI evaluate's output)."""

from __future__ import annotations

import logging

from honesteval.server.in_process import send_pending


def _record(logger: str, message: str) -> logging.LogRecord:
    return logging.LogRecord(logger, logging.WARNING, __file__, 1, message, None, None)


def test_a_drain_keeps_its_progress_lines_off_and_every_other_line():
    send_pending(timeout_s=0.1)
    for name in ("EventsWorker", "APILogWorker"):
        logger = logging.getLogger(name)
        assert not logger.filter(_record(name, "Still processing items: 40 items remaining..."))
        assert logger.filter(_record(name, "Service 'EventsWorker' failed to process item"))


def test_a_blocks_flow_and_task_runs_use_the_client_made_before_the_server_answered(
    prefect_backend, monkeypatch
):
    """``flow_runs`` makes Prefect's sync client while the server boots (``PrefectApi.ready``
    still to come) and every run of the block uses that one: no client is made after."""
    from prefect import flow, task
    from prefect.client.orchestration import SyncPrefectClient, get_client

    from honesteval.orchestration.flow_runs import flow_runs
    from honesteval.server.localserver import PrefectApi

    events: list[str] = []
    made, ready = SyncPrefectClient.__init__, PrefectApi.ready

    def making(self, *args, **kwargs):
        events.append("client made")
        made(self, *args, **kwargs)

    def answering(self):
        events.append("server answers")
        return ready(self)

    monkeypatch.setattr(SyncPrefectClient, "__init__", making)
    monkeypatch.setattr(PrefectApi, "ready", answering)

    @task
    def client_of_task() -> int:
        return id(get_client(sync_client=True))

    @flow
    def clients_of_runs() -> tuple[int, int]:
        return id(get_client(sync_client=True)), client_of_task.submit().result()

    with flow_runs():
        block = get_client(sync_client=True)
        in_flow, in_task = clients_of_runs()
    assert events == ["client made", "server answers"]
    assert in_flow == in_task == id(block)
    assert block._closed  # closed with the block
