"""What a hostile tester tried on the parser: signs, emphasis, markers over
line breaks, and outputs built to make a pattern backtrack.

Timing is not asserted here: ``bench/parsing.py`` compares n against 4n for
each shape. These tests check that 1 MB outputs of those shapes come back
with the right answer; a quadratic path would take hours, so a SIGALRM
guard (far above the ~0.1 s they take) turns a hang into a failure.
"""

from __future__ import annotations

import signal
import sys
import unicodedata
from collections.abc import Iterator

import pytest

from judgegraph._internal.markers import drop_format_chars, is_format_char, raw_offset
from judgegraph._parsing import MAX_OUTPUT_CHARS, value_distribution
from judgegraph._templates import DELIM_CLOSE, DELIM_OPEN
from judgegraph.judges import ParseError, parse_output
from judgegraph.types import TokenLogprob


def read(text: str, kind: str = "score", scale: tuple[int, int] = (1, 5), structured: bool = False) -> object:
    return parse_output(text, kind=kind, scale=scale, structured=structured).value  # type: ignore[arg-type]


def reason(text: str, kind: str = "score", scale: tuple[int, int] = (1, 5), structured: bool = False) -> str:
    with pytest.raises(ParseError) as info:
        parse_output(text, kind=kind, scale=scale, structured=structured)  # type: ignore[arg-type]
    return info.value.reason


# ---------------------------------------------------------------- signs


@pytest.mark.parametrize(
    "text",
    ["ok\n[RESULT] -3", "ok\n[RESULT]: -3", "ok\n[RESULT] (-3)", "ok\n[RESULT] **-3**", "ok\n[RESULT] \u22123"],
)
def test_a_negative_score_is_negative_and_off_a_positive_scale(text: str) -> None:
    assert "-3 is outside the scale 1 to 5" in reason(text)


def test_signed_scores_on_a_signed_scale() -> None:
    assert read("ok\n[RESULT] -2", scale=(-2, 2)) == -2
    assert read("ok\n[RESULT] +2", scale=(-2, 2)) == 2
    assert read("ok\n[RESULT] 0", scale=(-2, 2)) == 0
    assert read("ok\n[RESULT] \u22121", scale=(-2, 2)) == -1  # the Unicode minus sign
    assert "-3 is outside" in reason("ok\n[RESULT] -3", scale=(-2, 2))


def test_a_dash_before_a_spaced_number_is_not_guessed() -> None:
    # "- 3": a separator dash or a minus? Neither reading is safe.
    assert "a sign, a space and a number" in reason("ok\n[RESULT] - 3")
    assert "a sign, a space and a number" in reason("ok\n[RESULT] - 3", scale=(-5, 5))


def test_pairs_keep_their_signs() -> None:
    assert "score A -3 is outside" in reason("x\n[SCORES] -3 4", kind="two_scores", scale=(1, 10))
    assert "score B -4 is outside" in reason("x\n[SCORES] 3 -4", kind="two_scores", scale=(1, 10))
    assert read("x\n[SCORES] -3 4", kind="two_scores", scale=(-5, 5)) == (-3, 4)
    assert read("x\n[SCORES] A: -1, B: -2", kind="two_scores", scale=(-5, 5)) == (-1, -2)
    assert "two numbers" in reason("x\n[SCORES] 7-3", kind="two_scores", scale=(1, 10))


def test_json_and_choices_keep_signs() -> None:
    assert "-3 is outside" in reason('{"score": -3}', structured=True)
    assert "-3 is outside" in reason('{"score": "-3"}', structured=True)
    assert read('{"score": -2}', scale=(-2, 2), structured=True) == -2
    assert "score_a' -1 is outside" in reason('{"score_a": -1, "score_b": 4}', kind="two_scores", structured=True)
    # A choice is a letter; a signed letter or number is not one.
    assert "A, B or TIE" in reason("x\n[RESULT] -A", kind="choice", scale=(0, 0))
    assert "A, B or TIE" in reason("x\n[RESULT] -1", kind="choice", scale=(0, 0))


def test_huge_numbers_are_rejected_not_converted() -> None:
    assert "on no scale" in reason("ok\n[RESULT] " + "9" * 5000)
    assert "on no scale" in reason('{"score": "' + "9" * 5000 + '"}', structured=True)
    assert "not valid JSON" in reason('{"score": ' + "9" * 5000 + "}", structured=True)


# ---------------------------------------------------------------- emphasis


@pytest.mark.parametrize(
    "text",
    [
        "ok\n[RESULT] **4**",
        "ok\n[RESULT] *4*",
        "ok\n[RESULT] __4__",
        "ok\n[RESULT] _4_",
        "ok\n[RESULT] `4`",
        "ok\n[RESULT]: **4**",
        "ok\n**[RESULT]** **4**",
        "ok\n[RESULT] **4/5**",
        "ok\n[RESULT] **4**/5",
        "ok\n[RESULT] ***4***.",
    ],
)
def test_markdown_emphasis_around_a_score_is_read(text: str) -> None:
    assert read(text) == 4


