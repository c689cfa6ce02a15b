"""Recorded verdicts ("cassettes"): a JSON file beside the tests, and a judge
wrapper that answers from it.

Each entry is keyed by ``<config>-<input>``: the judge-configuration hash
that batch jobs use (:func:`judgegraph.jobs.fingerprint_for` +
:func:`~judgegraph.jobs.config_hash`, i.e. the one
:func:`~judgegraph.backends.verdict_identity`: the template id and version,
the judge's options, the backend's model and options, but not its server)
and the same hash of the
validated input. In replay mode the wrapper never calls the judge it wraps,
so no request can reach the network.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from judgegraph.jobs import config_hash, fingerprint_for
from judgegraph.judges import Judge
from judgegraph.types import PairwiseVerdict, PointwiseScore, RubricResult, Status

from ._settings import CassetteMode

__all__ = ["CassetteFile", "CassetteJudge", "CassetteMissError", "Judging", "cassette_key"]

FORMAT = 1
_RESULT_TYPES: dict[str, type[BaseModel]] = {t.__name__: t for t in (PointwiseScore, PairwiseVerdict, RubricResult)}


class CassetteMissError(LookupError):
    """Replay mode found no recording for a judge call; the message names the
    test, the key, and what changed since the recording."""


def cassette_key(judge: Judge[Any, Any], item: BaseModel, context: Any = None) -> str:
    ctx = context if isinstance(context, dict) else None
    # Where the model is served is not what it answers: a recording made
    # against a local server replays in CI, which has none.
    cfg = config_hash(fingerprint_for(judge, ctx, portable=True))
    inp = config_hash({"input_model": type(item).__name__, "input": item.model_dump(mode="json", exclude_none=True)})
    return f"{cfg[:16]}-{inp[:16]}"


class CassetteFile:
    """One test module's recordings. Reads once, and on :meth:`save` merges
    this session's changes into the file as it is on disk then."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, dict[str, Any]] | None = None
        self._written: dict[str, dict[str, Any]] = {}
        self._users: dict[str, set[str]] = {}  # key -> tests that used it this session
        self._passed: set[str] = set()

    def entries(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            self._entries = _read(self.path)
        return self._entries

    def get(self, key: str, test: str) -> dict[str, Any] | None:
        self._users.setdefault(key, set()).add(test)
        return self._written.get(key) or self.entries().get(key)

    def recorded_now(self, key: str, test: str) -> dict[str, Any] | None:
        """The entry this session recorded for ``key``, if any."""
        self._users.setdefault(key, set()).add(test)
        return self._written.get(key)

    def put(self, key: str, entry: dict[str, Any], test: str) -> None:
        self._users.setdefault(key, set()).add(test)
        self._written[key] = entry

    def test_passed(self, test: str) -> None:
        """A test that passed used every recording it needs; the ones it no
        longer uses may be dropped on save."""
        self._passed.add(test)

    def save(self) -> bool:
        """Write this session's recordings; drop entries no passing test of
        this session uses any more. Returns whether the file changed."""
        disk = _read(self.path)
        out = {**disk, **self._written}
        for key, entry in list(out.items()):
            tests = (set(entry.get("tests", ())) - self._passed) | self._users.get(key, set())
            if not tests:
                del out[key]
            else:
                out[key] = {**entry, "tests": sorted(tests)}
        if out == disk:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"judgegraph_cassette": FORMAT, "entries": out}, indent=2, sort_keys=True, ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, self.path)  # atomic: a reader never sees half a file
        self._entries = out
        return True


def _read(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"cassette {path} is not valid JSON ({exc}); fix or delete it, then re-record") from None
    if not isinstance(data, dict) or data.get("judgegraph_cassette") != FORMAT:
        raise ValueError(f"cassette {path} is not a judgegraph cassette (format {FORMAT})")
    entries: dict[str, dict[str, Any]] = data.get("entries", {})
    return entries


@dataclass(frozen=True, slots=True)
class Judging:
    """A judge call's verdicts (one per repeat), where they came from and their key."""

    verdicts: list[Any]
    source: str  # "replayed", "recorded", "replayed+recorded" or "live"
    key: str | None
    fresh: int  # how many of the verdicts (the last ones) were judged now


