"""Streaming readers: JSONL, CSV, Parquet, LangSmith exports, OpenTelemetry GenAI spans.

Every reader yields :class:`SourceRow` one at a time and holds at most one
chunk (a line, a CSV record, a Parquet batch, one OTLP export request) in
memory, so a job's memory does not grow with the size of its input.

A row that cannot be read (a line that is not JSON) is yielded with
``error`` set rather than raised: the job records it against that row and
goes on.
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from judgegraph._internal.text_files import open_text

from ._sources_files import SourceRow, _Bad, _csv_rows, _iter_json_lines, _iter_json_stream, _json_rows, _parquet_rows
from ._sources_traces import _langsmith_rows, _otel_rows

__all__ = [
    "Shard",
    "SourceChangedError",
    "SourceFormat",
    "check_unchanged",
    "count_rows",
    "detect_format",
    "expand_paths",
    "iter_rows",
    "iter_shard",
    "lookup",
    "plan_shards",
    "source_state",
]

SourceFormat = Literal["auto", "jsonl", "json", "csv", "tsv", "parquet", "langsmith", "otel"]


@dataclass(frozen=True, slots=True)
class Shard:
    """A unit of reading for the Ray engine: a whole file, or a range of a
    Parquet file's row groups (``first_row`` is the row number of its first row)."""

    file: int
    path: str
    format: str
    row_groups: tuple[int, ...] | None = None
    first_row: int = 0


# ------------------------------------------------------------------ paths


def expand_paths(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """A file, a directory (its files, sorted), a glob, or a list of these."""
    items = [path] if isinstance(path, str | os.PathLike) else list(path)
    out: list[str] = []
    for p in items:
        s = os.fspath(p)
        if any(ch in s for ch in "*?["):
            found = sorted(glob.glob(s))
            if not found:
                raise FileNotFoundError(f"source: no file matches {s!r}")
            out += found
        elif os.path.isdir(s):
            found = sorted(str(f) for f in Path(s).iterdir() if f.is_file() and not f.name.startswith("."))
            if not found:
                raise FileNotFoundError(f"source: directory {s!r} has no files")
            out += found
        elif os.path.isfile(s):
            out.append(s)
        else:
            raise FileNotFoundError(f"source: no such file {s!r}")
    return out


def detect_format(path: str) -> str:
    """From the extension; JSON files are sniffed for LangSmith or OTLP shapes."""
    name = path.lower()
    for ext in (".gz", ".zst"):
        if name.endswith(ext):
            raise ValueError(f"source: {path!r}: compressed input is not supported; decompress it first")
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".tsv"):
        return "tsv"
    if name.endswith((".jsonl", ".ndjson", ".json")):
        first = _first_json_value(path)
        if isinstance(first, dict):
            if "resourceSpans" in first:
                return "otel"
            if "run_type" in first or ("inputs" in first and ("outputs" in first or "dataset_id" in first)):
                return "langsmith"
        return "json" if name.endswith(".json") else "jsonl"
    raise ValueError(
        f"source: cannot tell the format of {path!r} from its name; "
        "pass format= one of jsonl, json, csv, tsv, parquet, langsmith, otel"
    )


def _first_json_value(path: str) -> Any:
    with open_text(path, errors="surrogateescape") as fp:
        if path.lower().endswith(".json"):
            for value, _ in _iter_json_stream(fp, peek=True):
                return None if isinstance(value, _Bad) else value
            return None
        for value, _ in _iter_json_lines(fp):
            return None if isinstance(value, _Bad) else value
    return None


# ------------------------------------------------------------------ dispatch


def _rows_for(path: str, file: int, fmt: str) -> Iterator[SourceRow]:
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt in ("jsonl", "json"):
        return _json_rows(path, file)
    if fmt == "csv":
        return _csv_rows(path, file)
    if fmt == "tsv":
        return _csv_rows(path, file, delimiter="\t")
    if fmt == "parquet":
        return _parquet_rows(path, file)
    if fmt == "langsmith":
        return _langsmith_rows(path, file)
    if fmt == "otel":
        return _otel_rows(path, file)
    raise ValueError(f"source: unknown format {fmt!r}")


def iter_rows(paths: Sequence[str], fmt: str = "auto") -> Iterator[SourceRow]:
    """All rows of all files, in path order then file order."""
    for i, p in enumerate(paths):
        yield from _rows_for(p, i, fmt)


def count_rows(paths: Sequence[str], fmt: str = "auto") -> int | None:
    """A cheap row count for the progress bar, or None where it would need a
    full parse (OTLP spans, JSON arrays, CSV with quoted newlines)."""
    total = 0
    for p in paths:
        f = detect_format(p) if fmt == "auto" else fmt
        if f == "parquet":
            import pyarrow.parquet as pq

            total += pq.ParquetFile(p).metadata.num_rows
        elif f in ("jsonl", "langsmith") and not p.lower().endswith(".json"):
            with open(p, "rb") as fp:
                lines = 0
                last = b"\n"
                while chunk := fp.read(1 << 20):
                    lines += chunk.count(b"\n")
                    last = chunk[-1:]
                if last != b"\n":
                    lines += 1
                total += lines
        else:
            return None
    return total


