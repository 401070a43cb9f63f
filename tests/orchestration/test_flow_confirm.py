"""Two stages through the real flow and CLI: screen, confirmation on fresh seeds, the ledger."""

from __future__ import annotations

import json
import re

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

from honesteval.cli import main
from honesteval.gating.ledger import read_best
from honesteval.models import trial_seed
from honesteval.orchestration.flows import gate, reevaluate_best
from honesteval.project.loader import load_project
from honesteval.stats import first_sentence, reason_details
from tests.helpers import run_cli
from tests.prefect_reads import artifacts
from tests.unit.test_online import g

pytestmark = pytest.mark.usefixtures("prefect_backend")

# A candidate passes each trial with probability `quality`, decided by task and seed (the
# same draw for every candidate: common random numbers). A "lucky" candidate also passes
# every trial whose seed is below lucky_below.txt: it shines on the screen's seeds only.
LUCKY_TARGET = r"""
import json, random
from pathlib import Path

HERE = Path(__file__).parent


def run(task, candidate_dir, seed):
    d = Path(candidate_dir)
    with open(HERE / "calls.log", "a") as fh:
        fh.write(json.dumps({"task": task["id"], "seed": seed, "candidate": d.name}) + "\n")
    lucky = d / "lucky_below.txt"
    if lucky.exists() and seed < int(lucky.read_text()):
        return {"answer": task["target"]}
    quality = float((d / "quality.txt").read_text())
    ok = random.Random(f"{task['id']}-{seed}").random() < quality
    return {"answer": task["target"] if ok else "wrong"}


def score(task, output):
    return 1.0 if output["answer"] == task["target"] else 0.0
"""

ALPHA, W0 = 0.05, 0.025
SCREEN_SEEDS = {0, 1}
# Enough tasks that a real gain (+0.5 a task) can reach 1/alpha_2 ≈ 280: 1.5^24 ≫ 280.
N_TASKS = 24


def search_project(make_project, candidates=None, gate=None):
    tasks = [{"id": f"s{i:02d}", "input": {}, "target": "yes"} for i in range(N_TASKS)]
    root = make_project(
        tasks=tasks,
        candidates=candidates or {"base": 0.5, "lucky": 0.5, "better": 1.0},
        config={"trials": 2, "gate": gate or {}},
        target_code=LUCKY_TARGET,
    )
    if (root / "candidates" / "lucky").exists():
        (root / "candidates" / "lucky" / "lucky_below.txt").write_text("100")
    return root


def calls(root, candidate):
    lines = (root / "calls.log").read_text().splitlines()
    return [d["seed"] for d in map(json.loads, lines) if d["candidate"] == candidate]


def decisions(root):
    path = root / ".honesteval" / "decisions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def child_runs(flow_run_id):
    with get_client(sync_client=True) as c:
        return c.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])
            )
        )


