"""`score` as its own task, and `rescore`: grading again never runs the target again."""

from __future__ import annotations

import pytest
import yaml

from honesteval.orchestration.flows import evaluate, rescore
from tests.helpers import call_counts, stored_trials
from tests.prefect_reads import task_runs

pytestmark = pytest.mark.usefixtures("prefect_backend")

# A second scorer: right answers now score 0, anything else 1 (UNGRADEABLE included).
INVERTED_SCORER = """
def score(task, output):
    return 0.0 if output.get("answer") == task["target"] else 1.0
"""

# A judge that is down twice (InfraError), then grades: counts its calls in judge.log.
FLAKY_JUDGE = """
from pathlib import Path
from honesteval import InfraError

HERE = Path(__file__).parent


def score(task, output):
    log = HERE / "judge.log"
    seen = log.read_text().count(task["id"]) if log.exists() else 0
    with log.open("a") as fh:
        fh.write(task["id"] + "\\n")
    if seen < 2:
        raise InfraError("judge: 429")
    return 1.0 if output["answer"] == task["target"] else 0.0
"""


def use_scorer(root, module: str, code: str) -> None:
    (root / f"{module}.py").write_text(code)
    cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
    cfg["adapter"]["scorer"] = f"{module}:score"
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def stored(root) -> list[dict]:
    return stored_trials(root)


@pytest.mark.quick
def test_rescore_regrades_stored_rollouts_without_calling_the_target(make_project):
    root = make_project(["pass", "pass", "fail", "scorer_error"], config={"trials": 2})
    first = evaluate(str(root), "base", "val")
    # The first scorer: pass 1, pass 1, fail 0; the judge cannot grade the 4th task.
    assert (first.reward, first.n_scored) == (pytest.approx(2 / 3), 3)
    calls = call_counts(root)
    assert sum(calls.values()) == 8
    old_scorer = {r["scorer"] for r in stored(root) if r["status"] == "ok"}

    use_scorer(root, "inverted", INVERTED_SCORER)
    state = rescore(str(root), "base", "val", return_state=True)
    again = state.result()
    # Inverted: pass 0, pass 0, fail 1, the ungradeable answer 1 -> mean 2/4, all 4 scored.
    assert (again.reward, again.n_scored, again.trials_scorer_error) == (0.5, 4, 0)
    assert call_counts(root) == calls  # not one target call
    records = stored(root)
    assert len(records) == 8
    assert {r["scorer"] for r in records} == {again.scorer} and {again.scorer} != old_scorer
    runs = task_runs(state.state_details.flow_run_id, expected=9)
    assert sorted(r.name for r in runs if r.name.startswith("score-")) == sorted(
        f"score-t0{i}-t{k}" for i in range(4) for k in range(2)
    )

    # An evaluate after the scorer changed again reuses none of the trials graded by the
    # older scorer (their context differs): each runs again, once.
    use_scorer(root, "inverted2", INVERTED_SCORER + "\n# a new version\n")
    later = evaluate(str(root), "base", "val")
    assert later.trials_reused == 0
    assert call_counts(root) == {key: 2 * n for key, n in calls.items()}


def test_score_task_retries_the_scorer_alone(make_project):
    root = make_project(["pass", "fail"], config={"trials": 1})
    use_scorer(root, "judge", FLAKY_JUDGE)
    state = evaluate(str(root), "base", "val", return_state=True)
    r = state.result()
    assert (r.reward, r.trials_ok) == (0.5, 2)
    assert call_counts(root) == {("t00", 0): 1, ("t01", 0): 1}  # each rollout ran once
    judge_calls = (root / "judge.log").read_text().split()
    assert sorted(judge_calls) == ["t00"] * 3 + ["t01"] * 3  # 2 faults + 1 grade each
    runs = {x.name: x for x in task_runs(state.state_details.flow_run_id, expected=5)}
    assert runs["score-t00-t0"].run_count == 3 and runs["t00-t0"].run_count == 1


def test_a_stored_rollout_is_graded_on_resume_not_run_again(make_project):
    """A run that stopped between the target and the scorer left the rollout on disk (an
    honest scorer_error, awaiting its score); the next evaluate grades it, target untouched."""
    from honesteval.evaluation.plan import plan_evaluation
    from honesteval.evaluation.trial import Attempt, record_rollout
    from honesteval.models import Rollout

    root = make_project(["pass", "fail"], config={"trials": 1})
    plan = plan_evaluation(root, "base", "val")
    spec = plan.todo[0]  # t00, trial 0: its rollout is stored, its score never came
    waiting = record_rollout(spec, plan.settings, Attempt(Rollout(output={"answer": "yes"})), [], 1)
    assert waiting.status == "scorer_error"  # on disk meanwhile: ungraded is missing data
    r = evaluate(str(root), "base", "val")
    assert (r.reward, r.trials_ok, r.trials_reused) == (0.5, 2, 0)
    assert call_counts(root) == {("t01", 0): 1}  # only the trial without a rollout ran
