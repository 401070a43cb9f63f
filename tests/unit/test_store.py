"""The state folder: safe names for hostile ids, atomic writes, exact-trial reads."""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from honesteval.models import TrialRecord
from honesteval.store.state_dir import Store, atomic_write_json, safe_name
from honesteval.store.trial_log import _key_prefix, deferred_sync

HOSTILE = [
    "../../etc/x",
    "a/b",
    "nul\x00byte",
    "x" * 300,
    "..",
    ".",
    "",
    "%41",
    "A",
    "con",
    "ünïcødé/..",
    " spaced name ",
]


def record(task_id: str, seed: int = 0, status: str = "ok") -> TrialRecord:
    return TrialRecord(
        task_id=task_id,
        candidate="c/../x",
        fingerprint="f" * 64,
        split="val",
        trial=seed,
        seed=seed,
        status=status,
        reward=1.0 if status == "ok" else None,
        started_at="2026-01-01T00:00:00Z",
    )


def test_safe_names_stay_in_their_folder_and_are_injective(tmp_path):
    names = [safe_name(h) for h in HOSTILE]
    assert len(set(names)) == len(HOSTILE)
    for n in names:
        assert "/" not in n and "\x00" not in n and n not in (".", "..") and len(n) <= 120
        assert not n.startswith(".")


def test_hostile_ids_round_trip_through_records(tmp_path):
    store = Store(tmp_path / ".honesteval")
    for h in HOSTILE:
        path = store.write_trial(record(h))
        assert path.resolve().is_relative_to((tmp_path / ".honesteval").resolve())
        back = store.read_trial("val", "c/../x", "f" * 64, h, 0)
        assert back is not None and back.task_id == h  # the record keeps the real id
    assert not (tmp_path / "etc").exists()


def test_long_ids_that_share_a_prefix_do_not_collide():
    a, b = "y" * 300 + "a", "y" * 300 + "b"
    assert safe_name(a) != safe_name(b)


def test_atomic_write_leaves_no_temp_and_keeps_old_on_failure(tmp_path):
    path = tmp_path / "x.json"
    atomic_write_json(path, {"a": 1})
    with pytest.raises(ValueError):
        atomic_write_json(path, {"a": float("nan")})  # not JSON: refused before the rename
    assert path.read_text().strip().replace(" ", "").replace("\n", "") == '{"a":1}'
    assert os.listdir(tmp_path) == ["x.json"]


def test_read_trial_rejects_a_record_of_another_trial(tmp_path):
    store = Store(tmp_path)
    store.write_trial(record("t1", seed=0))
    assert store.read_trial("val", "c/../x", "f" * 64, "t1", 1) is None
    assert store.read_trial("val", "c/../x", "e" * 64, "t1", 0) is None
    # A line of another candidate in this log (copied by hand, say) counts for nobody here.
    log = store.trial_log("val", "c/../x", "f" * 64)
    with log.open("a") as fh:
        fh.write(record("t2").model_copy(update={"candidate": "other"}).model_dump_json() + "\n")
    assert store.read_trial("val", "c/../x", "f" * 64, "t2", 0) is None
    assert store.read_trial("val", "other", "f" * 64, "t2", 0) is None


def test_a_torn_line_is_skipped_and_the_next_record_stays_whole(tmp_path):
    store = Store(tmp_path)
    store.write_trial(record("t1"))
    log = store.trial_log("val", "c/../x", "f" * 64)
    with log.open("a") as fh:
        fh.write('{"task_id": "t9", "candidate": "c/../x", "rew')  # a crash mid-write
    store.write_trial(record("t2"))
    trials = store.read_trials("val", "c/../x", "f" * 64)
    assert sorted(trials) == [("t1", 0), ("t2", 0)]
    assert trials[("t2", 0)] == record("t2")


def test_the_newest_line_of_a_trial_wins_and_a_bad_reward_is_missing_data(tmp_path):
    store = Store(tmp_path)
    store.write_trial(record("t1", status="scorer_error"))  # the rollout, before its score
    store.write_trial(record("t1"))
    assert store.read_trial("val", "c/../x", "f" * 64, "t1", 0) == record("t1")
    log = store.trial_log("val", "c/../x", "f" * 64)
    tampered = record("t1").model_dump() | {"reward": 5.0}
    with log.open("a") as fh:
        fh.write(json.dumps(tampered) + "\n")
    # Not the earlier ok line either: a counted record that cannot be trusted reruns.
    assert store.read_trial("val", "c/../x", "f" * 64, "t1", 0) is None
    store.write_trial(record("t1"))
    assert store.read_trial("val", "c/../x", "f" * 64, "t1", 0) == record("t1")


