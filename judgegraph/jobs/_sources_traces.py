"""Trace readers: LangSmith runs and dataset examples, and OpenTelemetry GenAI spans (OTLP/JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ._sources_files import SourceRow, _Bad, _json_rows, _json_values

__all__ = ["langsmith_row", "otel_rows"]


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
    return _sole_string(outputs)


def _sole_string(d: dict[Any, Any]) -> str | None:
    """The value of a one-key dict, when it is a string."""
    if len(d) == 1:
        (only,) = d.values()
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
    return _sole_string(inputs)


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
    for value, _ in _json_values(path):
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
