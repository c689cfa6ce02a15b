"""The work folder: manifest, lock, state, round records, held-out verdicts and training traces on file."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from judgegraph.cascade import ThresholdCalibration
from judgegraph.finetune import PairwiseTrace, dedup_traces, instruction_key, read_traces, write_traces
from judgegraph.judges import Judge, VerdictRecord, read_verdicts, write_verdicts

from ..types import PairwiseVerdict, Winner
from ._crossfit import acrossfit_verdicts, trace_calibration
from ._records import FlywheelEvent, FlywheelItem, FlywheelSettings, FlywheelState, HeldoutEval, RoundRecord, write_json
from ._rules import as_verdict, evaluate_on_heldout
from ._trainer import LocalTrainer

__all__ = ["FlywheelError"]


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


def _jsonl_bytes(models: Sequence[BaseModel]) -> bytes:
    return b"".join(m.model_dump_json().encode() + b"\n" for m in models)


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
    from judgegraph.judges import item_key

    return item_key(t.to_input())


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


class _WorkFolder:
    """What :class:`~judgegraph.flywheel.Flywheel` keeps in ``workdir``; its ``__init__`` sets the attributes below."""

    workdir: Path
    teacher: Judge[Any, Any]
    trainer: LocalTrainer
    settings: FlywheelSettings
    heldout: list[PairwiseTrace]
    seed: list[PairwiseTrace]
    _heldout_groups: set[str]
    _log: Any

    # -------------------------------------------------------------- files

    @property
    def rounds_dir(self) -> Path:
        return self.workdir / "rounds"

    def round_dir(self, n: int) -> Path:
        return self.rounds_dir / f"round-{n:03d}"

    def _open(self) -> None:
        manifest_path = self.workdir / "flywheel.json"
        seed_bytes = _jsonl_bytes(self.seed)
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

    @staticmethod
    def _batch_sha(batch: Sequence[FlywheelItem]) -> str:
        return hashlib.sha256(_jsonl_bytes(batch)).hexdigest()

    def _start(self, batch: list[FlywheelItem]) -> RoundRecord:
        done = self.rounds()
        n = done[-1].round + 1 if done else 1
        d = self.round_dir(n)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "batch.jsonl.tmp"
        tmp.write_bytes(_jsonl_bytes(batch))
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
        return await self._judge_heldout(self.teacher, path)

    async def _judge_heldout(self, judge: Judge[Any, Any], path: Path) -> list[PairwiseVerdict]:
        """``judge``'s verdicts on the held-out set, written to ``path``."""
        got = await judge.ajudge_many([t.to_input() for t in self.heldout])
        results = [as_verdict(r) for r in got]
        _write_verdicts_atomic(
            path,
            [
                VerdictRecord(key=_trace_key(t), judge=str(judge.name), result=r, label=t.winner)
                for t, r in zip(self.heldout, results, strict=True)
            ],
        )
        return results

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
        return await self._heldout_eval(n, local, await self._teacher_heldout(), settings)

    async def _heldout_eval(
        self, n: int, local: list[PairwiseVerdict], teacher: list[PairwiseVerdict], settings: FlywheelSettings
    ) -> HeldoutEval:
        """Round ``n``'s judge on the held-out set, at the threshold ``settings.calibrate_on`` says."""
        cal = await self._trace_calibration(n, settings) if settings.calibrate_on == "traces" else None
        return evaluate_on_heldout(n, local, teacher, self._heldout_labels(), settings, calibration=cal)

    async def _trace_calibration(self, n: int, settings: FlywheelSettings) -> ThresholdCalibration:
        """Round ``n``'s threshold from its training traces, cross-fitted; the
        out-of-fold verdicts are kept in ``crossfit.jsonl``, so a resumed or
        re-evaluated round does not fit the folds again."""
        d = self.round_dir(n)
        traces = _check_pairwise(read_traces(d / "training.jsonl"), f"round {n} training traces")
        path = d / "crossfit.jsonl"
        verdicts: list[PairwiseVerdict] | None
        if path.exists():
            table = {r.key: r.result for r in read_verdicts(path)}
            verdicts = [table[_trace_key(t)] for t in traces] if table else None  # type: ignore[misc]
        else:
            self._say(f"round {n}: cross-fitting {len(traces)} traces in {settings.folds} folds for the threshold")
            verdicts = await acrossfit_verdicts(
                self.trainer, traces, folds=settings.folds, seed=settings.seed + n, scratch=d / "crossfit.partial"
            )
            records = (
                []
                if verdicts is None
                else [
                    VerdictRecord(key=_trace_key(t), judge="cross-fitted", result=r, label=t.winner)
                    for t, r in zip(traces, verdicts, strict=True)
                ]
            )
            _write_verdicts_atomic(path, records)
        return trace_calibration(verdicts, traces, settings)

    # -------------------------------------------------------------- training traces

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

    def _previous_model(self, n: int) -> Path | None:
        for k in range(n - 1, 0, -1):
            m = self.round_dir(k) / "model"
            if m.is_dir():
                return m
        return None
