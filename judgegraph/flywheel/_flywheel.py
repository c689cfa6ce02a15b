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

import hashlib
import math
import shutil
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from .._calibration import calibrate_tier
from .._cascade import Abstain, CascadeJudge, LowConfidence, Tier, certainty
from .._judge import BaseJudge, JudgeInputError, _run_sync
from .._replay import VerdictRecord, read_verdicts, write_verdicts
from ..finetune._dataset import dedup_traces, instruction_key
from ..finetune._traces import PairwiseTrace, read_traces, trace_from_result, write_traces
from ..types import PairwiseVerdict, Status, Winner
from ._records import (
    STAGES,
    BatchSummary,
    FlywheelEvent,
    FlywheelItem,
    FlywheelSettings,
    FlywheelState,
    HeldoutEval,
    ItemDecision,
    PromotionDecision,
    RoundRecord,
    Stage,
    TrainingSummary,
    read_jsonl_tolerant,
    write_json,
)
from ._trainer import LocalTrainer, link_identical_files

__all__ = ["Flywheel", "FlywheelError", "evaluate_on_heldout", "promotion_decision"]


class FlywheelError(RuntimeError):
    """The work folder and the request disagree (another held-out set, an unfinished round, ...)."""


class _Manifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
    heldout_n: int
    heldout_sha256: str
    heldout_instructions: int
    seed_n: int
    seed_sha256: str
    created_at: float


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _trace_lines(traces: Sequence[PairwiseTrace]) -> bytes:
    return b"".join(t.model_dump_json().encode() + b"\n" for t in traces)


def _check_pairwise(traces: Sequence[Any], what: str) -> list[PairwiseTrace]:
    out = []
    for i, t in enumerate(traces):
        if not isinstance(t, PairwiseTrace):
            raise TypeError(f"{what}[{i}] is a {type(t).__name__}, not a PairwiseTrace")
        out.append(t)
    return out


def _heldout_sha(traces: Sequence[PairwiseTrace]) -> str:
    rows = sorted(f"{_trace_key(t)}\t{t.winner}" for t in traces)
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _trace_key(t: PairwiseTrace) -> str:
    from .._replay import item_key

    return item_key(t.to_input())


def _audit_pick(seed: int, round_no: int, key: str, rate: float) -> bool:
    if rate <= 0:
        return False
    h = int.from_bytes(hashlib.sha256(f"{seed}:{round_no}:{key}".encode()).digest()[:8], "big")
    return h / 2**64 < rate


def _write_verdicts_atomic(path: Path, records: list[VerdictRecord]) -> None:
    # Whether this file exists decides whether a resumed round asks again: never leave half of one.
    tmp = path.with_name(path.name + ".tmp")
    write_verdicts(tmp, records)
    tmp.replace(path)


