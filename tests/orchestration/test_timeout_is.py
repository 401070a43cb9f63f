"""A candidate that hangs pays for it (issue 23 §5): past ``timeout_s`` a python or command
target's trial is ``failed`` at ``failure_reward`` and never retried, unless the project says
``timeout_is: missing``; a target that ends its own interpreter under ``isolate: true`` is a
failure too. (An adapter's network timeouts stay infrastructure: tests/test_openai.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from honesteval.models import GateConfig
from honesteval.stats import decide
from tests.helpers import run_plain

# Ten tasks; 6..9 are the hard ones. "base" answers right on 0..2 and on every hard task;
# "hanger" answers right on every easy task and hangs on every hard one.
TARGET = """
import time
from pathlib import Path

def answer(who, i):
    hard = i >= 6
    if who == "hanger":
        if hard:
            time.sleep(5)  # far past timeout_s
        return "right"
    return "right" if i < 3 or hard else "wrong"

def run(task, candidate_dir, seed):
    return answer(Path(candidate_dir, "who.txt").read_text(), task["input"]["i"])

def score(task, output):
    return 1.0 if output == "right" else 0.0
"""
COMMAND = """
import json, os, sys
sys.path.insert(0, os.getcwd())
from target import answer
task = json.load(sys.stdin)
who = open(os.path.join(os.environ["HONESTEVAL_CANDIDATE_DIR"], "who.txt")).read()
print(json.dumps(answer(who, task["input"]["i"])))
"""
TASKS = [{"id": f"t{i}", "input": {"i": i}} for i in range(10)]


def hang_project(make_project, adapter: dict[str, object] | None = None, **config: object) -> Path:
    cfg: dict[str, object] = {"trials": 1, "retries": 2, "timeout_s": 0.5, **config}
    if adapter is not None:
        cfg["adapter"] = adapter
    root = make_project(
        tasks=TASKS, target_code=TARGET, candidates={"base": 0, "hanger": 0}, config=cfg
    )
    for who in ("base", "hanger"):
        (root / "candidates" / who / "who.txt").write_text(who)
    (root / "command_target.py").write_text(COMMAND)
    return root


def test_a_candidate_hanging_on_its_4_hardest_of_10_tasks_scores_0_6_and_is_rejected(
    make_project,
):
    root = hang_project(make_project)
    _, base = run_plain(root, "base")
    records, hanger = run_plain(root, "hanger")
    hard = [r for r in records if r.task_id in {"t6", "t7", "t8", "t9"}]
    assert [(r.status, r.reward, r.attempts) for r in hard] == [("failed", 0.0, 1)] * 4
    assert all("TargetTimeout" in (r.error or "") and r.timeout_s == 0.5 for r in hard)
    assert hanger.reward == pytest.approx(0.6) and hanger.coverage == 1.0
    assert base.reward == pytest.approx(0.7)
    decision = decide(base, hanger, GateConfig())
    # Δ over the 10 tasks: +1 on t3..t5, −1 on t6..t9 → −0.1: a decisive reject.
    assert not decision.indecisive and not decision.accept
    assert decision.delta == pytest.approx(-0.1)


@pytest.mark.quick
def test_timeout_is_missing_keeps_the_timeout_an_infra_error(make_project):
    root = hang_project(make_project, timeout_is="missing")
    _, base = run_plain(root, "base")
    records, hanger = run_plain(root, "hanger")
    hard = [r for r in records if r.task_id in {"t6", "t7", "t8", "t9"}]
    assert [(r.status, r.reward, r.attempts) for r in hard] == [("infra_error", None, 3)] * 4
    assert hanger.reward == pytest.approx(1.0) and hanger.coverage == pytest.approx(0.6)
    decision = decide(base, hanger, GateConfig())
    # Observed: Δ +0.5 over 6 tasks (SE 0.2236) accepts; with the 4 missing imputed at 0 it
    # is −0.1 and rejects: the missing data could flip it.
    assert decision.indecisive and decision.rerun == ["t6", "t7", "t8", "t9"]


def test_a_failed_timeout_is_rerun_once_time_is_the_infrastructures(make_project):
    root = hang_project(make_project)
    run_plain(root, "hanger")
    (root / "honesteval.yaml").write_text(
        (root / "honesteval.yaml").read_text() + "timeout_is: missing\n"
    )
    records, hanger = run_plain(root, "hanger")  # the 6 ok trials are reused, not the 4 hangs
    assert sorted(r.task_id for r in records) == ["t6", "t7", "t8", "t9"]
    assert {r.status for r in records} == {"infra_error"} and hanger.reward == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["command", "isolated python"])
def test_a_hanging_subprocess_target_is_failed_not_missing(make_project, kind):
    adapter: dict[str, object] = (
        {"kind": "command", "command": "{python} command_target.py", "scorer": "target:score"}
        if kind == "command"
        else {"kind": "python", "target": "target:run", "scorer": "target:score", "isolate": True}
    )
    # An interpreter starts per trial: the limit leaves it room on a loaded machine (the
    # isolated target's clock starts once the target is loaded; the command's at its start).
    root = hang_project(make_project, adapter, timeout_s=3.0, failure_reward=0.1)
    records, hanger = run_plain(root, "hanger")
    hard = sorted((r.task_id, r.status, r.reward, r.attempts) for r in records if r.reward != 1.0)
    assert hard == [(f"t{i}", "failed", 0.1, 1) for i in range(6, 10)]
    assert hanger.reward == pytest.approx((6 + 4 * 0.1) / 10)


EXITS = """
import os, sys

def run(task, candidate_dir, seed):
    how = task["input"]["how"]
    if how == "os._exit(0)":
        os._exit(0)
    if how == "os._exit(3)":
        os._exit(3)
    if how == "SystemExit":
        sys.exit(0)
    return "fine"

def score(task, output):
    return 1.0
"""


@pytest.mark.slow
def test_a_target_that_ends_its_own_interpreter_under_isolate_is_failed(make_project):
    hows = ["os._exit(0)", "os._exit(3)", "SystemExit", "returns"]
    root = make_project(
        tasks=[{"id": h, "input": {"how": h}} for h in hows],
        target_code=EXITS,
        config={
            "trials": 1,
            "retries": 2,
            "failure_reward": 0.2,
            "adapter": {
                "kind": "python",
                "target": "target:run",
                "scorer": "target:score",
                "isolate": True,
            },
        },
    )
    records, result = run_plain(root)
    got = {r.task_id: (r.status, r.reward, r.attempts) for r in records}
    assert got == {
        "os._exit(0)": ("failed", 0.2, 1),
        "os._exit(3)": ("failed", 0.2, 1),
        "SystemExit": ("failed", 0.2, 1),
        "returns": ("ok", 1.0, 1),
    }
    by_id = {r.task_id: r for r in records}
    assert "ended its interpreter (exit code 0)" in (by_id["os._exit(0)"].error or "")
    assert "exit code 3" in (by_id["os._exit(3)"].error or "")
    assert result.coverage == 1.0 and result.reward == pytest.approx((3 * 0.2 + 1) / 4)