def test_markdown_emphasis_on_pairs_and_choices() -> None:
    assert read("x\n[SCORES] **7** **3**", kind="two_scores", scale=(1, 10)) == (7, 3)
    assert read("x\n[SCORES] `7`, `3`", kind="two_scores", scale=(1, 10)) == (7, 3)
    assert read("x\n[RESULT] **B**", kind="choice", scale=(0, 0)) == "B"
    assert read("x\n[RESULT] __tie__", kind="choice", scale=(0, 0)) == "tie"


def test_emphasis_does_not_make_a_wrong_value_right() -> None:
    assert "outside the scale" in reason("ok\n[RESULT] **7**")
    assert "not a whole number" in reason("ok\n[RESULT] **4.5**")
    assert "unexpected text" in reason("ok\n[RESULT] **4** or 5")


# ---------------------------------------------------------------- one line


@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\v", "\f"])
def test_a_marker_or_its_value_never_spans_a_line_break(brk: str) -> None:
    assert "no [RESULT] marker" in reason(f"ok\n[{brk}RESULT] 5")
    assert "no [RESULT] marker" in reason(f"ok\n[RESULT{brk}] 5")
    assert "on its line" in reason(f"ok\n[RESULT]{brk}5")
    assert "no [SCORES] marker" in reason(f"ok\n[{brk}SCORES] 5 6", kind="two_scores", scale=(1, 10))
    assert "on its line" in reason(f"ok\n[SCORES] 5{brk}6", kind="two_scores", scale=(1, 10))
    assert "A, B or TIE" in reason(f"ok\n[RESULT]{brk}A", kind="choice", scale=(0, 0))
    # Spaces and tabs inside and after a marker are still fine.
    assert read("ok\n[ \tRESULT\t ]\t 5") == 5


def test_format_instructions_echoed_across_lines_do_not_count_twice() -> None:
    # Two markers on separate lines: the last one is the verdict line.
    assert read("Write [RESULT] n.\n[RESULT] 3") == 3
    assert "more than one" in reason("Write [RESULT] A or [RESULT] B", kind="choice", scale=(0, 0))
    assert "more than one" in reason("ok\u2028[RESULT] A [RESULT] B", kind="choice", scale=(0, 0))


# ---------------------------------------------------------------- fenced JSON


def test_fenced_json_is_read_and_a_long_blank_run_is_linear() -> None:
    assert read('```json\n{"score": 4}\n```', structured=True) == 4
    assert read('```JSON\n{"score": 4}\n```', structured=True) == 4
    assert read('```\n{"score": 4}\n```', structured=True) == 4
    # Regression: an output cut off at max_tokens inside the fence (16k
    # newlines took 1.8 s; the guardrail decided after 4.9 s with a 0.2 s budget).
    blank = "\n" * 16_000
    assert "not valid JSON" in reason('```json\n{"feedback": "ok",' + blank, structured=True)
    assert read("```json\n" + blank + '{"score": 4}' + blank + "```", structured=True) == 4


# ---------------------------------------------------------------- 1 MB outputs

MB = 1_000_000


@pytest.fixture
def hang_guard() -> Iterator[None]:
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def hung(signum: int, frame: object) -> None:
        raise AssertionError("a 1 MB parse ran for 5 minutes: a non-linear path came back")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(300)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


