"""The gate, reevaluate-best and finalize flows on a real (temporary) Prefect server."""

from __future__ import annotations

import json
import re

import pytest

from honesteval.cli import main
from honesteval.errors import TestSealedError
from honesteval.gating.ledger import read_best
from honesteval.models import OnlineState
from honesteval.orchestration.flows import finalize, gate, reevaluate_best
from honesteval.project.loader import load_project
from honesteval.stats import (
    GateDesign,
    ScreenStopping,
    advance,
    new_online_state,
    next_level,
    promotion_power,
    reason_details,
)
from tests.helpers import call_counts, popen_cli, run_cli
from tests.prefect_reads import artifacts, events
from tests.unit.test_online import g

pytestmark = pytest.mark.usefixtures("prefect_backend")


def gate_project(make_project, n: int = 8, candidates=None, **kw):
    """n val tasks whose trials pass with probability `quality` (by seed), plus a test split."""
    tasks = [
        {"id": f"g{i:02d}", "input": {"behaviour": "seeded"}, "target": "yes"} for i in range(n + 2)
    ]
    ids = [t["id"] for t in tasks]
    config = {"splits": {"train": [], "val": ids[:n], "test": ids[n:]}, "trials": 4}
    config.update(kw.pop("config", {}))
    return make_project(
        tasks=tasks,
        candidates=candidates or {"base": 0.5, "better": 1.0, "worse": 0.0},
        config=config,
        **kw,
    )


def run_main(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code), out, err


def ledger_lines(root):
    path = root / ".honesteval" / "decisions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def decisions(root):
    """The decision lines of the ledger (not its confirmation reservations)."""
    return [d for d in ledger_lines(root) if d["kind"] == "decision"]


@pytest.mark.quick
def test_baseline_then_accept_and_reject(make_project, capsys):
    root = gate_project(make_project)
    code, out, _ = run_main(["gate", "--project", str(root), "--candidate", "base"], capsys)
    assert code == 0 and out.startswith("BASELINE: base becomes the baseline at reward")
    assert out.splitlines()[-1] == "  best      base is now the best"
    assert read_best(load_project(root)).name == "base"
    calls_after_baseline = call_counts(root)

    # --no-confirm: the single-stage gate as it always was, and it says what that costs.
    no_confirm = ["--no-confirm"]
    code, out, _ = run_main(
        ["gate", "--project", str(root), "--candidate", "better", *no_confirm, "-v"], capsys
    )
    assert code == 0 and out.startswith("ACCEPT: better vs current best base")
    for needle in ("Δ ", "SE ", "bar ", "n paired  8", "MDE ", "screened  1", "promoted"):
        assert needle in out
    assert "no search-level guarantee" in out
    best = read_best(load_project(root))
    assert best.name == "better" and best.result.candidate == "better"
    # The current best's trials were reused, not paid for again; both sides used seeds 0..3.
    calls = call_counts(root)
    assert sum(calls.values()) - sum(calls_after_baseline.values()) == 8 * 4
    assert {seed for _, seed in calls} == {0, 1, 2, 3}

    code, out, _ = run_main(
        ["gate", "--project", str(root), "--candidate", "worse", *no_confirm], capsys
    )
    # the default screen: the verdict, the evidence, coverage, what changed
    lines = out.splitlines()
    assert code == 1 and lines[0].startswith("REJECT: worse does not beat better: Δ -")
    assert lines[1].startswith("  evidence  screen not passed: Δ -") and "one stage" in lines[1]
    assert lines[2] == "  coverage  better 8/8 tasks, worse 8/8 tasks; every trial ok"
    assert lines[3:] == ["  best      better stays the best"]
    assert read_best(load_project(root)).name == "better"
    ds = decisions(root)
    assert [d["candidate"] for d in ds] == ["base", "better", "worse"]
    assert [d["promoted"] for d in ds] == [True, True, False]
    assert ds[2]["screened"] == 1 and ds[2]["current"] == "better"
    assert [d["stage"] for d in ds] == [None, "single", "single"]
    assert best.result.n_trials == 4 and best.result.base_seed == 0  # the screen's own run


def test_decision_artifacts(make_project):
    root = gate_project(make_project, n=24)  # 8 tasks cannot reach the confirmation's 1/alpha_1
    gate(str(root), "base")
    state = gate(str(root), "better", return_state=True)
    arts = artifacts(state.state_details.flow_run_id)
    assert "# Gate: ACCEPT" in arts[f"gate-decision-{root.name}"]["data"]
    row = arts[f"gate-decision-table-{root.name}"]["data"][0]
    assert row["verdict"] == "ACCEPT" and row["n_paired"] == 24 and row["promoted"] is True
    assert f"summary-{root.name}-val-better" in arts and f"summary-{root.name}-val-base" in arts


