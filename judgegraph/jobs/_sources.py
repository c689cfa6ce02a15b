"""Streaming readers: JSONL, CSV, Parquet, LangSmith exports, OpenTelemetry GenAI spans.

Every reader yields :class:`SourceRow` one at a time and holds at most one
chunk (a line, a CSV record, a Parquet batch, one OTLP export request) in
memory, so a job's memory does not grow with the size of its input.

A row that cannot be read (a line that is not JSON) is yielded with
``error`` set rather than raised: the job records it against that row and
goes on.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Shard",
    "SourceFormat",
    "SourceRow",
    "count_rows",
    "detect_format",
    "expand_paths",
    "iter_rows",
    "iter_shard",
    "langsmith_row",
    "lookup",
    "otel_rows",
    "plan_shards",
]

SourceFormat = Literal["auto", "jsonl", "json", "csv", "tsv", "parquet", "langsmith", "otel"]

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
    with open(path, encoding="utf-8", errors="surrogateescape") as fp:
        if path.lower().endswith(".json"):
            for value, _ in _iter_json_stream(fp, peek=True):
                return None if isinstance(value, _Bad) else value
            return None
        for value, _ in _iter_json_lines(fp):
            return None if isinstance(value, _Bad) else value
    return None


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


def _json_rows(path: str, file: int) -> Iterator[SourceRow]:
    with open(path, encoding="utf-8", errors="surrogateescape") as fp:
        values = _iter_json_stream(fp) if path.lower().endswith(".json") else _iter_json_lines(fp)
        for value, n in values:
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
        from .._backend import MissingExtraError

        raise MissingExtraError("reading Parquet", "ray") from None
    pf = pq.ParquetFile(path)
    n = first_row
    for batch in pf.iter_batches(batch_size=batch_size, row_groups=row_groups):
        for record in batch.to_pylist():
            yield SourceRow(file, n, record)
            n += 1


# ------------------------------------------------------------------ LangSmith


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and isinstance(block.get("content"), str):
                parts.append(block["content"])
        return "".join(parts)
    return "" if content is None else str(content)


_ROLES = {
    "human": "user",
    "user": "user",
    "humanmessage": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "aimessage": "assistant",
    "aimessagechunk": "assistant",
    "system": "system",
    "systemmessage": "system",
    "developer": "system",
}


def _norm_message(m: Any) -> dict[str, str] | None:
    """One chat message from OpenAI, LangChain (dict or serialized) or OTel shapes."""
    if not isinstance(m, dict):
        return None
    if m.get("lc") == 1 and isinstance(m.get("kwargs"), dict):  # serialized LangChain message
        kind = str((m.get("id") or [""])[-1]).lower()
        role = _ROLES.get(kind) or _ROLES.get(str(m["kwargs"].get("type", "")).lower())
        return {"role": role, "content": _message_text(m["kwargs"].get("content"))} if role else None
    if "data" in m and isinstance(m["data"], dict) and "type" in m:  # messages_to_dict()
        role = _ROLES.get(str(m["type"]).lower())
        return {"role": role, "content": _message_text(m["data"].get("content"))} if role else None
    raw_role = m.get("role", m.get("type"))
    role = _ROLES.get(str(raw_role).lower()) if raw_role is not None else None
    if role is None:
        return None
    if "parts" in m:  # OTel GenAI parts
        content = "".join(
            str(p.get("content", "")) for p in m["parts"] if isinstance(p, dict) and p.get("type") == "text"
        )
    else:
        content = _message_text(m.get("content"))
    return {"role": role, "content": content}


def _norm_messages(value: Any) -> list[dict[str, str]]:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # LangChain chat model runs batch their inputs: [[...]]
    if not isinstance(value, list):
        return []
    out = [_norm_message(m) for m in value]
    return [m for m in out if m is not None]


def _output_text(outputs: Any) -> str | None:
    """The model's answer in a LangSmith run's outputs, whatever produced it."""
    if isinstance(outputs, str):
        return outputs
    if not isinstance(outputs, dict):
        return None
    gens = outputs.get("generations")
    if isinstance(gens, list) and gens:
        g = gens[0][0] if isinstance(gens[0], list) and gens[0] else gens[0]
        if isinstance(g, dict):
            if isinstance(g.get("message"), dict):
                msg = _norm_message(g["message"])
                if msg:
                    return msg["content"]
            if isinstance(g.get("text"), str):
                return str(g["text"])
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = choices[0].get("message")
        if isinstance(msg, dict):
            return _message_text(msg.get("content"))
        if isinstance(choices[0].get("text"), str):
            return str(choices[0]["text"])
    for key in ("output", "answer", "response", "content", "text", "result"):
        v = outputs.get(key)
        if isinstance(v, str):
            return v
        if isinstance(v, dict):
            msg = _norm_message(v)
            if msg:
                return msg["content"]
    if len(outputs) == 1:
        (only,) = outputs.values()
        if isinstance(only, str):
            return only
    return None


def _input_text(inputs: Any, messages: list[dict[str, str]]) -> str | None:
    users = [m["content"] for m in messages if m["role"] == "user"]
    if users:
        return users[-1]
    if isinstance(inputs, str):
        return inputs
    if not isinstance(inputs, dict):
        return None
    for key in ("question", "input", "query", "prompt", "instruction", "text"):
        v = inputs.get(key)
        if isinstance(v, str):
            return v
    if len(inputs) == 1:
        (only,) = inputs.values()
        if isinstance(only, str):
            return only
    return None


def langsmith_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """A LangSmith run or dataset example, plus derived fields.

    The record keeps its own keys (map ``inputs.question`` etc. directly) and
    gains ``instruction`` (the last user message or the main input string),
    ``response`` (the model's answer, for runs), ``reference`` (a dataset
    example's expected output) and ``messages`` (the conversation with the
    answer appended), whichever can be found.
    """
    row = dict(record)
    inputs = record.get("inputs")
    outputs = record.get("outputs")
    msgs = _norm_messages(inputs.get("messages") if isinstance(inputs, dict) else None)
    derived: dict[str, Any] = {}
    instr = _input_text(inputs, msgs)
    if instr is not None:
        derived["instruction"] = instr
    is_example = "dataset_id" in record and "run_type" not in record
    answer = _output_text(outputs)
    if answer is not None:
        if is_example:
            derived["reference"] = answer
        else:
            derived["response"] = answer
            if msgs:
                derived["messages"] = [*msgs, {"role": "assistant", "content": answer}]
            elif instr is not None:
                derived["messages"] = [{"role": "user", "content": instr}, {"role": "assistant", "content": answer}]
    if not is_example and record.get("error"):
        derived["run_error"] = record["error"]
    for k, v in derived.items():
        row.setdefault(k, v)
    return row


def _langsmith_rows(path: str, file: int) -> Iterator[SourceRow]:
    for r in _json_rows(path, file):
        yield r if r.data is None else SourceRow(r.file, r.row, langsmith_row(r.data))


# ------------------------------------------------------------------ OpenTelemetry GenAI


def _any_value(v: Any) -> Any:
    """OTLP/JSON AnyValue → plain Python."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_any_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv["key"]: _any_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", [])}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attrs(items: Any) -> dict[str, Any]:
    if isinstance(items, dict):  # already flat (some exporters)
        return dict(items)
    return {kv["key"]: _any_value(kv.get("value")) for kv in items or () if isinstance(kv, dict) and "key" in kv}


