"""Source readers: formats, field mapping, bad rows, trace exports, flat memory."""

from __future__ import annotations

import csv
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from judgegraph.jobs import RowPreparer, SourceConfig, detect_format, iter_rows, langsmith_row, otel_rows
from judgegraph.jobs._sources import count_rows, expand_paths, lookup, plan_shards
from judgegraph.types import ConversationInput, PairwiseInput, PointwiseInput

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = [
    {"q": f"Question {i}?", "out": [f"first {i}", f"second {i}"], "pref": ["A", "B", "tie"][i % 3], "cat": "x"}
    for i in range(6)
]


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _prep(kind: str, path: Path, **kw: Any) -> list[Any]:
    cfg = SourceConfig(path=str(path), **kw)
    preparer = RowPreparer(kind, cfg)
    return [preparer(r) for r in iter_rows(expand_paths(cfg.path), cfg.format)]


def test_jsonl_mapping_with_paths_labels_and_categories(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "a.jsonl", ROWS)
    rows = _prep(
        "pairwise",
        src,
        fields={"instruction": "q", "response_a": "out.0", "response_b": "out.1"},
        label="pref",
        category="cat",
    )
    assert [r.row for r in rows] == list(range(6))
    assert all(r.problem is None for r in rows)
    first = rows[0].item
    assert isinstance(first, PairwiseInput)
    assert (first.instruction, first.response_a, first.response_b) == ("Question 0?", "first 0", "second 0")
    assert [json.loads(r.label) for r in rows[:3]] == ["A", "B", "tie"]
    assert rows[0].category == "x"
    # Same input, same hash; different input, different hash.
    again = _prep("pairwise", src, fields={"instruction": "q", "response_a": "out.0", "response_b": "out.1"})
    assert [r.item_hash for r in again] == [r.item_hash for r in rows]
    assert len({r.item_hash for r in rows}) == 6


