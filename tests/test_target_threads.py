"""Target calls run on reused daemon threads: a timeout still holds, a hung target never
blocks the others, and no trial starts a thread of its own when one is idle."""

from __future__ import annotations

import threading

import pytest

from honesteval.errors import CandidateFailure, TargetTimeout
from honesteval.trials import _call_with_timeout


def _target_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "honesteval-target"}


def test_sequential_calls_reuse_one_thread_and_keep_results_and_errors():
    _call_with_timeout(lambda: None, 5)  # at least one idle target thread exists now
    before = _target_threads()
    seen = {_call_with_timeout(lambda: threading.current_thread(), 5) for _ in range(200)}
    assert len(seen) == 1 and seen <= before  # no new thread for any of the 200 calls
    assert _target_threads() == before

    def boom() -> None:
        raise ValueError("the target's own error")

    with pytest.raises(ValueError, match="the target's own error"):
        _call_with_timeout(boom, 5)
    # A BaseException inside the target is the candidate's failure, not this process's exit.
    with pytest.raises(CandidateFailure, match="SystemExit"):
        _call_with_timeout(lambda: exit(3), 5)


def test_a_hung_target_times_out_and_does_not_hold_up_the_next_call():
    release = threading.Event()
    # The target returns only once released (below): raising means the trial gave up on it.
    with pytest.raises(TargetTimeout, match=r"timeout_s=0\.2"):
        _call_with_timeout(lambda: release.wait(60), 0.2)
    assert not release.is_set()
    try:
        assert _call_with_timeout(lambda: "next", 5) == "next"  # served by another thread
    finally:
        release.set()
