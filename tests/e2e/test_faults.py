"""The standing fault campaign: corrupt, truncated and read-only state, disk full, SIGKILL.

Each fault ends in one line on stderr and exit code 2 (or an exact resume), never a traceback,
never a silent reset of the state, never a record lost.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from honesteval.cli import main
from honesteval.gating.ledger import record_decision
from honesteval.models import GateConfig
from honesteval.store.state_dir import Store
from tests.gate_helpers import result
from tests.helpers import call_counts, run_plain, stored_trials

BEST = {
    "name": "base",
    "fingerprint": "f" * 64,
    "promoted_at": "2026-01-01T00:00:00.000000Z",
    "reason": "BASELINE",
}
GARBAGE = {
    "empty object": "{}",
    "list": "[]",
    "garbage": "\x00\x01 not json at all",
    "truncated": '{"name": "base", "fingerpr',
    "not utf-8": b"\xff\xfe{}",
    "empty file": "",
}


def run_main(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code), out, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], err


def write_state(root: Path, name: str, content: str | bytes) -> bytes:
    path = root / ".honesteval" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("content", list(GARBAGE.values()), ids=list(GARBAGE))
@pytest.mark.parametrize(
    "name,args",
    [
        ("best.json", ["gate", "--candidate", "base"]),
        ("best.json", ["status"]),
        ("seal.json", ["finalize", "--candidate", "base"]),
        ("seal.json", ["status"]),
        ("splits.json", ["evaluate", "--candidate", "base"]),
        ("splits.json", ["check"]),
    ],
)
def test_corrupt_state_file_stops_with_one_line_and_is_kept(
    make_project, capsys, name, args, content
):
    root = make_project(["pass", "fail"])
    before = write_state(root, name, content)
    code, _, err = run_main([*args, "--project", str(root)], capsys)
    assert_one_line_error(code, err, name, "will not reset it")
    assert (root / ".honesteval" / name).read_bytes() == before  # never silently reset
    assert not list((root / ".honesteval").glob("trials/**/*.json"))  # nothing was run


def test_wrong_shape_splits_with_a_task_in_two_splits(make_project, capsys):
    root = make_project(["pass", "fail"])
    write_state(root, "splits.json", json.dumps({"train": ["t00"], "val": ["t00"], "test": []}))
    code, _, err = run_main(["evaluate", "--project", str(root), "--candidate", "base"], capsys)
    assert_one_line_error(code, err, "splits.json", "in another split")


def test_an_empty_split_from_a_failed_first_run_is_not_frozen(make_project, capsys):
    root = make_project(["pass"] * 4, config={"splits": {"train": 0.5, "val": 0.5, "test": 0.0}})
    tasks = (root / "tasks.jsonl").read_text()
    (root / "tasks.jsonl").write_text("")  # the first run sees no tasks yet
    code, _, err = run_main(["evaluate", "--project", str(root), "--candidate", "base"], capsys)
    assert_one_line_error(code, err, "has no tasks")
    assert not (root / ".honesteval" / "splits.json").exists()
    (root / "tasks.jsonl").write_text(tasks)
    records, res = run_plain(root)
    assert res.n_tasks == 2 and len(records) == 2 * 3  # half of 4 tasks in val, 3 trials each
    assert len(json.loads((root / ".honesteval" / "splits.json").read_text())["val"]) == 2


def test_torn_last_decision_line_is_repaired_on_append(tmp_path):
    store = Store(tmp_path / ".honesteval")
    cur, cand = result([0.5, 0.6], name="cur"), result([0.9, 1.0], name="cand")
    from honesteval.stats import decide

    decision = decide(cur, cand, GateConfig())
    store.append_decision(decision)
    with (store.root / "decisions.jsonl").open("a") as fh:
        fh.write('{"accept": true, "reason": "torn mid-wri')  # a crash mid-append
    store.append_decision(decision.model_copy(update={"reason": "after the crash"}))
    decisions = store.read_decisions()
    assert [d.reason for d in decisions] == [decision.reason, "after the crash"]


def test_the_decision_is_logged_before_best_json_changes(make_project, monkeypatch):
    from honesteval.project.loader import load_project
    from honesteval.stats import baseline_decision

    project = load_project(make_project(["pass"]))
    first = result([1.0, 1.0], name="base")

    def crash(self, best):
        raise OSError(28, "No space left on device")  # the crash between the two writes

    monkeypatch.setattr(Store, "write_best", crash)
    with pytest.raises(OSError):
        record_decision(project, baseline_decision(first, GateConfig()), first, None)
    store = Store(project.state_dir)
    logged = store.read_decisions()
    assert len(logged) == 1 and logged[0].promoted and logged[0].candidate == "base"
    assert store.read_best() is None  # the old best (none) stands, and the log says why


@pytest.mark.parametrize("bad", [5.0, -0.5, math.nan, math.inf, None])
def test_invalid_stored_ok_trials_are_rerun_not_reused(make_project, bad):
    root = make_project(["pass", "fail"], config={"trials": 2})
    records, first = run_plain(root)
    victim = next(r for r in records if r.task_id == "t00" and r.trial == 1)
    log = Store.for_project(root).trial_log("val", "base", victim.fingerprint)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line]
    for data in lines:
        if (data["task_id"], data["seed"]) == (victim.task_id, victim.seed):
            data["reward"] = bad
    # json writes NaN/Infinity, as a careless tool editing the log would
    log.write_text("".join(json.dumps(data) + "\n" for data in lines))
    records, second = run_plain(root)
    assert [(r.task_id, r.trial) for r in records] == [("t00", 1)]  # only the bad one reran
    assert call_counts(root)[("t00", victim.seed)] == 2
    assert second.reward == first.reward == 0.5


def _modes(folder: Path) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode)
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_state_files_are_private_whatever_the_umask(make_project):
    root = make_project(["pass", "fail"])
    old = os.umask(0)
    try:
        run_plain(root)
        from honesteval.project.loader import load_project
        from honesteval.stats import baseline_decision

        first = result([1.0, 1.0], name="base")
        record_decision(load_project(root), baseline_decision(first, GateConfig()), first, None)
    finally:
        os.umask(old)
    modes = _modes(root / ".honesteval")
    assert {"best.json", "decisions.jsonl", "splits.json", ".lock"} <= set(modes)
    assert any(name.startswith("trials/") for name in modes)
    assert {name: mode for name, mode in modes.items() if mode & 0o077} == {}


# -- read-only folder and full disk: real mounts when the machine allows ------------------------


def _mount(*args: str) -> bool:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    return proc.returncode == 0


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Make ``folder`` read-only for this process: chmod, or (as root, who ignores modes) a
    read-only bind mount; skipped with a reason when neither can hold."""
    if os.geteuid() != 0:
        folder.chmod(0o500)
        try:
            yield
        finally:
            folder.chmod(0o700)
        return
    if not _mount("--bind", str(folder), str(folder)):
        pytest.skip("running as root and a bind mount is not allowed here")
    if not _mount("-o", "remount,bind,ro", str(folder)):
        subprocess.run(["umount", str(folder)], check=True)
        pytest.skip("running as root and a read-only remount is not allowed here")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_read_only_state_folder_is_one_line_and_loses_nothing(make_project, capsys):
    root = make_project(["pass", "fail"])
    run_plain(root)
    state = root / ".honesteval"
    before = {p: p.read_bytes() for p in state.rglob("*") if p.is_file()}
    with read_only(state):
        args = ["evaluate", "--project", str(root), "--candidate", "base", "--fresh"]
        code, _, err = run_main(args, capsys)
    assert_one_line_error(code, err, str(state), "cannot write the state folder")
    assert {p: p.read_bytes() for p in state.rglob("*") if p.is_file()} == before


