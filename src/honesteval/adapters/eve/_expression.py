"""Eve's ``scalar_score_expression``: a small arithmetic language over score.yaml, never ``eval``.

Eve evaluates the expression with Python's ``eval`` and the whole score tree bound to
``score`` (e.g. ``min(score["dimensions"]["coverage"], ...)``). Here the expression is parsed
with :mod:`ast` and only these forms are allowed:

* numbers; ``score`` (the whole tree, as in Eve); any other name is a top-level key of the
  tree; ``a.b.c`` and ``a["b"]`` walk into nested mappings;
* ``+ - * / // % **``, unary ``+ - not``, comparisons, ``and``/``or``, ``x if c else y``;
* calls of ``min``, ``max``, ``abs``, ``round`` with positional arguments.

Anything else (attribute calls, imports, lambdas, comprehensions, strings outside a
subscript) is refused when the project loads. Numbers are floats, so ``**`` overflows into an
error instead of building a huge integer.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from honesteval.errors import ConfigError

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _round(x: float, ndigits: float = 0) -> float:
    return round(x, int(ndigits))  # numbers are floats here; round() wants an int of digits


_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs, "round": _round}
_ALLOWED = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.Subscript,
    ast.Constant,
    *_BINARY,
    *_UNARY,
    *_COMPARE,
)


class ExpressionError(ValueError):
    """The expression cannot be evaluated on this score tree (a missing key, a bad type)."""


class ScoreExpression:
    """A parsed, checked ``scalar_score_expression``; call :meth:`evaluate` per score tree."""

    def __init__(self, source: str):
        self.source = " ".join(source.split())
        try:
            self._tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            raise ConfigError(
                f"evaluation.scalar_score_expression is not an expression: {exc.msg}"
            ) from None
        for node in ast.walk(self._tree):
            self._check(node)

    @staticmethod
    def _check(node: ast.AST) -> None:
        where = "evaluation.scalar_score_expression"
        if not isinstance(node, _ALLOWED):
            raise ConfigError(f"{where}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS):
                raise ConfigError(f"{where}: only {', '.join(_FUNCTIONS)} may be called")
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                raise ConfigError(f"{where}: call {node.func.id}() with plain arguments")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | str):
            raise ConfigError(f"{where}: constant {node.value!r} is not allowed")

    def evaluate(self, score: Any) -> float:
        """The expression's value on ``score`` (the parsed score.yaml) as a finite float."""
        try:
            value = self._eval(self._tree.body, score)
        except (ArithmeticError, TypeError) as exc:
            raise ExpressionError(f"scalar_score_expression failed: {exc}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ExpressionError(
                f"scalar_score_expression gave {type(value).__name__} {value!r}, not a number"
            )
        if not math.isfinite(value):
            raise ExpressionError(f"scalar_score_expression is not finite: {value}")
        return float(value)

    def _eval(self, node: ast.expr, score: Any) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                raise TypeError(f"a string ({node.value!r}) is only allowed as a key")
            return node.value if isinstance(node.value, bool) else _number(node.value)
        if isinstance(node, ast.Name):
            return score if node.id == "score" else _lookup(score, node.id)
        if isinstance(node, ast.Attribute):
            return _lookup(self._eval(node.value, score), node.attr)
        if isinstance(node, ast.Subscript):
            key = node.slice
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str | int)):
                raise TypeError('a subscript must be a literal key, e.g. score["dimensions"]')
            return _lookup(self._eval(node.value, score), key.value)
        if isinstance(node, ast.BinOp):
            binary = _BINARY[type(node.op)]
            left = _number(self._eval(node.left, score))
            return binary(left, _number(self._eval(node.right, score)))
        if isinstance(node, ast.UnaryOp):
            operand = self._eval(node.operand, score)
            return _UNARY[type(node.op)](
                operand if isinstance(node.op, ast.Not) else _number(operand)
            )
        if isinstance(node, ast.Compare):
            first = _number(self._eval(node.left, score))
            for cmp, right_node in zip(node.ops, node.comparators, strict=True):
                right = _number(self._eval(right_node, score))
                if not _COMPARE[type(cmp)](first, right):
                    return False
                first = right
            return True
        if isinstance(node, ast.BoolOp):
            values = (self._eval(v, score) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.IfExp):
            chosen = node.body if self._eval(node.test, score) else node.orelse
            return self._eval(chosen, score)
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)  # checked in _check
            args = [_number(self._eval(a, score)) for a in node.args]
            return _FUNCTIONS[node.func.id](*args)
        raise TypeError(f"{type(node).__name__} is not allowed")  # unreachable after _check


def _lookup(tree: Any, key: str | int) -> Any:
    if not isinstance(tree, dict):
        raise ExpressionError(f"cannot look up {key!r} in a {type(tree).__name__}")
    if key not in tree:
        raise ExpressionError(f"score.yaml has no key {key!r} (keys: {', '.join(map(str, tree))})")
    return tree[key]


def _number(value: Any) -> float:
    """A float operand; a comparison's bool counts as 0/1 as in Python (Eve uses eval)."""
    if not isinstance(value, int | float):
        raise TypeError(f"{type(value).__name__} {value!r} is not a number")
    return float(value)