def _maybe_json(v: Any) -> Any:
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _span_messages(attrs: dict[str, Any], events: list[dict[str, Any]]) -> tuple[list[dict[str, str]], str | None]:
    """(input messages, output text) from any of the GenAI conventions' generations:
    ``gen_ai.input.messages``/``gen_ai.output.messages`` (current),
    ``gen_ai.*.message``/``gen_ai.choice`` events, or indexed
    ``gen_ai.prompt.N.*``/``gen_ai.completion.N.*`` attributes."""
    msgs: list[dict[str, str]] = []
    system = _maybe_json(attrs.get("gen_ai.system_instructions"))
    if isinstance(system, list):
        text = "".join(str(p.get("content", "")) for p in system if isinstance(p, dict))
        if text:
            msgs.append({"role": "system", "content": text})
    output: str | None = None
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        msgs += _norm_messages(_maybe_json(attrs.get("gen_ai.input.messages")))
        outs = _norm_messages(_maybe_json(attrs.get("gen_ai.output.messages")))
        output = outs[0]["content"] if outs else None
        return msgs, output
    if any(str(e.get("name", "")).startswith("gen_ai.") for e in events):
        for e in events:
            name = str(e.get("name", ""))
            ea = _attrs(e.get("attributes"))
            if name in ("gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message"):
                role = name.split(".")[1]
                msgs.append({"role": role, "content": _message_text(_maybe_json(ea.get("content")))})
            elif name == "gen_ai.choice" and output is None:
                message = _maybe_json(ea.get("message"))
                if isinstance(message, dict):
                    output = _message_text(message.get("content"))
                elif "content" in ea:
                    output = _message_text(ea["content"])
            elif name == "gen_ai.client.inference.operation.details":
                msgs += _norm_messages(_maybe_json(ea.get("gen_ai.input.messages")))
                outs = _norm_messages(_maybe_json(ea.get("gen_ai.output.messages")))
                output = outs[0]["content"] if outs else output
        return msgs, output
    i = 0
    while f"gen_ai.prompt.{i}.content" in attrs or f"gen_ai.prompt.{i}.role" in attrs:
        m = _norm_message(
            {
                "role": attrs.get(f"gen_ai.prompt.{i}.role", "user"),
                "content": attrs.get(f"gen_ai.prompt.{i}.content", ""),
            }
        )
        if m:
            msgs.append(m)
        i += 1
    if "gen_ai.completion.0.content" in attrs:
        output = str(attrs["gen_ai.completion.0.content"])
    return msgs, output