def plan_shards(paths: Sequence[str], fmt: str = "auto", *, row_groups_per_shard: int = 1) -> list[Shard]:
    """Split the input for parallel reading: one shard per file, and Parquet
    files further by row groups. Row numbers match :func:`iter_rows`."""
    shards: list[Shard] = []
    for i, p in enumerate(paths):
        f = detect_format(p) if fmt == "auto" else fmt
        if f == "parquet":
            import pyarrow.parquet as pq

            md = pq.ParquetFile(p).metadata
            start = 0
            for g in range(0, md.num_row_groups, row_groups_per_shard):
                groups = tuple(range(g, min(g + row_groups_per_shard, md.num_row_groups)))
                shards.append(Shard(i, p, f, groups, start))
                start += sum(md.row_group(k).num_rows for k in groups)
        else:
            shards.append(Shard(i, p, f))
    return shards


def iter_shard(shard: Shard) -> Iterator[SourceRow]:
    if shard.row_groups is not None:
        return _parquet_rows(shard.path, shard.file, row_groups=shard.row_groups, first_row=shard.first_row)
    return _rows_for(shard.path, shard.file, shard.format)


# ------------------------------------------------------------------ field paths

_MISSING = object()


def lookup(record: Any, path: str) -> Any:
    """``a.b.0.c`` into nested dicts and lists; a key that itself contains
    dots is found first. Returns a sentinel-free ``KeyError`` on a miss."""
    if isinstance(record, Mapping) and path in record:
        return record[path]
    cur = record
    for part in path.split("."):
        if isinstance(cur, Mapping):
            if part not in cur:
                raise KeyError(path)
            cur = cur[part]
        elif isinstance(cur, list | tuple):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                raise KeyError(path) from None
        else:
            raise KeyError(path)
    return cur


# ------------------------------------------------------------------ a source that changes


class SourceChangedError(ValueError):
    """An input file changed while a job read it: its rows may come from two
    versions of the file, so the run is not marked finished."""


def source_state(paths: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Each file's size and SHA-256, to tell whether it changed while a job read it."""
    state: dict[str, tuple[int, str]] = {}
    for p in paths:
        digest = hashlib.sha256()
        size = 0
        with open(p, "rb") as fp:
            while chunk := fp.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        state[os.path.abspath(p)] = (size, digest.hexdigest())  # absolute: a resume may start elsewhere
    return state


def changed_files(before: Mapping[str, Sequence[Any]], after: Mapping[str, Sequence[Any]]) -> list[str]:
    """Each file whose size or bytes differ between two :func:`source_state`
    pictures (stored ones are JSON lists), said in a few words."""

    def what(p: str) -> str:
        if p not in before:
            return f"{p} (new)"
        if p not in after:
            return f"{p} (gone)"
        was, now = before[p][0], after[p][0]
        return f"{p} ({was:,} -> {now:,} bytes)" if was != now else f"{p} (same size, other bytes)"

    return [what(p) for p in sorted(set(before) | set(after)) if tuple(before.get(p, ())) != tuple(after.get(p, ()))]


def resume_notice(stored_spec: Mapping[str, Any], now: Mapping[str, tuple[int, str]]) -> str | None:
    """What a resumed run says when its input changed since the run began
    (the state stored with the run under ``source_state``), or None."""
    was = stored_spec.get("source_state")
    if not isinstance(was, Mapping):
        return None  # a run stored before states were kept
    changed = changed_files(was, now)
    if not changed:
        return None
    return (
        "the input changed since this run began: " + "; ".join(changed) + ". This pass judged the file as it is "
        "now (rows whose content is unchanged were not judged again) and, once finished, the run holds only its rows"
    )


def check_unchanged(before: dict[str, tuple[int, str]], paths: Sequence[str]) -> None:
    """Raise :class:`SourceChangedError`, naming each file, when any changed
    since ``before`` was taken (its size or its bytes): what was judged is
    saved, but rows read early and late may come from different versions."""
    try:
        after = source_state(paths)
    except OSError as exc:
        raise SourceChangedError(
            f"{exc.filename}: the input went away while the job read it ({exc.strerror})"
        ) from None
    changed = changed_files(before, after)
    if changed:
        raise SourceChangedError(
            "the input changed while the job read it: " + "; ".join(changed) + ". What was judged is saved and the "
            "run is not marked finished; when the file is settled, run the same command again: unchanged rows are "
            "not judged twice, and the run then reflects one version of the file"
        )