# -- faults of the target and the scorer -------------------------------------------------------

ODD_OUTPUTS = r"""
import numpy as np

def run(task, candidate_dir, seed):
    kind = task["input"]["kind"]
    print("chatter from the target")  # must never reach --json stdout
    if kind == "array":
        return np.arange(3)
    if kind == "object":
        return object()
    if kind == "huge":
        return "x" * 2_000_000
    return {"answer": kind}

def score(task, output):
    return np.float32(0.5) if task["input"]["kind"] != "huge" else np.float64(1.0)
"""


def odd_project(make_project, config=None):
    kinds = ["array", "object", "huge", "plain"]
    tasks = [{"id": k, "input": {"kind": k}} for k in kinds]
    cfg = {"trials": 2, "timeout_s": 60.0, **(config or {})}  # not a test of timeouts
    return make_project(tasks=tasks, target_code=ODD_OUTPUTS, config=cfg)


def test_odd_outputs_and_numpy_rewards_mark_only_their_own_trial(make_project):
    records, res = run_plain(odd_project(make_project))
    by_task = {r.task_id: r for r in records}
    assert {r.status for r in records} == {"ok"}
    assert [r.reward for r in records if r.task_id != "huge"] == [0.5] * 6
    assert by_task["array"].rollout == [0, 1, 2] and by_task["array"].notes == []
    assert by_task["object"].rollout.startswith("<object object") and by_task["object"].notes
    huge = by_task["huge"]
    assert len(huge.rollout) == 1_000_000 and "cut to the first 1000000" in huge.notes[0]
    assert res.reward == pytest.approx((0.5 * 3 + 1.0) / 4)


