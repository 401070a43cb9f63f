"""The standing fault campaign, inputs: hostile project files, tasks files, ids and candidates.

Each bad input: one line on stderr, exit code 2, no traceback, nothing written outside the
state folder. Hostile ids that are valid stay inside the state folder and never collide, not
even on a case-insensitive filesystem.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from honesteval.cli import main
from honesteval.store.state_dir import Store, safe_name
from tests.helpers import call_counts, run_plain, stored_trials

MAX_LINE = 1000  # an error line stays readable whatever the input


def run_main(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code), out, err


def outside_state(base: Path) -> dict[str, bytes]:
    """Every file under ``base`` except the state folders, with its bytes."""
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in base.rglob("*")
        if p.is_file() and ".honesteval" not in p.parts and "__pycache__" not in p.parts
    }


def edit(root: Path, **changes) -> None:
    cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
    cfg.update(changes)
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def append_yaml(text: str):
    def mutate(root: Path) -> None:
        with (root / "honesteval.yaml").open("a") as fh:
            fh.write(text)

    return mutate


def replace_key(key: str, raw: str):
    def mutate(root: Path) -> None:
        lines = (root / "honesteval.yaml").read_text().splitlines()
        kept = [line for line in lines if not line.startswith(f"{key}:")]
        (root / "honesteval.yaml").write_text("\n".join([*kept, f"{key}: {raw}"]) + "\n")

    return mutate


def write_bytes(name: str, data: bytes):
    def mutate(root: Path) -> None:
        (root / name).write_bytes(data)

    return mutate


ALIAS_BOMB = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
)


def broken_candidate(root: Path) -> None:
    (root / "candidates" / "ghost").symlink_to(root / "does-not-exist")


def huge_garbage_line(root: Path) -> None:
    with (root / "tasks.jsonl").open("a") as fh:
        fh.write('{"id": "big", "input": "' + "x" * 50_000_000 + "\n")  # 50 MB, unterminated


def huge_duplicate_id(root: Path) -> None:
    big = json.dumps({"id": "y" * 25_000_000})
    (root / "tasks.jsonl").write_text(big + "\n" + big + "\n")


CASES = {
    "non-utf8 project file": (write_bytes("honesteval.yaml", b"name: x\xff\xfe\n"), "not UTF-8"),
    "non-utf8 tasks file": (
        write_bytes("tasks.jsonl", b'{"id": "a"}\n{"id": "\xff"}\n'),
        "tasks.jsonl:2: not UTF-8",
    ),
    "alias bomb": (lambda root: (root / "honesteval.yaml").write_text(ALIAS_BOMB), "aliases"),
    "duplicate yaml key": (append_yaml("trials: 5\n"), "duplicate key 'trials'"),
    "trials: true": (replace_key("trials", "true"), "trials"),
    "trials: 1e9": (replace_key("trials", "1000000000"), "less than or equal to 10000"),
    "retries as text": (replace_key("retries", '"3"'), "retries"),
    "timeout inf": (replace_key("timeout_s", ".inf"), "timeout_s"),
    "duplicate task ids": (
        write_bytes("tasks.jsonl", b'{"id": "a"}\n{"id": "a"}\n'),
        "duplicate task id",
    ),
    "50 MB garbage line": (huge_garbage_line, "not valid JSON"),
    "50 MB duplicate id": (huge_duplicate_id, "duplicate task id"),
    "broken symlink candidate": (broken_candidate, "broken symlink"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(make_project, capsys, tmp_path, case):
    mutate, needle = CASES[case]
    root = make_project(["pass", "fail"])
    candidate = "ghost" if case == "broken symlink candidate" else "base"
    mutate(root)
    before = outside_state(tmp_path)
    code, out, err = run_main(
        ["evaluate", "--project", str(root), "--candidate", candidate], capsys
    )
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) < MAX_LINE, err
    assert needle in lines[0] and "Traceback" not in err and out == ""
    assert outside_state(tmp_path) == before
    assert not list((root / ".honesteval").glob("trials/**/*.json"))


@pytest.mark.parametrize("name", ["../target", "..", "/etc", "base\x00x", "candidates/base"])
def test_candidate_names_cannot_escape(make_project, capsys, tmp_path, name):
    root = make_project(["pass"])
    before = outside_state(tmp_path)
    code, _, err = run_main(["evaluate", "--project", str(root), "--candidate", name], capsys)
    assert code == 2 and err.startswith("error: unknown candidate") and "Traceback" not in err
    assert outside_state(tmp_path) == before


HOSTILE_IDS = ["../../escape", "a/b", "ctl\x01byte", "Task", "task", "TASK", "é", "É", "z" * 300]


def test_hostile_ids_run_inside_the_state_folder_and_never_collide(make_project, tmp_path):
    tasks = [{"id": i, "input": {"behaviour": "pass"}, "target": "yes"} for i in HOSTILE_IDS]
    root = make_project(tasks=tasks, candidates={"base": 1.0, "Base": 1.0}, config={"trials": 1})
    before = outside_state(tmp_path)
    for cand in ("base", "Base"):
        _, result = run_plain(root, cand)
        assert result.n_scored == len(HOSTILE_IDS) and result.reward == 1.0
    written = [p for p in (root / ".honesteval" / "trials").rglob("*") if p.is_file()]
    assert len(written) == 2  # one trial log per candidate
    # Injective even where the filesystem folds case (macOS, Windows).
    assert len({str(p.relative_to(root)).lower() for p in written}) == len(written)
    assert all(p.resolve().is_relative_to(root / ".honesteval") for p in written)
    stored = {(r["candidate"], r["task_id"]) for r in stored_trials(root)}
    assert stored == {(c, i) for c in ("base", "Base") for i in HOSTILE_IDS}
    new = set(outside_state(tmp_path)) - set(before)
    assert new == {f"{root.name}/calls.log", f"{root.name}/peak.txt"}  # the target's own files


def test_case_folded_names_are_injective_and_old_names_still_read(tmp_path):
    names = [safe_name(i) for i in HOSTILE_IDS]
    assert len({n.lower() for n in names}) == len(HOSTILE_IDS)
    assert safe_name("Task") == "^task" and safe_name("task") == "task"
    # A record written under the earlier name (upper case kept) is still found and reused.
    from tests.unit.test_store import record

    store = Store(tmp_path)
    rec = record("Task").model_copy(update={"candidate": "Base"})
    legacy = tmp_path / "trials" / "val" / "Base" / rec.fingerprint[:12] / "Task__s0.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_text(rec.model_dump_json())
    assert legacy.name == "Task__s0.json"
    assert store.read_trial("val", "Base", rec.fingerprint, "Task", 0) == rec
    assert store.read_trial("val", "base", rec.fingerprint, "Task", 0) is None


def test_changed_scorer_or_task_never_reuses_stale_trials(make_project):
    root = make_project(["pass", "fail"], config={"trials": 1})
    run_plain(root)
    assert run_plain(root)[0] == []  # unchanged: everything reused
    target = root / "target.py"
    target.write_text(target.read_text().replace('"wrong answer"', '"not right"'))
    records, _ = run_plain(root)  # the scorer's module changed: both trials rerun
    assert sorted(r.task_id for r in records) == ["t00", "t01"]
    assert call_counts(root) == {("t00", 0): 2, ("t01", 0): 2}
    tasks = [json.loads(line) for line in (root / "tasks.jsonl").read_text().splitlines()]
    tasks[0]["input"]["behaviour"] = "fail"
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    records, res = run_plain(root)  # only the edited task reruns, and now fails
    assert [(r.task_id, r.reward) for r in records] == [("t00", 0.0)] and res.reward == 0.0


def test_splits_edited_after_first_use_says_so_in_one_line(make_project, capsys):
    root = make_project(["pass", "fail", "pass", "fail"])
    run_plain(root)
    edit(root, splits={"train": ["t00"], "val": ["t01", "t02", "t03"], "test": []})
    code, _, err = run_main(["check", "--project", str(root)], capsys)
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "'splits:' changed after the split was frozen" in warnings[0]
    assert code == 0 and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "evaluate"])
def test_a_task_id_with_a_nul_byte_is_refused_at_load(make_project, command):
    from tests.helpers import run_cli

    root = make_project(tasks=[{"id": "ok", "input": 1}, {"id": "a\u0000b", "input": 2}])
    before = outside_state(root)
    proc = run_cli(command, "--project", str(root), "--candidate", "base", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: {root / 'tasks.jsonl'}:2: task id 'a\\x00b' holds a NUL character"
    )
    assert proc.stdout == "" and outside_state(root) == before
    assert stored_trials(root) == []


def _derived_split(ids: list[str], seed: int, ratios: tuple[float, float]) -> dict[str, set[str]]:
    """The documented rule for seeded ratios: shuffle the sorted ids with random.Random(seed),
    then take round(train * n) train ids and round(val * n) val ids; the rest is test."""
    import random

    order = sorted(ids)
    random.Random(seed).shuffle(order)
    n_train, n_val = round(ratios[0] * len(order)), round(ratios[1] * len(order))
    return {
        "train": set(order[:n_train]),
        "val": set(order[n_train : n_train + n_val]),
        "test": set(order[n_train + n_val :]),
    }


@pytest.mark.slow
def test_a_lost_split_file_is_refused_and_refrozen_only_within_the_test_boundary(make_project):
    from tests.helpers import run_cli

    seed, ratios = 3, (0.4, 0.4)
    first = [f"t{i:02d}" for i in range(10)]
    root = make_project(
        tasks=[{"id": t, "input": {"behaviour": "pass"}} for t in first],
        config={"trials": 1, "splits": {"seed": seed, "train": 0.4, "val": 0.4, "test": 0.2}},
    )
    for split in ("train", "val"):
        run_plain(root, split=split)
    splits_file = root / ".honesteval" / "splits.json"
    frozen = json.loads(splits_file.read_text())
    assert {k: set(frozen[k]) for k in ("train", "val", "test")} == _derived_split(
        first, seed, ratios
    )
    recorded = set(frozen["train"]) | set(frozen["val"])

    # 1. Lost, tasks unchanged: refused by every command until re-frozen; the re-freeze gives
    #    back the same split.
    splits_file.unlink()
    proc = run_cli("check", "--project", str(root), timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"`honesteval refreeze-splits --project {root}`" in proc.stderr
    assert not splits_file.exists()  # nothing derived behind the user's back
    proc = run_cli("refreeze-splits", "--project", str(root), timeout=120)
    assert proc.returncode == 0, proc.stderr
    again = json.loads(splits_file.read_text())
    assert [again[k] for k in ("train", "val", "test")] == [
        frozen[k] for k in ("train", "val", "test")
    ]

    # 2. Lost after tasks were added: the derived split moves stored tasks into test: refused.
    added = [f"t{i:02d}" for i in range(10, 20)]
    with (root / "tasks.jsonl").open("a") as fh:
        for t in added:
            fh.write(json.dumps({"id": t, "input": {"behaviour": "pass"}}) + "\n")
    moved = sorted(recorded & _derived_split(first + added, seed, ratios)["test"])
    assert moved  # the case of the issue: a former train or val task would land in test
    splits_file.unlink()
    proc = run_cli("check", "--project", str(root), timeout=120)
    assert proc.returncode == 2 and "refreeze-splits" in proc.stderr
    proc = run_cli("refreeze-splits", "--project", str(root), timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"moves {len(moved)} task(s) with stored trials across the test boundary" in (
        proc.stderr
    )
    assert all(repr(t) in proc.stderr for t in moved[:5])
    assert not splits_file.exists()


@pytest.mark.parametrize("split", ["test", "train"])
def test_gate_on_a_split_other_than_val_is_refused_in_one_line(make_project, capsys, split):
    root = make_project(["pass", "fail"])
    args = ["gate", "--project", str(root), "--candidate", "base", "--split", split]
    code, out, err = run_main(args, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and out == "", err
    assert lines[0].startswith(f"error: gate --split {split}: the gate reads val only"), err
    assert not (root / ".honesteval" / "decisions.jsonl").exists()
