"""Plan a cascade from recorded verdicts on a labelled set.

Every candidate policy is simulated offline with the same escalation logic
the :class:`CascadeJudge` uses (:func:`decide_tier`), giving its agreement
with the human labels and its cost per item. The result is the
cost-agreement frontier and, for a target agreement or a budget, a
recommendation. The numbers are in-sample: for a guarantee on new items,
calibrate thresholds with :func:`calibrate_cascade` on held-out labels.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import Field

from judgegraph.judges import Judge, ReplayJudge, Result, VerdictRecord
from judgegraph.types import FrozenModel, PairwiseVerdict, PointwiseScore

from ._cascade import (
    Abstain,
    Budget,
    CascadeJudge,
    EscalationPolicy,
    LowConfidence,
    ScoreMargin,
    SwapInconsistency,
    Tier,
    certainty,
    create_jury,
    decide_tier,
    jury_name,
    score_margin,
)
from ._thresholds import CascadeCalibration, Label, agreement_credit, calibrate_cascade, matches_label

__all__ = [
    "CascadePlan",
    "CrossValidatedPlan",
    "HeldOutFold",
    "MissingCostError",
    "PlannedPolicy",
    "PlannedTier",
    "assign_folds",
    "cross_validate_plan",
    "describe_policy",
    "plan_cascades",
    "simulate_cascade",
]


class MissingCostError(ValueError):
    """Judges whose recordings carry no cost and for which none was given."""

    def __init__(self, judges: list[str]) -> None:
        super().__init__(f"no cost for judges {judges}: give costs= (recordings carry no cost_usd)")
        self.judges = judges


DEFAULT_BUDGETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


class PlannedTier(FrozenModel):
    judge: str
    escalate: tuple[EscalationPolicy, ...] = ()
    members: tuple[str, ...] = Field(default=(), description="a jury's members (recorded judges); () for one judge")

    @property
    def judges(self) -> tuple[str, ...]:
        """The recorded judges this tier calls."""
        return self.members or (self.judge,)


class PlannedPolicy(FrozenModel):
    """A cascade policy and how it did on the labelled set."""

    name: str
    tiers: tuple[PlannedTier, ...]
    agreement: float = Field(description="mean agreement credit with the labels (ties per tie_credit)")
    strict_agreement: float = Field(description="share of items whose verdict equals the label")
    cost_per_item: float
    reach: tuple[float, ...] = Field(description="share of items that reached each tier")
    failed: float = Field(description="share of items left without a usable verdict")
    calibration: CascadeCalibration | None = Field(
        default=None, description="the Trust-or-Escalate test behind the thresholds, for calibrated candidates"
    )

    def to_cascade(self, judges: Mapping[str, Judge[Any, Any]], *, name: str | None = None) -> CascadeJudge:
        """This policy as a live cascade over ``judges`` (by name); a jury tier
        is :func:`create_jury` over its members."""
        missing = sorted({j for t in self.tiers for j in t.judges if j not in judges})
        if missing:
            raise KeyError(f"no judge given for {missing}")
        built = [
            create_jury([judges[m] for m in t.members], name=t.judge) if t.members else judges[t.judge]
            for t in self.tiers
        ]
        return CascadeJudge([Tier(j, t.escalate) for j, t in zip(built, self.tiers, strict=True)], name=name)


class CascadePlan(FrozenModel):
    n_items: int
    judges: tuple[str, ...]
    costs: dict[str, float]
    tie_credit: float
    target_agreement: float | None = None
    max_cost: float | None = None
    candidates: tuple[PlannedPolicy, ...]
    frontier: tuple[PlannedPolicy, ...]
    recommended: PlannedPolicy | None
    recommendation: str

    def to_cascade(
        self, judges: Mapping[str, Judge[Any, Any]], policy: PlannedPolicy | None = None, *, name: str | None = None
    ) -> CascadeJudge:
        """The recommended (or given) policy as a live cascade over ``judges`` (by name)."""
        chosen = policy or self.recommended
        if chosen is None:
            raise ValueError(f"no policy to build: {self.recommendation}")
        return chosen.to_cascade(judges, name=name)


def describe_policy(policies: Sequence[EscalationPolicy]) -> str:
    if not policies:
        return "if it fails"
    parts: list[str] = []
    for p in policies:
        if isinstance(p, SwapInconsistency):
            parts.append("if swap-inconsistent")
        elif isinstance(p, LowConfidence):
            parts.append(f"if {'confidence' if p.measure == 'probability' else 'certainty'} < {p.threshold:.3g}")
        elif isinstance(p, ScoreMargin):
            parts.append(f"if margin < {p.min_margin:.3g}")
        elif isinstance(p, Budget):
            parts.append(f"least sure {p.fraction:.0%}")
        elif isinstance(p, Abstain):
            parts.append("always")
    return " or ".join(parts)


def _name(tiers: Sequence[PlannedTier]) -> str:
    out = tiers[0].judge
    for prev, t in itertools.pairwise(tiers):
        out += f" -({describe_policy(prev.escalate)})-> {t.judge}"
    return out


def simulate_cascade(
    tiers: Sequence[PlannedTier],
    results: Mapping[str, Mapping[str, Result]],
    labels: Mapping[str, Label],
    *,
    costs: Mapping[str, float],
    tie_credit: float = 0.5,
) -> PlannedPolicy:
    """Replay one cascade policy over recorded results (judge -> key -> result).
    A jury tier not in ``results`` is combined from its members' recordings."""
    keys = list(labels)
    results = _with_juries(results, [t.members for t in tiers if t.members and t.judge not in results], keys)
    jury_costs = {t.judge: sum(costs[m] for m in t.members) for t in tiers if t.members and t.judge not in costs}
    costs = {**costs, **jury_costs}
    n = len(keys)
    if n == 0:
        raise ValueError("no labelled items")
    final: list[Result | None] = [None] * n
    reach = [0] * len(tiers)
    cost = 0.0
    active = list(range(n))
    for t, tier in enumerate(tiers):
        if not active:
            break
        table = results[tier.judge]
        reach[t] = len(active)
        cost += len(active) * costs[tier.judge]
        answers: list[Result | str] = [table.get(keys[i], "no recorded verdict") for i in active]
        is_last = t == len(tiers) - 1
        decisions = decide_tier(answers, () if is_last else tier.escalate)
        moving = []
        for i, a, (esc, _) in zip(active, answers, decisions, strict=True):
            if not isinstance(a, str) and a.ok and (is_last or not esc):
                final[i] = a
            elif not is_last:
                moving.append(i)
        active = moving
    credit = sum(agreement_credit(r, labels[k], tie_credit=tie_credit) for r, k in zip(final, keys, strict=True) if r)
    strict = sum(matches_label(r, labels[k]) for r, k in zip(final, keys, strict=True) if r)
    return PlannedPolicy(
        name=_name(tiers),
        tiers=tuple(tiers),
        agreement=credit / n,
        strict_agreement=strict / n,
        cost_per_item=cost / n,
        reach=tuple(r / n for r in reach),
        failed=sum(r is None for r in final) / n,
    )


