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