def test_a_trial_that_cannot_be_stored_spares_its_batch(make_project, monkeypatch):
    root = odd_project(make_project)
    real = Store.write_trial

    def flaky_disk(self, record):
        if record.task_id == "plain" and record.status == "ok":
            raise OSError(28, "No space left on device")
        return real(self, record)

    monkeypatch.setattr(Store, "write_trial", flaky_disk)
    records, _ = run_plain(root)
    statuses = {(r.task_id, r.trial): r.status for r in records}
    # The graded record could not be written: missing data now, the rollout kept on disk.
    assert statuses.pop(("plain", 0)) == statuses.pop(("plain", 1)) == "scorer_error"
    assert set(statuses.values()) == {"ok"}
    crashed = next(r for r in records if r.task_id == "plain")
    assert "No space left on device" in crashed.error
    calls = call_counts(root)
    monkeypatch.undo()
    records, _ = run_plain(root)  # the two stored rollouts are graded; no target runs again
    assert sorted((r.task_id, r.status) for r in records) == [("plain", "ok")] * 2
    assert call_counts(root) == calls


@pytest.mark.slow
def test_batches_isolate_odd_outputs_through_the_flow(make_project, prefect_backend):
    from honesteval.orchestration.flows import evaluate

    root = odd_project(make_project)
    res = evaluate(project=str(root), candidate="base", batch_size=3)
    assert res.trials_ok == 8 and res.coverage == 1.0


def test_print_in_a_target_keeps_json_stdout_clean(make_project, capsys, prefect_backend):
    root = odd_project(make_project)
    code, out, err = run_main(
        ["evaluate", "--project", str(root), "--candidate", "base", "--json"], capsys
    )
    assert code == 0, err
    assert json.loads(out)["trials_ok"] == 8, [t["statuses"] for t in json.loads(out)["per_task"]]
    assert "chatter from the target" in err


SLOW_SCORER = "import time\ndef run(t, c, s):\n    return 1\ndef score(t, o):\n    time.sleep(5)\n"


def test_a_scorer_past_timeout_is_a_scorer_error(make_project):
    root = make_project(["pass"], target_code=SLOW_SCORER, config={"timeout_s": 0.3, "trials": 1})
    records, res = run_plain(root)
    assert (
        records[0].status == "scorer_error" and "scorer ran past timeout_s=0.3" in records[0].error
    )
    assert res.coverage == 0.0


GIL_HOLDER = r"""
import re, os, subprocess, sys, time
from pathlib import Path

def run(task, candidate_dir, seed):
    kind = task["input"]["kind"]
    if kind == "gil":  # one C call that never releases the GIL (catastrophic backtracking)
        re.match(r"(a+)+$", "a" * 24 + "b")
        return "finished late"
    if kind == "hang":  # a hung target with a child of its own
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        Path(candidate_dir, f"child-{os.getpid()}.pid").write_text(str(child.pid))
        time.sleep(60)
    return "quick"

def score(task, output):
    return 1.0 if output == "quick" else 0.0
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie waiting for its reaper counts as gone
        status = Path(f"/proc/{pid}/status").read_text()
        return "\nState:\tZ" not in status
    return True


def python_adapter(isolate: bool) -> dict[str, object]:
    return {"kind": "python", "target": "target:run", "scorer": "target:score", "isolate": isolate}


@pytest.mark.parametrize("isolate", [False, True])
@pytest.mark.parametrize("timeout_is,status", [("failure", "failed"), ("missing", "infra_error")])
def test_a_gil_holding_target_is_timed_out_not_recorded_ok(
    make_project, isolate, timeout_is, status
):
    tasks = [{"id": k, "input": {"kind": k}} for k in ("gil", "quick")]
    cfg = {
        "timeout_s": 0.3,
        "trials": 1,
        "retries": 0,
        "failure_reward": 0.25,
        "timeout_is": timeout_is,
        "adapter": python_adapter(isolate),
    }
    root = make_project(tasks=tasks, target_code=GIL_HOLDER, config=cfg)
    records, _ = run_plain(root)
    got = {r.task_id: (r.status, r.reward, r.error) for r in records}
    assert got["quick"] == ("ok", 1.0, None)
    assert got["gil"][:2] == (status, 0.25 if status == "failed" else None)
    assert "TargetTimeout" in (got["gil"][2] or "")


def test_isolated_target_kills_a_hung_process_tree(make_project):
    tasks = [{"id": "hang", "input": {"kind": "hang"}}]
    cfg = {
        "timeout_s": 1.5,
        "trials": 1,
        "retries": 1,
        "timeout_is": "missing",  # retried: one process tree per attempt to clean up
        "adapter": python_adapter(isolate=True),
        "sandbox": "off",  # unconfined: the target writes its children's pids into the project
    }
    root = make_project(tasks=tasks, target_code=GIL_HOLDER, config=cfg)
    records, _ = run_plain(root)
    assert records[0].status == "infra_error" and records[0].attempts == 2
    pids = [int(p.read_text()) for p in (root / "candidates" / "base").glob("child-*.pid")]
    assert len(pids) == 2  # one grandchild per attempt, each in its own process tree
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in pids)


def test_isolated_target_keeps_the_trial_contract(make_project):
    root = make_project(
        ["pass", "fail", "flaky", "bug"],
        # unconfined: the faulty target counts its calls in a log in the project
        config={"trials": 1, "adapter": python_adapter(isolate=True), "sandbox": "off"},
    )
    records, _ = run_plain(root)
    got = {r.task_id: (r.status, r.reward, r.attempts) for r in records}
    assert got["t00"] == ("ok", 1.0, 1) and got["t01"] == ("ok", 0.0, 1)
    assert got["t02"] == ("ok", 1.0, 3)  # InfraError crossed the process boundary: retried
    bug = next(r for r in records if r.task_id == "t03")
    assert bug.attempts == 1 and "ValueError: bad value in the target" in bug.error


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str = "4m") -> Iterator[Path]:
    """A small tmpfs at ``folder``; skipped with a reason where mounting is not allowed."""
    folder.mkdir()
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)):
        pytest.skip("mounting a tmpfs is not allowed on this machine (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Fill the filesystem of ``folder`` to the last byte; returns the filler file."""
    filler = folder / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as fh:
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    with contextlib.suppress(OSError), filler.open("ab") as fh:
        for _ in range(65536):
            fh.write(b"\0")
            fh.flush()
    return filler