def test_bad_rows_are_reported_by_row_and_field_and_the_rest_still_read(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text(
        json.dumps({"instruction": "q", "response": "r"})
        + "\n{not json\n"
        + json.dumps({"instruction": "q2"})
        + "\n[1, 2]\n\n"
        + json.dumps({"instruction": "q3", "response": "r3", "score": "great"})
        + "\n",
        encoding="utf-8",
    )
    rows = _prep("pointwise", src, label="score")
    assert len(rows) == 5
    assert rows[0].item is not None and "label 'score' is missing" in rows[0].problem
    assert rows[1].item is None and "row 1" in rows[1].problem and "not valid JSON" in rows[1].problem
    assert rows[2].item is None and "missing response" in rows[2].problem
    assert rows[3].item is None and "expected a JSON object" in rows[3].problem
    # A label that cannot be read is a warning: the item is still judged.
    assert rows[4].item is not None and rows[4].label is None
    assert "label 'score'" in rows[4].problem and "'great'" in rows[4].problem


def test_unknown_mapping_target_is_rejected_up_front(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "a.jsonl", ROWS)
    with pytest.raises(ValueError, match="respnose"):
        _prep("pointwise", src, fields={"respnose": "q"})


def test_csv_and_parquet_give_the_same_items_as_jsonl(tmp_path: Path) -> None:
    flat = [{"q": r["q"], "a": r["out"][0], "b": r["out"][1], "pref": r["pref"]} for r in ROWS]
    j = _jsonl(tmp_path / "f.jsonl", flat)
    c = tmp_path / "f.csv"
    with c.open("w", newline="", encoding="utf-8") as fp:
        w = csv.DictWriter(fp, fieldnames=["q", "a", "b", "pref"])
        w.writeheader()
        w.writerows(flat)
    p = tmp_path / "f.parquet"
    pq.write_table(pa.Table.from_pylist(flat), p, row_group_size=2)
    fields = {"instruction": "q", "response_a": "a", "response_b": "b"}
    got = [[(r.item_hash, r.label) for r in _prep("pairwise", f, fields=fields, label="pref")] for f in (j, c, p)]
    assert got[0] == got[1] == got[2]
    assert {detect_format(str(f)) for f in (j, c, p)} == {"jsonl", "csv", "parquet"}
    assert count_rows([str(j)]) == count_rows([str(p)]) == 6
    # Parquet shards by row group keep the row numbers of a plain read.
    shards = plan_shards([str(p)])
    assert [s.row_groups for s in shards] == [(0,), (1,), (2,)]
    assert [s.first_row for s in shards] == [0, 2, 4]


def test_csv_multiturn_messages_as_json_text_and_numeric_answers(tmp_path: Path) -> None:
    c = tmp_path / "conv.csv"
    msgs = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    with c.open("w", newline="", encoding="utf-8") as fp:
        w = csv.writer(fp)
        w.writerow(["conversation", "human_score"])
        w.writerow([json.dumps(msgs), "4"])
        w.writerow(["not json", "3"])
    rows = _prep("multiturn", c, fields={"messages": "conversation"}, label="human_score")
    assert isinstance(rows[0].item, ConversationInput) and rows[0].item.messages[1].content == "4"
    assert json.loads(rows[0].label) == 4.0
    assert rows[1].item is None and "messages" in rows[1].problem


def test_json_array_file_is_streamed(tmp_path: Path) -> None:
    f = tmp_path / "arr.json"
    f.write_text(json.dumps([{"instruction": f"q{i}", "response": f"r{i}"} for i in range(5)], indent=2))
    rows = _prep("pointwise", f)
    assert [r.item.instruction for r in rows] == [f"q{i}" for i in range(5)]


def test_lookup_paths() -> None:
    rec = {"a": {"b": [{"c": 1}]}, "x.y": 2}
    assert lookup(rec, "a.b.0.c") == 1
    assert lookup(rec, "x.y") == 2
    with pytest.raises(KeyError):
        lookup(rec, "a.b.3.c")


# ------------------------------------------------------------------ LangSmith


LS_RUN = {
    "id": "run-1",
    "name": "ChatOpenAI",
    "run_type": "llm",
    "inputs": {
        "messages": [
            [
                {
                    "lc": 1,
                    "type": "constructor",
                    "id": ["langchain", "schema", "messages", "SystemMessage"],
                    "kwargs": {"content": "Be brief.", "type": "system"},
                },
                {
                    "lc": 1,
                    "type": "constructor",
                    "id": ["langchain", "schema", "messages", "HumanMessage"],
                    "kwargs": {"content": "Capital of France?", "type": "human"},
                },
            ]
        ]
    },
    "outputs": {
        "generations": [
            [
                {
                    "text": "Paris.",
                    "message": {
                        "lc": 1,
                        "type": "constructor",
                        "id": ["langchain", "schema", "messages", "AIMessage"],
                        "kwargs": {"content": "Paris."},
                    },
                }
            ]
        ]
    },
    "error": None,
}
LS_CHAIN = {"id": "run-2", "run_type": "chain", "inputs": {"question": "2+2?"}, "outputs": {"answer": "4"}}
LS_EXAMPLE = {
    "id": "ex-1",
    "dataset_id": "d",
    "inputs": {"question": "Largest planet?"},
    "outputs": {"answer": "Jupiter"},
}


def test_langsmith_runs_and_examples(tmp_path: Path) -> None:
    assert langsmith_row(LS_RUN)["instruction"] == "Capital of France?"
    assert langsmith_row(LS_RUN)["response"] == "Paris."
    assert [m["role"] for m in langsmith_row(LS_RUN)["messages"]] == ["system", "user", "assistant"]
    assert langsmith_row(LS_EXAMPLE)["reference"] == "Jupiter"
    assert "response" not in langsmith_row(LS_EXAMPLE)

    f = _jsonl(tmp_path / "runs.jsonl", [LS_RUN, LS_CHAIN])
    assert detect_format(str(f)) == "langsmith"
    rows = _prep("pointwise", f)
    assert [(r.item.instruction, r.item.response) for r in rows] == [("Capital of France?", "Paris."), ("2+2?", "4")]
    conv = _prep("multiturn", f)
    assert conv[0].item.messages[-1].content == "Paris."
    # Users can still map raw keys of the export.
    mapped = _prep(
        "pointwise", f, format="langsmith", fields={"instruction": "inputs.question", "response": "outputs.answer"}
    )
    assert mapped[0].item is None and "missing instruction" in mapped[0].problem
    assert mapped[1].item.instruction == "2+2?"


# ------------------------------------------------------------------ OpenTelemetry


def _attr(k: str, v: Any) -> dict[str, Any]:
    if isinstance(v, str):
        return {"key": k, "value": {"stringValue": v}}
    return {"key": k, "value": {"intValue": str(v)}}


def _request(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", "bot")]},
                "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}],
            }
        ]
    }


