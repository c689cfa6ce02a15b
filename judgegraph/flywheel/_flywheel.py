"""The judge flywheel: escalations become training data.

Each round

1. judges a batch with the cascade in service (the champion local judge at its
   calibrated threshold, then the teacher), and sends an audit sample of the
   confidently decided items to the teacher as well;
2. keeps the teacher's verdicts (and any human labels) as traces;
3. trains a challenger local judge on every trace collected so far;
4. calibrates the challenger's threshold, and recalibrates the champion's,
   on a fixed labelled held-out set;
5. promotes the challenger only if it does not lose agreement with the
   held-out labels (champion/challenger); otherwise the champion stays.

Everything a round does is written under its own folder before the next step
starts, so an interrupted round resumes where it stopped and an old round can
be put back in service with :meth:`Flywheel.rollback`. Held-out items, and any
item sharing an instruction with one, never enter training.

Layout of the work folder::

    flywheel.json           held-out and seed fingerprints
    heldout.jsonl           the held-out traces (labels)
    heldout-teacher.jsonl   the teacher's verdicts on them (asked once)
    seed.jsonl              optional starting traces
    state.json              the champion, the event log, rounds excluded from training
    .lock                   held while a round or a rollback runs
    rounds/round-NNN/
        batch.jsonl         the round's items
        decisions.jsonl     per item: what the cascade decided, the teacher's verdict, cost
        collected.jsonl     the traces this round added
        training.jsonl      exactly the traces the challenger trained on
        model/              the challenger
        heldout.jsonl       the challenger's verdicts on the held-out set
        round.json          the round's record (stage, figures, decision)
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judgegraph.cascade import Abstain, CascadeJudge, LowConfidence, Tier
from judgegraph.finetune import PairwiseTrace, instruction_key, write_traces
from judgegraph.judges import Judge, run_sync

from ._decisions import _audit_pick, collect_traces, decide_item, summarise_batch
from ._records import (
    STAGES,
    FlywheelEvent,
    FlywheelItem,
    FlywheelSettings,
    FlywheelState,
    HeldoutEval,
    ItemDecision,
    RoundRecord,
    Stage,
    TrainingSummary,
    read_jsonl_tolerant,
)
from ._rules import as_verdict, matches, promotion_decision
from ._trainer import LocalTrainer, link_identical_files
from ._workdir import (
    FlywheelError,
    _check_pairwise,
    _exclusive,
    _sha256_file,
    _WorkFolder,
)

__all__ = ["Flywheel"]


# ------------------------------------------------------------------ the flywheel


class Flywheel(_WorkFolder):
    """Rounds of judge → collect → train → calibrate → promote, kept in ``workdir``.

    ``heldout``: the fixed labelled set (PairwiseTrace with human labels) the
    thresholds are calibrated on and the promotion rule reads; it must be the
    same set every time this folder is used. ``teacher``: the stronger judge.
    ``trainer``: trains and loads the local judge. ``seed_traces``: optional
    labelled traces to train on from the first round.
    """

    def __init__(
        self,
        workdir: str | Path,
        *,
        heldout: Sequence[PairwiseTrace],
        teacher: Judge[Any, Any],
        trainer: LocalTrainer,
        settings: FlywheelSettings,
        seed_traces: Sequence[PairwiseTrace] = (),
        log: Any = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.teacher = teacher
        self.trainer = trainer
        self.settings = settings
        self._log = log
        self.heldout = _check_pairwise(heldout, "heldout")
        if not self.heldout:
            raise ValueError("heldout must hold at least one labelled trace")
        self.seed = _check_pairwise(seed_traces, "seed_traces")
        self._heldout_groups = {instruction_key(t) for t in self.heldout}
        self._open()

    # -------------------------------------------------------------- serving

    def load_local(self, n: int) -> Judge[Any, Any]:
        model = self.round_dir(n) / "model"
        if not model.is_dir():
            raise FlywheelError(f"round {n} has no model")
        return self.trainer.load(model)

    async def acascade(self, settings: FlywheelSettings | None = None) -> tuple[Judge[Any, Any], HeldoutEval | None]:
        """The cascade in service: the champion at its calibrated threshold, then
        the teacher (the teacher alone while there is no champion), with the
        champion's held-out evaluation."""
        s = settings or self.settings
        champ = self.state.champion
        if champ is None:
            return self.teacher, None
        ev = await self._evaluate_round_model(champ, s)
        local = self.load_local(champ)
        policy: LowConfidence | Abstain = ev.calibration.policy()
        cascade = CascadeJudge(
            [Tier(local, (policy,)), self.teacher], on_last_failure=s.on_teacher_failure, name=f"flywheel:{champ}"
        )
        return cascade, ev

    # -------------------------------------------------------------- rounds

    def run_round(self, batch: Sequence[FlywheelItem] | None = None, *, stop_after: Stage | None = None) -> RoundRecord:
        """Synchronous :meth:`arun_round`."""
        return run_sync(self.arun_round(batch, stop_after=stop_after))

    async def arun_round(
        self, batch: Sequence[FlywheelItem] | None = None, *, stop_after: Stage | None = None
    ) -> RoundRecord:
        """Run a round over ``batch``, or finish the interrupted one.

        With an unfinished round on file, that round resumes (``batch`` must
        then be None or the same items). ``stop_after`` ends the call after
        that stage; the next call resumes from there.
        """
        with _exclusive(self.workdir):
            return await self._run_round(batch, stop_after)

    async def _run_round(self, batch: Sequence[FlywheelItem] | None, stop_after: Stage | None) -> RoundRecord:
        rec = self.pending()
        if rec is not None:
            if batch is not None and self._batch_sha(batch) != rec.batch_sha256:
                raise FlywheelError(
                    f"round {rec.round} is unfinished (stage {rec.stage}) with another batch: "
                    "resume it first (call with no batch)"
                )
            self._say(f"resuming round {rec.round} after stage {rec.stage}")
        else:
            if batch is None:
                raise ValueError("no unfinished round to resume: give a batch (an empty one retrains only)")
            rec = self._start(list(batch))
        items = self._read_batch(rec.round)
        order: list[Stage] = list(STAGES)
        while rec.stage != "done":
            if stop_after is not None and order.index(rec.stage) >= order.index(stop_after):
                return rec
            if rec.stage == "started":
                rec = await self._judge_stage(rec, items)
            elif rec.stage == "judged":
                rec = self._train_stage(rec)
            elif rec.stage == "trained":
                rec = await self._evaluate_stage(rec)
            elif rec.stage == "evaluated":
                rec = self._decide_stage(rec)
        return rec

    async def arun(self, batches: Sequence[Sequence[FlywheelItem]]) -> list[RoundRecord]:
        """Finish any interrupted round, then one round per batch."""
        out = []
        if self.pending() is not None:
            out.append(await self.arun_round())
        for b in batches:
            out.append(await self.arun_round(b))
        return out

    # .............................................................. 1. judge

    async def _judge_stage(self, rec: RoundRecord, items: list[FlywheelItem]) -> RoundRecord:
        s = rec.settings
        d = self.round_dir(rec.round)
        path = d / "decisions.jsonl"
        done = {row["key"]: ItemDecision.model_validate(row) for row in read_jsonl_tolerant(path)}
        # Rewrite what survived, so a cut-off last line never glues onto the next one.
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(v.model_dump_json() + "\n" for v in done.values()), encoding="utf-8")
        tmp.replace(path)

        champion = self.state.champion
        judge: Judge[Any, Any]
        ref: HeldoutEval | None = None
        if champion is None:
            judge = self.teacher
        else:
            judge, ref = await self.acascade(s)
        todo = [it for it in items if it.key not in done]
        if todo:
            self._say(
                f"round {rec.round}: judging {len(todo)} items with "
                + (
                    f"round {champion}'s local judge (threshold {ref.threshold}) and the teacher"
                    if ref
                    else "the teacher alone"
                )
            )
        for start in range(0, len(todo), s.chunk_size):
            chunk = todo[start : start + s.chunk_size]
            got = await judge.ajudge_many([it.input for it in chunk])
            decisions = [
                decide_item(it, as_verdict(r), local=champion is not None) for it, r in zip(chunk, got, strict=True)
            ]
            audit = [
                i
                for i, dec in enumerate(decisions)
                if dec.decided_by == "local"
                and not dec.escalated  # a fallback after a teacher failure is not a confident decision
                and _audit_pick(s.seed, rec.round, dec.key, s.audit_rate)
            ]
            if audit:
                answers = await self.teacher.ajudge_many([chunk[i].input for i in audit])
                for i, r in zip(audit, answers, strict=True):
                    t = as_verdict(r)
                    cost = t.provenance.cost_usd if t.provenance is not None else None
                    decisions[i] = decisions[i].model_copy(
                        update={
                            "audited": True,
                            "teacher": t.model_copy(update={"tiers": ()}),
                            "teacher_calls": 1,
                            "teacher_cost_usd": cost,
                        }
                    )
            with path.open("a", encoding="utf-8") as fh:
                fh.write("".join(dec.model_dump_json() + "\n" for dec in decisions))
                fh.flush()
            for dec in decisions:
                done[dec.key] = dec
        ordered = [done[it.key] for it in items]
        collected = collect_traces(rec.round, items, ordered)
        write_traces(d / "collected.jsonl", collected)
        summary = summarise_batch(champion, ref, ordered, collected)
        self._say(
            f"round {rec.round}: escalated {summary.escalated}/{summary.items}, audited {summary.audited}, "
            f"collected {len(collected)} traces"
        )
        return self._save(rec.model_copy(update={"stage": "judged", "batch": summary}))

    # .............................................................. 2. train

    def _train_stage(self, rec: RoundRecord) -> RoundRecord:
        d = self.round_dir(rec.round)
        traces, info = self.training_traces(rec.round)
        path = d / "training.jsonl"
        write_traces(path, traces)
        summary = TrainingSummary(
            traces=len(traces),
            by_source=dict(Counter(t.source for t in traces)),
            sha256=_sha256_file(path),
            trainer=self.trainer.describe(),
            **info,
        )
        if len(traces) < 2:
            summary = summary.model_copy(update={"skipped": f"only {len(traces)} training trace(s)"})
            return self._save(rec.model_copy(update={"stage": "trained", "training": summary}))
        partial, model = d / "model.partial", d / "model"
        shutil.rmtree(partial, ignore_errors=True)
        if model.exists():  # a crash after the rename but before the record: the model is complete
            metrics: dict[str, float] = {}
        else:
            self._say(f"round {rec.round}: training on {len(traces)} traces")
            metrics = self.trainer.train(traces, partial)
            partial.replace(model)
        prev = self._previous_model(rec.round)
        if prev is not None:
            link_identical_files(model, prev)
        summary = summary.model_copy(update={"metrics": {k: float(v) for k, v in metrics.items()}})
        return self._save(rec.model_copy(update={"stage": "trained", "training": summary}))

    # .............................................................. 3. evaluate

    async def _evaluate_stage(self, rec: RoundRecord) -> RoundRecord:
        s = rec.settings
        teacher = await self._teacher_heldout()
        labels = self._heldout_labels()
        teacher_agree = sum(matches(t, y) for t, y in zip(teacher, labels, strict=True)) / len(labels)
        challenger: HeldoutEval | None = None
        if rec.training is not None and rec.training.skipped is None:
            local = self._local_heldout(rec.round)
            if local is None:
                self._say(f"round {rec.round}: the challenger on the held-out set ({len(labels)} items)")
                judge = self.load_local(rec.round)
                local = await self._judge_heldout(judge, self.round_dir(rec.round) / "heldout.jsonl")
            challenger = await self._heldout_eval(rec.round, local, teacher, s)
        champ = self.state.champion
        champion = await self._evaluate_round_model(champ, s) if champ is not None else None
        return self._save(
            rec.model_copy(
                update={
                    "stage": "evaluated",
                    "teacher_heldout_agreement": teacher_agree,
                    "challenger": challenger,
                    "champion": champion,
                }
            )
        )

    # .............................................................. 4. decide

    def _decide_stage(self, rec: RoundRecord) -> RoundRecord:
        skipped = rec.training.skipped if rec.training is not None else "no training"
        decision = promotion_decision(
            rec.challenger,
            rec.champion,
            tolerance=rec.settings.promote_tolerance,
            skipped=skipped,
            on=rec.settings.promote_on,
        )
        rec = self._save(rec.model_copy(update={"stage": "done", "decision": decision, "finished_at": time.time()}))
        self._write_state(self._apply(self.state, rec))
        self._say(f"round {rec.round}: {decision.reason}")
        return rec

    # -------------------------------------------------------------- rollback

    def rollback(self, to: int | None = None, *, drop_traces: bool = False, note: str = "") -> FlywheelState:
        """Put an earlier round's local judge back in service.

        ``to``: the round whose model serves again; by default the champion
        before the current one. ``drop_traces``: rounds after ``to`` stop
        contributing training traces to later rounds (their records and
        files stay). The round records are never changed; the event log says
        what happened.
        """
        with _exclusive(self.workdir):
            return self._rollback(to, drop_traces=drop_traces, note=note)

    def _rollback(self, to: int | None, *, drop_traces: bool, note: str) -> FlywheelState:
        pending = self.pending()
        if pending is not None:
            raise FlywheelError(
                f"round {pending.round} is unfinished (stage {pending.stage}): finish it before a rollback"
            )
        state = self.state
        if to is None:
            history = [None, *(e.champion for e in state.events)]
            earlier = [c for c in history[:-1] if c != state.champion]
            if not earlier or all(c is None for c in earlier):
                raise FlywheelError("there is no earlier local judge to roll back to")
            to = next(c for c in reversed(earlier) if c is not None)
        if not (self.round_dir(to) / "model").is_dir() or self._local_heldout(to) is None:
            raise FlywheelError(f"round {to} has no trained, evaluated local judge to roll back to")
        excluded = set(state.excluded_rounds)
        if drop_traces:
            excluded |= {r.round for r in self.rounds() if r.round > to}
        ev = FlywheelEvent(
            round=None,
            action="rollback",
            champion=to,
            at=time.time(),
            note=note
            or f"round {state.champion} -> round {to}" + (" (later rounds' traces dropped)" if drop_traces else ""),
        )
        new = state.model_copy(
            update={"champion": to, "excluded_rounds": tuple(sorted(excluded)), "events": (*state.events, ev)}
        )
        self._write_state(new)
        return new
