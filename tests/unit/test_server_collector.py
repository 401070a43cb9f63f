"""The server's boot runs without the cyclic garbage collector; what a server needs after it
is a collector that runs again and frees the cycles its requests leave (no leak)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from honesteval.server.localserver import booted_without_gc


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()
    if was:
        gc.enable()
    else:
        gc.disable()


def test_after_the_boot_the_collector_runs_and_frees_new_cycles(collector: None) -> None:
    gc.disable()  # as the server's main does first
    built = [Node() for _ in range(100)]  # what the boot built and keeps
    booted_without_gc()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(built)  # the boot's objects are left out of passes
    cycle = Node()
    gone = weakref.ref(cycle)
    del cycle
    gc.collect()
    assert gone() is None