def _with_juries(
    results: Mapping[str, Mapping[str, Result]], juries: Sequence[Sequence[str]], keys: Sequence[str]
) -> Mapping[str, Mapping[str, Result]]:
    """``results`` plus each jury's verdicts on ``keys``, combined from its members'
    recordings exactly as the live jury combines their answers."""
    if not juries:
        return results
    out = dict(results)
    for members in juries:
        unknown = [m for m in members if m not in results]
        if unknown:
            raise ValueError(f"jury members with no recordings: {unknown}")
        if len(members) < 2 or len(set(members)) != len(members):
            raise ValueError(f"a jury needs two or more distinct members, got {list(members)}")
        jury = create_jury([ReplayJudge(results[m], name=m) for m in members])
        out[jury_name(members)] = {
            k: jury.combine([results[m].get(k, "no recorded verdict") for m in members]) for k in keys
        }
    return out


def _grid(values: Iterable[float | None], cap: int) -> list[float]:
    """Distinct values above the smallest (which would escalate nothing), thinned to ``cap`` quantiles."""
    distinct = sorted({v for v in values if v is not None and math.isfinite(v)})[1:]
    if len(distinct) <= cap:
        return distinct
    idx = sorted({round(i * (len(distinct) - 1) / (cap - 1)) for i in range(cap)})
    return [distinct[i] for i in idx]


def _options(
    judge_results: Mapping[str, Result], *, budgets: Sequence[float], max_thresholds: int
) -> list[tuple[EscalationPolicy, ...]]:
    ok = [r for r in judge_results.values() if r.ok]
    opts: list[tuple[EscalationPolicy, ...]] = [()]
    pairs = [r for r in ok if isinstance(r, PairwiseVerdict)]
    if pairs and len(pairs) == len(ok) and any(len(r.orders) >= 2 for r in pairs):
        opts.append((SwapInconsistency(),))
    opts += [(LowConfidence(threshold=t),) for t in _grid((certainty(r) for r in ok), max_thresholds)]
    opts += [(ScoreMargin(min_margin=m),) for m in _grid((score_margin(r) for r in ok), max_thresholds)]
    opts += [(Budget(fraction=f),) for f in budgets]
    return opts


