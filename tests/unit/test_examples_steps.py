"""The Eve variant of circle packing and the openai_judge example, run for real."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from honesteval.evaluation.plan import plan_evaluation
from tests.fake_openai import fake_openai
from tests.helpers import run_plain

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(root, candidate, task_ids, n_trials=1):
    return run_plain(root, candidate, n_trials=n_trials, task_ids=task_ids)


def test_eve_variant_scores_like_the_python_scorer(tmp_path):
    shutil.copytree(
        EXAMPLES / "circle_packing",
        tmp_path / "cp",
        ignore=shutil.ignore_patterns(".honesteval", "__pycache__"),
    )
    eve, plain = tmp_path / "cp" / "eve", tmp_path / "cp"
    ids = plan_evaluation(plain, "seed", "val").tasks[:2]
    task_ids = [t.id for t in ids]
    eve_records, _ = run(eve, "seed", task_ids)
    plain_records, _ = run(plain, "seed", task_ids)
    assert [r.status for r in eve_records] == ["ok", "ok"]
    for e, p in zip(eve_records, plain_records, strict=True):
        assert (e.task_id, e.seed) == (p.task_id, p.seed)
        assert e.reward == pytest.approx(p.reward)
    ws = Path(eve_records[0].score["details"]["workspace"])
    status = ws / "logs/evaluate/steps/step_01_evaluation/status.txt"
    assert status.read_text() == "ok\nexit 0\n"
    assert (eve / ".honesteval").is_dir() and ws.is_relative_to(eve / ".honesteval")


def test_openai_judge_example_against_a_local_server(tmp_path, monkeypatch):
    shutil.copytree(EXAMPLES / "openai_judge", tmp_path / "oj")
    root = tmp_path / "oj"
    monkeypatch.setenv("HONESTEVAL_OPENAI_KEY", "sk-example")
    with fake_openai() as server:

        def content(body):
            if body["model"] == "my-judge-model":
                return "```yaml\nscore: 1.0\nsummary: right and terse\n```"
            question = body["messages"][-1]["content"].split("Compute ")[1].split(".")[0]
            a, b = (int(x) for x in question.split(" + "))
            return str(a + b)

        server.content = content
        cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
        cfg["adapter"]["base_url"] = cfg["judge"]["base_url"] = server.base_url
        (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
        task_ids = [t.id for t in plan_evaluation(root, "terse", "val").tasks[:3]]
        records, result = run(root, "terse", task_ids)
    assert [r.status for r in records] == ["ok"] * 3 and result.reward == 1.0
    assert records[0].score["details"]["score_yaml"]["exact"] == 1.0
    assert result.tokens == 3 * 30


def test_openai_judge_example_with_its_fake_server(tmp_path, monkeypatch):
    """The example as its README runs it: the shipped fake server, a judge that uses tools."""
    import importlib.util
    import threading

    spec = importlib.util.spec_from_file_location(
        "example_fake_server", EXAMPLES / "openai_judge" / "fake_server.py"
    )
    assert spec is not None and spec.loader is not None
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    shutil.copytree(EXAMPLES / "openai_judge", tmp_path / "oj")
    root = tmp_path / "oj"
    monkeypatch.setenv("HONESTEVAL_OPENAI_KEY", "anything")
    server = fake.make_server(0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
        cfg["adapter"]["base_url"] = cfg["judge"]["base_url"] = url
        (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
        task_ids = [t.id for t in plan_evaluation(root, "stepwise", "val").tasks[:3]]
        records, _ = run(root, "stepwise", task_ids)
    finally:
        server.shutdown()
        server.server_close()
    assert [r.status for r in records] == ["ok"] * 3
    for r in records:
        verdict = r.score["details"]["score_yaml"]
        # the judge read the candidate's prompt and the output: format followed on ANSWER lines
        assert r.rollout.strip().splitlines()[-1].startswith("ANSWER:")
        assert verdict["score"] == verdict["exact"]
        assert verdict["summary"].endswith(", format followed")
        ws = Path(r.score["details"]["workspace"])
        transcript = (ws / "logs/evaluate/steps/step_02_judge/transcript.json").read_text()
        assert "solver/prompt.md" in transcript and "write_score" in transcript