def test_screened_count_is_exact(make_project):
    root = gate_project(
        make_project,
        n=24,  # "better" must pass its confirmation (8 tasks cannot reach 1/alpha_1)
        candidates={"base": 0.5, "w1": 0.0, "w2": 0.1, "w3": 0.05, "better": 1.0, "w4": 0.0},
    )
    gate(str(root), "base")
    for expected, cand in enumerate(["w1", "w2", "w3", "better"], start=1):
        assert gate(str(root), cand).screened == expected
    after = gate(str(root), "w4")  # a new current best: the count starts again
    assert after.current == "better" and after.screened == 1


def test_infra_outage_on_half_the_tasks_is_indecisive(make_project):
    root = gate_project(make_project, name="outage-project")
    gate(str(root), "base")
    (root / "candidates" / "better" / "outage.txt").write_text("g00 g01 g02 g03 g04")
    state = gate(str(root), "better", return_state=True)
    decision = state.result(raise_on_failure=False)
    assert state.is_failed() and state.name == "Indecisive"
    assert decision.indecisive and not decision.accept
    assert reason_details(decision.reason).startswith("INDECISIVE:")
    assert "candidate 0.38" in decision.reason
    assert read_best(load_project(root)).name == "base"  # untouched
    assert decisions(root)[-1]["indecisive"] is True
    found = events("honesteval.coverage.low", "honesteval.project.outage-project")
    assert any(
        r["candidate"] == "better" and r["coverage"] == pytest.approx(3 / 8)
        for e in found
        for r in e["payload"]["results"]
    )
    # the verdict as an event about the candidate, for an automation to page on
    [verdict] = events("honesteval.gate.indecisive", "honesteval.candidate.outage-project.better")
    assert verdict["payload"]["candidate_coverage"] == pytest.approx(3 / 8)


@pytest.mark.quick
def test_reevaluate_best_stable_then_drifted(make_project):
    root = gate_project(make_project, candidates={"base": 1.0}, name="drift-project")
    gate(str(root), "base")
    report = reevaluate_best(str(root))
    assert report.status == "stable" and report.new_base_seed != report.stored_base_seed
    (root / "drift.txt").write_text("every answer is wrong now")
    state = reevaluate_best(str(root), return_state=True)
    report = state.result()
    assert report.status == "drifted" and report.delta == pytest.approx(-1.0)
    assert "current best has drifted" in report.message
    md = artifacts(state.state_details.flow_run_id)["drift-drift-project-base"]["data"]
    assert "drifted" in md and "paired Δ = -1.0000" in md
    assert state.is_completed() and state.name == "Drifted"  # a named state a filter finds
    [drift] = events("honesteval.drift.detected", "honesteval.candidate.drift-project.base")
    assert drift["payload"]["delta"] == pytest.approx(-1.0)
    # each night's check said it ran, whatever it found ("nightly did not run" watches this)
    ran = events("honesteval.best.reevaluated", "honesteval.project.drift-project", min_count=2)
    assert sorted(e["payload"]["status"] for e in ran) == ["drifted", "stable"]


def test_finalize_once_and_a_crash_does_not_burn_the_seal(make_project, monkeypatch):
    root = gate_project(make_project)
    gate(str(root), "base")

    import honesteval.orchestration.flows._gate as gate_module

    def crash(*a, **k):
        raise RuntimeError("machine lost before scoring")

    monkeypatch.setattr(gate_module, "run_plan", crash)
    with pytest.raises(RuntimeError):
        finalize(str(root))
    assert not (root / ".honesteval" / "seal.json").exists()
    monkeypatch.undo()

    result = finalize(str(root))
    assert result.split == "test" and result.n_tasks == 2 and result.candidate == "base"
    seal = json.loads((root / ".honesteval" / "seal.json").read_text())
    assert seal["candidate"] == "base"
    with pytest.raises(TestSealedError):
        finalize(str(root))