def _collect(
    records: Iterable[VerdictRecord] | Mapping[str, Mapping[str, Result]], labels: Mapping[str, Label] | None
) -> tuple[dict[str, dict[str, Result]], dict[str, Label]]:
    table: dict[str, dict[str, Result]] = {}
    found: dict[str, Label] = {}
    if isinstance(records, Mapping):
        table = {j: dict(rs) for j, rs in records.items()}
    else:
        for r in records:
            per = table.setdefault(r.judge, {})
            if r.key in per and per[r.key] != r.result:
                raise ValueError(f"judge {r.judge}: two different recordings for item {r.key}")
            per[r.key] = r.result
            if r.label is not None:
                if r.key in found and found[r.key] != r.label:
                    raise ValueError(f"item {r.key}: conflicting labels {found[r.key]!r} and {r.label!r}")
                found[r.key] = r.label
    if labels is not None:
        found = dict(labels)
    if not table:
        raise ValueError("no recorded verdicts")
    if not found:
        raise ValueError("no labels: give labels= or records that carry a label")
    return table, found


def plan_cascades(
    records: Iterable[VerdictRecord] | Mapping[str, Mapping[str, Result]],
    *,
    labels: Mapping[str, Label] | None = None,
    costs: Mapping[str, float] | None = None,
    target_agreement: float | None = None,
    max_cost: float | None = None,
    max_tiers: int = 2,
    budgets: Sequence[float] = DEFAULT_BUDGETS,
    max_thresholds: int = 12,
    tie_credit: float = 0.5,
    juries: Sequence[Sequence[str]] = (),
    alpha: float | None = None,
    delta: float = 0.1,
) -> CascadePlan:
    """Simulate cascade policies over recorded verdicts and pick one.

    ``records``: :class:`VerdictRecord` rows (labels may ride along) or a
    mapping judge -> item key -> result. ``labels``: item key -> human label;
    the labelled items are the ones evaluated. ``costs``: judge -> cost per
    item (any unit); by default the mean recorded ``cost_usd``.

    Candidates: each judge alone, and chains of up to ``max_tiers`` judges in
    non-decreasing cost, where each lower tier escalates on failure only, on
    swap inconsistency, below a confidence or margin threshold (thresholds
    from the recorded values), or by budget. Recommendation: with
    ``target_agreement``, the cheapest candidate reaching it (within
    ``max_cost`` if also given); with ``max_cost`` alone, the most agreeing
    candidate within it.

    ``juries``: member lists (recorded judge names); each becomes a candidate
    tier named :func:`jury_name`, whose confidence is the jury's agreement
    (:func:`create_jury`) and whose cost is its members' summed. A chain
    never calls one recorded judge twice. ``alpha``: also add, for every
    chain, the candidate whose lower tiers' thresholds come from
    :func:`calibrate_cascade` at ``alpha`` / ``delta`` (Trust-or-Escalate:
    with probability >= 1 - delta, the kept items disagree with humans at a
    rate <= alpha), its test kept in ``calibration``.
    """
    if max_tiers < 1:
        raise ValueError(f"max_tiers must be >= 1, got {max_tiers}")
    if not 0 <= tie_credit <= 1:
        raise ValueError(f"tie_credit must be in [0, 1], got {tie_credit}")
    for f in budgets:
        if not 0 < f < 1:
            raise ValueError(f"budgets must be fractions in (0, 1), got {f}")
    if target_agreement is not None and not 0 <= target_agreement <= 1:
        raise ValueError(f"target_agreement must be in [0, 1], got {target_agreement}")
    if max_cost is not None and max_cost < 0:
        raise ValueError(f"max_cost must be >= 0, got {max_cost}")
    if alpha is not None and not (0 < alpha < 1 and 0 < delta < 1):
        raise ValueError(f"alpha and delta must be in (0, 1), got {alpha}, {delta}")
    table, found = _collect(records, labels)
    unit = _costs(table, costs)
    members: dict[str, tuple[str, ...]] = {j: (j,) for j in table}
    for jury in juries:
        members[jury_name(jury)] = tuple(jury)
    table = {j: dict(rs) for j, rs in _with_juries(table, juries, list(found)).items()}
    unit.update({j: sum(unit[m] for m in ms) for j, ms in members.items() if j not in unit})
    judges = sorted(table)
    options = {j: _options(table[j], budgets=budgets, max_thresholds=max_thresholds) for j in judges}

    def tier(j: str, escalate: tuple[EscalationPolicy, ...] = ()) -> PlannedTier:
        return PlannedTier(judge=j, escalate=escalate, members=members[j] if members[j] != (j,) else ())

    candidates: list[PlannedPolicy] = []
    for size in range(1, min(max_tiers, len(judges)) + 1):
        for chain in itertools.permutations(judges, size):
            if any(unit[a] > unit[b] for a, b in itertools.pairwise(chain)):
                continue
            called = [m for j in chain for m in members[j]]
            if len(called) != len(set(called)):
                continue  # a judge twice in one chain (alone and in a jury) pays twice for one opinion
            for combo in itertools.product(*(options[j] for j in chain[:-1])):
                tiers = [tier(j, p) for j, p in zip(chain[:-1], combo, strict=True)]
                tiers.append(tier(chain[-1]))
                candidates.append(simulate_cascade(tiers, table, found, costs=unit, tie_credit=tie_credit))
            if alpha is not None and size > 1:
                calibrated = _calibrated(chain, table, found, alpha=alpha, delta=delta)
                if calibrated is not None:
                    tiers = [tier(j, (p,)) for j, p in zip(chain[:-1], calibrated.policies(), strict=True)]
                    tiers.append(tier(chain[-1]))
                    got = simulate_cascade(tiers, table, found, costs=unit, tie_credit=tie_credit)
                    candidates.append(got.model_copy(update={"calibration": calibrated}))
    candidates.sort(key=lambda c: (c.cost_per_item, -c.agreement, len(c.tiers), _plainness(c), c.name))
    frontier: list[PlannedPolicy] = []
    best = -math.inf
    for c in candidates:
        if c.agreement > best + 1e-12:
            frontier.append(c)
            best = c.agreement
    recommended, why = _recommend(candidates, target_agreement, max_cost)
    return CascadePlan(
        n_items=len(found),
        judges=tuple(judges),
        costs=unit,
        tie_credit=tie_credit,
        target_agreement=target_agreement,
        max_cost=max_cost,
        candidates=tuple(candidates),
        frontier=tuple(frontier),
        recommended=recommended,
        recommendation=why,
    )


