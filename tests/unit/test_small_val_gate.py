"""The default gate at the sizes users have (issue 33): a real gain is promoted through the
real API at 7 val tasks × 3 trials, a bar out of reach is said before any trial, and `check`
and the first gate warn when val is too small for small gains, with the numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy.special import zeta

import honesteval
from honesteval.evaluation import progress
from honesteval.evaluation.checks import check_project
from honesteval.models import GateConfig
from honesteval.stats import ScreenStopping, evidence_ceiling, planning_mde, small_val_warning
from honesteval.store.state_dir import Store

# A candidate passes trial `seed` of a task with probability quality.txt, drawn from the task
# and the seed (the same draw for both sides: common random numbers).
TARGET = """\
import random
from pathlib import Path


def run(task, candidate_dir, seed):
    quality = float((Path(candidate_dir) / "quality.txt").read_text())
    return random.Random(f"{task['id']}-{seed}").random() < quality


def score(task, output):
    return {"reward": 1.0 if output else 0.0}
"""


def _project(base: Path, n_tasks: int, trials: int, gate: str = "{}") -> Path:
    root = base / "proj"
    (root / "candidates").mkdir(parents=True)
    tasks = [{"id": f"t{i}", "input": i} for i in range(n_tasks)]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    ids = [t["id"] for t in tasks]
    (root / "honesteval.yaml").write_text(
        "name: small\ntasks: tasks.jsonl\n"
        f"splits: {{train: [], val: {json.dumps(ids)}, test: []}}\n"
        'adapter: {kind: python, target: "target:run", scorer: "target:score"}\n'
        f"trials: {trials}\nretries: 0\ngate: {gate}\n"
    )
    (root / "target.py").write_text(TARGET)
    for name, quality in (("base", 0.3), ("better", 0.9)):
        (root / "candidates" / name).mkdir()
        (root / "candidates" / name / "quality.txt").write_text(f"{quality}\n")
    return root


def test_seven_tasks_promote_a_large_gain_by_trial_level_evidence(tmp_path: Path) -> None:
    root = _project(tmp_path, 7, 3)
    assert honesteval.gate(root, "base", orchestration="local").accept  # the baseline
    d = honesteval.gate(root, "better", orchestration="local")
    # +0.6 a task: with one delta per task (the old test) 7 tasks could never reach
    # 1/alpha_1 = 91.4 (even 2^7 = 128 needs every Δ = 1); trial by trial it does
    assert d.accept and d.promoted and d.stage == "confirm" and d.confirm_stop == "promote"
    assert d.e_value >= 1 / d.level and d.confirm_budget == 9
    assert d.confirm_rounds <= 9


def test_a_bar_out_of_reach_is_indecisive_before_any_trial_and_spends_nothing(
    tmp_path: Path,
) -> None:
    # 3 tasks × 1 confirmation round: at most the mean of (1 + λ)^3 over the bets
    # 0.1, 0.2, 0.4, 0.8: 2.91 < 91.4
    root = _project(tmp_path, 3, 2, gate="{confirm_trials: 1}")
    most = sum((1 + b) ** 3 for b in (0.1, 0.2, 0.4, 0.8)) / 4
    assert math.exp(evidence_ceiling(3, 1)) == pytest.approx(most) and most < 3
    (root / "candidates" / "base" / "quality.txt").write_text("0\n")  # never passes
    (root / "candidates" / "better" / "quality.txt").write_text("1\n")  # always does
    honesteval.gate(root, "base", orchestration="local")
    d = honesteval.gate(root, "better", orchestration="local")
    assert d.delta == 1.0  # the screen passed (Δ = 1 on every task) ...
    assert d.indecisive and not d.accept  # ... and nothing was confirmed
    assert "even Δ = +1 on every trial could not reach 1/alpha_j" in d.reason
    assert "more val tasks" in d.reason and "--no-confirm" in d.reason
    ledger = (root / ".honesteval" / "decisions.jsonl").read_text().splitlines()
    assert [json.loads(x).get("kind") for x in ledger] == ["decision", "decision"]  # no level
    results = Store(root / ".honesteval").read_results()
    assert results and max(r.base_seed for r in results) < 10**9  # no confirmation ran


class _Said:
    """A progress listener keeping what the gate announces."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def progress(self, snapshot: object) -> None:
        pass

    def announce(self, text: str) -> None:
        self.lines.append(text)


def test_check_and_the_first_gate_warn_when_val_is_too_small(tmp_path: Path) -> None:
    root = _project(tmp_path, 7, 3)
    (found,) = [r for r in check_project(str(root)) if r.name == "gate power"]
    alpha_1 = 0.025 / float(zeta(1.6, 1))  # LORD++: w0·γ_1, w0 = α/2
    mde = planning_mde(7, 3, 9, alpha_1, 1.0, ScreenStopping(0.05, 0.9))
    assert mde is not None and mde >= 0.3
    assert found.level == "warn" and "7 val tasks × 3 trials" in found.detail
    assert f"promotes a gain of {mde:.2f} a task with 80% probability" in found.detail
    said = _Said()
    with progress.listening(said):
        honesteval.gate(root, "base", orchestration="local")
    assert any(x.startswith("warning: 7 val tasks × 3 trials") for x in said.lines)
    # 12 tasks × 10 trials promote +0.3 and less: no warning
    assert small_val_warning(12, 10, GateConfig()) is None