def test_a_lucky_screen_is_not_confirmed_and_a_real_gain_is(make_project):
    root = search_project(make_project)
    gate(str(root), "base")

    state = gate(str(root), "lucky", return_state=True)
    lucky = state.result()
    assert lucky.screen_delta > 0 and lucky.stage == "confirm"  # the screen passed ...
    assert not lucky.accept and not lucky.promoted  # ... the fresh seeds did not
    assert reason_details(lucky.reason).startswith("NOT CONFIRMED on fresh seeds at alpha_1")
    assert first_sentence(lucky.reason).endswith("not confirmed on fresh seeds")
    assert lucky.level == pytest.approx(W0 * g(1), rel=1e-9)
    assert lucky.online.tests == 1 and lucky.online.promotions == []
    assert read_best(load_project(root)).name == "base"
    # The confirmation re-ran both sides in rounds, on seeds the screen never used: off its
    # lucky seeds "lucky" is "base" (the same draws), every delta 0, so after round 2 even an
    # optimistic mean (0 + 2·0) is not positive: a futility stop, a REJECT, of a budget of
    # 3 × 2 rounds.
    assert (lucky.confirm_rounds, lucky.confirm_budget, lucky.confirm_stop) == (2, 6, "futile")
    assert "REJECT (futility)" in lucky.reason and not lucky.indecisive
    # Each task its own seeds (the same on both sides): 24 tasks × 2 rounds.
    seeds = set(calls(root, "lucky")) - SCREEN_SEEDS
    tasks = [f"s{i:02d}" for i in range(N_TASKS)]
    base = lucky.confirm_base_seed
    assert seeds == {trial_seed(base, t, k, "per_task") for t in tasks for k in (0, 1)}
    assert len(seeds) == 2 * N_TASKS and seeds.isdisjoint(SCREEN_SEEDS)
    assert set(calls(root, "base")) == SCREEN_SEEDS | seeds
    # The Prefect run shows the stages apart: the screen in the gate run, the confirmation
    # in its own subflow run, whose trial table carries the fresh seeds.
    (child,) = child_runs(state.state_details.flow_run_id)
    assert child.name == f"confirm-lucky-seeds-{lucky.confirm_base_seed}"
    rows = artifacts(child.id)[f"rollouts-{root.name}-val-lucky"]["data"]
    assert {r["seed"] for r in rows} <= seeds and max(r["seed"] for r in rows) == max(seeds)
    table = artifacts(state.state_details.flow_run_id)[f"gate-decision-table-{root.name}"]["data"][
        0
    ]
    assert table["stage"] == "confirm" and table["alpha_j"] == pytest.approx(W0 * g(1))
    assert table["wealth_left"] == pytest.approx(W0 - W0 * g(1))

    better = gate(str(root), "better")
    assert better.accept and better.promoted and better.stage == "confirm"
    assert better.level == pytest.approx(W0 * g(2), rel=1e-9)  # j = 2, nothing promoted yet
    assert better.online.promotions == [2]
    assert better.wealth_left == pytest.approx(ALPHA - W0 * (g(1) + g(2)))
    # Winner's curse: the reference is the confirmation run, not the screen that selected it.
    # "better" passes every trial, "base" half: the capital is the mean over the bets 0.1, 0.2,
    # 0.4, 0.8 of (1 + λ)^k, k the trials base failed (a round of 24 tasks fails about 12,
    # enough for 1/alpha_2 in one or two rounds of 6)
    best = read_best(load_project(root))
    rounds = better.confirm_rounds
    assert rounds is not None and rounds <= 2 and better.confirm_stop == "promote"
    failed = round(24 * rounds * (1 - better.current_reward))
    capital = sum((1 + bet) ** failed for bet in (0.1, 0.2, 0.4, 0.8)) / 4
    assert better.e_value == pytest.approx(capital) and capital >= 1 / better.level
    assert best.name == "better" and best.result.n_trials == rounds
    assert best.result.base_seed == better.confirm_base_seed != lucky.confirm_base_seed
    assert better.candidate_reward == best.result.reward
    assert better.delta == pytest.approx(better.candidate_reward - better.current_reward)


def run_main(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code), out, err


