"""``status``'s candidates table (issue 23 §3): each candidate's paired Δ against the current
best ± its SE, computed here from the trial files on disk, in the text and in --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import scipy.stats

from honesteval.views.status import project_status, status_lines
from tests.helpers import paired_by_hand, task_means_on_disk
from tests.synthetic_state import synthetic_state


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_state(tmp_path_factory.mktemp("status"), 15, {"a": 0.3, "b": 0.8, "c": 0.5})


def test_status_lists_each_candidate_with_its_paired_delta_vs_the_best(state: Path) -> None:
    best = json.loads((state / ".honesteval" / "best.json").read_text())["name"]
    means = task_means_on_disk(state)
    report = project_status(state)
    lines = status_lines(report)
    table = lines[lines.index(next(x for x in lines if x.startswith("candidates ("))) :]
    assert "Δ vs best ± SE" in table[1]
    rows = {line.split()[0]: line for line in table[2:5]}
    assert "(current best)" in rows[best]
    as_json = {c["candidate"]: c for c in report.as_json()["candidates"]}
    assert as_json[best]["delta_vs_best"] is None
    for cand in set(means) - {best}:
        mean, se, n = paired_by_hand(means[cand], means[best])
        assert f"{mean:+.4f} ± {se:.4f} (n={n})" in rows[cand]
        got = as_json[cand]["delta_vs_best"]
        assert (got["delta"], got["se"], got["n_paired"]) == (
            pytest.approx(mean),
            pytest.approx(se),
            n,
        )
        half = scipy.stats.t.ppf(0.975, n - 1) * se
        assert got["ci95"] == pytest.approx([max(mean - half, -1), min(mean + half, 1)])
