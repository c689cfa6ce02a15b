"""The encoding of a text file a user gives us, from its first bytes.

Spreadsheet and Windows tools write byte-order marks and UTF-16 as often as
plain UTF-8. Read as UTF-8, a BOM glues itself to the first CSV header
(``\\ufeffid``), so a present column reads as "missing", and UTF-16 is NUL
bytes between letters. Every reader of a user's file (job sources, labels,
specs, criteria, traces) opens it through :func:`open_text`, so each reads
what the user's tool wrote, or refuses it naming the encoding it expected.

Imports nothing from judgegraph: readers in several wings use it.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import IO

__all__ = ["open_text", "read_text", "sniff_encoding"]

_BOMS = (  # longest first: UTF-32-LE's mark starts with UTF-16-LE's
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def sniff_encoding(head: bytes) -> str:
    """The codec for a file that starts with ``head``: the one its byte-order
    mark names; UTF-16 without a mark when NUL bytes alternate with text the
    way UTF-16 writes ASCII (JSON's braces, CSV headers); UTF-8 otherwise."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    pairs = len(head) // 2
    if pairs >= 1:
        even_nul = sum(1 for i in range(0, 2 * pairs, 2) if head[i] == 0)
        odd_nul = sum(1 for i in range(1, 2 * pairs, 2) if head[i] == 0)
        # UTF-8 text has no NUL bytes; UTF-16 of mostly-ASCII text has one in each pair.
        if odd_nul * 2 > pairs and even_nul * 4 < pairs:
            return "utf-16-le"
        if even_nul * 2 > pairs and odd_nul * 4 < pairs:
            return "utf-16-be"
    return "utf-8"


def _encoding_of(path: str | Path) -> str:
    with open(path, "rb") as fp:
        return sniff_encoding(fp.read(4096))


def open_text(path: str | Path, *, errors: str = "strict", newline: str | None = None) -> IO[str]:
    """``path`` opened for reading as text in the encoding its first bytes show."""
    return open(path, encoding=_encoding_of(path), errors=errors, newline=newline)


def read_text(path: str | Path) -> str:
    """The whole of ``path`` as text, in the encoding its first bytes show;
    a ValueError naming the file and that encoding when it does not decode."""
    encoding = _encoding_of(path)
    try:
        return Path(path).read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not valid {encoding} (byte {exc.start}: {exc.reason}); save it as UTF-8 or UTF-16"
        ) from None
