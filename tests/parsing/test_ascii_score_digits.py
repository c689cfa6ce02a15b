"""A score marker holds one number of the scale written in ASCII digits;
any other script's digits ("５", "٥", "৫") are unparsed, in every parser:
text scores, pairwise scores and JSON (issue 26's open class). ``int()``
reads them all, so "[RESULT] ５" used to score 5."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgegraph._parsing import ParseError, parse_output

# Every decimal digit Python's int() accepts that is not ASCII.
_OTHER_DIGITS = st.characters(categories=["Nd"]).filter(lambda c: not c.isascii())


def _number(value: int, other: str, at: int) -> str:
    """``value`` in ASCII digits with the digit at ``at`` replaced by ``other``'s script."""
    digits = list(str(value))
    i = at % len(digits)
    # The same digit value, written in the other script.
    digits[i] = chr(ord(other) - unicodedata.digit(other) + int(digits[i]))
    return "".join(digits)


def _forms(number: str) -> list[tuple[str, str, bool]]:
    return [
        (f"Fine. [RESULT] {number}", "score", False),
        (f"Close call. [SCORES] 3 {number}", "two_scores", False),
        (f"Close call. [SCORES] {number} 3", "two_scores", False),
        (json.dumps({"feedback": "Fine.", "score": number}), "score", True),
    ]


@pytest.mark.parametrize("digit", ["５", "٥", "৫", "𝟓"])
def test_five_in_another_script_is_unparsed(digit: str) -> None:
    for text, kind, structured in _forms(digit):
        with pytest.raises(ParseError, match=r"ASCII digits|not a whole number|not followed"):
            parse_output(text, kind=kind, scale=(1, 9), structured=structured)  # type: ignore[arg-type]


@given(value=st.integers(1, 9), other=_OTHER_DIGITS, at=st.integers(0, 3))
def test_any_non_ascii_digit_in_any_parser_is_unparsed(value: int, other: str, at: int) -> None:
    number = _number(value, other, at)
    for text, kind, structured in _forms(number):
        with pytest.raises(ParseError):
            parse_output(text, kind=kind, scale=(1, 9), structured=structured)  # type: ignore[arg-type]


@given(value=st.integers(1, 9))
def test_ascii_digits_parse_in_every_parser(value: int) -> None:
    score, pair_b, pair_a, as_json = _forms(str(value))
    assert parse_output(score[0], kind="score", scale=(1, 9)).value == value
    assert parse_output(pair_b[0], kind="two_scores", scale=(1, 9)).value == (3, value)
    assert parse_output(pair_a[0], kind="two_scores", scale=(1, 9)).value == (value, 3)
    assert parse_output(as_json[0], kind="score", scale=(1, 9), structured=True).value == value
