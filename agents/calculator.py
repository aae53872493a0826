"""`calculate(expression)`: arithmetic over numbers, without `eval`.

The expression is parsed with `ast` and only numbers, `+ - * / // % **`, unary `+`/`-` and
parentheses are walked. Length, exponent and result size are bounded, so no input can make the
worker spin or eat memory. Anything else gets a message that says what is allowed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

MAX_EXPRESSION_LENGTH = 200
MAX_EXPONENT = 1000
MAX_RESULT = 10**100
MAX_DEPTH = 200

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
}
ALLOWED = "numbers, + - * / // % ** and parentheses"


class CalculationError(ValueError):
    pass


def _check(value: int | float) -> int | float:
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise CalculationError("the result is not a finite number")
        if abs(value) > float(MAX_RESULT):
            raise CalculationError("the result is too large (over 1e100)")
    elif abs(value) > MAX_RESULT:
        raise CalculationError("the result is too large (over 1e100)")
    return value


def _power(base: int | float, exponent: int | float) -> int | float:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculationError(f"exponents are limited to {MAX_EXPONENT}")
    # Refuse before computing: the result would have about bits * exponent bits (2**340 > 1e100).
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and (abs(base).bit_length() - 1) * exponent > 340
    ):
        raise CalculationError("the result is too large (over 1e100)")
    if base == 0 and exponent < 0:
        raise CalculationError("zero cannot be raised to a negative power")
    result = base**exponent
    if isinstance(result, complex):
        raise CalculationError("the result is not a real number")
    return result


def _walk(node: ast.AST, depth: int = 0) -> int | float:
    if depth > MAX_DEPTH:
        raise CalculationError("the expression is nested too deeply")
    if isinstance(node, ast.Expression):
        return _walk(node.body, depth + 1)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculationError(f"only {ALLOWED} are allowed")
        return _check(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_walk(node.operand, depth + 1)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _walk(node.left, depth + 1)
        right = _walk(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            return _check(_power(left, right))
        if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
            raise CalculationError("division by zero")
        try:
            return _check(_BINARY[type(node.op)](left, right))
        except OverflowError:
            raise CalculationError("the result is too large (over 1e100)") from None
    raise CalculationError(f"only {ALLOWED} are allowed")


def evaluate(expression: str) -> int | float:
    if not isinstance(expression, str):
        raise CalculationError("the expression must be text")
    text = expression.strip()
    if not text:
        raise CalculationError("the expression is empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise CalculationError(f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    text = text.replace("×", "*").replace("÷", "/").replace("^", "**")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        raise CalculationError(f"that is not an arithmetic expression ({ALLOWED})") from None
    try:
        return _walk(tree)
    except OverflowError:
        raise CalculationError("the result is too large (over 1e100)") from None
    except RecursionError:
        raise CalculationError("the expression is nested too deeply") from None


def format_number(value: int | float) -> str:
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return format(value, ".15g")
    return str(value)


def calculate(expression: str) -> str:
    """Calculate an arithmetic expression exactly: numbers, + - * / // % ** and parentheses.

    Args:
        expression: the expression to calculate, for example "(2 + 3) * 4 ** 2".
    """
    try:
        return format_number(evaluate(expression))
    except CalculationError as exc:
        return f"Error: cannot calculate {str(expression)[:80]!r}: {exc}."
