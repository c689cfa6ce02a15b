"""Local-judge variants for bench/quickstart_seeds.py: features, labels,
confidence estimator and how an escalated item is decided."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from _quickstart_embed import text_key

CLASSES = ("A", "B", "tie")


@dataclass
class SeedData:
    fit: Sequence[Any]
    calib: Sequence[Any]
    held: Sequence[Any]
    table: dict[str, dict[str, Any]]
    train: Sequence[Any] = ()
    seed: int = 0


@dataclass
class VariantOutput:
    held_pred: np.ndarray
    held_conf: np.ndarray
    held_final_if_up: np.ndarray
    threshold: float | None
    budget: float
    calib_local: float
    calib_teacher: float


def features(
    items: Sequence[Any], table: dict[str, dict[str, Any]], views: Sequence[str], lexical: str = "v1"
) -> tuple[Any, Any, int]:
    """(anti, sym, n_scalar) for the items; with one view 'mean6' exactly the probe's features."""
    import torch

    from judgegraph.finetune._probe import _features, _lexical, _lexical_v2

    lex = _lexical if lexical == "v1" else _lexical_v2
    la = torch.tensor([lex(it.prompt, it.response1) for it in items])
    lb = torch.tensor([lex(it.prompt, it.response2) for it in items])

    def emb(view: str, attr: str) -> Any:
        return torch.stack([table[view][text_key(getattr(it, attr))] for it in items])

    if list(views) == ["mean6"]:
        anti, sym = _features(emb("mean6", "prompt"), emb("mean6", "response1"), emb("mean6", "response2"), la, lb)
        return anti, sym, 1 + la.shape[1]
    cos, diffs, dots = [], [], []
    for v in views:
        q, a, b = emb(v, "prompt"), emb(v, "response1"), emb(v, "response2")
        cos.append(((q * a).sum(-1) - (q * b).sum(-1)).unsqueeze(-1))
        diffs.append(a - b)
        dots.append((a * b).sum(-1, keepdim=True))
    anti = torch.cat([*cos, la - lb, *diffs], dim=-1)
    sym = torch.cat([anti.abs(), *dots], dim=-1)
    return anti, sym, len(views) + la.shape[1]


def _targets(items: Sequence[Any], labels: str) -> tuple[list[int], list[int]]:
    keep, ys = [], []
    for i, it in enumerate(items):
        w = it.gold_winner if labels == "human" else it.recorded_verdict("gpt-3.5-turbo").winner
        if w is None:
            continue
        keep.append(i)
        ys.append(CLASSES.index(w))
    return keep, ys


