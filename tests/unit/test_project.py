"""Project loading: the schema of honesteval.yaml, tasks, frozen splits, candidates."""

from __future__ import annotations

import json

import pytest
import yaml

from honesteval.errors import ConfigError
from honesteval.project.loader import load_project
from honesteval.project.split import SplitsChangedWarning
from honesteval.store.fingerprints import fingerprint_path


def write_yaml(root, text: str) -> None:
    (root / "honesteval.yaml").write_text(text)


def test_loads_the_spec_example(tmp_path, make_project):
    root = make_project(["pass"] * 8)
    write_yaml(
        root,
        """\
name: demo
tasks: tasks.jsonl
splits: {seed: 0, train: 0.5, val: 0.25, test: 0.25}
adapter:
  kind: python
  target: target:run
  scorer: target:score
candidates: candidates
trials: 3
base_seed: 0
pass_threshold: 1.0
retries: 3
timeout_s: 600
gate: {mode: paired, k_se: 1.0, min_coverage: 0.6, no_regression: passed}
""",
    )
    p = load_project(root)
    split = p.frozen_split()
    assert [len(split[s]) for s in ("train", "val", "test")] == [4, 2, 2]
    assert sorted(i for ids in split.values() for i in ids) == sorted(t.id for t in p.all_tasks)
    assert p.gate_config.k_se == 1.0 and p.gate_config.mode == "paired"


def test_split_is_frozen_on_disk_and_seeded(tmp_path, make_project):
    root = make_project(["pass"] * 12)
    cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
    cfg["splits"] = {"seed": 3, "train": 0.5, "val": 0.25, "test": 0.25}
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
    first = load_project(root).frozen_split()
    stored = json.loads((root / ".honesteval" / "splits.json").read_text())
    assert stored["val"] == first["val"] and stored["seed"] == 3
    # Changing the seed in the file does not move a frozen split, and says so.
    cfg["splits"]["seed"] = 4
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.warns(SplitsChangedWarning, match="'splits:' changed after the split was frozen"):
        assert load_project(root).frozen_split() == first


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            "name: x\nadapter: {kind: python, target: 't:r', scorer: 't:s'}\nbogus: 1\n",
            r"honesteval.yaml:3: bogus: unknown key",
        ),
        (
            "name: x\nadapter:\n  kind: grpc\n  scorer: 't:s'\n",
            r"honesteval.yaml:3: adapter.kind: .*'grpc'",
        ),
        (
            "name: x\nadapter: {kind: python, target: 't:r', scorer: 't:s'}\ntrials: 0\n",
            r"honesteval.yaml:3: trials: Input should be greater than or equal to 1",
        ),
        (
            "name: x\nadapter: {kind: python, target: 't:r', scorer: 't:s'}\ngate: {mode: lucky}\n",
            r"honesteval.yaml:3: gate",
        ),
        (
            "name: x\nadapter: {kind: python, target: 't:r', scorer: 't:s'}\ngate: {k_se: 0}\n",
            r"honesteval.yaml:3: gate",
        ),
        (
            "name: x\nadapter: {kind: python, target: 't:r', scorer: 't:s'}\ntrails: 3\n",
            r"honesteval.yaml:3: trails: unknown key \(did you mean 'trials'\?\)$",
        ),
        (
            "name: x\nadapter: {kind: python, target: 't:r', scorer: 't:s'}\ngate: {k_sr: 2}\n",
            r"honesteval.yaml:3: gate.k_sr: unknown key \(did you mean 'k_se'\?\)$",
        ),
        (
            "name: x\nadapter: {kind: python, target: 't:r', scorer: 't:s', timout_s: 1}\n",
            r"honesteval.yaml:2: adapter.timout_s: unknown key$",  # not a key of adapter
        ),
        ("name: [x\n", r"not valid YAML"),
        ("- a\n- b\n", r"must be a mapping"),
        ("name: x\nadapter: {kind: python, scorer: 't:s'}\n", r"needs 'target"),
        (
            "name: x\nadapter: {kind: python, target: 't:r', scorer: 't:s'}\n"
            "splits: {train: 0.5, val: 0.6, test: 0.1}\n",
            r"sum to 1",
        ),
    ],
)
def test_bad_project_files_name_key_and_line(tmp_path, make_project, text, expected):
    root = make_project()
    write_yaml(root, text)
    with pytest.raises(ConfigError, match=expected):
        load_project(root)


@pytest.mark.parametrize(
    "lines,expected",
    [
        (['{"id": "a"}', '{"id": "a"}'], r"tasks.jsonl:2: duplicate task id 'a'"),
        (['{"id": 7}'], r"tasks.jsonl:1: task id must be a string"),
        (['{"input": 1}'], r"tasks.jsonl:1: task has no 'id'"),
        (["[1, 2]"], r"must be a JSON object"),
        (["{oops"], r"tasks.jsonl:1: not valid JSON"),
    ],
)
def test_bad_tasks(make_project, lines, expected):
    root = make_project()
    (root / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=expected):
        load_project(root)


def test_unknown_split_and_candidate(make_project):
    p = load_project(make_project())
    with pytest.raises(ConfigError, match="unknown split 'dev'"):
        p.tasks("dev")
    with pytest.raises(ConfigError, match="unknown candidate 'ghost'"):
        p.candidate("ghost")


def test_fingerprint_tracks_content_not_bytecode(tmp_path):
    d = tmp_path / "cand"
    d.mkdir()
    (d / "a.py").write_text("x = 1\n")
    before = fingerprint_path(d)
    (d / "__pycache__").mkdir()
    (d / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\x00junk")
    assert fingerprint_path(d) == before
    (d / "a.py").write_text("x = 2\n")
    assert fingerprint_path(d) != before
    (d / "a.py").write_text("x = 1\n")
    assert fingerprint_path(d) == before
    (d / "a.py").rename(d / "b.py")
    assert fingerprint_path(d) != before


def test_file_candidate_fingerprint_is_sha256_of_content(tmp_path):
    import hashlib

    f = tmp_path / "prompt.md"
    f.write_text("hello")
    assert fingerprint_path(f) == hashlib.sha256(b"hello").hexdigest()


def test_a_misspelt_target_function_names_its_file_and_the_function_meant(tmp_path):
    """`target: target:runn` in the template: one line with the module's file and the
    function one typo away, when the adapter is built (check, evaluate)."""
    from honesteval.evaluation.plan import adapter_for
    from honesteval.project.scaffold import scaffold_project

    root = tmp_path / "p"
    scaffold_project(root)
    config = root / "honesteval.yaml"
    config.write_text(config.read_text().replace("target: target:run ", "target: target:runn "))
    proj = load_project(root)
    with pytest.raises(ConfigError) as err:
        adapter_for(str(proj.root), proj.scoring)
    assert str(err.value) == (
        f"'target:runn': module 'target' ({root / 'target.py'}) has no function 'runn' "
        "(did you mean 'run'?)"
    )
