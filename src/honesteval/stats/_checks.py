"""Argument rules shared by the statistics and their callers (one home per rule)."""

from __future__ import annotations

from collections.abc import Sequence


def sorted_ks(ks: Sequence[int]) -> list[int]:
    """The ks of pass^k / pass@k as every statistic takes them: unique, sorted, each >= 1.

    >>> sorted_ks([3, 1, 3])
    [1, 3]
    >>> sorted_ks([0, 2])
    Traceback (most recent call last):
    ...
    ValueError: every k must be >= 1, got [0, 2]
    """
    out = sorted({int(k) for k in ks})
    if any(k < 1 for k in out):
        raise ValueError(f"every k must be >= 1, got {list(ks)}")
    return out


def positive_int(name: str, value: int) -> int:
    """``value`` if it is an integer >= 1 (a bool is not), else ValueError naming it.

    >>> positive_int("--max-concurrency", 4)
    4
    >>> positive_int("--max-concurrency", 0)
    Traceback (most recent call last):
    ...
    ValueError: --max-concurrency must be >= 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be >= 1, got {value!r}")
    return value