@dataclass
class Variant:
    name: str
    labels: Literal["teacher", "human"] = "teacher"
    views: tuple[str, ...] = ("mean6",)
    l2_scalar: float = 0.1
    l2_embedding: float = 10.0
    n_classes: Literal[2, 3] = 3
    confidence: Literal["max", "margin"] = "max"
    bags: int = 0  # > 0: bootstrap heads (by prompt), probabilities averaged
    combine: Literal["replace", "bayes"] = "replace"
    crossfit: int = 0  # > 0: K folds by prompt over fit + calibration; the final head learns from both
    target: Literal["teacher", "best"] = "teacher"
    lexical: str = "v1"  # best: the most agreeing budget within the cap
    extra: dict[str, Any] = field(default_factory=dict)

    def _fit_predict(
        self, fit: Sequence[Any], others: Sequence[Sequence[Any]], table: Any, rng: Any
    ) -> list[np.ndarray]:
        import torch

        from judgegraph.finetune._probe import ProbeOptions, fit_head

        opts = ProbeOptions(labels=self.n_classes, l2_scalar=self.l2_scalar, l2_embedding=self.l2_embedding)
        keep, ys = _targets(fit, self.labels)
        if self.n_classes == 2:
            keep = [k for k, y in zip(keep, ys, strict=True) if y != 2]
            ys = [y for y in ys if y != 2]
        anti, sym, n_scalar = features([fit[k] for k in keep], table, self.views, self.lexical)
        feats = [features(o, table, self.views, self.lexical)[:2] for o in others]
        y = torch.tensor(ys)

        def one(idx: Any) -> list[np.ndarray]:
            head, _, _ = fit_head(anti[idx], sym[idx], y[idx], opts, n_scalar=n_scalar)
            outs = []
            with torch.no_grad():
                for a, s in feats:
                    p = head.logits(a, s).softmax(-1).numpy()
                    if self.n_classes == 2:
                        p = np.concatenate([p, np.zeros((len(p), 1))], axis=1)
                    outs.append(p)
            return outs

        if self.bags <= 0:
            return one(torch.arange(len(ys)))
        prompts = sorted({fit[k].prompt for k in keep})
        by_prompt: dict[str, list[int]] = {}
        for j, k in enumerate(keep):
            by_prompt.setdefault(fit[k].prompt, []).append(j)
        acc: list[np.ndarray] | None = None
        for _ in range(self.bags):
            pick = rng.choice(len(prompts), size=len(prompts), replace=True)
            idx = torch.tensor([j for p in pick for j in by_prompt[prompts[p]]])
            outs = one(idx)
            acc = outs if acc is None else [x + o for x, o in zip(acc, outs, strict=True)]
        assert acc is not None
        return [x / self.bags for x in acc]

    def _conf(self, p: np.ndarray) -> np.ndarray:
        s = np.sort(p, axis=1)
        return s[:, -1] if self.confidence == "max" else s[:, -1] - s[:, -2]

    def run(self, data: SeedData) -> VariantOutput:
        from judgegraph.quickstart._budget import _pick_budget
        from judgegraph.types import PairwiseVerdict, Status

        rng = np.random.default_rng(0)
        if self.crossfit:
            data = self._crossfit(data, rng)
            p_cal, p_held = data.extra_pcal, self._fit_predict(data.fit, [data.held], data.table, rng)[0]
        else:
            p_cal, p_held = self._fit_predict(data.fit, [data.calib, data.held], data.table, rng)
        pred_cal = np.array(CLASSES)[p_cal.argmax(1)]
        pred_held = np.array(CLASSES)[p_held.argmax(1)]
        conf_cal, conf_held = self._conf(p_cal), self._conf(p_held)
        t_cal = [it.recorded_verdict("gpt-3.5-turbo").winner for it in data.calib]
        t_held = [it.recorded_verdict("gpt-3.5-turbo").winner for it in data.held]
        gold_cal = [it.gold_winner for it in data.calib]
        up_cal, up_held = self._escalated(p_cal, pred_cal, t_cal, gold_cal, p_held, pred_held, t_held)

        def verdict(w: str | None, c: float | None = None) -> PairwiseVerdict:
            if w is None:
                return PairwiseVerdict(status=Status.UNPARSED, reason="unparseable")
            return PairwiseVerdict(status=Status.OK, winner=w, confidence=c)  # type: ignore[arg-type]

        ids = [str(it.idx) for it in data.calib]
        local = {i: verdict(str(w), float(c)) for i, w, c in zip(ids, pred_cal, conf_cal, strict=True)}
        upv = {i: verdict(w) for i, w in zip(ids, up_cal, strict=True)}
        labels = dict(zip(ids, gold_cal, strict=True))
        t_acc = float(np.mean([t == g for t, g in zip(t_cal, gold_cal, strict=True)]))
        pick = "cheapest" if self.target == "teacher" else "most-agreeing"
        tv = {i: verdict(w) for i, w in zip(ids, t_cal, strict=True)}
        cap = self.extra.get("budget", 0.5)
        choice = _pick_budget(local, upv, labels, budget=cap, target=t_acc, pick=pick, teacher_alone=tv)
        return VariantOutput(
            held_pred=pred_held,
            held_conf=conf_held,
            held_final_if_up=np.array([w or p for w, p in zip(up_held, pred_held, strict=True)]),
            threshold=choice.threshold,
            budget=choice.fraction,
            calib_local=choice.calibration_local,
            calib_teacher=t_acc,
        )

    def _crossfit(self, data: SeedData, rng: Any) -> SeedData:
        """Out-of-fold probabilities on every train-side item (folds by prompt,
        dealt as the quickstart deals them), which become the calibration set;
        the final head learns from all of them."""
        from judgegraph.quickstart._crossfit import assign_folds

        train = list(data.train)
        fold_of = assign_folds(train, folds=self.crossfit, seed=data.seed + 1)
        p = np.zeros((len(train), 3))
        for f in range(self.crossfit):
            inside = [i for i, it in enumerate(train) if fold_of[it.prompt] == f]
            outside = [it for it in train if fold_of[it.prompt] != f]
            (pf,) = self._fit_predict(outside, [[train[i] for i in inside]], data.table, rng)
            p[inside] = pf
        out = SeedData(fit=train, calib=train, held=data.held, table=data.table, train=train, seed=data.seed)
        out.extra_pcal = p  # type: ignore[attr-defined]
        return out

    def _escalated(
        self, p_cal: Any, pred_cal: Any, t_cal: Any, gold_cal: Any, p_held: Any, pred_held: Any, t_held: Any
    ) -> tuple[list[str | None], list[str | None]]:
        """What an escalated item's verdict is, on calibration and held-out."""
        if self.combine == "replace":
            return list(t_cal), list(t_held)
        # The quickstart's merge: P(human c | local probs, teacher says t) ~ p_local(c) * P(t | c),
        # the teacher's confusion counted on the calibration items (humans label those).
        from judgegraph.quickstart._combine import TeacherConfusion, combine_verdicts
        from judgegraph.types import PairwiseVerdict, Status

        def v(w: str | None, p: Any = None) -> PairwiseVerdict:
            if w is None:
                return PairwiseVerdict(status=Status.UNPARSED, reason="unparseable")
            dist = None if p is None else {c: float(x) for c, x in zip(CLASSES, p, strict=True)}
            return PairwiseVerdict(status=Status.OK, winner=w, distribution=dist)  # type: ignore[arg-type]

        keys = [str(i) for i in range(len(t_cal))]
        conf = TeacherConfusion.count(
            {k: v(t) for k, t in zip(keys, t_cal, strict=True)}, dict(zip(keys, gold_cal, strict=True))
        )

        def comb(p: Any, preds: Any, ts: Any) -> list[str | None]:
            return [combine_verdicts(v(str(w), row), v(t), conf).winner for row, w, t in zip(p, preds, ts, strict=True)]

        return comb(p_cal, pred_cal, t_cal), comb(p_held, pred_held, t_held)


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant("old"),
        Variant("human", labels="human"),
        Variant("margin", confidence="margin"),
        Variant("bag10", bags=10),
        Variant("bayes", combine="bayes"),
        Variant("views3", views=("mean6", "mean3", "max6")),
        Variant("l2e3", l2_embedding=3.0),
        Variant("l2e30", l2_embedding=30.0),
        Variant("two", n_classes=2),
        Variant("best", target="best"),
        Variant("cf4", crossfit=4),
        Variant("cf4-bayes", crossfit=4, combine="bayes"),
        Variant("cf4-best", crossfit=4, target="best"),
        Variant("cf4-bayes-best", crossfit=4, combine="bayes", target="best"),
        Variant("bayes-best", combine="bayes", target="best"),
        Variant("lex2", lexical="v2"),
        Variant("lex2-human", lexical="v2", labels="human"),
        Variant("lex2-cf4", lexical="v2", crossfit=4),
        Variant("lex2-views3", lexical="v2", views=("mean6", "mean3", "max6")),
        Variant("lex2-bag10", lexical="v2", bags=10),
        Variant("lex2-l2s1", lexical="v2", l2_scalar=1.0),
        Variant("new", lexical="v2", crossfit=4, combine="bayes", target="best"),
        Variant("new-teacher", lexical="v2", crossfit=4, combine="bayes"),
        Variant("new-nomerge", lexical="v2", crossfit=4, target="best"),
        Variant("new-v1", crossfit=4, combine="bayes", target="best"),
        Variant("new-45", lexical="v2", crossfit=4, combine="bayes", target="best", extra={"budget": 0.45}),
        Variant("new-v3", lexical="v2", crossfit=4, combine="bayes", target="best", views=("mean6", "mean3", "max6")),
        Variant("new-human", lexical="v2", crossfit=4, combine="bayes", target="best", labels="human"),
    ]
}
