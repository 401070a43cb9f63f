"""Target calls run on reused daemon threads: a timeout still holds, a hung target never
blocks the others, and no trial starts a thread of its own when one is idle."""

from __future__ import annotations

import re
import threading
import time

import pytest

from honesteval.errors import CandidateFailure, TargetTimeout
from honesteval.evaluation.trial import _call_with_timeout


def _target_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "honesteval-target"}


def test_sequential_calls_reuse_one_thread_and_keep_results_and_errors():
    _call_with_timeout(lambda: None, 5)  # at least one idle target thread exists now
    before = _target_threads()
    seen = {_call_with_timeout(lambda: threading.current_thread(), 5) for _ in range(200)}
    # Sequential calls are served by idle threads already there (earlier tests may have left
    # several idle ones): no new thread for any of the 200 calls.
    assert seen <= before
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


def test_a_quick_target_is_not_timed_out_when_the_waiting_thread_wakes_late(monkeypatch):
    """The limit is on the target's own running time. Here the call returns at once, then its
    thread holds the GIL in one long C call (catastrophic regex backtracking, ~0.6 s here) as
    the result is handed over, so this thread wakes long after ``timeout_s``: the result is
    still the target's, on time. Measured from this thread, it was a TargetTimeout."""
    from honesteval.evaluation import trial as trials

    held = threading.Event()

    def hold_the_gil(_future: object) -> None:
        held.set()
        re.match(r"(a+)+$", "a" * 23 + "b")  # never matches; never releases the GIL meanwhile

    submit = trials._target_threads.submit

    def submit_then_hold(fn):
        future = submit(fn)
        future.add_done_callback(hold_the_gil)  # runs on the target thread, after the result
        return future

    monkeypatch.setattr(trials._target_threads, "submit", submit_then_hold)
    t0 = time.monotonic()
    assert _call_with_timeout(lambda: "on time", 0.05) == "on time"
    # The GIL was held and the wait really was longer than the limit (else this shows nothing).
    assert held.is_set() and time.monotonic() - t0 > 0.05


def test_a_target_that_holds_the_gil_past_the_limit_is_timed_out():
    """The other side: the call itself runs past ``timeout_s`` without ever letting this thread
    wait (one C call that keeps the GIL): timed out, though its result came back."""
    with pytest.raises(TargetTimeout, match=r"timeout_s=0\.05"):
        _call_with_timeout(lambda: re.match(r"(a+)+$", "a" * 22 + "b"), 0.05)


def _submit_late(monkeypatch, delay_s: float | None) -> None:
    """Target calls begin ``delay_s`` after they are handed over (None: never), as on a
    machine too loaded to run the target thread."""
    from concurrent.futures import Future

    from honesteval.evaluation import trial as trials

    def submit(fn):
        future: Future = Future()
        if delay_s is not None:

            def late() -> None:
                time.sleep(delay_s)
                future.set_result(fn())

            threading.Thread(target=late, daemon=True).start()
        return future

    monkeypatch.setattr(trials._target_threads, "submit", submit)


def test_a_target_that_begins_late_gets_its_whole_limit_to_run(monkeypatch):
    """Begun 1.0 s after the hand-over, it runs 1.0 s of its 1.5 s: on time, though the
    result comes 2.0 s after the hand-over."""
    _submit_late(monkeypatch, 1.0)
    t0 = time.monotonic()
    assert _call_with_timeout(lambda: time.sleep(1.0) or "ran", 1.5) == "ran"
    assert time.monotonic() - t0 > 1.5  # the wait really outlasted the limit


def test_a_target_that_never_begins_is_given_up_after_its_limit(monkeypatch):
    _submit_late(monkeypatch, None)
    called = []
    with pytest.raises(TargetTimeout, match=r"timeout_s=0\.2"):
        _call_with_timeout(lambda: called.append(1), 0.2)
    assert called == []
