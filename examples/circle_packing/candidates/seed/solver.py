"""Candidate `seed`: one random start, locally optimised."""

import numpy as np
from packing import optimise


def solve(n: int, seed: int) -> list[tuple[float, float, float]]:
    return optimise(n, np.random.default_rng(seed))
