"""The run's call journal: every target call is a line before the target runs; work run
again after a lost worker takes what this run stored and calls only what it did not."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path

import pytest

from honesteval.evaluation.call_journal import CallJournal, RunEnded, TrialCalls
from honesteval.evaluation.plan import adapter_for, plan_evaluation
from honesteval.evaluation.tally import EvaluationTally
from honesteval.evaluation.trial import TrialSettings, run_target_with_retries
from tests.helpers import call_counts


def _journaled(root: Path, **kw: object) -> tuple[CallJournal, TrialSettings, list]:
    plan = plan_evaluation(root, "base", "val", **kw)
    journal = CallJournal.create(plan.project.state_dir)
    settings = plan.settings.model_copy(update={"calls_journal": journal.name})
    return journal, settings, plan.todo


def _run_batch(settings: TrialSettings, specs: list) -> list:
    """What a batch task run does with each trial: take it as stored, or begin and call it."""
    adapter = adapter_for(settings.project_root)
    out = []
    with TrialCalls(settings) as calls:
        for spec in specs:
            record = calls.stored(spec)
            if record is None:
                calls.begin(spec)
                record = run_target_with_retries(adapter, spec, settings)
            out.append(record)
    return out


def test_a_batch_run_again_calls_only_the_trial_it_had_in_flight(make_project):
    root = make_project(["pass", "pass", "pass"])
    journal, settings, specs = _journaled(root, n_trials=1)
    # A lost worker: it called the first two targets, stored the first, died in the second.
    adapter = adapter_for(str(root))
    with TrialCalls(settings) as lost:
        lost.begin(specs[0])
        first = run_target_with_retries(adapter, specs[0], settings)
        lost.begin(specs[1])
        adapter.run_target(specs[1].task, settings.candidate, seed=specs[1].seed)  # not stored
    again = _run_batch(settings, specs)
    # t00 taken as stored (its record as the lost worker wrote it), t01 and t02 called
    assert again[0].model_dump() == first.model_dump()
    keys = [(s.task.id, s.seed) for s in specs]
    assert call_counts(root) == Counter({keys[0]: 1, keys[1]: 2, keys[2]: 1})
    assert journal.calls() == call_counts(root)  # 4 calls of 3 trials
    tally = EvaluationTally([("t00", None), ("t01", None), ("t02", None)], 1)
    tally.count_calls(journal.calls())
    assert (tally.n_calls, tally.repeats()) == (4, {"t01": 1})


def test_a_record_stored_before_the_run_is_called_again(make_project):
    root = make_project(["pass"])
    _, settings, specs = _journaled(root, n_trials=1)
    adapter = adapter_for(str(root))
    # an earlier run's record of the trial (say, an infra_error this run retries)
    run_target_with_retries(adapter, specs[0], settings)
    with TrialCalls(settings) as lost:
        lost.begin(specs[0])  # this run's call, lost before it stored anything
    with TrialCalls(settings) as again:
        assert again.stored(specs[0]) is None


def test_a_journal_gone_means_the_run_ended(make_project):
    root = make_project(["pass"])
    journal, settings, specs = _journaled(root, n_trials=1)
    journal.remove()
    with TrialCalls(settings) as calls, pytest.raises(RunEnded):
        calls.begin(specs[0])
    assert call_counts(root) == Counter()


def test_trials_run_in_process_keep_no_journal(make_project):
    root = make_project(["pass"])
    plan = plan_evaluation(root, "base", "val", n_trials=1)
    with TrialCalls(plan.settings) as calls:
        calls.begin(plan.todo[0])
        assert calls.stored(plan.todo[0]) is None
    assert not (root / ".honesteval" / "calls").exists()
    tally = EvaluationTally([("t00", None)], 1)
    assert (tally.n_calls, tally.repeats()) == (0, {})


def _begin_many(settings: TrialSettings, specs: list) -> None:
    with TrialCalls(settings) as calls:
        for spec in specs:
            calls.begin(spec)


def test_lines_from_several_processes_are_whole(make_project):
    root = make_project(["pass"] * 50)
    journal, settings, specs = _journaled(root, n_trials=4)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_begin_many, args=(settings, specs)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * 4
    # 200 trials, each begun by 4 processes: every line parses, none is lost
    assert journal.calls() == Counter({(s.task.id, s.seed): 4 for s in specs})