@pytest.mark.quick
def test_cli_finalize_twice_is_refused(make_project, capsys):
    root = gate_project(make_project)
    run_main(["gate", "--project", str(root), "--candidate", "base"], capsys)
    code, out, _ = run_main(["finalize", "--project", str(root)], capsys)
    assert code == 0 and "test split sealed" in out
    code, _, err = run_main(["finalize", "--project", str(root)], capsys)
    assert code == 2 and "already scored" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args,message",
    [
        (["--candidate", "ghost"], "unknown candidate 'ghost'"),
        (["--candidate", "base", "--mode", "lucky"], "gate mode"),
        (["--candidate", "base", "--k-se", "0"], "gate k_se"),
        (["--candidate", "base", "--k-se", "-1"], "gate k_se"),
        (["--candidate", "base", "--alpha", "0.5"], "gate alpha"),
        (["--candidate", "base", "--alpha", "0"], "gate alpha"),
        (["--candidate", "base", "--trials", "0"], "--trials must be >= 1, got 0"),
        ([], "--candidate is required"),
    ],
)
def test_gate_bad_input(make_project, capsys, args, message):
    root = gate_project(make_project)
    code, out, err = run_main(["gate", "--project", str(root), *args], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in out + err
    assert not (root / ".honesteval" / "decisions.jsonl").exists()
    assert not (root / ".honesteval" / "best.json").exists()


def test_gate_with_no_val_tasks(make_project, capsys):
    root = gate_project(make_project, config={"splits": {"train": [], "val": [], "test": ["g00"]}})
    code, _, err = run_main(["gate", "--project", str(root), "--candidate", "base"], capsys)
    assert code == 2 and "split 'val' has no tasks" in err


def test_status_and_plan(make_project, capsys):
    root = gate_project(make_project)
    run_main(["gate", "--project", str(root), "--candidate", "base"], capsys)
    run_main(["gate", "--project", str(root), "--candidate", "worse"], capsys)
    code, out, _ = run_main(["status", "--project", str(root)], capsys)
    assert code == 0
    assert re.search(r"current best: base \(fingerprint [0-9a-f]{12}", out)
    assert "BASELINE" in out and "REJECT" in out and "coverage history:" in out
    assert "test split: not sealed" in out
    code, out, _ = run_main(["plan", "--project", str(root), "--effect", "0.05", "--json"], capsys)
    report = json.loads(out)
    assert report["val_tasks"] == 8 and report["tasks_needed"] >= 2
    # two stages: the plan is for the screen and the confirmation at the next alpha_j (j = 1:
    # nothing confirmed yet) with 3 × the screen's trials, and for nine confirmations on
    assert report["two_stages"] and report["level"] == pytest.approx(0.025 * g(1))
    assert report["level_later"] == pytest.approx(0.025 * g(10))
    assert report["confirm_trials"] == 3 * report["trials"]

    # the tasks needed are where the simulated promotion power first reaches 80 %, for the
    # gate as it runs by default: its screen staged (futility 0.05, efficacy 0.9), its
    # confirmation in rounds
    def design(n):
        return GateDesign(
            report["omega2_simulated"],
            report["sigma2_simulated"],
            n,
            screen_trials=float(report["trials"]),
            confirm_trials=float(report["confirm_trials"]),
            screen_bar=1.0,
            level=report["level"],
            omega2_se=report["omega2_se"],
            screen_stopping=ScreenStopping(futility=0.05, efficacy=0.9),
            rounds=True,
        )

    n = report["tasks_needed"]
    assert promotion_power(0.05, design(n)) >= 0.8 > promotion_power(0.05, design(n - 1))
    # 8 tasks × 4 screen trials: a +0.05 gain rarely passes the screen, whatever the rounds
    assert report["mde_current"] is None or report["mde_current"] > 0.05
    assert report["trials_needed"] is None
    code, out, _ = run_main(["plan", "--project", str(root), "--effect", "0.05"], capsys)
    assert "the confirmation in rounds at alpha_j = 0.0109 (at most 12 rounds" in out
    assert "power 80% by simulation, averaged over the measured ω²" in out
    assert "nine confirmations on if none promotes" in out
    code, _, err = run_main(["plan", "--project", str(root), "--effect", "0"], capsys)
    assert code == 2 and "--effect must be > 0" in err


@pytest.mark.slow
def test_concurrent_gate_runs_never_corrupt_state(make_project, cli_env):
    tasks = [
        # 24 tasks: the confirmation's e-value can reach 1/alpha_1 (6 tasks never could)
        {"id": f"c{i:02d}", "input": {"behaviour": "seeded", "sleep": 0.1}, "target": "yes"}
        for i in range(24)
    ]
    root = make_project(
        tasks=tasks,
        candidates={"base": 0.3, "a": 1.0, "b": 1.0},
        config={"trials": 3, "max_concurrency": 2},
    )
    first = run_cli("gate", "--project", str(root), "--candidate", "base", env=cli_env)
    assert first.returncode == 0, first.stderr
    procs = [
        popen_cli("gate", "--project", str(root), "--candidate", c, "--json", env=cli_env)
        for c in ("a", "b")
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode in (0, 1) for p in procs), outs
    lines = ledger_lines(root)  # every line parses: no torn or interleaved writes
    ds = [d for d in lines if d["kind"] == "decision"]
    assert len(ds) == 3 and {d["candidate"] for d in ds[1:]} == {"a", "b"}
    # Compare-and-swap: replaying the log, every promotion was decided against the best of
    # its moment, so no accept made against a stale best ever replaced a newer one.
    best_name = None
    for d in ds:
        if d["promoted"]:
            assert d["current"] == best_name, d
            best_name = d["candidate"]
    # The ledger: whichever process wrote it, each reservation's level follows from the state
    # before it, a promotion credits its own j, and a stale confirmation's level stays spent
    # (the loser reserved before the winner promoted) or was never reserved (after).
    ledger = new_online_state()
    for d in lines:
        if d["kind"] == "reservation":
            assert d["j"] == ledger.tests + 1
            assert d["level"] == pytest.approx(next_level(ledger))
            ledger = advance(ledger, d["level"], False)
        elif d.get("reservation") is not None and d["promoted"]:
            ledger = ledger.model_copy(
                update={"promotions": [*ledger.promotions, d["reservation"]]}
            )
        assert OnlineState.model_validate(d["online"]) == ledger
    promoted = [d["reservation"] for d in ds if d["promoted"] and d.get("reservation")]
    assert ledger.tests in (1, 2) and ledger.promotions == promoted and len(promoted) <= 1
    best = json.loads((root / ".honesteval" / "best.json").read_text())
    assert best["name"] == best_name
    assert best["fingerprint"] == next(
        d["candidate_fingerprint"] for d in reversed(ds) if d["promoted"]
    )


def test_a_futile_screen_stops_after_its_first_round_in_the_gate_flow(make_project, capsys):
    """Issue 28 §4 through the real Prefect flow and the CLI: with gate.screen_futility on,
    a candidate that always fails stops after one trial a task (4 rounds planned)."""
    root = gate_project(make_project, config={"gate": {"screen_futility": 0.1}})
    assert run_main(["gate", "--project", str(root), "--candidate", "base"], capsys)[0] == 0
    before = call_counts(root)
    code, out, err = run_main(
        ["gate", "--project", str(root), "--candidate", "worse", "--verbose"], capsys
    )
    assert "in 4 rounds of one trial a task, stopped early when it cannot pass" in err
    assert code == 1 and out.startswith("REJECT: worse vs current best base")
    assert "stopped early for futility after round 1 of 4 (8 of 32 candidate trials)" in out
    paid = call_counts(root) - before
    assert sum(paid.values()) == 8 and {seed for _, seed in paid} == {0}  # the first seed only
    last = decisions(root)[-1]
    assert (last["screen_stop"], last["screen_round"], last["screen_rounds"]) == (
        "futility",
        1,
        4,
    )
    assert (last["screen_trials"], last["screen_trials_planned"]) == (8, 32)
    # the CLI's --json carries the same record
    code, out, _ = run_main(
        ["gate", "--project", str(root), "--candidate", "worse", "--json"], capsys
    )
    again = json.loads(out)
    assert again["screen_stop"] == "futility" and again["screen_trials"] == 8
    assert sum((call_counts(root) - before).values()) == 8  # the re-run paid nothing


def test_honesteval_gate_loads_its_project_once(make_project, capsys, monkeypatch):
    """The notice, the screen, the decision and the confirmation's subflow all run the one
    plan `honesteval gate` made: honesteval.yaml is read once a command (before: three times
    for the first gate, measured with this test: the command, the adapter's cache, the flow;
    and the confirmation's subflow loaded it again)."""
    from honesteval.project import loader

    root = gate_project(make_project, n=24)  # 24 tasks: "better" reaches its confirmation
    reads: list[object] = []
    parse = loader.parse_project_file

    def counted(file):
        reads.append(file)
        return parse(file)

    monkeypatch.setattr(loader, "parse_project_file", counted)
    for candidate, verdict in (("base", "BASELINE"), ("better", "ACCEPT")):
        reads.clear()
        args = ["gate", "--project", str(root), "--candidate", candidate]
        code, out, err = run_main(args, capsys)
        assert code == 0 and out.startswith(verdict), out + err
        assert reads == [root / "honesteval.yaml"], candidate
    kinds = [line["kind"] for line in ledger_lines(root)]
    assert kinds.count("decision") == 2 and len(kinds) > 2  # the confirmation was reserved
