"""One row per stored trial, for pandas: ``export --format jsonl|csv``, ``evaluate --csv``.

Columns (stable; new ones are only ever appended):

=============  ==========================================================================
split          train / val / test
candidate      candidate name
fingerprint    sha256 of the candidate's content
task_id        the task's real id (never the encoded file name)
trial          k, 0..n_trials-1
seed           base_seed + k
status         ok, infra_error, scorer_error (and any status added later)
reward         float for ``ok`` trials (and counted failures); empty otherwise
attempts       how many times the target ran (InfraError retries included)
error          the last error text, empty when none
feedback       the scorer's feedback, empty when none
started_at     ISO-8601 UTC start of the trial
target_s       seconds in the target
score_s        seconds in the scorer
tokens         tokens reported by the adapter, empty when unknown
cost           cost reported by the adapter, empty when unknown
output         what the target returned (the record's ``rollout``)
errors         every attempt's error as a JSON list
=============  ==========================================================================

In CSV every value is text (``reward`` parses as float with ``pd.read_csv``): an ``output``
that is a string is the string itself (``42``, not ``"42"``), a number or boolean its JSON
text, a list or mapping JSON text. In JSONL the values keep their JSON types and ``output`` /
``errors`` are JSON values, not strings. A CSV cell that a spreadsheet would run as a formula
(it starts with ``= + - @``, a tab or a carriage return and is not a plain number) gets a
leading single quote (:func:`csv_cell`, OWASP's rule against CSV injection): task ids,
feedback and candidate names come from untrusted hands.

References
----------
OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError, StateError
from honesteval.models import SplitResult, TrialRecord
from honesteval.project.loader import SPLIT_NAMES, load_project
from honesteval.store.reading import trials_of
from honesteval.store.state_dir import Store

COLUMNS = (
    "split",
    "candidate",
    "fingerprint",
    "task_id",
    "trial",
    "seed",
    "status",
    "reward",
    "attempts",
    "error",
    "feedback",
    "started_at",
    "target_s",
    "score_s",
    "tokens",
    "cost",
    "output",
    "errors",
)
_JSON_COLUMNS = ("output", "errors")


def trial_row(record: TrialRecord) -> dict[str, Any]:
    """One trial as a row with exactly :data:`COLUMNS` (JSON types)."""
    return {
        "split": record.split,
        "candidate": record.candidate,
        "fingerprint": record.fingerprint,
        "task_id": record.task_id,
        "trial": record.trial,
        "seed": record.seed,
        "status": record.status,
        "reward": record.reward,
        "attempts": record.attempts,
        "error": record.error,
        "feedback": record.feedback,
        "started_at": record.started_at,
        "target_s": record.target_s,
        "score_s": record.score_s,
        "tokens": record.tokens,
        "cost": record.cost,
        "output": record.rollout,
        "errors": list(record.errors),
    }


def result_records(store: Store, result: SplitResult) -> Iterator[TrialRecord]:
    """The stored trials a result was aggregated from (a record missing on disk is skipped)."""
    for task in trials_of(store, result):
        yield from (r for r in task.records if r is not None)


def stored_records(
    project: str | Path, split: str | None = None, candidate: str | None = None
) -> list[TrialRecord]:
    """Every stored trial behind a stored result, each (candidate, fingerprint, split, task,
    seed) once, optionally filtered; ordered by split, candidate, task, trial."""
    if split is not None and split not in SPLIT_NAMES:
        raise ConfigError(f"unknown split {split!r}: use train, val or test")
    proj = load_project(project)
    store = Store(proj.state_dir)
    results = [
        r
        for r in store.read_results()
        if (split is None or r.split == split) and (candidate is None or r.candidate == candidate)
    ]
    if not results:
        what = " ".join(
            x
            for x in (f"for {candidate!r}" if candidate else "", f"on {split}" if split else "")
            if x
        )
        raise StateError(f"no stored results {what}".rstrip() + ": nothing to export")
    seen: dict[tuple[str, str, str, str, int], TrialRecord] = {}
    for result in results:
        for record in result_records(store, result):
            key = (record.split, record.candidate, record.fingerprint, record.task_id, record.seed)
            seen[key] = record
    return sorted(seen.values(), key=lambda r: (r.split, r.candidate, r.task_id, r.trial, r.seed))


def to_jsonl(records: Iterable[TrialRecord]) -> str:
    return "".join(json.dumps(trial_row(r), ensure_ascii=False) + "\n" for r in records)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell no spreadsheet runs as a formula: text starting with ``= + - @``, a tab or a
    carriage return gets a leading ``'`` (OWASP), unless it is a plain number (``-0.25``).
    Non-text values pass as they are; None is an empty cell.

    >>> [csv_cell(v) for v in ("=HYPERLINK(1)", "+SUM(1+1)*cmd|x", "@SUM(1)", "ok", "-0.25")]
    ["'=HYPERLINK(1)", "'+SUM(1+1)*cmd|x", "'@SUM(1)", 'ok', '-0.25']
    >>> csv_cell(None), csv_cell(-0.5)
    ('', -0.5)
    """
    if value is None:
        return ""
    if not isinstance(value, str) or not value.startswith(_FORMULA_START):
        return value
    try:
        float(value)
        return value  # a number, not a formula
    except ValueError:
        return "'" + value


def csv_text(rows: Iterable[Iterable[Any]]) -> str:
    """Rows as CSV text, every cell through :func:`csv_cell`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return out.getvalue()


def _csv_row(record: TrialRecord) -> list[Any]:
    row = trial_row(record)
    for col in _JSON_COLUMNS:
        value = row[col]
        # a string is a cell as it is: JSON-quoting it gave '"""42"""' in the file
        row[col] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return [row[c] for c in COLUMNS]


def to_csv(records: Iterable[TrialRecord]) -> str:
    return csv_text([COLUMNS, *(_csv_row(r) for r in records)])


FORMATS = {"jsonl": to_jsonl, "csv": to_csv}


def render(records: Iterable[TrialRecord], fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}: use {' or '.join(FORMATS)}")
    return FORMATS[fmt](records)
