"""The escalation budget: the planner's pick on the calibration split, and the per-item rule it becomes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from judgegraph.types import PairwiseVerdict

from ._models import BudgetChoice

__all__ = ["BUDGET_GRID", "batch_threshold", "escalation_rule"]

#: Escalation budgets the planner tries (shares of items sent to the teacher).
BUDGET_GRID = tuple(round(0.05 * k, 2) for k in range(1, 20))


def _pick_budget(
    local: dict[str, PairwiseVerdict],
    teacher: dict[str, PairwiseVerdict],
    labels: dict[str, str],
    *,
    budget: float,
    target: float | None,
    pick: str = "most-agreeing",
    teacher_alone: dict[str, PairwiseVerdict] | None = None,
) -> BudgetChoice:
    """Let the planner pick the escalation budget on the calibration results,
    and turn it into a confidence threshold the graph applies item by item.

    ``teacher`` holds what an escalated item's verdict would be (the
    teacher's, or its merge with the local judge). ``pick="cheapest"``: the
    cheapest budget whose calibration agreement reaches ``target`` (default:
    the teacher alone's), else the most agreeing one; ``"most-agreeing"``:
    the most agreeing budget within the cap. ``teacher_alone``: the
    teacher's own verdicts, for its agreement figure (default ``teacher``)."""
    from judgegraph.cascade import plan_cascades

    table = {"local": local, "teacher": teacher}
    costs = {"local": 0.0, "teacher": 1.0}  # cost = share of items the teacher judges
    common: dict[str, Any] = {
        "labels": labels,
        "costs": costs,
        "budgets": BUDGET_GRID,
        "max_thresholds": 0,
        "tie_credit": 0.0,
    }
    first = plan_cascades(table, max_cost=budget, **common)
    alone = {c.name: c for c in first.candidates if len(c.tiers) == 1}
    local_acc, teacher_acc = alone["local"].agreement, alone["teacher"].agreement
    if teacher_alone is not None:
        own = plan_cascades({"local": local, "teacher": teacher_alone}, max_cost=budget, **common)
        teacher_acc = next(c.agreement for c in own.candidates if [t.judge for t in c.tiers] == ["teacher"])
    goal = teacher_acc if target is None else target
    plan = first
    if pick == "cheapest":
        plan = plan_cascades(table, target_agreement=goal, max_cost=budget, **common)
        if plan.recommended is None:
            plan = first
    chosen = plan.recommended
    assert chosen is not None  # local alone (cost 0) is always within the budget
    if pick != "cheapest":
        why = f"{plan.recommendation} (the most agreeing within the cap)"
    else:
        why = plan.recommendation if plan is not first else f"{plan.recommendation} (none reached {goal:.3f})"
    if [t.judge for t in chosen.tiers] == ["teacher"]:
        fraction = 1.0
    elif len(chosen.tiers) == 1:
        fraction = 0.0
    else:
        fraction = chosen.reach[1]
    confidences = sorted(v.confidence for v in local.values() if v.ok and v.confidence is not None)
    k = round(fraction * len(labels))
    threshold: float | None
    if fraction >= 1.0:
        threshold = None  # every item goes up
    elif k == 0:
        threshold = 0.0
    else:
        threshold = confidences[min(k, len(confidences) - 1)]
    return BudgetChoice(
        calibration_items=len(labels),
        fraction=fraction,
        threshold=threshold,
        policy=chosen.name,
        recommendation=why,
        calibration_agreement=chosen.agreement,
        calibration_local=local_acc,
        calibration_teacher=teacher_acc,
    )


def escalation_rule(threshold: float | None) -> str:
    """The per-item rule a budget became, in words."""
    if threshold is None:
        return "always"
    if threshold <= 0:
        return "never (only failed verdicts)"
    return f"when the local confidence < {threshold:.4f}"


def batch_threshold(threshold: float | None, confidences: Sequence[float | None], cap: float) -> float | None:
    """The threshold for one batch of items (the held-out job), with the budget as a hard cap.

    ``confidences`` are the local judge's on every item of the batch (None:
    no usable verdict; such an item always escalates). Items below
    ``threshold`` (None: every item) escalate, but never more than
    ``floor(cap * len(confidences))`` of them: when the threshold would send
    more, it is lowered to just above the confidence of the last item the cap
    allows, so the least confident items are the ones that go. Equally
    confident items at the edge stay together (below the cap), and the
    returned value sits halfway between two distinct confidences, so the
    same judge re-run on the batch sends up the same items."""
    n = len(confidences)
    allowed = math.floor(cap * n + 1e-9) - sum(c is None for c in confidences)
    if allowed <= 0:
        return 0.0
    vals = sorted(c for c in confidences if c is not None)
    if allowed >= len(vals) or (threshold is not None and sum(v < threshold for v in vals) <= allowed):
        return threshold  # within the cap: the threshold stands
    edge = vals[allowed]  # the first item the cap keeps
    below = [v for v in vals[:allowed] if v < edge]
    capped = (below[-1] + edge) / 2 if below else 0.0
    return capped if threshold is None else min(threshold, capped)
