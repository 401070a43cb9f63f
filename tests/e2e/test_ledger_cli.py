"""Issue 24 §5 through the real CLI: every way the ledger was rolled back, forged or spent twice.

Each example of the issue is a subprocess run as a user runs it; the expected levels come from
the LORD++ formula (w0 = alpha/2, gamma_j = j^-1.6 / zeta(1.6)), computed here.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from honesteval.models import trial_seed
from tests.helpers import ProjectFactory, copy_project, popen_cli, run_cli, stored_trials
from tests.orchestration.test_flow_confirm import LUCKY_TARGET
from tests.unit.test_online import g

# Each test runs 5-12 CLI processes (each boots Python and Prefect): more than the suite's
# default per-test timeout on a loaded 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

W0 = 0.025
CONFIRM_SEED_BASE = 10**9
# Enough tasks that a real gain (+0.5 a task) reaches 1/alpha_j with the confirmation's
# e-value (1.5^24 >> 1/alpha_4 ≈ 870).
N_TASKS = 24
CONFIRM = 2  # confirmation trials a task in the killed-confirmation test

# The two-stage test project's target (lucky shines on the screen's seeds only), and with a
# file "hold" in the project, lucky's confirmation trials on task s07 wait for a file
# "release" (logged to held.log when they start waiting, before the target runs).
TARGET = (
    LUCKY_TARGET.replace("def run(", "def _run(").replace("import json,", "import time, json,")
    + r"""

def run(task, candidate_dir, seed):
    name = Path(candidate_dir).name
    if seed >= 10**9 and (HERE / "hold").exists() and name == "lucky" and task["id"] == "s07":
        with open(HERE / "held.log", "a") as fh:
            fh.write(json.dumps({"task": task["id"], "seed": seed}) + "\n")
        while not (HERE / "release").exists():
            time.sleep(0.05)
    return _run(task, candidate_dir, seed)
"""
)


def _new_project(make_project) -> Path:
    tasks = [{"id": f"s{i:02d}", "input": {}, "target": "yes"} for i in range(N_TASKS)]
    root = make_project(
        tasks=tasks,
        candidates={"base": 0.5, "lucky": 0.5, "better": 1.0},
        config={"trials": 2, "max_concurrency": 8, "timeout_s": 300.0},
        target_code=TARGET,
    )
    (root / "candidates" / "lucky" / "lucky_below.txt").write_text("100")
    return root


@pytest.fixture
def project(make_project):
    return _new_project(make_project)


@pytest.fixture(scope="module")
def searched_once(tmp_path_factory, session_cli_env) -> Path:
    """A project after :func:`searched`, made once for the module (two gates through the CLI,
    one of them a 288-trial confirmation): each test breaks its own copy."""
    root = _new_project(ProjectFactory(tmp_path_factory.mktemp("searched")))
    searched(root, session_cli_env)
    return root


@pytest.fixture
def searched_project(searched_once, tmp_path) -> Path:
    """A copy of :func:`searched_once`."""
    return copy_project(searched_once, tmp_path)


def gate(root, candidate, env, *extra):
    return run_cli(
        "gate", "--project", str(root), "--candidate", candidate, *extra, env=env, timeout=900
    )


def cli(root, env, *args):
    return run_cli(*args, "--project", str(root), env=env, timeout=900)


def ledger(root) -> list[dict]:
    path = root / ".honesteval" / "decisions.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()]


def assert_stopped(done, *needles):
    """exit 2, one line on stderr naming the break, no traceback."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the search ledger"), done.stderr
    for needle in needles:
        assert needle in lines[0], done.stderr


def assert_status_shows_break(root, env, needle):
    done = cli(root, env, "status")
    assert done.returncode == 2 and "LEDGER BROKEN" in done.stdout, done.stdout + done.stderr
    assert needle in done.stdout and "Traceback" not in done.stderr


def searched(root, env):
    """base is the baseline, lucky's screen passed and its confirmation did not."""
    assert gate(root, "base", env).returncode == 0
    done = gate(root, "lucky", env, "--json")
    assert done.returncode == 1, done.stderr
    decision = json.loads(done.stdout)
    assert decision["stage"] == "confirm" and decision["reservation"] == 1
    return decision


