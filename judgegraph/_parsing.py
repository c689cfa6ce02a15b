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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._internal.markers import (
    HSPACE,
    LINE_BREAKS,
    RESULT_MARKER,
    SCORES_MARKER,
    TooManyFormatChars,
    drop_format_chars,
    raw_offset,
)
from ._internal.strict_json import DuplicateKeyError, loads_unique
from ._score_distribution import topk_distribution
from ._templates import DELIM_CLOSE, DELIM_OPEN, ParserKind
from .types import TokenLogprob

__all__ = [
    "MAX_OUTPUT_CHARS",
    "ParseError",
    "Parsed",
    "copies_evaluated",
    "copy_form",
    "json_body",
    "parse_output",
    "value_distribution",
]


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


_H = HSPACE
# After the value: closing emphasis, brackets, punctuation, then only whitespace.
_TRAILER = re.compile(r"[\s.!*)\]`\"'_~]*+")
# An echoed block runs from a begin delimiter to its end delimiter, or to the
# end of the output when the echo is cut off. The end delimiter's name is
# short and holds no bracket: unbounded, many unclosed "⟦end" were quadratic.
_ECHO_BEGIN = re.compile(re.escape(DELIM_OPEN) + r"begin\b", re.I)
_ECHO_END = re.compile(
    re.escape(DELIM_OPEN) + r"end\b[^" + DELIM_OPEN + DELIM_CLOSE + r"\n]{0,40}" + re.escape(DELIM_CLOSE), re.I
)
# Markers (see _internal.markers), the separator and the value share one line: a
# marker spanning a line break could be assembled from two evaluated fields
# echoed one above the other. Quantifiers next to each other are possessive (``*+``): plain
# ``\s*`` runs side by side backtracked in cubic time on blank lines.
# Markdown emphasis or code around a value (``**4**``, ``_4_``, `` `4` ``) is decoration.
_OPEN = rf"(?:[*_`(]|{_H})*+"
_SEP = rf"{_H}*+[:=]?{_H}*+"
# A sign belongs to its number: "-3" is minus three, never a dash and a 3.
_SIGNED = r"([+\-\u2212]?\d+(?:[.,]\d+)?)"
_NUMBER = re.compile(_SEP + _OPEN + _SIGNED)
_OUT_OF = re.compile(rf"(?:[*_`]|{_H})*+(?:/|out{_H}++of){_H}*+(\d+)", re.I)
_CHOICE = re.compile(
    _SEP
    + rf"(?:[\[*_`(]|{_H})*+(?:(?:response|assistant|answer|output){_H}++)?"
    + rf"(a|b|tie)(?![^\W_])(?:[*_`)\]]|{_H})*+",  # not followed by a letter or digit ("_" is emphasis)
    re.I,
)
_PAIR = re.compile(
    _SEP
    + rf"(?:a{_H}*+[:=]{_H}*+)?{_OPEN}{_SIGNED}[*_`)]*+(?:{_H}*+[,;/|]{_H}*+|{_H}++)"
    + rf"(?:b{_H}*+[:=]{_H}*+)?{_OPEN}{_SIGNED}",
    re.I,
)
# The longest output read. Parsing is linear, so this bounds the time a
# parse can hold the event loop (tens of ms); a legitimate verdict, even
# after a long chain of reasoning, is far shorter.
MAX_OUTPUT_CHARS = 1 << 20
# A verdict has next to no invisible format characters; text made of little
# else costs a Python step per run, so stop counting there.
_MAX_FORMAT_RUNS = 10_000
# The most digits a score can have; longer is off any scale (and int() of a
# huge digit string is slow, or refused past 4,300 digits).
_MAX_DIGITS = 18


def _blank_echoes(text: str) -> str:
    """Blank every echoed block, keeping its line breaks: same-length
    blanking keeps offsets valid for the logprob lookup."""
    if DELIM_OPEN not in text:
        return text
    out: list[str] = []
    pos = 0
    while (begin := _ECHO_BEGIN.search(text, pos)) is not None:
        end = _ECHO_END.search(text, begin.end())
        stop = end.end() if end is not None else len(text)
        out.append(text[pos : begin.start()])
        out.append("\n".join(" " * len(line) for line in text[begin.start() : stop].split("\n")))
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def _whole_int(raw: str, what: str) -> int:
    raw = raw.replace("\u2212", "-")
    if not re.fullmatch(r"[+-]?\d+", raw):
        raise ParseError(f"{what} {raw[:24]!r} is not a whole number")
    if not raw.isascii():
        # int() reads any script's digits ("５", "٥"); a verdict's number is
        # written in ASCII digits, as the templates ask, and anything else is
        # as ambiguous as a number a judge did not write.
        raise ParseError(f"{what} {raw[:24]!r} is not written in ASCII digits")
    if len(raw.lstrip("+-")) > _MAX_DIGITS:
        raise ParseError(f"{what} {raw[:24]}... has {len(raw)} digits: it is on no scale")
    return int(raw)


