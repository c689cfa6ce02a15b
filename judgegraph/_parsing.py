"""Parse judge outputs, strictly.

Rules that keep us out of peers' known bugs:
- Only the judge's own output is parsed, never the prompt; echoed evaluated
  content (anything between our delimiters) is blanked before matching.
- The marker that counts is the last one, and nothing but punctuation may
  follow it: a score quoted mid-rationale, or inside an echoed answer, is not
  the verdict.
- Invisible format characters (zero-width, bidi marks) are removed first.
- A value that is not a whole number on the declared scale is rejected, never
  clipped or rounded.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ._score_distribution import topk_distribution
from ._templates import DELIM_CLOSE, DELIM_OPEN, ParserKind
from .types import TokenLogprob

__all__ = ["ParseError", "Parsed", "parse_output", "value_distribution"]


class ParseError(ValueError):
    """The output is not an acceptable verdict; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Parsed:
    value: int | tuple[int, int] | str
    rationale: str | None
    # Character offset, in the raw output, where the (first) value starts.
    # Used to find the score token in per-token logprobs.
    offset: int | None


_TRAILER = re.compile(r"[\s.!*)\]`\"'_~]*")
# An echoed block runs from a begin delimiter to its end delimiter, or to the
# end of the output when the echo is cut off.
_ECHO = re.compile(
    re.escape(DELIM_OPEN)
    + r"begin\b.*?(?:"
    + re.escape(DELIM_OPEN)
    + r"end\b[^"
    + DELIM_CLOSE
    + r"]*"
    + re.escape(DELIM_CLOSE)
    + r"|\Z)",
    re.S | re.I,
)
_RESULT = re.compile(r"\[\s*result\s*\]", re.I)
_SCORES = re.compile(r"\[\s*scores\s*\]", re.I)
# Possessive whitespace (``\s*+``): with plain ``\s*`` runs side by side,
# a long run of blank lines after a marker (a degenerate output, or a blanked
# echo) backtracks in cubic time: 400 newlines took 2.6 s.
_NUMBER = re.compile(r"\s*+[:=\-]?\s*+\(?\s*+([+-]?\d+(?:[.,]\d+)?)\s*+\)?")
_OUT_OF = re.compile(r"\s*(?:/|out\s+of)\s*(\d+)", re.I)
_CHOICE = re.compile(
    r"\s*+[:=\-]?\s*+\[*+\(?\s*+(?:(?:response|assistant|answer|output)\s++)?(a|b|tie)\b\s*+\)?\]*+", re.I
)
_PAIR = re.compile(
    r"\s*+[:=\-]?\s*+(?:a\s*+[:=]\s*+)?(\d+(?:[.,]\d+)?)(?:\s*+[,;/|]\s*+|\s++)(?:b\s*+[:=]\s*+)?(\d+(?:[.,]\d+)?)",
    re.I,
)


def _clean(text: str) -> tuple[str, Sequence[int]]:
    """Drop invisible format characters; keep a map back to raw offsets."""
    if text.isascii():  # no format characters below U+0080: skip the per-character walk
        return text, range(len(text) + 1)
    kept: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        if unicodedata.category(ch) == "Cf":
            continue
        kept.append(ch)
        index.append(i)
    index.append(len(text))
    return "".join(kept), index


def _blank_echoes(text: str) -> str:
    # Same-length blanking keeps offsets valid for the logprob lookup.
    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return _ECHO.sub(blank, text)


