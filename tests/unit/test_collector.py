"""The server's boot and a flow command's imports run without the cyclic garbage collector;
what follows needs a collector that runs again and frees the cycles its work leaves (no
leak), and a caller of the Python API keeps the collector as it set it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from honesteval.collector import pause_for_imports, resume_after_imports


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


def test_after_the_imports_the_collector_runs_and_frees_new_cycles(collector: None) -> None:
    gc.enable()
    pause_for_imports()
    assert not gc.isenabled()
    frozen_before = gc.get_freeze_count()
    built = [Node() for _ in range(100)]  # what the imports built and keep
    resume_after_imports()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen_before + len(built)  # left out of later passes
    cycle = Node()
    gone = weakref.ref(cycle)
    del cycle
    gc.collect()
    assert gone() is None


def test_a_collector_the_caller_turned_off_stays_off_and_nothing_is_frozen(
    collector: None,
) -> None:
    gc.disable()  # a caller's own choice, before honesteval runs a flow
    pause_for_imports()
    frozen_before = gc.get_freeze_count()
    resume_after_imports()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == frozen_before


def test_resuming_without_a_pause_changes_nothing(collector: None) -> None:
    gc.enable()
    frozen_before = gc.get_freeze_count()
    resume_after_imports()
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen_before
