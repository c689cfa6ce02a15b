"""A multi grader's ``calculate_output``, evaluated without ``eval``.

The formula is parsed with :mod:`ast` and every node checked against a
whitelist: numbers, the graders' names, ``+ - * /``, ``^`` or ``**`` (power,
binding tighter than ``*``), unary signs, parentheses, and the functions
``min max abs floor ceil exp sqrt log``. Anything else (attributes,
subscripts, comparisons, strings, keyword arguments, other names) is refused
by name when the config is loaded. Arithmetic runs on floats, so a huge power
overflows at once instead of building a giant integer; a division by zero, an
overflow or a result that is not finite is a :class:`FormulaError` at grading.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping

__all__ = ["FUNCTIONS", "MAX_FORMULA_CHARS", "Formula", "FormulaError", "compile_formula"]

MAX_FORMULA_CHARS = 2000

FUNCTIONS: Mapping[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "floor": lambda x: float(math.floor(x)),
    "ceil": lambda x: float(math.ceil(x)),
    "exp": math.exp,
    "sqrt": math.sqrt,
    "log": math.log,
}
_ARITY = {"abs": 1, "floor": 1, "ceil": 1, "exp": 1, "sqrt": 1, "log": 1}

_BINARY: Mapping[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    # math.pow raises for (-8) ^ 0.5 where ** would return a complex number.
    ast.Pow: math.pow,
}
_UNARY: Mapping[type[ast.unaryop], Callable[[float], float]] = {ast.USub: lambda a: -a, ast.UAdd: lambda a: a}

Node = Callable[[Mapping[str, float]], float]


class FormulaError(ValueError):
    """A formula that is not allowed, or that has no finite value for these scores."""


class Formula:
    """A checked formula over named scores: call it with their values."""

    def __init__(self, text: str, names: frozenset[str], node: Node) -> None:
        self.text = text
        self.names = names
        self._node = node

    def __call__(self, scores: Mapping[str, float]) -> float:
        missing = self.names - set(scores)
        if missing:
            raise FormulaError(f"calculate_output: no score for {sorted(missing)}")
        try:
            value = float(self._node(scores))
        except (ArithmeticError, ValueError) as exc:  # 1/0, overflow, sqrt(-1), log(0)
            raise FormulaError(f"calculate_output {self.text!r}: {exc}") from None
        if not math.isfinite(value):
            raise FormulaError(f"calculate_output {self.text!r} is not finite for these scores")
        return value


def compile_formula(text: str, names: frozenset[str] | set[str]) -> Formula:
    """``text`` checked against the whitelist, with ``names`` the only variables."""
    if len(text) > MAX_FORMULA_CHARS:
        raise FormulaError(f"calculate_output: longer than {MAX_FORMULA_CHARS} characters")
    # OpenAI's formulas write a power as a ^ b. Python parses ^ as XOR, below
    # + and *, so it is rewritten to ** (which binds tighter, as a power
    # should) before parsing: no string literal is allowed to contain a ^.
    try:
        tree = ast.parse(text.strip().replace("^", "**"), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise FormulaError(f"calculate_output {text!r} is not a formula: {exc}") from None
    used: set[str] = set()
    try:
        node = _build(tree.body, frozenset(names), used)
    except RecursionError:
        raise FormulaError(f"calculate_output {text!r} is nested too deeply") from None
    return Formula(text, frozenset(used), node)


def _refuse(node: ast.AST, why: str = "is not allowed") -> FormulaError:
    return FormulaError(f"calculate_output: {type(node).__name__} {why}")


def _build(node: ast.AST, names: frozenset[str], used: set[str]) -> Node:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise _refuse(node, f"{node.value!r} is not allowed (numbers only)")
        number = float(node.value)
        return lambda _: number
    if isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names))
            raise FormulaError(f"calculate_output: {node.id!r} is not one of the graders ({known})")
        used.add(node.id)
        name = node.id
        return lambda s: float(s[name])
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op, left, right = _BINARY[type(node.op)], _build(node.left, names, used), _build(node.right, names, used)
        return lambda s: op(left(s), right(s))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        uop, operand = _UNARY[type(node.op)], _build(node.operand, names, used)
        return lambda s: uop(operand(s))
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            what = node.func.id if isinstance(node.func, ast.Name) else type(node.func).__name__
            raise FormulaError(f"calculate_output: {what!r} is not an allowed function ({', '.join(FUNCTIONS)})")
        fname = node.func.id
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise FormulaError(f"calculate_output: {fname}() takes plain arguments only")
        want = _ARITY.get(fname)
        if (want is not None and len(node.args) != want) or (want is None and len(node.args) < 2):
            raise FormulaError(f"calculate_output: {fname}() takes {want or 'two or more'} argument(s)")
        fn, args = FUNCTIONS[fname], [_build(a, names, used) for a in node.args]
        return lambda s: float(fn(*(a(s) for a in args)))
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        raise _refuse(node.op)
    raise _refuse(node)
