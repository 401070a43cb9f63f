"""One row per stored trial, for pandas: ``export --format jsonl|csv``, ``evaluate --csv``.

Columns (stable; new ones are only ever appended):

=============  ==========================================================================
split          train / val / test
candidate      candidate name
fingerprint    sha256 of the candidate's content
task_id        the task's real id (never the encoded file name)
trial          k, 0..n_trials-1
seed           base_seed + k, or the task's own seed in a confirmation
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
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from honesteval.errors import ConfigError, StateError
from honesteval.models import SplitResult, TrialRecord
from honesteval.project.loader import load_project
from honesteval.project.split import SPLIT_NAMES
from honesteval.store.reading import trials_of
from honesteval.store.state_dir import Store
from honesteval.store.trial_log import TrialKey

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
_Row = TypeVar("_Row")


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


def _wanted_trials(
    results: Iterable[SplitResult],
) -> dict[tuple[str, str, str], dict[TrialKey, int]]:
    """The (task, seed) pairs each (split, candidate, fingerprint) has a stored result for, each
    with the position where it first appears (results oldest first, tasks and seeds in order)."""
    wanted: dict[tuple[str, str, str], dict[TrialKey, int]] = {}
    position = 0
    for result in results:
        keys = wanted.setdefault((result.split, result.candidate, result.fingerprint), {})
        for task in result.per_task:
            for seed in result.seeds(task.id):
                if (task.id, seed) not in keys:
                    keys[task.id, seed] = position
                    position += 1
    return wanted


def _results(project: str | Path, split: str | None, candidate: str | None) -> _Selection:
    if split is not None and split not in SPLIT_NAMES:
        raise ConfigError(f"unknown split {split!r}: use train, val or test")
    store = Store(load_project(project).state_dir)
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
    return store, results


_Selection = tuple[Store, list[SplitResult]]


def stored_rows(
    project: str | Path,
    row_of: Callable[[TrialRecord], _Row],
    split: str | None = None,
    candidate: str | None = None,
) -> list[_Row]:
    """``row_of`` of every stored trial behind a stored result: each (candidate, fingerprint,
    split, task, seed) once, optionally filtered; ordered by split, candidate, task, trial,
    seed (then by where the trial first appears among the results, oldest first).

    Each trial log is read once however many stored results share it (a rerun of a version
    stores another result), and each record is turned into its row as it is read: only the
    rows are held, never every record (bench/scale.py).
    """
    store, results = _results(project, split, candidate)
    rows: list[tuple[tuple[str, str, str, int, int, int], _Row]] = []
    for (split_name, cand, fingerprint), keys in _wanted_trials(results).items():
        for key, record in store.iter_trials(split_name, cand, fingerprint):
            position = keys.get(key)
            if position is not None:
                order = (record.split, record.candidate, record.task_id, record.trial, record.seed)
                rows.append(((*order, position), row_of(record)))
    rows.sort(key=itemgetter(0))  # the positions are unique: the rows are never compared
    return [row for _, row in rows]


def jsonl_line(record: TrialRecord) -> str:
    """One trial as a JSONL line (:data:`COLUMNS`, JSON types)."""
    return json.dumps(trial_row(record), ensure_ascii=False) + "\n"


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


class _LastLine:
    """A file for :func:`csv.writer` that keeps the one line just written."""

    line = ""

    def write(self, text: str) -> None:
        self.line = text


def csv_line(row: Iterable[Any]) -> str:
    r"""One CSV line (newline-terminated), every cell through :func:`csv_cell`.

    >>> csv_line(["=1+1", "a,b", None, 0.5])
    '\'=1+1,"a,b",,0.5\n'
    """
    sink = _LastLine()
    csv.writer(sink, lineterminator="\n").writerow([csv_cell(v) for v in row])
    return sink.line


def csv_text(rows: Iterable[Iterable[Any]]) -> str:
    """Rows as CSV text, every cell through :func:`csv_cell`."""
    return "".join(csv_line(row) for row in rows)


def csv_record_line(record: TrialRecord) -> str:
    """One trial as a CSV line in :data:`COLUMNS` order (``output``/``errors`` as JSON text)."""
    row = trial_row(record)
    for col in _JSON_COLUMNS:
        value = row[col]
        # a string is a cell as it is: JSON-quoting it gave '"""42"""' in the file
        row[col] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return csv_line(row[c] for c in COLUMNS)


#: The line of one trial, by format; a CSV starts with its header line.
FORMATS: dict[str, Callable[[TrialRecord], str]] = {"jsonl": jsonl_line, "csv": csv_record_line}
HEADERS = {"jsonl": "", "csv": csv_line(COLUMNS)}


def render(records: Iterable[TrialRecord], fmt: str) -> str:
    """Records as the text of ``fmt``, header first (in memory: for one run's trials)."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}: use {' or '.join(FORMATS)}")
    return HEADERS[fmt] + "".join(map(FORMATS[fmt], records))


def export_lines(
    project: str | Path, fmt: str, split: str | None = None, candidate: str | None = None
) -> Iterator[str]:
    """The lines ``export`` writes, header first: every stored trial (:func:`stored_rows`),
    each record turned into its line as its log is read. Bad input raises here, before any
    line is written."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}: use {' or '.join(FORMATS)}")
    return itertools.chain([HEADERS[fmt]], stored_rows(project, FORMATS[fmt], split, candidate))
