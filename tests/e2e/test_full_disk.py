"""A gate on a disk that fills up at each of its writes in turn (issue 36 §4–5).

The state folder lives on a real tmpfs (mounted by the test: root, or skipped with the reason).
A reference gate measures how many pages the gate writes; then the same gate runs once for
every amount of free space from none to that many pages (tmpfs hands out whole pages, so one
page more each run is the finest step a real full disk has), each time from the same stored
state. Every run either completes or stops with one storage error naming a file of the state
folder; after it the ledger is intact or ends in a cleanly torn tail, no temporary file is
left, best.json is the ledger's or one promotion behind it; with the space back, the next gate
works and ends as the reference did, a best.json left behind rebuilt from the ledger.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import honesteval
from honesteval.errors import ConfigError, HonestevalError
from honesteval.gating.ledger import BestRebuiltWarning, search_ledger
from honesteval.models import GateDecision
from honesteval.project.loader import load_project
from tests.e2e.test_faults import small_tmpfs
from tests.helpers import ProjectFactory

PAGE = 4096


def _free_pages(folder: Path) -> int:
    usage = shutil.disk_usage(folder)
    return usage.free // PAGE


def _leave_free(folder: Path, pages: int) -> Path:
    """Fill the filesystem of ``folder`` so that exactly ``pages`` pages stay free."""
    filler = folder / "filler"
    filler.unlink(missing_ok=True)
    with filler.open("wb") as fh:
        fh.write(b"\0" * ((_free_pages(folder) - pages) * PAGE))
        fh.flush()
    assert _free_pages(folder) == pages
    return filler


def _project(base: Path) -> Path:
    tasks = [
        {"id": f"t{i:02d}", "input": {"behaviour": "seeded"}, "target": "yes"} for i in range(12)
    ]
    return ProjectFactory(base)(
        tasks=tasks, candidates={"base": 0.1, "better": 1.0}, config={"trials": 2}
    )


def _gate(root: Path) -> GateDecision:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BestRebuiltWarning)
        return honesteval.gate(root, "better", orchestration="local", echo=lambda _: None)


def _state_files(state: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state)): p.read_bytes() for p in state.rglob("*") if p.is_file()}


def _check_after_failure(root: Path, state: Path) -> None:
    """What a full disk may leave: whole lines and a torn tail at most, no temp file, and a
    best.json that is the ledger's or one promotion behind it."""
    assert [p.name for p in state.rglob("*.tmp")] == []
    data = (state / "decisions.jsonl").read_bytes()
    *whole, tail = data.split(b"\n")
    for line in whole:
        json.loads(line)  # every terminated line is a whole record
    led = search_ledger(load_project(root))
    assert [b.kind for b in led.breaks] in ([], ["best-behind"]), led.breaks
    assert (led.torn_tail is not None) == (tail != b"")


def _restore(saved: Path, state: Path) -> None:
    shutil.rmtree(state)
    shutil.copytree(saved, state)


@pytest.mark.timeout(1200)
def test_a_gate_on_a_disk_full_at_each_write_leaves_nothing_wrong(tmp_path):
    root = _project(tmp_path)
    honesteval.gate(root, "base", orchestration="local", echo=lambda _: None)
    saved = tmp_path / "saved-state"
    shutil.copytree(root / ".honesteval", saved)
    with small_tmpfs(tmp_path / "disk", size="8m") as disk:
        state = disk / "state"
        shutil.copytree(saved, state)
        shutil.rmtree(root / ".honesteval")
        (root / ".honesteval").symlink_to(state, target_is_directory=True)
        reference = _gate(root)
        assert reference.promoted and reference.stage == "confirm", reference.reason
        # The sweep starts from the state before this gate plus its trials (every target run
        # is stored, so each run of the sweep is fast and writes what a gate writes once its
        # trials are in: the results, the reservation, the decision, the head and best.json).
        # A full disk while trials are stored: test_faults' full-disk test.
        shutil.rmtree(saved / "trials")
        shutil.copytree(state / "trials", saved / "trials")
        _restore(saved, state)
        before = _free_pages(disk)
        assert _gate(root).promoted
        needed = before - _free_pages(disk)
        assert needed >= 4  # results, the ledger's lines, its head, best.json at least
        outcomes: list[str] = []
        free = 0
        while not outcomes or outcomes[-1] == "stopped":
            assert free <= 2 * needed, outcomes  # a temporary copy needs its pages too
            _restore(saved, state)
            filler = _leave_free(disk, free)
            free += 1
            try:
                decision = _gate(root)
            except (OSError, HonestevalError) as exc:
                message = str(exc)
                assert "No space left on device" in message, message
                assert str(root / ".honesteval") in message or str(state) in message, message
                outcomes.append("stopped")
                _check_after_failure(root, state)
            else:
                outcomes.append("completed")
                assert decision.promoted
            filler.unlink()  # the space is back
            if outcomes[-1] == "stopped":
                landed = search_ledger(load_project(root)).best
                try:
                    again = _gate(root)
                except ConfigError as exc:  # the promotion was written before the disk filled
                    assert landed is not None and landed.name == "better", exc
                    assert str(exc) == "'better' is already the current best"
                else:
                    assert again.promoted and again.candidate == "better", again.reason
            best = json.loads((state / "best.json").read_text())
            assert best["name"] == "better"
            led = search_ledger(load_project(root))
            assert led.ok and led.best is not None and led.best.name == "better"
            assert led.state.tests == 1 and led.state.promotions == [1]
        print(needed, outcomes)
        assert len(outcomes) >= needed  # every page of the gate's writes was the last one once


@pytest.mark.timeout(600)
def test_a_full_disk_during_a_gate_is_one_line_without_prefect_traceback(tmp_path, cli_env):
    root = _project(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "honesteval.cli",
            "gate",
            "--project",
            str(root),
            "--candidate",
            "base",
        ],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=500,
    )
    assert done.returncode == 0, done.stderr
    with small_tmpfs(tmp_path / "disk", size="4m") as disk:
        shutil.copytree(root / ".honesteval", disk / "state")
        shutil.rmtree(root / ".honesteval")
        (root / ".honesteval").symlink_to(disk / "state", target_is_directory=True)
        before = _state_files(disk / "state")
        _leave_free(disk, 1)
        args = ["gate", "--project", str(root), "--candidate", "better"]
        done = subprocess.run(
            [sys.executable, "-m", "honesteval.cli", *args],
            capture_output=True,
            text=True,
            env=cli_env,
            timeout=500,
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
        errors = [x for x in done.stderr.splitlines() if x.startswith("error: ")]
        assert len(errors) == 1 and errors[0].endswith(": No space left on device"), done.stderr
        assert errors[0].startswith(f"error: {root / '.honesteval'}/"), errors  # names the file
        after = _state_files(disk / "state")
        assert set(before) <= set(after)  # nothing lost
        for name, data in before.items():  # the logs appended to, never cut
            if name.endswith(".jsonl"):
                assert after[name].startswith(data), name
