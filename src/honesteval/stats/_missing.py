"""Missing data bounded: a task with no counted trial imputed at an end of the reward range.

One rule for every place that reasons about missing tasks: the gate's worst case (the
candidate's missing tasks at the range's low end, the current best's at its high end,
:func:`honesteval.stats.decide`) and the bounds printed beside a reward or a pass^k whenever
coverage is below 1 (:func:`missing_bounds`): the statistic with every missing task at the low
end, and at the high end. Whatever the missing tasks would have scored, the statistic over all
tasks asked lies between the two; no assumption about why they are missing is needed (Manski
1989, worst-case bounds).

References
----------
Manski, C. F. (1989). Anatomy of the selection problem. Journal of Human Resources 24(3),
343-360.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from honesteval.models import REWARD_RANGE

__all__ = ["fill_missing", "missing_bounds", "missing_bounds_by_position"]

V = TypeVar("V")


def fill_missing(values: Mapping[str, V], ids: Iterable[str], fill: V) -> dict[str, V]:
    """``values`` over every id in ``ids``, an id without a value taking ``fill``.

    >>> fill_missing({"a": 0.5}, ["a", "b"], 1.0)
    {'a': 0.5, 'b': 1.0}
    """
    return {i: values.get(i, fill) for i in ids}


def missing_bounds(
    values: Mapping[str, float], ids: Sequence[str], value_range: tuple[float, float] = REWARD_RANGE
) -> tuple[float, float] | None:
    """The mean over ``ids`` with every id ``values`` lacks at the range's low end, and at its
    high end; None when nothing is missing (the mean is the mean) or ``ids`` is empty.

    Each task weighs the same, as in the reward (a mean of task means).

    >>> missing_bounds({"a": 1.0, "b": 0.5}, ["a", "b", "c", "d"])
    (0.375, 0.875)
    >>> missing_bounds({"a": 1.0}, ["a"]) is None
    True
    """
    present = np.array([i in values for i in ids], dtype=bool)
    laid_out = np.array([values.get(i, np.nan) for i in ids], dtype=float)
    return missing_bounds_by_position(laid_out, present, value_range)


def missing_bounds_by_position(
    values: np.ndarray, present: np.ndarray, value_range: tuple[float, float] = REWARD_RANGE
) -> tuple[float, float] | None:
    """:func:`missing_bounds` with the tasks laid out by position: ``values[i]`` is task i's
    value where ``present[i]`` (anything elsewhere). Vectorised, for ``aggregate``'s 10,000
    tasks; the sums are correctly rounded (:func:`math.fsum`), so both forms, and any order of
    the tasks, give the same floats.

    >>> missing_bounds_by_position(np.array([1.0, 0.5, 0.0, 0.0]), np.array([1, 1, 0, 0], bool))
    (0.375, 0.875)
    """
    if present.size == 0 or present.all():
        return None
    low, high = value_range
    n = present.size
    return (
        math.fsum(np.where(present, values, low).tolist()) / n,
        math.fsum(np.where(present, values, high).tolist()) / n,
    )