def test_a_last_line_made_non_json_stops_gate_and_status_shows_it(searched_project, cli_env):
    project = searched_project
    path = project / ".honesteval" / "decisions.jsonl"
    intact = path.read_bytes()
    lines = intact.split(b"\n")[:-1]
    for tail in (b"\n", b""):  # the last line garbled, with or without its newline
        path.write_bytes(b"\n".join([*lines[:-1], b"not json"]) + tail)
        done = gate(project, "better", cli_env)
        assert_stopped(done, "will not reset it")
        assert_status_shows_break(project, cli_env, "LEDGER BROKEN")
    # Nothing ran and nothing was written: the broken file is as the user left it.
    assert path.read_bytes() == b"\n".join([*lines[:-1], b"not json"])
    # A real crash's tail (a fragment after the last whole line) is no break: gate goes on.
    path.write_bytes(intact + b'{"kind": "decision", "accept": tr')
    done = gate(project, "better", cli_env, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["level"] == pytest.approx(W0 * g(2))  # j = 2: j = 1 kept
    assert ledger(project)[3]["torn_tail"] == '{"kind": "decision", "accept": tr'


@pytest.mark.parametrize("how", ["deleted", "emptied", "deleted with its head"])
def test_a_lost_ledger_with_a_best_stops_gate(searched_project, cli_env, how):
    project = searched_project
    state = project / ".honesteval"
    if how == "emptied":
        (state / "decisions.jsonl").write_text("")
    else:
        (state / "decisions.jsonl").unlink()
    if how == "deleted with its head":
        (state / "decisions.head.json").unlink()
        needle = "best.json names 'base' but the ledger records no promotion"
        spent = 1  # only the stored results tell: lucky's one confirmation run
    else:
        needle = "decisions.jsonl is missing or empty"
        spent = 3  # the head recorded 3 lines: each counts as a confirmation (an upper bound)
    assert_stopped(gate(project, "better", cli_env), needle)
    assert_status_shows_break(project, cli_env, needle)
    # The explicit repair: every confirmation the ledger may have held stays spent.
    done = cli(project, cli_env, "ledger", "repair", "--accept-break", "log lost in a move")
    assert done.returncode == 0, done.stderr
    assert f"the search goes on at confirmation #{spent + 1}" in done.stdout
    done = gate(project, "better", cli_env, "--json")
    assert done.returncode in (0, 1), done.stderr
    decision = json.loads(done.stdout)
    assert decision["reservation"] == spent + 1
    assert decision["level"] == pytest.approx(W0 * g(spent + 1))
    assert ledger(project)[0]["kind"] == "repair"


def test_a_hand_edited_alpha_stops_gate_until_an_explicit_recorded_repair(
    searched_project, cli_env
):
    project = searched_project
    path = project / ".honesteval" / "decisions.jsonl"
    text = path.read_text()
    assert text.count('"alpha": 0.05') == 3  # baseline, reservation, decision
    path.write_text(text.replace('"alpha": 0.05', '"alpha": 0.45'))
    assert_stopped(gate(project, "better", cli_env), "does not chain")
    assert_status_shows_break(project, cli_env, "does not chain")
    done = cli(project, cli_env, "ledger", "verify")
    assert done.returncode == 2 and "does not chain" in done.stderr
    done = cli(project, cli_env, "ledger", "repair")  # only an explicit acceptance repairs it
    assert done.returncode == 2 and "--accept-break" in done.stderr
    done = cli(project, cli_env, "ledger", "repair", "--accept-break", "my edit, undone in spirit")
    assert done.returncode == 0, done.stderr
    repair = ledger(project)[-1]
    assert repair["kind"] == "repair" and repair["reason"] == "my edit, undone in spirit"
    # the first line was edited: nothing before the break is trusted but the rule and alpha
    # come from the project (0.05), and the confirmation the lines name stays spent
    assert repair["online"]["alpha"] == 0.05 and repair["online"]["tests"] == 1
    done = gate(project, "better", cli_env, "--json")
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    assert decision["reservation"] == 2 and decision["level"] == pytest.approx(W0 * g(2))
    status = cli(project, cli_env, "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["ledger"]["repairs"] == 1


def test_a_crash_between_the_promotion_and_best_json_is_finished_by_the_next_gate(project, cli_env):
    assert gate(project, "base", cli_env).returncode == 0
    best_json = project / ".honesteval" / "best.json"
    before = best_json.read_bytes()
    done = gate(project, "better", cli_env, "--json")
    assert done.returncode == 0, done.stderr
    promoted = json.loads(done.stdout)
    best_json.write_bytes(before)  # exactly what a crash (or a full disk) between the writes leaves
    assert_status_shows_break(project, cli_env, "line 3 promoted 'better' but best.json names")
    # The log wins, without a manual repair: the next gate rebuilds best.json from the promoted
    # run's stored trials, says so in one line, records it, and gates against the rebuilt best.
    done = gate(project, "lucky", cli_env, "--json")
    assert done.returncode == 1, done.stderr
    rebuilt = "finished the promotion of better recorded at line 3"
    assert [x for x in done.stderr.splitlines() if x.startswith("warning: best.json")] == [
        f"warning: best.json was behind the search ledger: {rebuilt}"
    ], done.stderr
    d = json.loads(done.stdout)
    assert d["current"] == "better" and d["stage"] != "confirm"  # lucky's screen fails here
    best = json.loads(best_json.read_text())
    assert best["name"] == "better" and best["promoted_at"] == promoted["timestamp"]
    assert best["result"]["reward"] == promoted["candidate_reward"] == 1.0
    assert best["result"]["base_seed"] == promoted["confirm_base_seed"]
    # the confirmation's rounds (one trial a task each), stopped when decided, within 3 x 2
    assert best["result"]["n_trials"] == promoted["confirm_rounds"] <= 6
    assert [x.get("action") for x in ledger(project)][3:] == ["finish-promotion", None]
    assert cli(project, cli_env, "ledger", "verify").returncode == 0


def _popen_gate(root, candidate, env):
    args = ("gate", "--project", str(root), "--candidate", candidate, "--json")
    return popen_cli(*args, env=env, new_session=True)


def _wait_for(predicate, what, timeout=600.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _results(root):
    index = root / ".honesteval" / "results" / "index.jsonl"
    return index.read_text().splitlines() if index.exists() else []


def test_two_gates_of_one_candidate_at_once_share_one_confirmation(project, cli_env):
    assert gate(project, "base", cli_env).returncode == 0
    (project / "hold").touch()
    first = _popen_gate(project, "lucky", cli_env)
    _wait_for(lambda: (project / "held.log").exists(), "the first confirmation to start")
    screens_so_far = len(_results(project))
    second = _popen_gate(project, "lucky", cli_env)
    # The second gate has begun once its screen's results are stored (the screen's trials
    # are reused from the first: no call), i.e. it is past the point where it notes the ledger.
    _wait_for(lambda: len(_results(project)) >= screens_so_far + 2, "the second screen")
    (project / "release").touch()
    outs = [p.communicate(timeout=900) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [1, 1], outs
    a, b = (json.loads(out) for out, _ in outs)
    assert a == b  # one decision, shown to both
    kinds = [(x["kind"], x.get("j") or x.get("reservation")) for x in ledger(project)]
    assert kinds == [("decision", None), ("reservation", 1), ("decision", 1)]
    assert a["level"] == pytest.approx(W0 * g(1)) and a["online"]["tests"] == 1
    calls = Counter(
        (c["candidate"], c["task"], c["seed"])
        for c in map(json.loads, (project / "calls.log").read_text().splitlines())
        if c["seed"] >= CONFIRM_SEED_BASE
    )
    # one confirmation ran: off its lucky seeds lucky is base, so every delta is 0 and round 2
    # stops it for futility (of a budget of 6 rounds)
    assert a["confirm_rounds"] == 2 and a["confirm_stop"] == "futile"
    assert len(calls) == 2 * N_TASKS * 2 and set(calls.values()) == {1}


def test_a_killed_confirmation_is_spent_and_an_edited_candidate_gets_no_free_look(project, cli_env):
    # 2 confirmation rounds: 24 trials a side a round, one task run per trial (above 64 they
    # are batched, and a batch holding a waiting trial stores none of its others before the kill)
    cfg = yaml.safe_load((project / "honesteval.yaml").read_text())
    cfg["gate"] = {"confirm_trials": CONFIRM}
    (project / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
    assert gate(project, "base", cli_env).returncode == 0
    (project / "hold").touch()
    killed = _popen_gate(project, "lucky", cli_env)
    _wait_for(lambda: (project / "held.log").exists(), "the confirmation to start")

    def confirm_trials_stored():
        return [t for t in stored_trials(project, "val") if t["seed"] >= CONFIRM_SEED_BASE]

    # Every trial of the first round but lucky's on s07 finishes (the round waits for it);
    # then the process group is killed.
    def held_started():
        return len((project / "held.log").read_text().splitlines())

    _wait_for(
        lambda: len(confirm_trials_stored()) == 2 * N_TASKS - 1 and held_started() == 1,
        "every other trial of round 1 stored and lucky's on s07 started",
    )
    os.killpg(killed.pid, signal.SIGKILL)
    killed.communicate(timeout=60)
    (project / "hold").unlink()
    (reservation,) = [x for x in ledger(project) if x["kind"] == "reservation"]
    assert reservation["j"] == 1 and reservation["level"] == pytest.approx(W0 * g(1))
    status = cli(project, cli_env, "status")
    assert status.returncode == 0, status.stderr
    assert "open confirmation #1: lucky vs base" in status.stdout
    # One byte more in the candidate: another pair, so the next j on other seeds, and j = 1
    # stays spent (no free look at it).
    quality = project / "candidates" / "lucky" / "quality.txt"
    quality.write_text("0.50")
    done = gate(project, "lucky", cli_env, "--json")
    assert done.returncode == 1, done.stderr
    edited = json.loads(done.stdout)
    assert edited["reservation"] == 2 and edited["level"] == pytest.approx(W0 * g(2))
    assert edited["confirm_base_seed"] != reservation["base_seed"]
    # The candidate as it was: the same gate finishes reservation 1 on its own seeds, at its
    # level, reusing every trial stored before the kill.
    quality.write_text("0.5")
    done = gate(project, "lucky", cli_env, "--json")
    assert done.returncode == 1, done.stderr
    finished = json.loads(done.stdout)
    assert finished["reservation"] == 1 and finished["level"] == pytest.approx(W0 * g(1))
    assert finished["confirm_base_seed"] == reservation["base_seed"]
    assert finished["online"]["tests"] == 2
    base = reservation["base_seed"]
    tasks = [f"s{i:02d}" for i in range(N_TASKS)]
    seeds = {(t, trial_seed(base, t, k, "per_task")) for t in tasks for k in range(CONFIRM)}
    calls = Counter(
        (c["candidate"], c["task"], c["seed"])
        for c in map(json.loads, (project / "calls.log").read_text().splitlines())
        if (c["task"], c["seed"]) in seeds
    )
    # Every trial of the confirmation's rounds ran once: those stored before the kill were
    # reused, and lucky's on s07, held when the kill came, ran on the finishing gate, which
    # went on to round 2 (its budget: every delta 0, a REJECT).
    assert finished["confirm_rounds"] == CONFIRM and finished["confirm_stop"] == "exhausted"
    assert set(calls.values()) == {1} and len(calls) == 2 * N_TASKS * CONFIRM
    held = {(h["task"], h["seed"]) for h in map(json.loads, (project / "held.log").open())}
    assert held == {("s07", trial_seed(base, "s07", 0, "per_task"))}
    assert cli(project, cli_env, "ledger", "verify").returncode == 0


def test_a_budget_spent_in_between_is_indecisive_and_a_larger_one_continues_it(project, cli_env):
    """ "better" passes every trial "base" passes and more (common random numbers): a real
    gain of about 0.1 a task, short of 1/alpha_1 in 2 rounds of 24 tasks (about 5 deltas of
    +1, the mixture's capital about 7; it needs 10)."""
    (project / "candidates" / "better" / "quality.txt").write_text("0.6")
    assert gate(project, "base", cli_env).returncode == 0
    done = gate(project, "better", cli_env, "--confirm-trials", "2")
    assert done.returncode == 3, done.stdout + done.stderr  # INDECISIVE, not REJECT
    # the default screen: undecided, the evidence short of what it needs, and the command
    # that continues the same confirmation with more rounds
    lines = done.stdout.splitlines()
    assert len(lines) <= 6 and lines[0].startswith("INDECISIVE: better vs base is undecided")
    assert "not confirmed on fresh seeds in 2 of at most 2 rounds: evidence " in lines[1]
    settle = f"base stays the best; to settle it: honesteval gate --project {project} "
    assert lines[-1].startswith(f"  next      {settle}--candidate better --confirm-trials ")
    assert "confirmation round 1/2: running: evidence E = " in done.stderr
    (first,) = [x for x in ledger(project) if x["kind"] == "reservation"]
    done = gate(project, "better", cli_env, "--confirm-trials", "30", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    d = json.loads(done.stdout)
    assert d["promoted"] and d["reservation"] == 1 and d["confirm_budget"] == 30
    assert d["level"] == pytest.approx(W0 * g(1)) and d["online"]["tests"] == 1
    kinds = [x["kind"] for x in ledger(project)]
    assert kinds == ["decision", "reservation", "decision", "continuation", "decision"]
    # the rounds already run were reused: each confirmation trial ran once
    calls = Counter(
        (c["candidate"], c["task"], c["seed"])
        for c in map(json.loads, (project / "calls.log").read_text().splitlines())
        if c["seed"] >= CONFIRM_SEED_BASE
    )
    assert set(calls.values()) == {1}
    assert len(calls) == 2 * N_TASKS * d["confirm_rounds"]
    # on the reserved base seed, each task its own seeds
    tasks = {t for _, t, _ in calls}
    wanted = {
        (t, trial_seed(first["base_seed"], t, k, "per_task"))
        for t in tasks
        for k in range(d["confirm_rounds"])
    }
    assert len(tasks) == N_TASKS and {(t, s) for _, t, s in calls} == wanted
    assert cli(project, cli_env, "ledger", "verify").returncode == 0