@contextmanager
def _exclusive(workdir: Path) -> Iterator[None]:
    """One writer per work folder: a second process (say, an overlapping cron run)
    fails at once instead of interleaving rounds. The lock dies with its process."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    with (workdir / ".lock").open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FlywheelError(f"{workdir} is in use by another process") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _binom_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


# ------------------------------------------------------------------ pure rules


def matches(r: PairwiseVerdict, label: Winner) -> bool:
    """Strict agreement, as calibration counts it: an ok verdict equal to the label."""
    return r.ok and r.winner == label


def evaluate_on_heldout(
    round_no: int,
    local: Sequence[PairwiseVerdict],
    teacher: Sequence[PairwiseVerdict],
    labels: Sequence[Winner],
    settings: FlywheelSettings,
) -> HeldoutEval:
    """Calibrate a local judge's threshold on the held-out set and measure it there.

    The threshold is the fixed-sequence calibrated one (``settings.alpha``,
    ``settings.delta``); items the local judge keeps at it are those with
    confidence >= threshold, as :class:`~judgegraph.LowConfidence` escalates
    the rest. Agreement is strict: a verdict counts only when it equals the label.
    """
    if not (len(local) == len(teacher) == len(labels)):
        raise ValueError(f"{len(local)} local verdicts, {len(teacher)} teacher verdicts, {len(labels)} labels")
    if not labels:
        raise ValueError("the held-out set is empty")
    cal = calibrate_tier(
        list(local), list(labels), alpha=settings.alpha, delta=settings.delta, min_kept=settings.min_kept
    )
    kept = [_kept(r, cal.threshold) for r in local]
    n = len(labels)
    local_agree = sum(matches(r, y) for r, y in zip(local, labels, strict=True)) / n
    cascade_agree = sum(matches(r if k else t, y) for r, t, y, k in zip(local, teacher, labels, kept, strict=True)) / n
    pairs = [(r, t) for r, t, k in zip(local, teacher, kept, strict=True) if k and t.ok]
    # The equal-agreement point: keep the most confident items while the cascade
    # still agrees with the labels at least as often as the teacher alone.
    gain = [int(matches(r, y)) - int(matches(t, y)) for r, t, y in zip(local, teacher, labels, strict=True)]
    conf = [certainty(r) if r.ok else None for r in local]
    ranked = sorted((i for i in range(n) if conf[i] is not None), key=lambda i: -conf[i])  # type: ignore[operator]
    best = running = 0
    for pos, i in enumerate(ranked):
        running += gain[i]
        cut_here = pos + 1 == len(ranked) or conf[ranked[pos + 1]] != conf[i]  # a threshold cannot split ties
        if cut_here and running >= 0:
            best = pos + 1
    return HeldoutEval(
        round=round_no,
        n=n,
        local_agreement=local_agree,
        calibration=cal,
        escalation_share=1 - sum(kept) / n,
        cascade_agreement=cascade_agree,
        teacher_agreement_on_kept=(sum(r.winner == t.winner for r, t in pairs) / len(pairs)) if pairs else None,
        equal_agreement_escalation=1 - best / n,
    )


def _kept(r: PairwiseVerdict, threshold: float | None) -> bool:
    if threshold is None or not r.ok:
        return False
    c = certainty(r)
    return c is not None and c >= threshold


def promotion_decision(
    challenger: HeldoutEval | None,
    champion: HeldoutEval | None,
    *,
    tolerance: float,
    skipped: str | None = None,
) -> PromotionDecision:
    """Champion/challenger: the challenger replaces the champion only if its
    held-out agreement is at least the champion's minus ``tolerance``. With no
    champion yet, a challenger is promoted (its calibrated threshold, possibly
    "escalate everything", is what protects agreement then)."""
    before = champion.round if champion is not None else None
    if challenger is None:
        why = skipped or "no challenger was trained"
        return PromotionDecision(
            promoted=False, reason=f"kept: {why}", champion_before=before, champion_after=before, tolerance=tolerance
        )
    if champion is None:
        return PromotionDecision(
            promoted=True,
            reason=f"promoted: no local judge in service yet (challenger agreement {challenger.local_agreement:.3f})",
            champion_before=None,
            champion_after=challenger.round,
            tolerance=tolerance,
        )
    ch, cur = challenger.local_agreement, champion.local_agreement
    promoted = ch >= cur - tolerance - 1e-12
    verb = "promoted" if promoted else "kept"
    rel = ">=" if promoted else "<"
    tol = f" - {tolerance:g}" if tolerance else ""
    reason = f"{verb}: challenger agreement {ch:.3f} {rel} champion (round {champion.round}) {cur:.3f}{tol}"
    return PromotionDecision(
        promoted=promoted,
        reason=reason,
        champion_before=before,
        champion_after=challenger.round if promoted else before,
        tolerance=tolerance,
    )


# ------------------------------------------------------------------ the flywheel


class Flywheel:
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
        teacher: BaseJudge[Any, Any],
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

    # -------------------------------------------------------------- files

    @property
    def rounds_dir(self) -> Path:
        return self.workdir / "rounds"

    def round_dir(self, n: int) -> Path:
        return self.rounds_dir / f"round-{n:03d}"

    def _open(self) -> None:
        manifest_path = self.workdir / "flywheel.json"
        seed_bytes = _trace_lines(self.seed)
        manifest = _Manifest(
            heldout_n=len(self.heldout),
            heldout_sha256=_heldout_sha(self.heldout),
            heldout_instructions=len(self._heldout_groups),
            seed_n=len(self.seed),
            seed_sha256=hashlib.sha256(seed_bytes).hexdigest(),
            created_at=time.time(),
        )
        if manifest_path.exists():
            old = _Manifest.model_validate_json(manifest_path.read_text(encoding="utf-8"))
            if old.heldout_sha256 != manifest.heldout_sha256:
                raise FlywheelError(
                    f"{self.workdir} was run with another held-out set "
                    f"({old.heldout_n} items, sha {old.heldout_sha256[:12]}; "
                    f"given {manifest.heldout_n}, sha {manifest.heldout_sha256[:12]}): rounds are only comparable on "
                    "one fixed held-out set; use a new work folder"
                )
            if old.seed_sha256 != manifest.seed_sha256:
                raise FlywheelError(
                    f"{self.workdir} was run with other seed traces ({old.seed_n}; given {manifest.seed_n}); "
                    "use a new work folder"
                )
        else:
            self.workdir.mkdir(parents=True, exist_ok=True)
            write_traces(self.workdir / "heldout.jsonl", self.heldout)
            (self.workdir / "seed.jsonl").write_bytes(seed_bytes)
            write_json(manifest_path, manifest)
        if not (self.workdir / "state.json").exists():
            write_json(self.workdir / "state.json", FlywheelState())
        self.rounds_dir.mkdir(exist_ok=True)
        self._reconcile()

    @property
    def state(self) -> FlywheelState:
        return FlywheelState.model_validate_json((self.workdir / "state.json").read_text(encoding="utf-8"))

    def _write_state(self, state: FlywheelState) -> None:
        write_json(self.workdir / "state.json", state)

    def rounds(self) -> list[RoundRecord]:
        """Every round's record, oldest first (an unfinished one included)."""
        out = []
        for d in sorted(self.rounds_dir.glob("round-*")):
            f = d / "round.json"
            if f.exists():
                out.append(RoundRecord.model_validate_json(f.read_text(encoding="utf-8")))
        return out

    def record(self, n: int) -> RoundRecord:
        f = self.round_dir(n) / "round.json"
        if not f.exists():
            raise FlywheelError(f"there is no round {n} in {self.workdir}")
        return RoundRecord.model_validate_json(f.read_text(encoding="utf-8"))

    def pending(self) -> RoundRecord | None:
        """The unfinished round, if one was interrupted."""
        rs = self.rounds()
        return rs[-1] if rs and rs[-1].stage != "done" else None

    def _save(self, rec: RoundRecord) -> RoundRecord:
        write_json(self.round_dir(rec.round) / "round.json", rec)
        return rec

    def _say(self, text: str) -> None:
        if self._log is not None:
            self._log(text)

    def _reconcile(self) -> None:
        """A crash between writing a round's decision and the state leaves the
        state one event behind; apply it."""
        state = self.state
        applied = {e.round for e in state.events if e.round is not None}
        for rec in self.rounds():
            if rec.stage == "done" and rec.decision is not None and rec.round not in applied:
                state = self._apply(state, rec)
        self._write_state(state)

    def _apply(self, state: FlywheelState, rec: RoundRecord) -> FlywheelState:
        assert rec.decision is not None
        ev = FlywheelEvent(
            round=rec.round,
            action="promoted" if rec.decision.promoted else "kept",
            champion=rec.decision.champion_after,
            at=rec.finished_at or time.time(),
            note=rec.decision.reason,
        )
        return state.model_copy(update={"champion": rec.decision.champion_after, "events": (*state.events, ev)})

    # -------------------------------------------------------------- held-out verdicts

    def _heldout_labels(self) -> list[Winner]:
        return [t.winner for t in self.heldout]

    async def _teacher_heldout(self) -> list[PairwiseVerdict]:
        path = self.workdir / "heldout-teacher.jsonl"
        keys = [_trace_key(t) for t in self.heldout]
        name = str(self.teacher.name)
        if path.exists():
            rows = read_verdicts(path)
            table = {r.key: r.result for r in rows if r.judge == name}
            if all(k in table for k in keys):
                return [table[k] for k in keys]  # type: ignore[misc]
        self._say(f"teacher {name} on the held-out set ({len(keys)} items, once per teacher)")
        got = await self.teacher.ajudge_many([t.to_input() for t in self.heldout])
        results = [self._as_verdict(r) for r in got]
        _write_verdicts_atomic(
            path,
            [
                VerdictRecord(key=k, judge=name, result=r, label=t.winner)
                for k, r, t in zip(keys, results, self.heldout, strict=True)
            ],
        )
        return results

    @staticmethod
    def _as_verdict(r: Any) -> PairwiseVerdict:
        if isinstance(r, JudgeInputError):
            raise r
        if not isinstance(r, PairwiseVerdict):
            raise TypeError(f"expected a PairwiseVerdict, got {type(r).__name__}")
        return r

    def _local_heldout(self, n: int) -> list[PairwiseVerdict] | None:
        path = self.round_dir(n) / "heldout.jsonl"
        if not path.exists():
            return None
        table = {r.key: r.result for r in read_verdicts(path)}
        return [table[_trace_key(t)] for t in self.heldout]  # type: ignore[misc]

    async def _evaluate_round_model(self, n: int, settings: FlywheelSettings) -> HeldoutEval:
        local = self._local_heldout(n)
        if local is None:
            raise FlywheelError(f"round {n} has no held-out verdicts")
        teacher = await self._teacher_heldout()
        return evaluate_on_heldout(n, local, teacher, self._heldout_labels(), settings)

    # -------------------------------------------------------------- serving

    def load_local(self, n: int) -> BaseJudge[Any, Any]:
        model = self.round_dir(n) / "model"
        if not model.is_dir():
            raise FlywheelError(f"round {n} has no model")
        return self.trainer.load(model)

    async def acascade(
        self, settings: FlywheelSettings | None = None
    ) -> tuple[BaseJudge[Any, Any], HeldoutEval | None]:
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
        return _run_sync(self.arun_round(batch, stop_after=stop_after))

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

    @staticmethod
    def _batch_sha(batch: Sequence[FlywheelItem]) -> str:
        return hashlib.sha256(b"".join(i.model_dump_json().encode() + b"\n" for i in batch)).hexdigest()

    def _start(self, batch: list[FlywheelItem]) -> RoundRecord:
        done = self.rounds()
        n = done[-1].round + 1 if done else 1
        d = self.round_dir(n)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "batch.jsonl.tmp"
        tmp.write_bytes(b"".join(i.model_dump_json().encode() + b"\n" for i in batch))
        tmp.replace(d / "batch.jsonl")
        rec = RoundRecord(
            round=n,
            stage="started",
            settings=self.settings,
            batch_size=len(batch),
            batch_sha256=self._batch_sha(batch),
            started_at=time.time(),
        )
        self._say(f"round {n}: {len(batch)} items")
        return self._save(rec)

    def _read_batch(self, n: int) -> list[FlywheelItem]:
        path = self.round_dir(n) / "batch.jsonl"
        return [
            FlywheelItem.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line
        ]

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
        judge: BaseJudge[Any, Any]
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
                self._decision(it, self._as_verdict(r), local=champion is not None)
                for it, r in zip(chunk, got, strict=True)
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
                    t = self._as_verdict(r)
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
        collected = self._collect(rec.round, items, ordered)
        write_traces(d / "collected.jsonl", collected)
        summary = self._summarise(champion, ref, ordered, collected)
        self._say(
            f"round {rec.round}: escalated {summary.escalated}/{summary.items}, audited {summary.audited}, "
            f"collected {len(collected)} traces"
        )
        return self._save(rec.model_copy(update={"stage": "judged", "batch": summary}))

    def _decision(self, item: FlywheelItem, r: PairwiseVerdict, *, local: bool) -> ItemDecision:
        if not local:  # the teacher alone
            return ItemDecision(
                key=item.key,
                id=item.id,
                status=r.status,
                decided_by="teacher" if r.ok else "none",
                verdict=r.winner,
                escalated=True,
                reason="no local judge in service yet",
                teacher=r.model_copy(update={"tiers": ()}),
                teacher_calls=1,
                teacher_cost_usd=r.provenance.cost_usd if r.provenance is not None else None,
            )
        first = r.tiers[0]
        local_verdict = first.verdict if first.verdict in ("A", "B", "tie") else None
        escalated = len(r.tiers) > 1
        decided = next((t for t in r.tiers if t.decided), None)
        by = "none" if decided is None else ("local" if decided.tier == 0 else "teacher")
        teacher: PairwiseVerdict | None = None
        cost: float | None = None
        if escalated:
            second = r.tiers[1]
            cost = second.cost_usd
            if by == "teacher":
                teacher = r.model_copy(update={"tiers": ()})
            else:  # the teacher failed; keep why, as a failed verdict
                teacher = PairwiseVerdict(
                    status=second.status if second.status is not Status.OK else Status.ERROR,
                    reason=r.reason or second.reason,
                )
        return ItemDecision(
            key=item.key,
            id=item.id,
            status=r.status,
            decided_by=by,  # type: ignore[arg-type]
            verdict=r.winner,
            escalated=escalated,
            reason=first.reason,
            local_verdict=local_verdict,  # type: ignore[arg-type]
            local_confidence=first.confidence,
            teacher=teacher,
            teacher_calls=1 if escalated else 0,
            teacher_cost_usd=cost,
        )

    def _collect(self, n: int, items: list[FlywheelItem], decisions: list[ItemDecision]) -> list[PairwiseTrace]:
        out: list[PairwiseTrace] = []
        for it, dec in zip(items, decisions, strict=True):
            meta = {"round": n, "key": it.key}
            if it.human_label is not None:
                out.append(
                    PairwiseTrace(
                        id=it.id,
                        instruction=it.input.instruction,
                        response_a=it.input.response_a,
                        response_b=it.input.response_b,
                        reference=it.input.reference,
                        winner=it.human_label,
                        source="human",
                        metadata={**meta, "why": "human"},
                    )
                )
            if dec.teacher is not None and dec.teacher.ok:
                why = "audit" if dec.audited else "escalated"
                t = trace_from_result(it.input, dec.teacher, source="teacher", id=it.id, metadata={**meta, "why": why})
                assert isinstance(t, PairwiseTrace)
                out.append(t)
        return out

    def _summarise(
        self,
        champion: int | None,
        ref: HeldoutEval | None,
        decisions: list[ItemDecision],
        collected: list[PairwiseTrace],
    ) -> BatchSummary:
        audited = [d for d in decisions if d.audited and d.teacher is not None and d.teacher.ok]
        agree = sum(d.local_verdict == d.teacher.winner for d in audited if d.teacher is not None)
        audit_agreement = agree / len(audited) if audited else None
        reference = ref.teacher_agreement_on_kept if ref is not None else None
        drift: bool | None = None
        p: float | None = None
        if audited and reference is not None:
            p = _binom_cdf(agree, len(audited), reference)  # P(this few agreements | the reference rate)
            drift = p < 0.05
        costs = [d.teacher_cost_usd for d in decisions if d.teacher_calls]
        calls = sum(d.teacher_calls for d in decisions)
        return BatchSummary(
            champion=champion,
            threshold=ref.threshold if ref is not None else None,
            items=len(decisions),
            local_decided=sum(d.decided_by == "local" for d in decisions),
            escalated=sum(d.escalated for d in decisions),
            failed=sum(d.decided_by == "none" for d in decisions),
            audited=sum(d.audited for d in decisions),
            audit_agreement=audit_agreement,
            audit_reference=reference,
            drift=drift,
            drift_p_value=p,
            teacher_calls=calls,
            teacher_failures=sum(1 for d in decisions if d.teacher is not None and not d.teacher.ok),
            cost_usd=None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None)),
            collected=dict(Counter(str(t.metadata.get("why")) for t in collected)),
        )

    # .............................................................. 2. train

    def training_traces(self, upto: int) -> tuple[list[PairwiseTrace], dict[str, Any]]:
        """The traces a challenger of round ``upto`` trains on, and how they were chosen:
        the seed traces and every round's collected traces up to ``upto`` (rounds a
        rollback excluded left out), with any trace whose instruction is in the held-out
        set dropped, then duplicates dropped (a human label beats a teacher's, a later
        round's beats an earlier one's)."""
        excluded = set(self.state.excluded_rounds)
        sources: list[tuple[int, PairwiseTrace]] = []
        if 0 not in excluded:
            sources += [(0, t) for t in self.seed]
        for n in range(1, upto + 1):
            f = self.round_dir(n) / "collected.jsonl"
            if n in excluded or not f.exists():
                continue
            sources += [(n, t) for t in _check_pairwise(read_traces(f), f"round {n} traces")]
        leak = [(n, t) for n, t in sources if instruction_key(t) in self._heldout_groups]
        clean = [(n, t) for n, t in sources if instruction_key(t) not in self._heldout_groups]
        rank = {"human": 0, "teacher": 1}
        ordered = sorted(range(len(clean)), key=lambda i: (rank.get(clean[i][1].source, 2), -clean[i][0], i))
        kept, dups, conflicts = dedup_traces([clean[i][1] for i in ordered])
        kept_ids = {id(t) for t in kept}
        final = [t for _, t in clean if id(t) in kept_ids]  # back in round order
        info = {
            "rounds": sorted({n for n, _ in clean}),
            "excluded_heldout": len(leak),
            "duplicates": dups,
            "conflicting": conflicts,
        }
        return final, info

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

    def _previous_model(self, n: int) -> Path | None:
        for k in range(n - 1, 0, -1):
            m = self.round_dir(k) / "model"
            if m.is_dir():
                return m
        return None

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
                got = await judge.ajudge_many([t.to_input() for t in self.heldout])
                local = [self._as_verdict(r) for r in got]
                _write_verdicts_atomic(
                    self.round_dir(rec.round) / "heldout.jsonl",
                    [
                        VerdictRecord(key=_trace_key(t), judge=str(judge.name), result=r, label=t.winner)
                        for t, r in zip(self.heldout, local, strict=True)
                    ],
                )
            challenger = evaluate_on_heldout(rec.round, local, teacher, labels, s)
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
            rec.challenger, rec.champion, tolerance=rec.settings.promote_tolerance, skipped=skipped
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
