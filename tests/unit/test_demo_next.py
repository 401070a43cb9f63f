"""The demo's words: its ``next:`` lines run as printed in the shell that ran the demo, with
or without the install's bin folder on PATH, and point at the kept project (not a temporary
folder); a one-stage promotion, the demo's, does not claim fresh seeds."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from honesteval.cli.demo import next_lines

BIN = Path(sys.executable).parent  # the install's scripts (symlinks kept, as a shell sees them)
PROJECT = Path("honesteval-demo") / "circle_packing"


def test_without_the_bin_folder_on_path_the_next_command_is_the_scripts_path_and_runs(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(BIN.parent)
    script = os.path.relpath(BIN / "honesteval", BIN.parent)  # e.g. bin/honesteval
    lines = next_lines(BIN.parent / PROJECT)
    assert lines == [
        f"project: {PROJECT}",
        f"next: {script} report --project {PROJECT} --open",
        f"      {script} status --project {PROJECT}",
    ]
    command = shlex.split(lines[1].removeprefix("next: "))[:2]
    proc = subprocess.run(
        [*command, "--help"], cwd=BIN.parent, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "HTML report" in proc.stdout, proc.stderr


def test_with_the_bin_folder_on_path_it_is_just_honesteval(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", f"{BIN}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    expected = f"next: honesteval report --project {PROJECT} --open"
    assert next_lines(tmp_path / PROJECT)[1] == expected


def test_a_one_stage_promotion_does_not_claim_fresh_seeds():
    from honesteval.models import GateDecision
    from honesteval.views.text import decision_lines

    common = dict(accept=True, promoted=True, reason="ACCEPT", mode="paired", candidate="b")
    d = GateDecision(**common, candidate_fingerprint="x", current="a", delta=0.2, se=0.05)
    single = decision_lines(d.model_copy(update={"stage": "single"}))[-1]
    confirmed = decision_lines(d.model_copy(update={"stage": "confirm"}))[-1]
    assert single == (
        "  promoted  b is now the current best (better on these val tasks and seeds, in one "
        "stage: not confirmed)"
    )
    assert "fresh seeds" in confirmed and "fresh" not in single
