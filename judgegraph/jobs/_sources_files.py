"""The file readers: JSON Lines / JSON, CSV / TSV and Parquet, and the :class:`SourceRow` every reader yields."""

from __future__ import annotations

import csv
import json
import re
import sys
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judgegraph._internal.text_files import open_text

from ._sources_json import iter_json_records

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


def _iter_json_stream(fp: Any, *, peek: bool = False) -> Iterator[tuple[Any, int]]:
    """A ``.json`` file: the elements of one top-level array, or top-level
    values one after another, read in linear time. With ``peek``, a
    top-level array yields its first element only. A malformed record
    yields a :class:`_Bad` in its place and the next one is read as usual."""
    for value, n, text in iter_json_records(fp, peek=peek):
        if isinstance(value, ValueError):
            yield _Bad(str(value)), n
            continue
        bad = _undecodable(text)
        yield (value if bad is None else _Bad(bad)), n


def _json_values(path: str) -> Iterator[tuple[Any, int]]:
    """The values of a ``.json`` file (:func:`_iter_json_stream`) or of JSON Lines (:func:`_iter_json_lines`)."""
    with open_text(path, errors="surrogateescape") as fp:
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


class _Lines:
    """The physical lines a CSV reader takes, with the lines of a failed
    record given back so reading resumes on the line after its first."""

    def __init__(self, fp: Any) -> None:
        self._fp = fp
        self._back: deque[str] = deque()
        self.taken: list[str] = []
        self.line = 0  # physical lines consumed so far

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        text = self._back.popleft() if self._back else next(self._fp)
        self.taken.append(text)
        self.line += 1
        return text

    def start_record(self) -> None:
        self.taken = []

    def give_back_all_but_first(self) -> None:
        rest = self.taken[1:]
        self._back.extendleft(reversed(rest))
        self.line -= len(rest)
        self.taken = []


def _csv_rows(path: str, file: int, *, delimiter: str = ",") -> Iterator[SourceRow]:
    """CSV/TSV records, read strictly: an unclosed quote or a stray one is
    that record's problem, named by its line, and reading goes on at the
    next line, so one bad quote never folds the rest of the file into a field."""
    limit = csv.field_size_limit()
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        with open_text(path, errors="surrogateescape", newline="") as fp:
            lines = _Lines(fp)
            reader = csv.reader(lines, delimiter=delimiter, strict=True)
            try:
                header = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                yield SourceRow(file, 0, None, f"unreadable CSV header (line 1): {exc}")
                return
            header = [h.lstrip("\ufeff").strip() for h in header]
            n = 0
            while True:
                lines.start_record()
                first_line = lines.line + 1
                try:
                    record = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    why = "a quoted field is never closed" if "unexpected end of data" in str(exc) else str(exc)
                    yield SourceRow(file, n, None, f"unreadable CSV record at line {first_line}: {why}")
                    n += 1
                    lines.give_back_all_but_first()
                    reader = csv.reader(lines, delimiter=delimiter, strict=True)
                    continue
                if not record:
                    continue  # blank line
                bad = next(
                    ((h, b) for h, f in zip(header, record, strict=False) if (b := _undecodable(f)) is not None),
                    None,
                )
                if bad is not None:
                    yield SourceRow(file, n, None, f"field {bad[0]!r}: {bad[1]}")
                elif len(record) != len(header):
                    yield SourceRow(
                        file,
                        n,
                        None,
                        f"CSV record has {len(record)} fields, the header has {len(header)} (line {first_line})",
                    )
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
