"""What a verdict marker is, in one place for the neutraliser and the parser.

The parser reads ``[RESULT]`` / ``[SCORES]`` only when the whole marker sits
on one line. The neutraliser defuses a wider set: any whitespace inside the
brackets, and a marker cut in two at either edge of a field. So whatever the
parser could read in evaluated content has been turned into parentheses,
even where fields are joined: a user turn ending in ``[`` and the judged
reply starting with ``RESULT] 5`` form no marker.

Invisible format characters (zero-width spaces, bidi marks: Unicode
category Cf) cannot hide a marker: the parser drops them before it looks,
and the neutraliser's patterns step over the same set.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

__all__ = [
    "HSPACE",
    "LINE_BREAKS",
    "RESULT_MARKER",
    "SCORES_MARKER",
    "TooManyFormatChars",
    "drop_format_chars",
    "is_format_char",
    "neutralize_markers",
    "raw_offset",
]

# Every character str.splitlines() breaks on.
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
# One whitespace character that does not end a line.
HSPACE = r"[^\S\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"

# Unicode category Cf, as ranges: Unicode 14 (Python 3.11) plus the Egyptian
# hieroglyph controls of Unicode 15. Looking each character up in
# unicodedata instead costs about 0.2 s per MB of non-Latin-1 text; building
# this set from unicodedata at import, 0.4 s. tests/test_parsing_hostile.py
# checks that it covers the running Python's Cf characters.
_CF_RANGES = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)  # fmt: skip
_CF = "[" + "".join(f"{chr(a)}-{chr(b)}" if a != b else chr(a) for a, b in _CF_RANGES) + "]"
_CF_RUNS = re.compile(f"{_CF}+")

_WORDS = ("result", "scores")


def _word(word: str) -> str:
    """``word``, with format characters allowed between its letters."""
    return f"{_CF}*+".join(re.escape(ch) for ch in word)


# The parser's markers: on one line, after format characters are dropped.
RESULT_MARKER = re.compile(rf"\[{HSPACE}*+result{HSPACE}*+\]", re.I)
SCORES_MARKER = re.compile(rf"\[{HSPACE}*+scores{HSPACE}*+\]", re.I)

_GAP = rf"(?:\s|{_CF})*+"
# The neutraliser's marker: any whitespace or format characters inside.
_LOOSE = re.compile(rf"\[({_GAP}(?:{'|'.join(_word(w) for w in _WORDS)}){_GAP})\]", re.I)
_LOOSE_ASCII = re.compile(r"\[(\s*+(?:result|scores)\s*+)\]", re.I)  # the same, for text with no format characters
# A field's tail that a following field could complete into a marker ("[",
# "[RES"), and a head that completes one ("ULT] 5", "] 5"). Longest first.
_PREFIXES = sorted({w[:i] for w in _WORDS for i in range(len(w) + 1)}, key=len, reverse=True)
_SUFFIXES = sorted({w[i:] for w in _WORDS for i in range(len(w) + 1)}, key=len, reverse=True)
_OPEN_TAIL = re.compile(_GAP + "(?:" + "|".join(_word(p) for p in _PREFIXES) + ")" + _GAP, re.I)
_CLOSE_HEAD = re.compile(_GAP + "(?:" + "|".join(_word(s) for s in _SUFFIXES) + ")" + _GAP, re.I)


def is_format_char(ch: str) -> bool:
    return any(a <= ord(ch) <= b for a, b in _CF_RANGES)


class TooManyFormatChars(ValueError):
    """More runs of format characters than a caller allows."""


def drop_format_chars(text: str, *, max_runs: int | None = None) -> tuple[str, Sequence[tuple[int, int]]]:
    """``text`` without format characters, and what :func:`raw_offset` needs
    to map offsets in it back to ``text``. One pass of a character class;
    past ``max_runs`` runs of them it stops and raises, so the work on text
    made of little else is bounded too."""
    if text.isascii():  # no format character below U+0080
        return text, ()
    spans: list[tuple[int, int]] = []
    for m in _CF_RUNS.finditer(text):
        spans.append(m.span())
        if max_runs is not None and len(spans) > max_runs:
            raise TooManyFormatChars(f"more than {max_runs:,} runs of invisible format characters")
    if not spans:
        return text, ()
    kept: list[str] = []
    gaps: list[tuple[int, int]] = []  # after each removed run: (its offset in the kept text, removed so far)
    pos = visible = removed = 0
    for a, b in spans:
        kept.append(text[pos:a])
        visible += a - pos
        removed += b - a
        gaps.append((visible, removed))
        pos = b
    kept.append(text[pos:])
    return "".join(kept), gaps


def raw_offset(gaps: Sequence[tuple[int, int]], offset: int) -> int:
    """Map an offset in the text without format characters back to the raw text."""
    i = bisect.bisect_right(gaps, offset, key=lambda gap: gap[0])
    return offset + gaps[i - 1][1] if i else offset


def neutralize_markers(text: str) -> str:
    """Turn the brackets of every marker in ``text`` into parentheses, also
    of a marker cut off at either end of it. Linear: one pattern pass, and
    only the last ``[`` can open a marker that runs to the end (the rest of
    the text holds no other bracket), only the first ``]`` close one begun
    before the start."""
    if "[" not in text and "]" not in text:
        return text
    text = (_LOOSE_ASCII if text.isascii() else _LOOSE).sub(r"(\1)", text)
    start = text.rfind("[")
    if start >= 0 and _OPEN_TAIL.fullmatch(text, start + 1):
        text = text[:start] + "(" + text[start + 1 :]
    end = text.find("]")
    if end >= 0 and _CLOSE_HEAD.fullmatch(text, 0, end):
        text = text[:end] + ")" + text[end + 1 :]
    return text