OPEN, CLOSE = DELIM_OPEN, DELIM_CLOSE
# (output of about 1 MB, kind, structured, expected value or a piece of the reason)
HOSTILE: list[tuple[str, str, str, bool, object]] = [
    ("fence, newline run, cut off", '```json\n{"feedback": "x",' + "\n" * MB, "score", True, "not valid JSON"),
    ("fence, spaces, verdict", "```json\n" + " " * MB + '{"score": 2}\n```', "score", True, 2),
    ("nested arrays", "[" * MB, "score", True, "nested too deeply"),
    ("nested objects", '{"a":' * (MB // 5), "two_scores", True, "nested too deeply"),
    ("long JSON integer", '{"score": ' + "7" * MB + "}", "score", True, "not valid JSON"),
    ("long JSON string", '{"winner": "' + "A" * MB + '"}', "choice", True, "must be A, B or tie"),
    ("marker, spaces, junk", "[RESULT]" + " " * MB + "x", "score", False, "not followed by a number"),
    ("marker, spaces, value", "ok\n[RESULT]" + " \t" * (MB // 2) + "3", "score", False, 3),
    ("marker, newlines, value", "[RESULT]" + "\n" * MB + "3", "score", False, "on its line"),
    ("open brackets", "[" * MB, "score", False, "no [RESULT] marker"),
    ("close brackets", "]" * MB, "choice", False, "no [RESULT] marker"),
    ("markers on one line", "[RESULT] " * (MB // 9), "choice", False, "more than one"),
    ("a verdict per line", "[RESULT] 4\n" * (MB // 11), "score", False, 4),
    ("unclosed end delimiters", f"{OPEN}begin response{CLOSE}" + f"{OPEN}end " * (MB // 5) + "\n[RESULT] 5",
     "score", False, "no [RESULT] marker"),
    ("begin delimiters", f"{OPEN}begin response{CLOSE}[RESULT] 5" * (MB // 27), "score", False, "no [RESULT] marker"),
    ("long number", "[RESULT] " + "9" * MB, "score", False, "on no scale"),
    ("long pair", "[SCORES] " + "1" * (MB // 2) + " " + "2" * (MB // 2), "two_scores", False, "on no scale"),
    ("pair separators", "[SCORES] " + "1, " * (MB // 3), "two_scores", False, "unexpected text"),
    ("emphasis run", "[RESULT] " + "*" * MB + "4", "score", False, 4),
    ("choice word, spaces", "[RESULT] response" + " " * MB + "x", "choice", False, "not followed by A, B or TIE"),
    ("zero-width run in a marker", "ok\n[RE" + "\u200b" * MB + "SULT] 4", "score", False, 4),
    ("zero-width between letters", "a\u200b" * (MB // 2) + "\n[RESULT] 4", "score", False, "format characters"),
    ("some zero-width spaces", "a\u200b" * 5000 + "b" * MB + "\n[RESULT] 4", "score", False, 4),
    ("accents", "é" * MB + "\n[RESULT] 4", "score", False, 4),
    ("rationale prefix", "feedback" + " " * MB + ":\n[RESULT] 1", "score", False, 1),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "kind", "structured", "expected"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_1mb_hostile_output_is_read_or_rejected_correctly(
    hang_guard: None, name: str, text: str, kind: str, structured: bool, expected: object
) -> None:
    assert MB * 0.9 <= len(text) <= MAX_OUTPUT_CHARS, name
    scale = (1, 5)
    if isinstance(expected, str):
        assert expected in reason(text, kind, scale, structured), name
    else:
        assert read(text, kind, scale, structured) == expected, name


def test_an_output_over_the_limit_is_rejected_unread() -> None:
    text = "ok " * (MAX_OUTPUT_CHARS // 3) + "\n[RESULT] 4"
    assert "over the 1,048,576 a verdict may have" in reason(text)


# ---------------------------------------------------------------- format characters


def test_the_format_character_table_covers_this_python() -> None:
    # drop_format_chars uses a fixed table (looking each character up is too
    # slow); on a newer Unicode it must still cover every Cf character.
    cf = (chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    missing = [f"U+{ord(ch):04X}" for ch in cf if not is_format_char(ch)]
    assert not missing, f"add to judgegraph._internal.markers._CF_RANGES: {missing}"


def test_offsets_map_back_through_removed_runs() -> None:
    raw = "\u200ba\u200b\u200bbc\u2060"
    visible, gaps = drop_format_chars(raw)
    assert visible == "abc"
    assert [raw[raw_offset(gaps, i)] for i in range(3)] == ["a", "b", "c"]


# ---------------------------------------------------------------- distributions


def _tokens(value_tokens: list[TokenLogprob]) -> list[TokenLogprob]:
    return [TokenLogprob("ok", 0.0), TokenLogprob(" [RESULT]", 0.0), *value_tokens]


def test_value_distribution_on_a_signed_scale() -> None:
    text = "ok [RESULT] -1"
    offset = parse_output(text, kind="score", scale=(-2, 2)).offset
    # One token per signed value: read as such.
    whole = _tokens([TokenLogprob(" -1", -0.2, ((" -1", -0.2), (" -2", -2.0), (" 1", -2.5), (" 0", -3.0)))])
    dist = value_distribution(whole, text, offset, kind="score", scale=(-2, 2))
    assert dist is not None and set(dist) == {-2, -1, 0, 1} and max(dist, key=dist.__getitem__) == -1
    # The sign as its own token covers every negative level: no distribution, not a wrong one.
    split = _tokens([TokenLogprob(" -", -0.2, ((" -", -0.2), (" 1", -2.0))), TokenLogprob("1", 0.0)])
    assert value_distribution(split, text, offset, kind="score", scale=(-2, 2)) is None
    # On an all-positive scale a minus alternative leads only off the scale: dropped.
    text = "ok [RESULT] 4"
    offset = parse_output(text, kind="score", scale=(1, 5)).offset
    toks = _tokens([TokenLogprob(" 4", -0.1, ((" 4", -0.1), (" -", -3.0), (" 3", -2.0)))])
    dist = value_distribution(toks, text, offset, kind="score", scale=(1, 5))
    assert dist is not None and set(dist) == {3, 4}
    # Emphasised values are read from their token too.
    text = "ok [RESULT] **4**"
    offset = parse_output(text, kind="score", scale=(1, 5)).offset
    four = TokenLogprob("4", -0.1, (("4", -0.1), ("5", -2.0)))
    toks = [TokenLogprob("ok [RESULT] **", 0.0), four, TokenLogprob("**", 0)]
    dist = value_distribution(toks, text, offset, kind="score", scale=(1, 5))
    assert dist is not None and set(dist) == {4, 5}
