"""The help text of every setting a request carries, as plain strings.

One text per setting: the fields of :class:`~honesteval.models.EvaluateRequest`,
:class:`~honesteval.models.GateRequest` and :class:`~honesteval.models.GateOverrides` take
their ``description`` from here, the CLI's ``--help`` and the flows' parameter docs (the UI's
run form) read the same text. A module of its own, without pydantic, so ``honesteval --help``
stays quick.
"""

from __future__ import annotations

SETTINGS_HELP: dict[str, str] = {
    "candidate": "Candidate to evaluate (a folder or file in the project's candidates "
    "folder); empty: the current best.",
    "challenger": "The challenger: a candidate in the project's candidates folder.",
    "split": "Which split to score: train or val (test is sealed; only finalize scores it).",
    "trials": "Trials per task (trial k runs with seed base_seed + k); empty: the "
    "project's `trials`.",
    "base_seed": "Seed of trial 0; empty: the project's `base_seed`. Every candidate gets the "
    "same seeds.",
    "ks": "The k values for pass^k and pass@k, e.g. [1, 2, 3]; empty: 1..n_trials.",
    "task_ids": "Evaluate only these task ids of the split (the result is marked subset).",
    "max_concurrency": "Trials in flight at once; empty: the project's `max_concurrency`.",
    "fresh": "Ignore stored trials and run every trial again.",
    "batch_size": "Trials per task run; empty: one per trial up to 64 trials, batches above.",
    "task_runner": "Where trials run: thread (this process) or dask.",
    "dask_address": "Address of an existing Dask scheduler, e.g. tcp://host:8786 (task_runner "
    "dask); empty: a local cluster.",
    "budget": "Spend cap of this command, {usd: dollars, tokens: count}: no trial starts "
    "once it would take the spend past it; empty: the project's `budget`.",
    "budget_usd": "Spend cap in dollars (the trials' reported cost); empty: the project's "
    "`budget.usd`.",
    "budget_tokens": "Spend cap in tokens (the trials' reported tokens); empty: the project's "
    "`budget.tokens`.",
    "overrides": "Gate settings for this gate only; empty: the project's gate.",
    "mode": "Gate mode: paired, significant, threshold or strict; empty: the project's gate.",
    "k_se": "The gain must exceed k_se standard errors; empty: the project's gate.",
    "alpha": "One-sided significance level; replaces k_se when set.",
    "confirm": "Confirm a screen pass on fresh seeds at the online level alpha_j (the "
    "search-level guarantee); false: single stage, no such guarantee; empty: the project's gate.",
    "confirm_trials": "Trials per task of the confirmation; empty: the project's "
    "`confirm_trials` (3x the screen's trials by default).",
}
