"""In-process progress listeners: the CLI draws a bar while a flow runs in its process.

The Prefect progress artifact is the durable view (throttled to one update per 0.5 s); this
is the live one for a terminal, and costs one function call per finished task run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

Listener = Callable[[str, int, int], None]
_listeners: list[Listener] = []


def notify(label: str, done: int, total: int) -> None:
    for listener in list(_listeners):
        listener(label, done, total)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)