def test_the_newest_line_wins_whatever_its_layout_and_another_owner_decides_nothing(tmp_path):
    store = Store(tmp_path)
    key = ("val", "c/../x", "f" * 64)
    store.write_trial(record("t1", status="scorer_error"))
    graded = record("t1")
    log = store.trial_log(*key)
    with log.open("a") as fh:
        # Written by hand: other key order and spacing than honesteval's own lines.
        fh.write(json.dumps(dict(reversed(graded.model_dump().items()))) + "\n")
        # The newest line of this (task, seed) belongs to another candidate: it counts for none.
        other = record("t1", status="scorer_error").model_copy(update={"candidate": "other"})
        fh.write(other.model_dump_json() + "\n")
    assert store.read_trial(*key, "t1", 0) == graded
    store.write_trial(record("t1", status="scorer_error"))  # a newer rollout, awaiting a score
    assert store.read_trial(*key, "t1", 0) == record("t1", status="scorer_error")
    assert store.read_trials(*key) == {("t1", 0): record("t1", status="scorer_error")}


@pytest.mark.parametrize("task_id", ['t"1\\x', "tâche-ü 7", "plain-0001"])
def test_a_line_honesteval_writes_names_its_trial_at_its_start(tmp_path, task_id):
    """Reads skip superseded lines by the (task, seed) at the start of each line; a change of
    TrialRecord's field order would silently make every read parse every line. Ids with
    escapes, non-ASCII text and plain ones read back as written."""
    store = Store(tmp_path)
    store.write_trial(record(task_id, seed=7))
    lines = [
        ln for ln in store.trial_log("val", "c/../x", "f" * 64).read_bytes().split(b"\n") if ln
    ]
    assert [_key_prefix(ln) for ln in lines] == [(task_id, 7)]


def test_per_trial_files_of_earlier_versions_are_read_and_a_log_line_wins(tmp_path):
    store = Store(tmp_path)
    old = record("t1").model_copy(update={"reward": 0.0})
    folder = tmp_path / "trials" / "val" / safe_name("c/../x") / ("f" * 12)
    folder.mkdir(parents=True)
    (folder / "t1__s0.json").write_text(old.model_dump_json(indent=2))
    assert store.read_trial("val", "c/../x", "f" * 64, "t1", 0) == old
    store.write_trial(record("t1"))
    assert store.read_trial("val", "c/../x", "f" * 64, "t1", 0) == record("t1")


def test_a_batch_pays_one_fsync_for_its_log(tmp_path, monkeypatch):
    store = Store(tmp_path)
    store.write_trial(record("t0"))  # the log exists: no folder fsync below
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real(fd))
    for i in range(1, 21):
        store.write_trial(record(f"t{i}"))
    assert len(calls) == 20  # alone, each record is durable when written
    calls.clear()
    with deferred_sync():
        for i in range(21, 71):
            store.write_trial(record(f"t{i}"))
        assert calls == []
    assert len(calls) == 1
    assert len(store.read_trials("val", "c/../x", "f" * 64)) == 71


def _append_many(root: str, worker: int) -> None:
    store = Store(Path(root))
    with deferred_sync():
        for i in range(100):
            rec = record(f"w{worker}-{i}").model_copy(update={"rollout": "y" * 70_000})
            store.write_trial(rec)


def test_concurrent_writers_never_interleave_inside_a_line(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), w)) for w in range(4)]
    for p in procs:
        p.start()
    with ThreadPoolExecutor(4) as pool:  # and threads of this process at the same time
        list(pool.map(lambda w: _append_many(str(tmp_path), w), range(4, 8)))
    for p in procs:
        p.join()
        assert p.exitcode == 0
    log = Store(tmp_path).trial_log("val", "c/../x", "f" * 64)
    lines = [line for line in log.read_text().split("\n") if line]
    assert len(lines) == 800 and all(json.loads(line)["rollout"] == "y" * 70_000 for line in lines)
    assert len(Store(tmp_path).read_trials("val", "c/../x", "f" * 64)) == 800