def _in_scale(value: int, scale: tuple[int, int], what: str) -> int:
    lo, hi = scale
    if not lo <= value <= hi:
        raise ParseError(f"{what} {value} is outside the scale {lo} to {hi}")
    return value


def _line_start(text: str, pos: int) -> int:
    return max(text.rfind(ch, 0, pos) for ch in LINE_BREAKS) + 1


def _last_marker(text: str, marker: re.Pattern[str], name: str) -> re.Match[str]:
    last = prev = None
    for m in marker.finditer(text):
        prev, last = last, m
    if last is None:
        raise ParseError(f"no {name} marker in the output")
    # A verdict line holds one marker. Several on one line is the format
    # instruction ("write `[RESULT] A`, `[RESULT] B` or `[RESULT] TIE`")
    # parroted back, not a verdict.
    if prev is not None and prev.start() >= _line_start(text, last.start()):
        raise ParseError(f"more than one {name} marker on the verdict line (an echo of the format instructions?)")
    return last


def _tail_is_empty(text: str, pos: int, name: str) -> None:
    m = _TRAILER.match(text, pos)
    if m is None or m.end() != len(text):
        raise ParseError(f"unexpected text after the {name} value: {text[pos : pos + 200].strip()[:40]!r}")


def _rationale(text: str, end: int) -> str | None:
    body = text[:end].strip()
    body = re.sub(r"^(feedback|rationale|explanation)\s*:\s*", "", body, flags=re.I)
    return body or None


def _no_number(text: str, pos: int, what: str) -> ParseError:
    line = (text[pos : pos + 40].splitlines() or [""])[0].strip()
    if re.match(r"[-\u2212+]\s+\d", line):
        return ParseError(f"{what} is followed by a sign, a space and a number ({line[:12]!r}): say which it is")
    if not line:
        return ParseError(f"{what} is not followed by a number on its line")
    return ParseError(f"{what} is not followed by a number")


def _label_at(text: str, pos: int, labels: Sequence[str]) -> tuple[str, int, int] | None:
    """The label right after ``pos``: (label, start, end), whole-word and case-insensitive."""
    m = re.compile(r"[ \t]*+[:=\-]?[ \t]*+[\[(\"'`]?").match(text, pos)
    start = m.end() if m else pos
    for label in sorted(labels, key=len, reverse=True):  # "not sure" before "not"
        end = start + len(label)
        if text[start:end].casefold() == label.casefold() and not (end < len(text) and text[end].isalnum()):
            return label, start, end
    return None


def _parse_text(raw: str, kind: ParserKind, scale: tuple[int, int], labels: Sequence[str] = ()) -> Parsed:
    try:
        cleaned, gaps = drop_format_chars(raw, max_runs=_MAX_FORMAT_RUNS)
    except TooManyFormatChars as exc:
        raise ParseError(f"output is not a verdict: {exc}") from None
    text = _blank_echoes(cleaned)
    if kind == "two_scores":
        mk = _last_marker(text, SCORES_MARKER, "[SCORES]")
        m = _PAIR.match(text, mk.end())
        if m is None:
            raise ParseError("[SCORES] is not followed by two numbers on its line")
        a = _in_scale(_whole_int(m.group(1), "score A"), scale, "score A")
        b = _in_scale(_whole_int(m.group(2), "score B"), scale, "score B")
        _tail_is_empty(text, m.end(), "[SCORES]")
        return Parsed((a, b), _rationale(text, mk.start()), raw_offset(gaps, m.start(1)))
    mk = _last_marker(text, RESULT_MARKER, "[RESULT]")
    if kind == "label":
        found = _label_at(text, mk.end(), labels)
        if found is None:
            after = text[mk.end() :].strip()[:40]
            raise ParseError(f"[RESULT] is followed by {after!r}, which is not one of {list(labels)}")
        label, start, end = found
        _tail_is_empty(text, end, "[RESULT]")
        return Parsed(label, _rationale(text, mk.start()), raw_offset(gaps, start))
    if kind == "score":
        m = _NUMBER.match(text, mk.end())
        if m is None:
            raise _no_number(text, mk.end(), "[RESULT]")
        value = _in_scale(_whole_int(m.group(1), "score"), scale, "score")
        end = m.end()
        out_of = _OUT_OF.match(text, end)
        if out_of is not None:
            if out_of.group(1) != str(scale[1]):
                raise ParseError(f"score is given out of {out_of.group(1)[:24]}, scale is {scale[0]} to {scale[1]}")
            end = out_of.end()
        _tail_is_empty(text, end, "[RESULT]")
        return Parsed(value, _rationale(text, mk.start()), raw_offset(gaps, m.start(1)))
    m = _CHOICE.match(text, mk.end())
    if m is None:
        allowed = "A, B or TIE" if kind == "choice" else "A or B"
        raise ParseError(f"[RESULT] is not followed by {allowed}")
    choice = m.group(1).upper()
    if choice == "TIE" and kind == "choice_no_tie":
        raise ParseError("this template allows only A or B, got TIE")
    _tail_is_empty(text, m.end(), "[RESULT]")
    return Parsed("tie" if choice == "TIE" else choice, _rationale(text, mk.start()), raw_offset(gaps, m.start(1)))


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
    m = re.search(r'"' + key + r'"\s*+:\s*+"?', raw)
    return m.end() if m else None