@pytest.mark.quick
def test_cli_reports_the_adjusted_gain_and_status_says_what_is_guaranteed(make_project, capsys):
    # the MDE line of a screen that ran all its trials: the staged screen switched off (it
    # would pass "better" after its first round, whose MDE is "not measured")
    unstaged = {"screen_futility": None, "screen_efficacy": None}
    root = search_project(make_project, {"base": 0.5, "better": 1.0}, gate=unstaged)
    run_main(["gate", "--project", str(root), "--candidate", "base"], capsys)
    code, out, err = run_main(
        ["gate", "--project", str(root), "--candidate", "better", "--verbose"], capsys
    )
    assert code == 0 and out.startswith("ACCEPT: better vs current best base")
    # the reason's first sentence on a line of its own, at most 100 characters; the rules'
    # words on the next
    head = next(line for line in out.splitlines() if line.startswith("  reason    "))[12:]
    assert head.startswith("better beats base by +") and len(head) <= 100, head
    assert head.endswith(f" on {N_TASKS} tasks, confirmed on fresh seeds"), head
    assert "  details   CONFIRMED on fresh seeds at alpha_1" in out
    assert "screening 'better'" in err and "rounds of one trial a task" not in err  # unstaged
    # the evidence, round by round: "better" passes every trial, so every delta is 0 or +1 and
    # E is the mean over the bets 0.1, 0.2, 0.4, 0.8 of (1 + λ)^k, k = the trials base failed
    # = 24 tasks × rounds × Δ
    found = re.search(
        r"confirmation round (\d)/6: ACCEPT: evidence E = ([\d.]+) of .*\(paired Δ = \+([\d.]+)",
        err,
    )
    assert found is not None, err
    rounds, shown, delta = int(found[1]), float(found[2]), float(found[3])
    failed = round(N_TASKS * rounds * delta)
    e_value = sum((1 + bet) ** failed for bet in (0.1, 0.2, 0.4, 0.8)) / 4
    assert shown == pytest.approx(e_value, rel=5e-4) and rounds <= 2
    for needle in (
        "confirmation #1 on fresh seeds",
        "alpha_j = ",
        "(lord++, search alpha 0.05)",
        f"rounds    {rounds} of at most 6 (one fresh paired trial a task each), stopped: promote",
        "e-value ",
        "threshold 1/alpha_j = ",
        # the MDE is the two-stage gate's, at the level the confirmation was decided at
        f"promoted with 80% power by the screen and the confirmation at alpha_j = {W0 * g(1):.3g}",
        f"at alpha = {W0 * g(10):.3g}, nine confirmations on if none promotes",
        "simulated, averaged over the uncertainty of the variances this screen measured",
        "alpha-wealth left",
        "promoted",
    ):
        assert needle in out, needle
    wealth = ALPHA - W0 * g(1)  # one promotion earned α − w0 on top of w0; one level spent
    next_level = W0 * g(2) + (ALPHA - W0) * g(1)  # LORD++ after τ1 = 1
    code, out, _ = run_main(["status", "--project", str(root), "--json"], capsys)
    search = json.loads(out)["search"]
    assert search["confirmations"] == 1 and search["promotions"] == [1]
    assert search["wealth_left"] == pytest.approx(wealth)
    assert search["next_level"] == pytest.approx(next_level)
    code, out, _ = run_main(["status", "--project", str(root)], capsys)
    sentence = next(line for line in out.splitlines() if line.startswith("search guarantee"))
    assert sentence == (
        "search guarantee: LORD++ at alpha 0.05 over 1 confirmation(s), 1 promoted: the expected "
        "share of false promotions stays <= 0.05, and P(any false promotion) <= 0.025 while no "
        "candidate is better on these val tasks (fresh seeds, the tasks the screens saw; not new "
        f"tasks); alpha-wealth left {wealth:.4g} (next confirmation at alpha_j = "
        f"{next_level:.3g})."
    )


@pytest.mark.slow
def test_the_ledger_survives_into_another_process(make_project, cli_env):
    root = search_project(make_project, {"base": 0.3, "lucky": 0.3, "better": 0.7, "best2": 1})
    gate(str(root), "base")
    assert gate(str(root), "lucky").online.tests == 1
    done = run_cli("gate", "--project", str(root), "--candidate", "better", "--json", env=cli_env)
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    assert decision["level"] == pytest.approx(W0 * g(2), rel=1e-9)
    assert decision["online"]["tests"] == 2 and decision["online"]["promotions"] == [2]
    # A single-stage promotion spends nothing and says it is outside the guarantee.
    done = run_cli(
        "gate", "--project", str(root), "--candidate", "best2", "--no-confirm", env=cli_env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    status = run_cli("status", "--project", str(root), env=cli_env)
    assert "1 promotion(s) made with --no-confirm are outside it" in status.stdout
    last = decisions(root)[-1]
    assert last["stage"] == "single" and last["online"]["tests"] == 2


def test_the_drift_reference_after_a_confirmed_promotion_is_the_first_unselected_run(
    make_project,
):
    root = search_project(make_project, {"base": 0.5, "better": 1.0})
    gate(str(root), "base")
    assert gate(str(root), "better").promoted
    promoted = read_best(load_project(root)).result  # the confirmation run: selected
    first = reevaluate_best(str(root), base_seed=5000)
    assert first.status == "reference" and first.delta is None
    assert "later nights compare with this one" in first.message
    second = reevaluate_best(str(root), base_seed=6000)
    # compared with the first night's run, not with the confirmation that promoted it
    assert second.status in ("stable", "drifted") and second.stored_base_seed == 5000
    assert second.stored_base_seed != promoted.base_seed
