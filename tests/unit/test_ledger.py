"""The search ledger without Prefect: the hash chain, the head, torn lines, the replay, repairs.

Expected hashes are computed here with hashlib over the file's bytes; expected levels from the
LORD++ formula (w0 = alpha/2, gamma_j = j^-1.6 / zeta(1.6)) through ``tests.unit.test_online.g``.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from honesteval.errors import LedgerBrokenError
from honesteval.gating.ledger import (
    Confirmation,
    read_best,
    record_decision,
    repair_ledger,
    reserve_confirmation,
    search_ledger,
    staged,
)
from honesteval.models import GateConfig
from honesteval.project.loader import load_project
from honesteval.stats import baseline_decision, decide
from honesteval.store.state_dir import Store
from tests.gate_helpers import result
from tests.unit.test_online import g

W0 = 0.025
FLAT = [0.5] * 6


def ledger_path(proj):
    return proj.state_dir / "decisions.jsonl"


def raw_lines(proj) -> list[bytes]:
    return ledger_path(proj).read_bytes().split(b"\n")[:-1]


def baseline(make_project):
    proj = load_project(make_project())
    base = result(FLAT, name="base")
    record_decision(proj, baseline_decision(base, GateConfig()), base, None)
    return proj


def confirm(proj, name, fresh_means, *, since=0):
    """A screen pass of ``name`` confirmed on ``fresh_means`` (current stays at 0.5)."""
    cfg = GateConfig()
    best = read_best(proj)
    cand = result([0.9] * 6, name=name)
    screen = staged(decide(best.result, cand, cfg), cfg)
    reserved = reserve_confirmation(proj, best, cand, cfg, since)
    evidence = Confirmation(result(FLAT, name=best.name), result(fresh_means, name=name), cfg)
    return record_decision(proj, screen, cand, best, evidence, reserved)


def test_every_line_carries_the_hash_of_every_byte_before_it(make_project):
    proj = baseline(make_project)
    confirm(proj, "a", FLAT)  # a reservation, then its decision
    data = ledger_path(proj).read_bytes()
    lines = raw_lines(proj)
    assert [json.loads(x)["kind"] for x in lines] == ["decision", "reservation", "decision"]
    offset = 0
    for line in lines:
        assert json.loads(line)["prev"] == hashlib.sha256(data[:offset]).hexdigest()
        offset += len(line) + 1
    assert json.loads(lines[0])["prev"] == hashlib.sha256(b"").hexdigest()  # fixed start
    head = json.loads((proj.state_dir / "decisions.head.json").read_text())
    assert head == {"lines": 3, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    led = search_ledger(proj)
    assert led.ok and led.state.tests == 1 and led.state.spent == pytest.approx(W0 * g(1))


def test_a_crash_tail_is_cut_and_kept_but_a_torn_line_inside_breaks_the_ledger(make_project):
    proj = baseline(make_project)
    with ledger_path(proj).open("ab") as fh:
        fh.write(b'{"kind": "reservation", "j": 1, "lev')  # a crash mid-append
    assert search_ledger(proj).ok  # only the last line, not a complete object: a crash's tail
    confirm(proj, "a", FLAT)
    lines = raw_lines(proj)
    assert json.loads(lines[1])["torn_tail"] == '{"kind": "reservation", "j": 1, "lev'
    assert json.loads(lines[1])["prev"] == hashlib.sha256(lines[0] + b"\n").hexdigest()
    assert search_ledger(proj).ok
    # The same fragment inside the log (closed by a newline, another line after it) breaks it.
    broken = [*lines[:1], b'{"kind": "reservation", "j": 1, "lev', *lines[1:]]
    ledger_path(proj).write_bytes(b"\n".join(broken) + b"\n")
    led = search_ledger(proj)
    assert not led.ok and led.breaks[0].line == 2
    assert "line 2 is not a JSON record" in led.breaks[0].message
    with pytest.raises(LedgerBrokenError, match="will not reset it"):
        led.check()


def test_an_old_log_without_hashes_is_read_and_the_chain_starts_at_its_first_hashed_line(
    make_project,
):
    proj = baseline(make_project)
    confirm(proj, "a", FLAT)
    # The same log as the version before the chain wrote it: no reservation lines, no kind,
    # prev or reservation fields, no head; a torn line closed by a later append.
    legacy = []
    for line in raw_lines(proj):
        obj = json.loads(line)
        if obj["kind"] == "reservation":
            continue
        for key in ("kind", "prev", "reservation", "reference_base_seed", "reference_trials"):
            obj.pop(key)
        legacy.append(json.dumps(obj).encode())
    legacy.insert(1, b'{"accept": true, "reason": "torn mid-wri')
    old = b"\n".join(legacy) + b"\n"
    ledger_path(proj).write_bytes(old)
    (proj.state_dir / "decisions.head.json").unlink()
    led = search_ledger(proj)
    assert led.ok and led.state.tests == 1 and led.state.spent == pytest.approx(W0 * g(1))
    d = confirm(proj, "b", FLAT)
    assert d.level == pytest.approx(W0 * g(2)) and d.reservation == 2
    first_hashed = json.loads(raw_lines(proj)[len(legacy)])
    assert first_hashed["kind"] == "reservation"
    assert first_hashed["prev"] == hashlib.sha256(old).hexdigest()  # covers the legacy part
    assert search_ledger(proj).ok
    # From the upgrade on, the legacy part is frozen too: an edit of it breaks the chain.
    data = ledger_path(proj).read_bytes()
    ledger_path(proj).write_bytes(
        data.replace(b'"candidate_reward": 0.5', b'"candidate_reward": 0.6', 1)
    )
    led = search_ledger(proj)
    assert not led.ok and led.breaks[0].line == 1  # somewhere in the legacy part
    assert led.breaks[0].message.startswith(f"line {len(legacy) + 1} does not chain")


def test_a_legacy_line_whose_online_state_was_edited_breaks_the_replay(make_project):
    proj = baseline(make_project)
    confirm(proj, "a", FLAT)
    lines = [json.loads(x) for x in raw_lines(proj)]
    for obj in lines:
        obj.pop("prev")
    lines[-1]["online"]["alpha"] = 0.45  # no chain to see it: the replay does
    ledger_path(proj).write_text("".join(json.dumps(o) + "\n" for o in lines))
    (proj.state_dir / "decisions.head.json").unlink()
    led = search_ledger(proj)
    assert not led.ok and led.breaks[0].line == 3
    assert "alpha 0.45" in led.breaks[0].message


def test_confirmations_finished_out_of_order_get_levels_from_what_was_known(make_project):
    proj = baseline(make_project)
    cfg = GateConfig()
    best = read_best(proj)
    a, b = result([0.9] * 6, name="a"), result([0.9] * 6, name="b")
    ra = reserve_confirmation(proj, best, a, cfg, 0)
    rb = reserve_confirmation(proj, best, b, cfg, 0)
    assert (ra.record.j, rb.record.j) == (1, 2)
    assert ra.record.level == pytest.approx(W0 * g(1))
    assert rb.record.level == pytest.approx(W0 * g(2))  # j = 1 still running: no reward
    current = result(FLAT * 8, name="base")  # 48 tasks: enough to confirm at alpha_2
    fresh = result([0.8, 0.9, 0.7, 0.8, 0.9, 0.8] * 8, name="b")

    def finish(cand, reserved):
        screen = staged(decide(best.result, cand, cfg), cfg)
        evidence = Confirmation(current, fresh, cfg)
        return record_decision(proj, screen, cand, best, evidence, reserved)

    db = finish(b, rb)
    assert db.promoted and db.online.promotions == [2] and db.online.tests == 2
    da = finish(a, ra)  # finishes after the best changed: stale, its level stays spent
    assert not da.promoted and "stale" in da.reason
    led = search_ledger(proj)
    assert led.ok and led.state.tests == 2 and led.state.promotions == [2]
    assert led.state.spent == pytest.approx(W0 * (g(1) + g(2)))


def test_accept_break_goes_on_from_before_the_break_and_never_refunds(make_project):
    proj = baseline(make_project)
    confirm(proj, "a", FLAT)
    confirm(proj, "b", FLAT)  # lines: base, res 1, dec 1, res 2, dec 2
    lines = raw_lines(proj)
    lines[2] = b"garbage"  # a torn line inside: from line 3 on nothing is trusted
    ledger_path(proj).write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(LedgerBrokenError, match="only an explicit `--accept-break REASON`"):
        repair_ledger(proj, None)
    message = repair_ledger(proj, "a stray editor write")
    # trusted: reservation 1; untrusted lines name confirmation 2: both count as spent
    assert "confirmation #3" in message and "0 promotion(s) credited" in message
    led = search_ledger(proj)
    assert led.ok and led.repairs == 1 and led.state.tests == 2
    assert led.state.spent == pytest.approx(W0 * (g(1) + g(2)))
    repair = json.loads(raw_lines(proj)[-1])
    assert repair["kind"] == "repair" and repair["reason"] == "a stray editor write"
    assert repair["breaks"][0].startswith("line 3 is not a JSON record")
    assert b"garbage" in ledger_path(proj).read_bytes()  # nothing deleted
    d = confirm(proj, "c", FLAT)
    assert d.reservation == 3 and d.level == pytest.approx(W0 * g(3))


def test_a_lost_log_is_repaired_counting_the_confirmations_stored_results_show(make_project):
    proj = baseline(make_project)
    store = Store(proj.state_dir)
    for seed in (10**9 + 5, 10**9 + 5, 10**9 + 77):  # two sides of one run, then another
        store.write_result(result(FLAT, name="x").model_copy(update={"base_seed": seed}))
    ledger_path(proj).unlink()
    led = search_ledger(proj)
    assert [b.line for b in led.breaks] == [None, None]
    assert "is missing or empty" in led.breaks[0].message
    assert "best.json names 'base' but the ledger records no promotion" in led.breaks[1].message
    repair_ledger(proj, "restored best.json from a backup, the log was lost")
    led = search_ledger(proj)
    # the head recorded 1 line (at most 1 confirmation); the results show 2 runs: 2 spent
    assert led.ok and led.state.tests == 2 and led.state.promotions == []
    assert led.best.name == "base"