def json_body(raw: str) -> str:
    """The text the JSON parser reads: the output, without a code fence around it.

    Linear: the fence is cut off by hand, since a pattern like
    ```` ```json\\s*(.*?)\\s*``` ```` is quadratic on a long whitespace run.
    """
    body = raw.strip()
    if body.startswith("```") and body.endswith("```") and len(body) >= 6:
        inner = body[3:-3]
        if inner[:4].lower() == "json":
            inner = inner[4:]
        body = inner.strip()
    return body


# JSON string escapes: a tool call's arguments come back re-serialised with
# every non-ASCII letter as \uXXXX, a planted verdict may be written so.
_JSON_ESCAPE = re.compile(r'\\(?:[uU]([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# Default-ignorable characters outside category Cf (which drop_format_chars
# covers): combining grapheme joiner, Hangul fillers, Khmer inherent vowels,
# Mongolian and other variation selectors. They render as nothing.
_IGNORABLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]")


def _json_unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = _JSON_ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else _SIMPLE_ESCAPES[m[2]], text)
    try:  # escaped surrogate pairs (\ud83d\ude00) into the one character they encode
        return out.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:  # a lone surrogate: compared as is
        return out


def copy_form(text: str) -> str:
    """``text`` as the copy check compares it: Unicode NFKC, invisible format
    characters and other default-ignorables removed, JSON escapes decoded
    (after the first two, so a disguised escape is decoded too), case folded
    and whitespace removed. Two texts that read the same to a model (and to
    a reader) have the same form, whichever path they took."""
    text = unicodedata.normalize("NFKC", text)
    text = _json_unescape(_IGNORABLE.sub("", drop_format_chars(text)[0]))
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return "".join(_IGNORABLE.sub("", drop_format_chars(text)[0]).split())


def copies_evaluated(output: str, fields: Iterable[str | None]) -> bool:
    """Whether a structured ``output`` is a copy of text in the evaluated
    ``fields`` (a verdict planted there and repeated by the judge). Both
    sides in :func:`copy_form`; the JSON parser's view of the output (a code
    fence around it cut off first), so a fenced copy is still a copy."""
    out = copy_form(json_body(output))
    return bool(out) and any(v and out in copy_form(v) for v in fields)


def _parse_json(raw: str, kind: ParserKind, scale: tuple[int, int], labels: Sequence[str] = ()) -> Parsed:
    try:
        obj = loads_unique(json_body(raw))
    except DuplicateKeyError as exc:
        # Two values for one key: which one is the verdict is anyone's guess.
        raise ParseError(f"JSON output is ambiguous: {exc} (given twice in one object)") from None
    except json.JSONDecodeError as exc:
        raise ParseError(f"output is not valid JSON: {exc.msg} at char {exc.pos}") from None
    except RecursionError:
        raise ParseError("output is not a verdict: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal past Python's digit limit
        raise ParseError(f"output is not valid JSON: {str(exc)[:80]}") from None
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
        raise ParseError(f"JSON field 'winner' must be A, B or tie, got {str(w)[:40]!r}")
    choice = w.strip().upper()
    if choice == "TIE" and kind == "choice_no_tie":
        raise ParseError("this template allows only A or B, got tie")
    return Parsed("tie" if choice == "TIE" else choice, rationale, _json_offset(raw, "winner"))


def parse_output(
    raw: str, *, kind: ParserKind, scale: tuple[int, int], structured: bool = False, labels: Sequence[str] = ()
) -> Parsed:
    """Parse one judge output or raise :class:`ParseError` with the reason.
    ``labels`` are the allowed verdicts of the ``label`` kind.

    Time is linear in the length of ``raw`` on every path, and an output
    over :data:`MAX_OUTPUT_CHARS` is rejected unread."""
    if len(raw) > MAX_OUTPUT_CHARS:
        raise ParseError(f"output is {len(raw):,} characters, over the {MAX_OUTPUT_CHARS:,} a verdict may have")
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
    tokens from ``offset`` on; multi-token values ("10") and signed values
    included, with the approximation stated in :mod:`judgegraph._score_distribution`."""
    if kind == "label":  # a label verdict has no token distribution yet
        return None
    return topk_distribution(tokens, offset, kind=kind, scale=scale)
