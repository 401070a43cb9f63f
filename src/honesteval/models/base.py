"""What every model shares: the frozen bases (records; sections of the project file), the status
and split vocabularies, the rule for a task's cluster and the timestamp format."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

TrialStatus = Literal["ok", "failed", "infra_error", "scorer_error"]
# Statuses whose reward counts in the mean: "ok" (the scorer's reward) and "failed" (a
# candidate failure, scored at the project's failure_reward). The rest are missing data.
COUNTED_STATUSES: frozenset[str] = frozenset({"ok", "failed"})
MISSING_STATUSES: frozenset[str] = frozenset({"infra_error", "scorer_error"})
SplitName = Literal["train", "val", "test"]
#: Whose time a target's ``timeout_s`` is (the project's ``timeout_is``).
TimeoutIs = Literal["failure", "missing"]
# Every reward lies in [0, 1] (SPEC §2): intervals stay inside it, and the gate's worst case
# imputes its ends for missing tasks.
REWARD_RANGE = (0.0, 1.0)
StderrMethod = Literal["task", "clustered", "combined"]


EMPTY_CLUSTER = "an empty cluster name is not a cluster: omit 'cluster' for a task of its own"


def cluster_key(task_id: str, cluster: str | None) -> str:
    """The independent unit a task is drawn in: its cluster, or, without one, the task alone.

    The one rule for "a task without a cluster" (``aggregate``'s clustered SE and interval and
    the gate's paired SE both use it). The prefixes keep a task id from clashing with a
    cluster name. An empty name is refused: it would silently merge unrelated tasks.

    >>> cluster_key("t1", None), cluster_key("t1", "algebra")
    ('t:t1', 'c:algebra')
    """
    if cluster is None:
        return f"t:{task_id}"
    if not cluster:
        raise ValueError(EMPTY_CLUSTER)
    return f"c:{cluster}"


def _cluster_name(cluster: str | None) -> str | None:
    if cluster == "":
        raise ValueError(EMPTY_CLUSTER)
    return cluster


def utc_now() -> str:
    """An ISO-8601 UTC timestamp with microseconds (sortable as text)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StrictModel(BaseModel):
    """A validated, immutable section of ``honesteval.yaml``: unknown keys rejected.

    The base of the project schema (:mod:`honesteval.project.schema`) and of the adapter kinds'
    configs, which live beside their adapters: here, below both, so neither imports the other
    for it.
    """

    # strict: `trials: true` is not 1 and `retries: "3"` is not 3; no NaN or inf anywhere.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


OnlineRule = Literal["lord++", "fallback", "e-lond"]
GateStage = Literal["single", "screen", "confirm"]
ScreenStop = Literal["futility", "efficacy"]
#: Why a confirmation in rounds stopped (stats.rounds_decide).
ConfirmStop = Literal["promote", "futile", "short", "exhausted", "unreachable", "coverage"]
#: What stands between a confirmation's evidence for the candidate and its bar (INDECISIVE).
ConfirmShort = Literal["budget", "missing"]
GateMode = Literal["paired", "significant", "threshold", "strict"]
NoRegression = Literal["report", "passed", "any", "off"]
