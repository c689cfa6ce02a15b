"""Input files in the encodings users' tools write are read right, or refused
with the encoding named; never a misleading "missing field" (issue 26's open
class). Excel's "CSV UTF-8" starts with a byte-order mark, which read as
UTF-8 glued itself to the first header (``\\ufeffid``); PowerShell's ``>``
writes UTF-16."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgegraph._internal.text_files import sniff_encoding
from judgegraph.jobs import iter_rows
from judgegraph.jobs._report import read_labels

ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"]
MARKED = {"utf-8", "utf-8-sig", "utf-16", "utf-32"}  # a BOM (or plain UTF-8): always read exactly


def _text(rows: list[dict[str, str]], fmt: str) -> str:
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if fmt == "json":
        return json.dumps(rows, ensure_ascii=False)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def test_an_excel_csv_with_a_byte_order_mark_keeps_its_first_column(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_bytes("id,instruction,response\n1,q,a\n".encode("utf-8-sig"))
    (row,) = list(iter_rows([str(path)]))
    assert row.error is None and dict(row.data or {}) == {"id": "1", "instruction": "q", "response": "a"}


def test_a_powershell_utf16_jsonl_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes('{"instruction": "q", "response": "café"}\n'.encode("utf-16"))
    (row,) = list(iter_rows([str(path)]))
    assert row.error is None and dict(row.data or {}) == {"instruction": "q", "response": "café"}


def test_a_labels_csv_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_bytes("id,label\nx1,A\nx2,B\n".encode("utf-8-sig"))
    assert read_labels(path) == {"x1": "A", "x2": "B"}


def test_a_latin1_file_is_refused_by_record_naming_the_encoding_expected(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes('{"response": "café"}\n{"response": "plain"}\n'.encode("latin-1"))
    first, second = list(iter_rows([str(path)]))
    assert first.data is None and first.error is not None and "not valid UTF-8" in first.error
    assert second.error is None and dict(second.data or {}) == {"response": "plain"}


_VALUE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12
)  # any text a user's row holds (control characters aside: CSV writers differ on them)
_ROWS = st.lists(
    st.fixed_dictionaries({"id": st.text("abcxyz0123", min_size=1, max_size=4), "response": _VALUE}),
    min_size=1,
    max_size=5,
)


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_ROWS, fmt=st.sampled_from(["jsonl", "json", "csv"]), encoding=st.sampled_from(ENCODINGS))
def test_rows_read_back_the_same_in_every_encoding_or_are_refused_by_name(
    tmp_path: Path, rows: list[dict[str, str]], fmt: str, encoding: str
) -> None:
    path = tmp_path / f"items.{fmt}"
    path.write_bytes(_text(rows, fmt).encode(encoding))
    got = list(iter_rows([str(path)]))
    read: list[dict[str, Any]] = [dict(r.data) for r in got if r.data is not None]
    if encoding in MARKED:
        assert read == rows, (encoding, got)
    else:
        # UTF-16 without a mark is recognised by its NUL bytes; text with too
        # few ASCII characters to show them is refused by record, naming the
        # encoding expected: never rows that differ from the file.
        assert read == rows or all(r.error and "UTF-8" in r.error for r in got if r.data is None), (encoding, got)
        assert all(r in rows for r in read)


@given(head=st.binary(max_size=64))
def test_sniffing_never_fails_and_names_a_codec_python_has(head: bytes) -> None:
    import codecs

    codecs.lookup(sniff_encoding(head))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_spec_file_in_any_of_these_encodings_is_read(tmp_path: Path, encoding: str) -> None:
    from judgegraph.jobs.cli import _load_spec_file

    path = tmp_path / "job.json"
    spec = {"source": {"path": "items.jsonl"}, "judge": {"kind": "pointwise"}, "backend": {"model": "m"}}
    path.write_bytes(json.dumps(spec).encode(encoding))
    assert _load_spec_file(path) == spec
