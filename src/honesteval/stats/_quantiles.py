"""Quantiles of the normal and Student t distributions, without importing ``scipy.stats``.

``scipy.stats`` takes about a second to import (it builds every distribution); every CLI
command that aggregates would pay it. The normal quantile comes from the standard library
(``statistics.NormalDist``, Wichura's AS 241, accurate to about 1e-16) and the t quantile
from ``scipy.special.stdtrit``, the routine behind ``scipy.stats.t.ppf``: the same numbers.
"""

from __future__ import annotations

from statistics import NormalDist

_STANDARD_NORMAL = NormalDist()


def normal_quantile(q: float) -> float:
    """``scipy.stats.norm.ppf(q)`` for 0 < q < 1."""
    return _STANDARD_NORMAL.inv_cdf(q)


def t_quantile(q: float, df: float) -> float:
    """``scipy.stats.t.ppf(q, df)`` (imports ``scipy.special`` on first use)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, q))