class CassetteJudge(Judge[Any, Any]):
    """``inner`` behind a cassette. ``replay`` answers only from the file;
    ``refresh`` replays what is there and records what is missing; ``record``
    judges everything again and records it; ``live`` only calls ``inner``.
    Verdicts with status ``error`` (the model was not reached) are never
    recorded; unreadable (``unparsed``) ones are, and replay as unreadable."""

    def __init__(self, inner: Judge[Any, Any], *, cassette: CassetteFile, mode: CassetteMode, test: str) -> None:
        self.inner = inner
        self.input_model = inner.input_model
        self.name = inner.name
        self.cassette = cassette
        self.mode = mode
        self.test = test

    async def _ajudge_item(self, item: Any, context: Any) -> Any:
        return (await self.ajudge_repeated(item, repeats=1, context=context)).verdicts[0]

    async def ajudge_repeated(self, value: Any, *, repeats: int, context: Any = None) -> Judging:
        """``repeats`` verdicts on one input, from the cassette or the judge as the mode says."""
        item = self.input_model.model_validate(value) if not isinstance(value, self.input_model) else value
        if self.mode == "live":
            return Judging(await self._fresh(item, repeats, context), "live", None, repeats)
        key = cassette_key(self.inner, item, context)
        # Record mode judges each key afresh once per session, then reuses that.
        get = self.cassette.recorded_now if self.mode == "record" else self.cassette.get
        entry = get(key, self.test)
        have = [_load(entry["result_type"], v) for v in entry["verdicts"]] if entry else []
        if len(have) >= repeats:
            return Judging(have[:repeats], "replayed", key, 0)
        if self.mode == "replay":
            raise CassetteMissError(self._miss_message(key, item, entry, repeats))
        new = await self._fresh(item, repeats - len(have), context)
        keep = [v for v in new if v.status is not Status.ERROR]
        if keep:
            self.cassette.put(key, self._entry(item, [*have, *keep], entry), self.test)
        return Judging([*have, *new], "replayed+recorded" if have else "recorded", key, len(new))

    async def _fresh(self, item: Any, n: int, context: Any) -> list[Any]:
        return list(await asyncio.gather(*(self.inner.ajudge(item, context=context) for _ in range(n))))

    def _entry(self, item: BaseModel, verdicts: list[Any], old: dict[str, Any] | None) -> dict[str, Any]:
        template = getattr(self.inner, "template", None)
        return {
            "judge": self.inner.name,
            "template": f"{template.id}@{template.version}" if template is not None else None,
            "input": item.model_dump(mode="json", exclude_none=True),
            "result_type": type(verdicts[0]).__name__,
            "verdicts": [v.model_dump(mode="json", exclude_none=True) for v in verdicts],
            "tests": sorted({self.test, *((old or {}).get("tests", ()))}),
        }

    def _miss_message(self, key: str, item: BaseModel, entry: dict[str, Any] | None, repeats: int) -> str:
        where = f"{self.test}: cassette {self.cassette.path}, key {key}"
        redo = "Re-record with --judge-cassette-mode=refresh (it calls the judge only for what is missing)."
        if entry is not None:
            n = len(entry["verdicts"])
            return f"{where} has {n} recorded verdict(s), the test asks for {repeats} repeats. {redo}"
        cfg, inp = key.split("-")
        mine = {k: e for k, e in self.cassette.entries().items() if self.test in e.get("tests", ())}
        same_cfg = [e for k, e in mine.items() if k.startswith(cfg + "-")]
        if same_cfg:
            now = item.model_dump(mode="json", exclude_none=True)
            # The nearest recording of this test: the one with the fewest differing fields.
            diffs = [sorted(f for f in set(now) | set(e["input"]) if now.get(f) != e["input"].get(f)) for e in same_cfg]
            fields = min(diffs, key=len)
            why = f"the input changed since it was recorded (fields differing from this test's recordings: {fields})"
        elif any(k.endswith("-" + inp) for k in mine):
            why = "the judge configuration changed (model, template or version, options) since it was recorded"
        else:
            why = "nothing was recorded for this input"
        return f"{where}: no recorded verdict in replay mode; {why}. {redo}"


def _load(result_type: str, data: dict[str, Any]) -> Any:
    if result_type not in _RESULT_TYPES:
        raise ValueError(f"cassette entry has result_type {result_type!r}; known: {sorted(_RESULT_TYPES)}")
    return _RESULT_TYPES[result_type].model_validate(data)
