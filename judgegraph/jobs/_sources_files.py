"""The file readers: JSON Lines / JSON, CSV / TSV and Parquet, and the :class:`SourceRow` every reader yields."""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SourceRow"]

_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One input record. ``file`` is the index of its file in the sorted
    path list, ``row`` its position within that file (0-based)."""

    file: int
    row: int
    data: Mapping[str, Any] | None
    error: str | None = None

    @property
    def where(self) -> str:
        return f"row {self.row}" if self.file == 0 else f"file {self.file} row {self.row}"


# ------------------------------------------------------------------ JSON streaming


class _Bad(str):
    """A record that could not be decoded; the string is why."""


# Text files are read with errors="surrogateescape", so a byte that is not
# UTF-8 spoils only its own record (as U+DC80..U+DCFF) instead of the file.
_ESCAPED = re.compile("[\udc80-\udcff]")


def _undecodable(text: str) -> str | None:
    m = _ESCAPED.search(text)
    if m is None:
        return None
    return f"not valid UTF-8: byte 0x{ord(m.group()) - 0xDC00:02x} at character {m.start()}"


def _iter_json_lines(fp: Any) -> Iterator[tuple[Any, int]]:
    """JSON Lines: one value per non-blank line. A broken line yields a
    :class:`_Bad` in its place and the next line is read as usual."""
    n = 0
    for line in fp:
        if not line.strip():
            continue
        bad = _undecodable(line)
        if bad is not None:
            yield _Bad(bad), n
            n += 1
            continue
        try:
            yield json.loads(line), n
        except ValueError as exc:
            yield _Bad(f"not valid JSON ({exc}): {line.strip()[:60]!r}"), n
        except RecursionError:
            yield _Bad(f"not valid JSON (nested too deeply): {line.strip()[:60]!r}"), n
        n += 1


_MAX_RECORD = 256 << 20


def _iter_json_stream(fp: Any, *, peek: bool = False) -> Iterator[tuple[Any, int]]:
    """A ``.json`` file: the elements of one top-level array, or top-level
    values one after another, decoded a chunk at a time. With ``peek``, a
    top-level array yields its first element only. A malformed record ends
    the file with a :class:`_Bad` (there is no line to resynchronise on)."""
    decoder = json.JSONDecoder()
    buf, pos, n = "", 0, 0
    eof = in_array = started = False

    def refill() -> bool:
        nonlocal buf, pos, eof
        chunk = fp.read(_CHUNK)
        if not chunk:
            eof = True
            return False
        buf, pos = buf[pos:] + chunk, 0
        return True

    while True:
        while True:
            while pos < len(buf) and (buf[pos] in " \t\r\n\ufeff" or (in_array and buf[pos] == ",")):
                pos += 1
            if pos < len(buf) or eof or not refill():
                break
        if pos >= len(buf):
            return
        if not started:
            started = True
            if buf[pos] == "[":
                in_array = True
                pos += 1
                continue
        if in_array and buf[pos] == "]":
            return
        while True:
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                if not eof and len(buf) - pos < _MAX_RECORD and refill():
                    continue
                yield _Bad(f"not valid JSON at record {n} ({exc.msg})"), n
                return
            except RecursionError:
                yield _Bad(f"not valid JSON at record {n} (nested too deeply)"), n
                return
            if end == len(buf) and not eof and not isinstance(value, dict | list) and refill():
                continue  # a bare number may go on in the next chunk
            bad = _undecodable(buf[pos:end])
            pos = end
            yield (value if bad is None else _Bad(bad)), n
            n += 1
            break
        if peek and in_array:
            return


def _json_values(path: str) -> Iterator[tuple[Any, int]]:
    """The values of a ``.json`` file (:func:`_iter_json_stream`) or of JSON Lines (:func:`_iter_json_lines`)."""
    with open(path, encoding="utf-8", errors="surrogateescape") as fp:
        yield from _iter_json_stream(fp) if path.lower().endswith(".json") else _iter_json_lines(fp)


def _json_rows(path: str, file: int) -> Iterator[SourceRow]:
    for value, n in _json_values(path):
        if isinstance(value, _Bad):
            yield SourceRow(file, n, None, str(value))
        elif not isinstance(value, dict):
            yield SourceRow(file, n, None, f"expected a JSON object, got {type(value).__name__}")
        else:
            yield SourceRow(file, n, value)


# ------------------------------------------------------------------ CSV


def _csv_rows(path: str, file: int, *, delimiter: str = ",") -> Iterator[SourceRow]:
    limit = csv.field_size_limit()
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fp:
            reader = csv.reader(fp, delimiter=delimiter)
            try:
                header = next(reader)
            except StopIteration:
                return
            header = [h.lstrip("\ufeff").strip() for h in header]
            n = 0
            while True:
                try:
                    record = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    yield SourceRow(file, n, None, f"unreadable CSV record: {exc}")
                    n += 1
                    continue
                if not record:
                    continue  # blank line
                bad = next((b for f in record if (b := _undecodable(f)) is not None), None)
                if bad is not None:
                    yield SourceRow(file, n, None, bad)
                elif len(record) != len(header):
                    yield SourceRow(file, n, None, f"CSV record has {len(record)} fields, the header has {len(header)}")
                else:
                    yield SourceRow(file, n, dict(zip(header, record, strict=True)))
                n += 1
    finally:
        csv.field_size_limit(limit)


# ------------------------------------------------------------------ Parquet


def _parquet_rows(
    path: str, file: int, *, row_groups: Sequence[int] | None = None, first_row: int = 0, batch_size: int = 1024
) -> Iterator[SourceRow]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        from judgegraph.types import MissingExtraError

        raise MissingExtraError("reading Parquet", "ray") from None
    pf = pq.ParquetFile(path)
    n = first_row
    for batch in pf.iter_batches(batch_size=batch_size, row_groups=row_groups):
        for record in batch.to_pylist():
            yield SourceRow(file, n, record)
            n += 1
