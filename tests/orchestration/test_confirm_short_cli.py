"""A confirmation whose budget, not its evidence, stands between a gain and the bar ends
INDECISIVE (exit 3) with the ``--confirm-trials`` that settles it, through the real CLI.

Expected values are computed by hand from the e-process's rule: the equally weighted mean of
four gamblers' constant bets λ ∈ {0.1, 0.2, 0.4, 0.8}, so a constant delta g on n tasks has
E_R = mean_λ (1 + λg)^(nR).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honesteval.cli import main

pytestmark = pytest.mark.usefixtures("prefect_backend")

#: Every trial of a candidate scores its ``quality.txt``: no noise at all.
CONSTANT_TARGET = """
from pathlib import Path


def run(task, candidate_dir, seed):
    return float((Path(candidate_dir) / "quality.txt").read_text())


def score(task, output):
    return output
"""

ALPHA_1 = 1 / 91.43  # the ledger's first level (lord++, search alpha 0.05), as 1/alpha_j prints


def cli(capsys, *args: str) -> tuple[int, dict, str]:
    """``honesteval ARGS --json``: (exit code, parsed output, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main([*args, "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return int(exc.value.code), json.loads(out), err


BETS = (0.1, 0.2, 0.4, 0.8)


def evidence(n_tasks: int, gain: float, rounds: int) -> float:
    return sum((1 + lam * gain) ** (n_tasks * rounds) for lam in BETS) / len(BETS)


def rounds_to_reach(n_tasks: int, gain: float, alpha: float) -> int:
    """The first round whose capital reaches 1/alpha."""
    return next(r for r in range(1, 1000) if evidence(n_tasks, gain, r) >= 1 / alpha)


def test_a_consistent_gain_the_budget_cannot_confirm_is_indecisive_then_settled(
    make_project, capsys
):
    root: Path = make_project(
        tasks=[{"id": f"v{i}", "input": None} for i in range(5)],
        candidates={"base": 0.5, "better": 0.6},
        config={"trials": 2, "retries": 0},
        target_code=CONSTANT_TARGET,
    )
    project = ("--project", str(root))
    assert cli(capsys, "gate", *project, "--candidate", "base")[0] == 0
    code, d, said = cli(capsys, "gate", *project, "--candidate", "better")
    needed = rounds_to_reach(5, 0.1, ALPHA_1)
    assert needed == 16  # (1.08^80 + 1.04^80 + …)/4 = 125.5 ≥ 91.43 > 15 rounds' 86.7
    # budget 3 × 2 = 6 rounds: round 2 sees that the 4 left cannot get there, and every
    # trial both sides ran shows the gain: the budget stands in the way, not the evidence
    assert code == 3 and d["indecisive"] and not d["accept"]
    assert (d["confirm_stop"], d["confirm_short"], d["confirm_rounds"]) == ("short", "budget", 2)
    assert d["confirm_settle"] == needed and f"--confirm-trials {needed}" in d["reason"]
    assert d["e_value"] == pytest.approx(evidence(5, 0.1, 2))
    assert "REJECT" not in d["reason"]
    # said before the confirmation's first trial: the screen's +0.1 needs 16 rounds, not 6
    warning = next(line for line in said.splitlines() if "the gain the screen measured" in line)
    assert said.index(warning) < said.index("confirmation round 1/6")
    assert f"about {needed} rounds" in warning and f"--confirm-trials {needed}" in warning
    # the same command with that budget continues the same confirmation and promotes
    code, d, _ = cli(
        capsys, "gate", *project, "--candidate", "better", "--confirm-trials", str(needed)
    )
    assert code == 0 and d["promoted"] and d["confirm_rounds"] == needed
    assert d["level"] == pytest.approx(ALPHA_1, rel=1e-3)
