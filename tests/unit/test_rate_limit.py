"""The in-process rate limit (``orchestration="local"``, no Prefect): threads share one bucket,
and the setting is validated like every other key of the project file. The limit shared by
processes through the Prefect server: tests/orchestration/test_dask_cluster.py and
tests/orchestration/test_openai.py."""

from __future__ import annotations

import threading
import time

import pytest
from pydantic import ValidationError

from honesteval.adapters.rate_limit import RateLimit, in_process_pacer
from tests.fake_openai import most_in_a_window


def test_threads_share_one_bucket() -> None:
    rate, burst = 10.0, 2  # at most 2 + 10 W of the 16 grants in any W seconds
    limit = RateLimit(per_s=rate, burst=burst)
    granted: list[float] = []
    lock = threading.Lock()

    def calls() -> None:
        for _ in range(4):
            in_process_pacer("unit-threads", limit)
            with lock:
                granted.append(time.time())

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 16
    for window_s in (0.1, 0.5, 1.0):
        assert most_in_a_window(granted, window_s) <= burst + rate * window_s, granted
    # 14 grants past the burst at 10/s: at least 1.4 s from the first to the last
    assert max(granted) - min(granted) >= (16 - burst) / rate - 0.05


@pytest.mark.parametrize("bad", [{"per_s": 0}, {"per_s": 2, "burst": 0}, {"per_s": 2, "rps": 1}])
def test_a_bad_setting_is_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        RateLimit.model_validate(bad)