def _whole_int(raw: str, what: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", raw):
        raise ParseError(f"{what} {raw!r} is not a whole number")
    return int(raw)


def _in_scale(value: int, scale: tuple[int, int], what: str) -> int:
    lo, hi = scale
    if not lo <= value <= hi:
        raise ParseError(f"{what} {value} is outside the scale {lo}-{hi}")
    return value


def _last_marker(text: str, marker: re.Pattern[str], name: str) -> re.Match[str]:
    found = list(marker.finditer(text))
    if not found:
        raise ParseError(f"no {name} marker in the output")
    last = found[-1]
    # A verdict line holds one marker. Several on one line is the format
    # instruction ("write `[RESULT] A`, `[RESULT] B` or `[RESULT] TIE`")
    # parroted back, not a verdict.
    line_start = text.rfind("\n", 0, last.start()) + 1
    if len(found) > 1 and found[-2].start() >= line_start:
        raise ParseError(f"more than one {name} marker on the verdict line (an echo of the format instructions?)")
    return last


def _tail_is_empty(text: str, pos: int, name: str) -> None:
    rest = text[pos:]
    m = _TRAILER.match(rest)
    if m is None or m.end() != len(rest):
        raise ParseError(f"unexpected text after the {name} value: {rest.strip()[:40]!r}")


def _rationale(text: str, end: int) -> str | None:
    body = text[:end].strip()
    body = re.sub(r"^(feedback|rationale|explanation)\s*:\s*", "", body, flags=re.I)
    return body or None


def _label_at(text: str, pos: int, labels: Sequence[str]) -> tuple[str, int, int] | None:
    """The label right after ``pos``: (label, start, end), whole-word and case-insensitive."""
    m = re.compile(r"\s*+[:=\-]?\s*+[\[(\"'`]?").match(text, pos)
    start = m.end() if m else pos
    for label in sorted(labels, key=len, reverse=True):  # "not sure" before "not"
        end = start + len(label)
        if text[start:end].casefold() == label.casefold() and not (end < len(text) and text[end].isalnum()):
            return label, start, end
    return None


def _parse_text(raw: str, kind: ParserKind, scale: tuple[int, int], labels: Sequence[str] = ()) -> Parsed:
    cleaned, index = _clean(raw)
    text = _blank_echoes(cleaned)
    if kind == "two_scores":
        mk = _last_marker(text, _SCORES, "[SCORES]")
        m = _PAIR.match(text, mk.end())
        if m is None:
            raise ParseError("[SCORES] is not followed by two numbers")
        a = _in_scale(_whole_int(m.group(1), "score A"), scale, "score A")
        b = _in_scale(_whole_int(m.group(2), "score B"), scale, "score B")
        _tail_is_empty(text, m.end(), "[SCORES]")
        return Parsed((a, b), _rationale(text, mk.start()), index[m.start(1)])
    mk = _last_marker(text, _RESULT, "[RESULT]")
    if kind == "label":
        found = _label_at(text, mk.end(), labels)
        if found is None:
            after = text[mk.end() :].strip()[:40]
            raise ParseError(f"[RESULT] is followed by {after!r}, which is not one of {list(labels)}")
        label, start, end = found
        _tail_is_empty(text, end, "[RESULT]")
        return Parsed(label, _rationale(text, mk.start()), index[start])
    if kind == "score":
        m = _NUMBER.match(text, mk.end())
        if m is None:
            raise ParseError("[RESULT] is not followed by a number")
        value = _in_scale(_whole_int(m.group(1), "score"), scale, "score")
        end = m.end()
        out_of = _OUT_OF.match(text, end)
        if out_of is not None:
            if int(out_of.group(1)) != scale[1]:
                raise ParseError(f"score is given out of {out_of.group(1)}, scale is {scale[0]}-{scale[1]}")
            end = out_of.end()
        _tail_is_empty(text, end, "[RESULT]")
        return Parsed(value, _rationale(text, mk.start()), index[m.start(1)])
    m = _CHOICE.match(text, mk.end())
    if m is None:
        allowed = "A, B or TIE" if kind == "choice" else "A or B"
        raise ParseError(f"[RESULT] is not followed by {allowed}")
    choice = m.group(1).upper()
    if choice == "TIE" and kind == "choice_no_tie":
        raise ParseError("this template allows only A or B, got TIE")
    _tail_is_empty(text, m.end(), "[RESULT]")
    return Parsed("tie" if choice == "TIE" else choice, _rationale(text, mk.start()), index[m.start(1)])


def _json_int(obj: dict[str, object], key: str, scale: tuple[int, int]) -> int:
    if key not in obj:
        raise ParseError(f"JSON output has no {key!r} field")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise ParseError(f"JSON field {key!r} is not a number")
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            raise ParseError(f"JSON field {key!r} = {v!r} is not a whole number")
        v = int(v)
    if isinstance(v, str):
        v = _whole_int(v.strip(), f"JSON field {key!r}")
    return _in_scale(v, scale, f"JSON field {key!r}")


def _json_offset(raw: str, key: str) -> int | None:
    m = re.search(r'"' + key + r'"\s*:\s*"?', raw)
    return m.end() if m else None


def _parse_json(raw: str, kind: ParserKind, scale: tuple[int, int], labels: Sequence[str] = ()) -> Parsed:
    body = raw.strip()
    fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.S)
    if fence:
        body = fence.group(1)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ParseError(f"output is not valid JSON: {exc.msg} at char {exc.pos}") from None
    if not isinstance(obj, dict):
        raise ParseError("JSON output is not an object")
    rationale = obj.get("rationale", obj.get("feedback"))
    rationale = rationale.strip() or None if isinstance(rationale, str) else None
    if kind == "score":
        return Parsed(_json_int(obj, "score", scale), rationale, _json_offset(raw, "score"))
    if kind == "label":
        v = obj.get("label")
        # Exact, up to case and surrounding space: "yes." or "Yes, mostly" is not a label.
        match = [lb for lb in labels if isinstance(v, str) and v.strip().casefold() == lb.casefold()]
        if not match:
            raise ParseError(f"JSON field 'label' must be one of {list(labels)}, got {v!r}")
        return Parsed(match[0], rationale, _json_offset(raw, "label"))
    if kind == "two_scores":
        a = _json_int(obj, "score_a", scale)
        b = _json_int(obj, "score_b", scale)
        return Parsed((a, b), rationale, _json_offset(raw, "score_a"))
    w = obj.get("winner")
    if not isinstance(w, str) or w.strip().upper() not in ("A", "B", "TIE"):
        raise ParseError(f"JSON field 'winner' must be A, B or tie, got {w!r}")
    choice = w.strip().upper()
    if choice == "TIE" and kind == "choice_no_tie":
        raise ParseError("this template allows only A or B, got tie")
    return Parsed("tie" if choice == "TIE" else choice, rationale, _json_offset(raw, "winner"))


def parse_output(
    raw: str, *, kind: ParserKind, scale: tuple[int, int], structured: bool = False, labels: Sequence[str] = ()
) -> Parsed:
    """Parse one judge output or raise :class:`ParseError` with the reason.
    ``labels`` are the allowed verdicts of the ``label`` kind."""
    if not raw or not raw.strip():
        raise ParseError("empty output")
    if kind == "label" and not labels:
        raise ValueError("the label parser needs the allowed labels")
    if structured:
        return _parse_json(raw, kind, scale, labels)
    return _parse_text(raw, kind, scale, labels)


def value_distribution(
    tokens: list[TokenLogprob] | None,
    raw: str,
    offset: int | None,
    *,
    kind: ParserKind,
    scale: tuple[int, int],
) -> dict[int | str, float] | None:
    """Probability of each admissible value, from the top-k logprobs of the
    tokens from ``offset`` on; multi-token values ("10") included, with the
    approximation stated in :mod:`judgegraph._score_distribution`."""
    if kind == "label":  # a label verdict has no token distribution yet
        return None
    return topk_distribution(tokens, offset, kind=kind, scale=scale)
