"""A ``.json`` file read one record at a time, in linear time.

A structural scan finds where each record of the top-level array (or each
top-level value) ends: it tracks strings, escapes and bracket depth, jumping
from one special character to the next with a regular expression, so a
16 MB record costs one pass. Each record's text is then decoded on its own:
a malformed record is that record's problem, and the scan goes on at the
next separator at depth zero.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["iter_json_records"]

_CHUNK = 1 << 16
_DECODER = json.JSONDecoder()
_MAX_RECORD = 256 << 20
_STRING_BODY = re.compile(r'(?:[^"\\]+|\\.)*', re.DOTALL)
_OUTSIDE = re.compile(r'["\[\]{},]')
_SPACE = " \t\r\n\ufeff"
_BREAK = re.compile(r"[ \t\r\n\[{]")


class _Scan:
    """Pulls the text of one record at a time out of a text stream."""

    def __init__(self, fp: Any) -> None:
        self.fp = fp
        self.buf = ""
        self.pos = 0
        self.eof = False

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.fp.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def peek(self, skip: str) -> str | None:
        """The next character that is not in ``skip`` (None at the end)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in skip:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return None

    def record(self, in_array: bool) -> str:
        """The text from here to the end of this record: a ``,`` or ``]`` at
        depth zero in an array, the close of the outermost bracket of a
        top-level value otherwise. Consumes the record, not what ends it."""
        if not in_array and self.buf[self.pos] not in "[{":
            return self._scalar()
        parts: list[str] = []
        depth = 0
        in_string = False
        size = 0
        while True:
            buf, i = self.buf, self.pos
            while True:
                if in_string:
                    i = _STRING_BODY.match(buf, i).end()  # type: ignore[union-attr]  # matches empty
                    if i < len(buf) and buf[i] == '"':
                        in_string = False
                        i += 1
                        continue
                    break  # the string goes on in the next chunk (maybe after a split escape)
                m = _OUTSIDE.search(buf, i)
                if m is None:
                    i = len(buf)
                    break
                ch, j = m.group(), m.start()
                i = j + 1
                if ch == '"':
                    in_string = True
                elif ch in "[{":
                    depth += 1
                elif depth == 0 and in_array:  # "," or "]": this record ends here
                    parts.append(buf[self.pos : j])
                    self.pos = j
                    return "".join(parts)
                elif ch in "]}":
                    depth -= 1
                    if depth <= 0 and not in_array:
                        parts.append(buf[self.pos : i])
                        self.pos = i
                        return "".join(parts)
            parts.append(buf[self.pos : i])
            size += i - self.pos
            self.pos = i
            if size > _MAX_RECORD or not self._more():
                rest = self.buf[self.pos :]
                self.pos = len(self.buf)
                return "".join(parts) + rest

    def _scalar(self) -> str:
        """A top-level value that is not an object or array: up to the next space."""
        parts: list[str] = []
        while True:
            m = _BREAK.search(self.buf, self.pos)
            if m is not None:
                parts.append(self.buf[self.pos : m.start()])
                self.pos = m.start()
                return "".join(parts)
            parts.append(self.buf[self.pos :])
            self.pos = len(self.buf)
            if not self._more():
                return "".join(parts)


def iter_json_records(fp: Any, *, peek: bool = False) -> Iterator[tuple[Any, int, str]]:
    """``(value, n, text)`` for each record, with ``ValueError(why)`` as the
    value of one that does not decode. With ``peek``, a top-level array
    yields its first record only."""
    scan = _Scan(fp)
    first = scan.peek(_SPACE)
    if first is None:
        return
    in_array = first == "["
    if in_array:
        scan.pos += 1
    n = 0
    while True:
        ch = scan.peek(_SPACE + ("," if in_array else ""))
        if ch is None or (in_array and ch == "]"):
            if in_array and ch == "]":
                scan.pos += 1
                if scan.peek(_SPACE) is not None:
                    yield ValueError(f"not valid JSON after the array, at record {n}"), n, ""
            return
        # Most records decode in place at C speed; one that runs past the
        # buffer, or is malformed, is delimited by the scan and decoded alone.
        value: Any = None
        try:
            value, end = _DECODER.raw_decode(scan.buf, scan.pos)
        except (ValueError, RecursionError):
            end = -1
        if 0 <= end < len(scan.buf) or (end == len(scan.buf) and scan.eof):
            text = scan.buf[scan.pos : end]
            scan.pos = end
            yield value, n, text
            n += 1
            if peek and in_array:
                return
            continue
        text = scan.record(in_array)
        if len(text) > _MAX_RECORD:
            yield ValueError(f"record {n} is over {_MAX_RECORD >> 20} MB"), n, ""
        else:
            try:
                value = json.loads(text)
            except ValueError as exc:
                msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                value = ValueError(f"not valid JSON at record {n} ({msg}): {text.strip()[:60]!r}")
            except RecursionError:
                value = ValueError(f"not valid JSON at record {n} (nested too deeply)")
            yield value, n, text
        n += 1
        if peek and in_array:
            return