def otel_rows(request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """GenAI inference spans in one OTLP/JSON ``ExportTraceServiceRequest``,
    as flat records: ``trace_id``, ``span_id``, ``name``, ``model``,
    ``messages`` (input plus the answer), ``instruction`` (last user
    message), ``response`` (the answer), ``attributes`` and ``resource``.
    Spans that are not GenAI inference calls (no ``gen_ai.*`` attributes,
    or embeddings/tool spans) are skipped."""
    for rs in request.get("resourceSpans") or ():
        resource = _attrs((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            for span in ss.get("spans") or ():
                attrs = _attrs(span.get("attributes"))
                if not any(k.startswith("gen_ai.") for k in attrs):
                    continue
                op = attrs.get("gen_ai.operation.name", "chat")
                if op not in ("chat", "text_completion", "generate_content", "invoke_agent"):
                    continue
                events = [e for e in span.get("events") or () if isinstance(e, dict)]
                msgs, output = _span_messages(attrs, events)
                rec: dict[str, Any] = {
                    "trace_id": span.get("traceId"),
                    "span_id": span.get("spanId"),
                    "name": span.get("name"),
                    "model": attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model"),
                    "attributes": attrs,
                    "resource": resource,
                }
                users = [m["content"] for m in msgs if m["role"] == "user"]
                if users:
                    rec["instruction"] = users[-1]
                if output is not None:
                    rec["response"] = output
                    rec["messages"] = [*msgs, {"role": "assistant", "content": output}]
                else:
                    rec["messages"] = msgs
                yield rec


def _otel_rows(path: str, file: int) -> Iterator[SourceRow]:
    n = 0
    with open(path, encoding="utf-8", errors="surrogateescape") as fp:
        values = _iter_json_stream(fp) if path.lower().endswith(".json") else _iter_json_lines(fp)
        for value, _ in values:
            if isinstance(value, _Bad):
                yield SourceRow(file, n, None, f"OTLP export request: {value}")
                n += 1
                continue
            if not isinstance(value, dict) or "resourceSpans" not in value:
                yield SourceRow(file, n, None, "expected an OTLP/JSON export request with 'resourceSpans'")
                n += 1
                continue
            for rec in otel_rows(value):
                yield SourceRow(file, n, rec)
                n += 1


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