CURRENT = {
    "traceId": "t1",
    "spanId": "s1",
    "name": "chat gpt-x",
    "attributes": [
        _attr("gen_ai.operation.name", "chat"),
        _attr("gen_ai.request.model", "gpt-x"),
        _attr("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}])),
        _attr(
            "gen_ai.output.messages",
            json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Hello!"}], "finish_reason": "stop"}]
            ),
        ),
        _attr("gen_ai.usage.input_tokens", 3),
    ],
}
EVENTS = {
    "traceId": "t2",
    "spanId": "s2",
    "name": "chat",
    "attributes": [_attr("gen_ai.system", "openai"), _attr("gen_ai.request.model", "m")],
    "events": [
        {"name": "gen_ai.system.message", "attributes": [_attr("content", "Be nice.")]},
        {"name": "gen_ai.user.message", "attributes": [_attr("content", "Tell a joke")]},
        {"name": "gen_ai.choice", "attributes": [_attr("message", json.dumps({"content": "Knock knock."}))]},
    ],
}
INDEXED = {
    "traceId": "t3",
    "spanId": "s3",
    "name": "openai.chat",
    "attributes": [
        _attr("gen_ai.prompt.0.role", "user"),
        _attr("gen_ai.prompt.0.content", "Sum 1+1"),
        _attr("gen_ai.completion.0.content", "2"),
    ],
}
NOT_GENAI = {"traceId": "t4", "spanId": "s4", "name": "GET /", "attributes": [_attr("http.method", "GET")]}
EMBEDDING = {
    "traceId": "t5",
    "spanId": "s5",
    "name": "emb",
    "attributes": [_attr("gen_ai.operation.name", "embeddings")],
}


def test_otel_genai_spans_in_all_three_conventions(tmp_path: Path) -> None:
    recs = list(otel_rows(_request([CURRENT, EVENTS, INDEXED, NOT_GENAI, EMBEDDING])))
    assert [r["span_id"] for r in recs] == ["s1", "s2", "s3"]
    assert [(r["instruction"], r["response"]) for r in recs] == [
        ("Hi?", "Hello!"),
        ("Tell a joke", "Knock knock."),
        ("Sum 1+1", "2"),
    ]
    assert recs[0]["model"] == "gpt-x" and recs[0]["attributes"]["gen_ai.usage.input_tokens"] == 3
    assert [m["role"] for m in recs[1]["messages"]] == ["system", "user", "assistant"]

    f = tmp_path / "spans.jsonl"  # the collector's file exporter: one export request per line
    f.write_text(json.dumps(_request([CURRENT, NOT_GENAI])) + "\n" + json.dumps(_request([EVENTS, INDEXED])) + "\n")
    assert detect_format(str(f)) == "otel"
    rows = _prep("pointwise", f, id="span_id")
    assert [r.item_id for r in rows] == ["s1", "s2", "s3"]
    assert isinstance(rows[2].item, PointwiseInput) and rows[2].item.response == "2"


# ------------------------------------------------------------------ memory


def _peak_while_reading(path: Path, fmt: str = "auto") -> tuple[int, int]:
    preparer = RowPreparer("pairwise", SourceConfig(path=str(path), fields={"response_a": "a", "response_b": "b"}))
    tracemalloc.start()
    n = 0
    try:
        for r in iter_rows([str(path)], fmt):
            assert preparer(r).item is not None
            n += 1
        return n, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_reading_memory_does_not_grow_with_input_size(tmp_path: Path, fmt: str) -> None:
    def write(n: int) -> Path:
        rows = [{"instruction": f"question {i} " + "x" * 200, "a": "answer " * 30, "b": f"other {i}"} for i in range(n)]
        f = tmp_path / f"{n}.{fmt}"
        if fmt == "jsonl":
            _jsonl(f, rows)
        elif fmt == "csv":
            with f.open("w", newline="") as fp:
                w = csv.DictWriter(fp, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
        else:
            pq.write_table(pa.Table.from_pylist(rows), f, row_group_size=2000)
        return f

    small_n, small_peak = _peak_while_reading(write(1_000))
    big_n, big_peak = _peak_while_reading(write(20_000))
    assert (small_n, big_n) == (1_000, 20_000)
    # 20x the rows (about 10 MB of input), about the same peak: flat, not proportional.
    assert big_peak < 2 * small_peak + 512 * 1024, (small_peak, big_peak)
