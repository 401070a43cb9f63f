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

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from honesteval.models import REWARD_RANGE

__all__ = ["fill_missing", "missing_bounds"]

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
    if not ids or all(i in values for i in ids):
        return None
    low, high = value_range
    n = len(ids)
    return (
        sum(fill_missing(values, ids, low).values()) / n,
        sum(fill_missing(values, ids, high).values()) / n,
    )
