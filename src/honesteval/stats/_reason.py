"""A gate decision's reason as a person reads it: one first sentence that fits a line (who beat
whom, by how much, how sure, and whether the candidate crashed), then the details.

The rule is one helper, :func:`headlined`: whatever the rules of a decision write as their
reason, the recorded reason starts with :func:`headline` and a period, and that first sentence
is at most :data:`HEADLINE_CHARS` characters. :func:`first_sentence` and
:func:`reason_details` read it back.
"""

from __future__ import annotations

from honesteval.models import GateDecision

#: The longest first sentence of a reason (a terminal line, a UI list cell).
HEADLINE_CHARS = 100
#: Where the first sentence ends.
SENTENCE_END = ". "
#: The longest candidate name quoted in a headline (longer ones end in "…").
NAME_CHARS = 24


def first_sentence(reason: str) -> str:
    """The reason's first sentence, without its period.

    >>> first_sentence("b beats a by +0.10 ± 0.02 on 9 tasks. ACCEPT: paired Δ = 0.1")
    'b beats a by +0.10 ± 0.02 on 9 tasks'
    """
    head, _, _ = reason.partition(SENTENCE_END)
    return head.removesuffix(".")


def reason_details(reason: str) -> str:
    """What follows the first sentence: the rules' own words (empty when nothing does).

    >>> reason_details("b beats a by +0.10 ± 0.02 on 9 tasks. ACCEPT: paired Δ = 0.1")
    'ACCEPT: paired Δ = 0.1'
    """
    return reason.partition(SENTENCE_END)[2]


def _name(name: str | None) -> str:
    text = (name or "?").replace(SENTENCE_END, ", ")
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"


def _gain(d: GateDecision) -> str:
    """``+0.38 ± 0.03 on 20 tasks``"""
    se = "" if d.se is None else f" ± {d.se:.2f}"
    return f"{d.delta:+.2f}{se} on {d.n_paired} tasks"


def _failures(d: GateDecision) -> str | None:
    """The candidate failed trials (its own exceptions, timeouts) where the best failed fewer."""
    failed, planned = d.candidate_failed, d.candidate_trials
    if not failed or planned is None:
        return None
    if d.baseline:
        return f"it failed {failed} of {planned} trials"
    if d.current_failed is not None and failed > d.current_failed:
        return f"it failed {failed} of {planned} trials, {_name(d.current)} {d.current_failed}"
    return None


def _verdict(d: GateDecision) -> str:
    c, b = _name(d.candidate), _name(d.current)
    if d.budget is not None:
        return f"{c} is undecided: the budget was reached before its trials ran"
    if d.baseline:
        if d.accept and d.candidate_reward is not None:
            reward = f"{d.candidate_reward:.2f}"
            return f"{c} becomes the baseline at reward {reward} (no current best yet)"
        return f"{c} is not the baseline: too little of val was scored"
    if d.delta is None:
        return f"{c} vs {b} is undecided: too little scored on both sides"
    if d.indecisive:
        return f"{c} vs {b} is undecided at Δ {_gain(d)}"
    if d.accept:
        how = {
            "confirm": ", confirmed on fresh seeds",
            "single": " (one stage, not confirmed)",
        }.get(d.stage or "", "")
        return f"{c} beats {b} by {_gain(d)}{how}"
    if d.stage == "confirm":
        return f"{c} is not promoted over {b}: Δ {_gain(d)}, not confirmed on fresh seeds"
    if d.regressions and d.delta > 0:
        return f"{c} is not promoted over {b}: {len(d.regressions)} task(s) got worse"
    return f"{c} does not beat {b}: Δ {_gain(d)}"


def headline(d: GateDecision) -> str:
    """The first sentence of ``d``'s reason, at most :data:`HEADLINE_CHARS` characters: the
    verdict in words, then the candidate's failures when it failed trials the best did not
    (the verdict's words are cut to fit them: a crash is what a reader must not miss)."""
    said, failures = _verdict(d), _failures(d)
    room = HEADLINE_CHARS if failures is None else HEADLINE_CHARS - len(failures) - 2
    said = said if len(said) <= room else said[: room - 1] + "…"
    return said if failures is None else f"{said}; {failures}"


def headlined(d: GateDecision) -> GateDecision:
    """``d`` with its reason led by :func:`headline` (the rules' reason follows as the details).
    A reason already led by its headline is kept as it is."""
    head = headline(d)
    if first_sentence(d.reason) == head:
        return d
    return d.model_copy(update={"reason": f"{head}{SENTENCE_END}{d.reason}"})
