"""An answer with no text to judge is refused, whatever shape its content has.

A last AI message made only of an image, a reasoning block, an empty block
list or blank text used to reach the judge as its placeholder ("(image content
not shown)") and be scored. The class: any content shape (a string, a list of
blocks of any type, dict messages, LangChain message objects), an answer with
no text is an input error that names the message, and nothing is sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

from judgegraph import JudgeInputError, PairwiseJudge, PointwiseJudge, ScriptedBackend

_IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def _backend() -> ScriptedBackend:
    return ScriptedBackend(lambda r: "Fine. [RESULT] 5")


@pytest.mark.parametrize(
    "content",
    [[_IMAGE], [{"type": "reasoning", "reasoning": "thinking it over"}], [], "  \n "],
    ids=["image-only", "reasoning-only", "empty-list", "whitespace"],
)
async def test_an_answer_with_no_text_is_refused_not_judged(content: Any) -> None:
    backend = _backend()
    chat = [HumanMessage("Describe the picture."), AIMessage(content=content)]
    with pytest.raises(JudgeInputError, match=r"messages\[1\]\.content") as info:
        await PointwiseJudge(backend).ajudge({"messages": chat})
    assert "no text" in str(info.value)
    assert backend.calls == []


async def test_an_image_only_answer_given_as_a_pairwise_response_is_refused() -> None:
    backend = _backend()
    with pytest.raises(JudgeInputError, match="response_a") as info:
        await PairwiseJudge(backend).ajudge(
            {"instruction": "Draw a cat.", "response_a": AIMessage(content=[_IMAGE]), "response_b": "A cat: =^.^="}
        )
    assert "no text" in str(info.value)
    assert backend.calls == []


# ---------------------------------------------------------------- the class

_BLANK = st.text(alphabet=" \t\n\r\u00a0\u2003", max_size=4)
_NON_TEXT_TYPES = st.sampled_from(
    ["image_url", "image", "reasoning", "thinking", "audio", "file", "input_audio", "refusal_note", "x-custom"]
)
_NON_TEXT_BLOCK = st.builds(
    lambda kind, extra: {"type": kind, **extra},
    _NON_TEXT_TYPES,
    st.fixed_dictionaries({}, optional={"reasoning": st.text(max_size=10), "url": st.just("https://x.invalid/a.png")}),
)
_BLANK_TEXT_BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _BLANK),
    _BLANK,  # a bare string block
)
_NO_TEXT_CONTENT = st.one_of(_BLANK, st.lists(st.one_of(_NON_TEXT_BLOCK, _BLANK_TEXT_BLOCK), max_size=4))


def _shaped(content: Any, shape: str) -> Any:
    """One AI message with ``content``, in one of the shapes judges accept."""
    message = AIMessage(content=content)
    if shape == "object":
        return message
    if shape == "dump":
        return message.model_dump()
    if shape == "stored":
        return messages_to_dict([message])[0]
    if shape == "openai":
        return {"role": "assistant", "content": content}
    return ("ai", content)


_SHAPES = st.sampled_from(["object", "dump", "stored", "openai", "tuple"])
_EARLIER = st.lists(st.sampled_from(["Hello.", "Another question?"]), max_size=3)


@settings(max_examples=80)
@given(content=_NO_TEXT_CONTENT, shape=_SHAPES, earlier=_EARLIER)
async def test_no_text_in_any_shape_is_refused_by_message(content: Any, shape: str, earlier: list[str]) -> None:
    backend = _backend()
    turns: list[Any] = []
    for text in earlier:
        turns += [HumanMessage(text), AIMessage("Sure.")]
    chat = [*turns, HumanMessage("What do you see?"), _shaped(content, shape)]
    last = len(chat) - 1
    with pytest.raises(JudgeInputError, match=rf"messages\[{last}\]\.content: the last answer has"):
        await PointwiseJudge(backend).ajudge({"messages": chat})
    with pytest.raises(JudgeInputError, match=r"response_b"):
        await PairwiseJudge(backend).ajudge(
            {"instruction": "What do you see?", "response_a": "A cat.", "response_b": _shaped(content, shape)}
        )
    assert backend.calls == []


@settings(max_examples=60)
@given(
    before=st.lists(st.one_of(_NON_TEXT_BLOCK, _BLANK_TEXT_BLOCK), max_size=3),
    after=st.lists(st.one_of(_NON_TEXT_BLOCK, _BLANK_TEXT_BLOCK), max_size=3),
    text=st.text(alphabet="abcdefgh ", min_size=1, max_size=12).filter(str.strip),
    as_block=st.booleans(),
    shape=_SHAPES,
)
async def test_any_text_among_other_blocks_is_judged(
    before: list[Any], after: list[Any], text: str, as_block: bool, shape: str
) -> None:
    """The other side of the class: one real text block among the rest is an answer."""
    backend = _backend()
    block: Any = {"type": "text", "text": text} if as_block else text
    chat = [HumanMessage("What do you see?"), _shaped([*before, block, *after], shape)]
    verdict = await PointwiseJudge(backend, structured=False).ajudge({"messages": chat})
    assert verdict.score == 5
    assert text.strip() in backend.calls[-1].messages[-1].content
