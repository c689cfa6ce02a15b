"""Extra wordings of the judge prompts, used only as training augmentation.

Each alternative keeps the template's blocks and its output format exactly;
only the task description changes. Training on several wordings keeps a
small judge from keying on one phrasing, while inference keeps using the
registered template (wording 0).
"""

from __future__ import annotations

from judgegraph._templates import Template

__all__ = ["phrasing", "phrasing_count"]

_PAIR_BLOCKS = "{instruction_block}\n{reference_block}{response_a_block}\n{response_b_block}\n\n{format}"
_POINT_BLOCKS = "{rubric_block}\n{instruction_block}\n{reference_block}{response_block}\n\n{format}"

_ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "pairwise-scores": (
        "Two assistants answered the question below. Rate each answer from {lo} to {hi} for how "
        "helpful, accurate, relevant and detailed it is; a longer answer is not a better one. "
        "{rubric_block}\n\n" + _PAIR_BLOCKS,
        "Score answer A and answer B separately, each on a scale of {lo} to {hi}. What counts is "
        "correctness and real use to the person asking, not length or position. {rubric_block}\n\n" + _PAIR_BLOCKS,
    ),
    "pairwise-choice": (
        "Which answer does a better job of what the user asked? Weigh correctness and faithfulness "
        "to the instruction; the order of the answers and their length do not matter. "
        "{rubric_block}Say tie only when they are equally good.\n\n" + _PAIR_BLOCKS,
        "Read the instruction and both answers, then pick the one that serves the user better. A "
        "correct answer that follows the instruction beats a polished one that does not. "
        "{rubric_block}Choose tie only if neither is ahead.\n\n" + _PAIR_BLOCKS,
    ),
    "pairwise-rubric": (
        "Measure both answers against the rubric below and decide which one satisfies it more "
        "fully.\n{rubric_block}\n" + _PAIR_BLOCKS,
    ),
    "pointwise-rubric": (
        "Rate the answer below from {lo} to {hi} against the rubric. If a reference answer is "
        "shown, it marks what a top score looks like.\n" + _POINT_BLOCKS,
        "Using the rubric, give the answer one absolute score between {lo} and {hi}. A reference "
        "answer, when present, shows the quality of a top-scoring answer.\n" + _POINT_BLOCKS,
    ),
}


def phrasing_count(template: Template) -> int:
    """How many wordings exist for ``template`` (the registered one included)."""
    return 1 + len(_ALTERNATIVES.get(template.id, ()))


def phrasing(template: Template, index: int) -> Template:
    """Wording ``index`` of ``template``; 0 is the template itself."""
    if index == 0:
        return template
    alternatives = _ALTERNATIVES.get(template.id, ())
    if not 0 < index <= len(alternatives):
        raise ValueError(f"template {template.id!r} has {1 + len(alternatives)} phrasings, not {index + 1}")
    return template.model_copy(update={"user": alternatives[index - 1]})
