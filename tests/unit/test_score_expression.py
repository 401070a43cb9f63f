"""scalar_score_expression: Eve's expressions evaluate without eval; anything else is refused."""

from __future__ import annotations

import pytest

from honesteval.adapters.eve._expression import ExpressionError, ScoreExpression
from honesteval.errors import ConfigError

# The expression of Eve's math_proof evaluation config, as it appears there (folded YAML).
MATH_PROOF = """min(
  score["dimensions"]["coverage"],
  score["dimensions"]["correctness"],
  score["dimensions"]["coverage"] * 0.4 +
  score["dimensions"]["correctness"] * 0.3 +
  score["dimensions"]["dependency"] * 0.15 +
  score["dimensions"]["strategy"] * 0.10 +
  score["dimensions"]["clarity"] * 0.05
)"""

DIMS = {
    "dimensions": {
        "coverage": 0.8,
        "correctness": 0.9,
        "dependency": 0.5,
        "strategy": 0.4,
        "clarity": 1.0,
    },
    "summary": "text is ignored",
}


def test_math_proof_expression():
    weighted = 0.8 * 0.4 + 0.9 * 0.3 + 0.5 * 0.15 + 0.4 * 0.10 + 1.0 * 0.05  # = 0.755
    assert ScoreExpression(MATH_PROOF).evaluate(DIMS) == pytest.approx(min(0.8, 0.9, weighted))
    low = {"dimensions": {**DIMS["dimensions"], "correctness": 0.2}}
    assert ScoreExpression(MATH_PROOF).evaluate(low) == pytest.approx(0.2)


@pytest.mark.parametrize(
    "source,expected",
    [
        ("dimensions.coverage * 2 - 1", 0.8 * 2 - 1),
        ("max(dimensions.clarity, 0) ** 2 / 4", 0.25),
        ("abs(-dimensions.strategy)", 0.4),
        ("round(dimensions.coverage + 0.04, 1)", 0.8),
        ("1.0 if dimensions.coverage >= 0.8 else 0.0", 1.0),
        ("0.5 if 0 < dimensions.dependency < 0.5 else 0.25", 0.25),
        ("(dimensions.clarity > 0.5 and dimensions.strategy > 0.5) * 1.0", 0.0),
        ("score['dimensions'].clarity // 1 + 7 % 4", 4.0),
    ],
)
def test_the_allowed_forms(source, expected):
    assert ScoreExpression(source).evaluate(DIMS) == pytest.approx(expected)


@pytest.mark.parametrize(
    "source,message",
    [
        ("__import__('os').system('touch x')", "only min, max, abs, round may be called"),
        ("score.keys()", "only min, max, abs, round may be called"),
        ("(lambda: 1)()", "only min, max, abs, round may be called"),
        ("lambda: 1", "Lambda is not allowed"),
        ("[x for x in (1, 2)]", "ListComp is not allowed"),
        ("min(*[1, 2])", "plain arguments"),
        ("[1, 2]", "List is not allowed"),
        ("max(1, default=2)", "plain arguments"),
        ("x = 1", "not an expression"),
        ("None", "constant None is not allowed"),
    ],
)
def test_refused_when_the_project_loads(source, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ScoreExpression(source)


@pytest.mark.parametrize(
    "source,message",
    [
        ("dimensions.missing", "no key 'missing'"),
        ("score", "dict"),
        ("summary * 1", "not a number"),
        ("dimensions.coverage > 0.5", "bool"),
        ("10.0 ** 10 ** 10", "failed"),
        ("dimensions.coverage / (dimensions.coverage - 0.8)", "failed"),
        ("dimensions.__class__", "no key '__class__'"),
    ],
)
def test_bad_values_are_expression_errors(source, message):
    with pytest.raises(ExpressionError, match=message):
        ScoreExpression(source).evaluate(DIMS)
