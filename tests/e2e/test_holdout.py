"""Issue 24 §2: a held-out part of val that screens never score and confirmations score alone."""

from __future__ import annotations

import json

import pytest
import yaml

from honesteval.errors import ConfigError
from honesteval.orchestration.flows import gate
from honesteval.views.status import project_status, status_lines
from tests.orchestration.test_flow_confirm import LUCKY_TARGET

pytestmark = pytest.mark.usefixtures("prefect_backend")

N_TASKS = 24
CONFIRM_SEED_BASE = 10**9


def project(make_project, gate_cfg=None):
    tasks = [{"id": f"s{i:02d}", "input": {}, "target": "yes"} for i in range(N_TASKS)]
    root = make_project(
        tasks=tasks,
        candidates={"base": 0.5, "lucky": 0.5},
        config={"trials": 2, **({"gate": gate_cfg} if gate_cfg else {})},
        target_code=LUCKY_TARGET,
    )
    (root / "candidates" / "lucky" / "lucky_below.txt").write_text("100")
    return root


def calls(root):
    return [json.loads(x) for x in (root / "calls.log").read_text().splitlines()]


@pytest.mark.quick
def test_screens_never_score_the_held_out_part_and_confirmations_score_only_it(make_project):
    root = project(make_project, {"confirm_holdout": 0.25})
    gate(str(root), "base")
    splits = json.loads((root / ".honesteval" / "splits.json").read_text())
    held = splits["confirm_holdout"]
    assert len(held) == 6 and set(held) <= set(splits["val"])  # a quarter of val, inside it
    assert len(splits["val"]) == N_TASKS and splits["test"] == []  # nothing else moved
    lucky = gate(str(root), "lucky")
    assert lucky.stage == "confirm" and lucky.holdout and not lucky.promoted
    screened = {c["task"] for c in calls(root) if c["seed"] < CONFIRM_SEED_BASE}
    confirmed = {c["task"] for c in calls(root) if c["seed"] >= CONFIRM_SEED_BASE}
    assert screened == set(splits["val"]) - set(held)  # screens never score the held-out part
    assert confirmed == set(held)  # the confirmation scores only it
    assert lucky.n_paired == len(held)
    text = "\n".join(status_lines(project_status(root)))
    assert "on the held-out val tasks no screen scored" in text
    # Frozen once: a later change of the share moves nothing.
    cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
    cfg["gate"]["confirm_holdout"] = 0.5
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
    gate(str(root), "lucky")
    again = json.loads((root / ".honesteval" / "splits.json").read_text())
    assert again["confirm_holdout"] == held


def test_a_held_out_part_is_refused_once_val_was_scored(make_project):
    root = project(make_project)
    gate(str(root), "base")  # every val task scored
    before = (root / ".honesteval" / "splits.json").read_bytes()
    cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
    cfg["gate"] = {"confirm_holdout": 0.25}
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="val was already scored in this project"):
        gate(str(root), "lucky")
    assert (root / ".honesteval" / "splits.json").read_bytes() == before