def test_full_disk_is_one_line_and_keeps_every_ok_record(tmp_path, capsys, prefect_backend):
    from tests.helpers import ProjectFactory

    with small_tmpfs(tmp_path / "disk") as disk:
        root = ProjectFactory(tmp_path)(["pass", "fail", "pass"], config={"trials": 2})
        # Only the state folder is on the full disk: the test target's own call log stays off
        # it (a target that cannot write its file fails as the candidate, a different story,
        # and whether its record still fits in a page the disk has left is chance).
        (disk / "state").mkdir()
        (root / ".honesteval").symlink_to(disk / "state", target_is_directory=True)
        _, first = run_plain(root)
        ok = {(r["task_id"], r["seed"]): r for r in stored_trials(root)}
        assert len(ok) == 6 and first.trials_ok == 6
        filler = fill(disk)
        args = ["evaluate", "--project", str(root), "--candidate", "base", "--fresh"]
        code, out, err = run_main(args, capsys)
        assert code == 2 and out == "", err
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "No space left on device" in errors[0], err
        assert "Traceback" not in err
        # No record is lost or torn: each is still an ok record with its reward, or (--fresh
        # asked for every trial again) the new rollout stored before its score, which the next
        # run grades without running the target again.
        from honesteval.evaluation.trial import AWAITING_SCORE

        after = {(r["task_id"], r["seed"]): r for r in stored_trials(root)}
        assert set(after) == set(ok)
        for key, then in ok.items():
            now = after[key]
            if now["status"] == "ok":
                assert now["reward"] == then["reward"], key
            else:
                assert (now["status"], now["error"]) == ("scorer_error", AWAITING_SCORE), key
        filler.unlink()
        _, again = run_plain(root)
        assert again.reward == first.reward and again.trials_ok == 6


# -- SIGKILL of the CLI at random points -------------------------------------------------------


@pytest.mark.slow
def test_sigkill_at_random_points_then_exact_totals(tmp_path, cli_env):
    from tests.soak import (
        CANDIDATES,
        N_TASKS,
        TRIALS,
        Campaign,
        TrialKey,
        expected_reward,
        make_soak_project,
        soak_tasks,
    )

    camp = Campaign(make_soak_project(tmp_path), cli_env, random.Random(14))
    ok: dict[TrialKey, bytes] = {}
    for _ in range(2):
        point = camp.rng.randint(1, N_TASKS * TRIALS - 2)
        assert camp.run(["evaluate", "--candidate", "c1"], kill_after_calls=point) == -9
        ok = camp.check(ok)
    assert camp.run(["evaluate", "--candidate", "c1", "--json"], None) == 0, camp.last_stderr
    res = json.loads(camp.last_stdout)
    assert res["trials_ok"] == N_TASKS * TRIALS and res["trials_reused"] == len(ok)
    assert res["reward"] == pytest.approx(
        expected_reward(soak_tasks(), CANDIDATES["c1"], TRIALS, 0), abs=1e-12
    )
    ok = camp.check(ok)
    # A gate killed mid-run records nothing; the next one records exactly one decision.
    assert camp.run(["gate", "--candidate", "c2"], kill_after_calls=3) == -9
    ok = camp.check(ok)
    assert camp.decisions() == 0
    assert camp.run(["gate", "--candidate", "c2"], None) == 0, camp.last_stderr
    camp.check(ok)
    assert camp.decisions() == 1 and camp.lost == []
