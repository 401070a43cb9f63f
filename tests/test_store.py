"""The state folder: safe names for hostile ids, atomic writes, exact-trial reads."""

from __future__ import annotations

import os

import pytest

from honesteval.models import TrialRecord
from honesteval.store import Store, atomic_write_json, safe_name

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
    path = store.trial_path("val", "c/../x", "f" * 64, "t1", 0)
    path.write_text("{ truncated")
    assert store.read_trial("val", "c/../x", "f" * 64, "t1", 0) is None