def _calibrated(
    chain: Sequence[str],
    table: Mapping[str, Mapping[str, Result]],
    labels: Mapping[str, Label],
    *,
    alpha: float,
    delta: float,
) -> CascadeCalibration | None:
    """Trust-or-Escalate thresholds for a chain's lower tiers (None when a tier
    lacks a recording for some labelled item: the test needs every one)."""
    keys = list(labels)
    lower: list[list[Result]] = []
    for j in chain[:-1]:
        rs = [table[j].get(k) for k in keys]
        if any(r is None for r in rs):
            return None
        lower.append([r for r in rs if r is not None])
    if not all(isinstance(r, PairwiseVerdict | PointwiseScore) for rs in lower for r in rs):
        return None
    return calibrate_cascade(lower, [labels[k] for k in keys], alpha=alpha, delta=delta)


_PLAIN = {"swap_inconsistency": 1, "score_margin": 2, "low_confidence": 3, "budget": 4, "abstain": 5}


def _plainness(c: PlannedPolicy) -> int:
    """Among equally good policies, list the simplest to explain first."""
    return sum(_PLAIN[p.kind] for t in c.tiers for p in t.escalate)


def _costs(table: Mapping[str, Mapping[str, Result]], given: Mapping[str, float] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    missing: list[str] = []
    for j, rs in table.items():
        if given is not None and j in given:
            if not (given[j] >= 0 and math.isfinite(given[j])):
                raise ValueError(f"costs[{j!r}] must be a non-negative number, got {given[j]}")
            out[j] = float(given[j])
            continue
        recorded = [r.provenance.cost_usd if r.provenance else None for r in rs.values()]
        if recorded and all(c is not None for c in recorded):
            out[j] = sum(c for c in recorded if c is not None) / len(recorded)
        else:
            missing.append(j)
    if missing:
        raise MissingCostError(sorted(missing))
    unknown = set(given or {}) - set(table)
    if unknown:
        raise ValueError(f"costs name judges with no recordings: {sorted(unknown)}")
    return out


def _recommend(
    candidates: Sequence[PlannedPolicy], target: float | None, max_cost: float | None
) -> tuple[PlannedPolicy | None, str]:
    eps = 1e-12
    if target is None and max_cost is None:
        return None, "give a target agreement or a budget to get a recommendation"
    pool = [c for c in candidates if max_cost is None or c.cost_per_item <= max_cost + eps]
    if target is not None:
        hits = [c for c in pool if c.agreement >= target - eps]
        if not hits:
            within = f" within cost {max_cost:g}" if max_cost is not None else ""
            best = max(pool, key=lambda c: c.agreement, default=None)
            tail = f"; the best{within} is {best.agreement:.4f} ({best.name})" if best else ""
            return None, f"no policy reaches agreement {target:g}{within}{tail}"
        pick = min(hits, key=lambda c: (c.cost_per_item, -c.agreement, len(c.tiers), _plainness(c)))
        return pick, f"cheapest policy with agreement >= {target:g}"
    if not pool:
        return None, f"no policy costs <= {max_cost:g} per item"
    pick = min(pool, key=lambda c: (-c.agreement, c.cost_per_item, len(c.tiers), _plainness(c)))
    return pick, f"highest agreement at cost <= {max_cost:g} per item"


# ------------------------------------------------------------ out-of-sample choice


class HeldOutFold(FrozenModel):
    """One fold: the policy chosen on the other folds, and how it did on this one."""

    fold: int
    keys: tuple[str, ...]
    chosen: PlannedPolicy = Field(description="picked on the other folds (its figures are theirs, in-sample)")
    held_out: PlannedPolicy = Field(description="the same tiers replayed on this fold's items")


class CrossValidatedPlan(FrozenModel):
    """Each item scored under a policy chosen without it: an honest estimate of the choice."""

    seed: int
    n_items: int
    folds: tuple[HeldOutFold, ...]
    agreement: float
    strict_agreement: float
    cost_per_item: float
    escalated: float = Field(description="share of items sent past the first tier")
    failed: float


def assign_folds(keys: Sequence[str], *, folds: int, seed: int, groups: Mapping[str, str] | None = None) -> list[int]:
    """A fold per key: groups (default: each key its own) shuffled by ``seed``
    and dealt round-robin, so one group never straddles two folds."""
    group_of = [groups[k] if groups is not None else k for k in keys]
    distinct = sorted(set(group_of))
    if not 2 <= folds <= len(distinct):
        raise ValueError(f"folds must be between 2 and the number of groups ({len(distinct)}), got {folds}")
    random.Random(seed).shuffle(distinct)
    fold_of = {g: i % folds for i, g in enumerate(distinct)}
    return [fold_of[g] for g in group_of]


def cross_validate_plan(
    records: Iterable[VerdictRecord] | Mapping[str, Mapping[str, Result]],
    *,
    plan: Callable[[Mapping[str, Label]], CascadePlan],
    choose: Callable[[CascadePlan], PlannedPolicy | None] | None = None,
    labels: Mapping[str, Label] | None = None,
    folds: int = 5,
    seed: int = 0,
    groups: Mapping[str, str] | None = None,
    tie_credit: float = 0.5,
) -> CrossValidatedPlan:
    """Choose a policy on all folds but one, score it on that one, for each fold.

    ``plan`` plans on the training labels it is given (e.g. a
    ``plan_cascades(records, labels=train, ...)`` closure); ``choose`` picks
    from that plan (default: its recommendation; None is an error, naming
    the fold). ``groups`` maps item key -> group (a prompt, say): items of
    one group share a fold, so none leaks across. The same ``seed`` gives the
    same folds and so the same choices.
    """
    table, found = _collect(records, labels)
    keys = list(found)
    fold_of = assign_folds(keys, folds=folds, seed=seed, groups=groups)
    out: list[HeldOutFold] = []
    for f in range(folds):
        train = {k: found[k] for k, g in zip(keys, fold_of, strict=True) if g != f}
        test = {k: found[k] for k, g in zip(keys, fold_of, strict=True) if g == f}
        planned = plan(train)
        chosen = choose(planned) if choose is not None else planned.recommended
        if chosen is None:
            raise ValueError(f"fold {f}: no policy chosen ({planned.recommendation})")
        held = simulate_cascade(chosen.tiers, table, test, costs=planned.costs, tie_credit=tie_credit)
        out.append(HeldOutFold(fold=f, keys=tuple(test), chosen=chosen, held_out=held))
    n = len(keys)

    def pooled(value: Callable[[PlannedPolicy], float]) -> float:
        return sum(value(h.held_out) * len(h.keys) for h in out) / n

    return CrossValidatedPlan(
        seed=seed,
        n_items=n,
        folds=tuple(out),
        agreement=pooled(lambda p: p.agreement),
        strict_agreement=pooled(lambda p: p.strict_agreement),
        cost_per_item=pooled(lambda p: p.cost_per_item),
        escalated=pooled(lambda p: p.reach[1] if len(p.reach) > 1 else 0.0),
        failed=pooled(lambda p: p.failed),
    )
