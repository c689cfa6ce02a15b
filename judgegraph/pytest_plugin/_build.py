"""The backend and judges the fixtures hand out, built from :class:`JudgeSettings`."""

from __future__ import annotations

from typing import Any, Literal

from judgegraph.backends import Backend, BackendError, Capabilities, GenerateRequest, GenerateResult
from judgegraph.config import BackendConfig, JudgeConfig, build_backend, build_judge
from judgegraph.judges import Judge
from judgegraph.types import PairwiseInput, PointwiseInput, Pricing, SwapPolicy

from ._settings import JudgeSettings

__all__ = ["NoNetworkBackend", "create_backend", "create_judge"]

# A replayed backend is never called, so it needs no real address; the base
# URL is not part of a verdict's key, so recordings still match.
_REPLAY_URL = "http://replay.invalid/v1"


class NoNetworkBackend:
    """A backend's identity (name, model, capabilities, pricing) that refuses
    every call: what ``judge_backend`` is in replay mode."""

    def __init__(self, inner: Backend) -> None:
        self.name = inner.name
        self.model = inner.model
        self.capabilities: Capabilities = inner.capabilities
        self.pricing: Pricing | None = inner.pricing

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        raise BackendError(
            "judgegraph cassette mode is replay: no model calls are made. Judge through the "
            "judge fixtures or the judged.assert_* helpers, whose verdicts come from the cassette."
        )


def create_backend(settings: JudgeSettings) -> Backend:
    """The configured backend. In replay mode it is built without a server
    (it will not be called)."""
    if not settings.model:
        raise ValueError(
            "judgegraph: no judge model configured: set judge_model in [tool.pytest.ini_options] "
            "(or pytest.ini), or pass --judge-model"
        )
    pricing = None
    if settings.price_in is not None or settings.price_out is not None:
        pricing = Pricing(input_per_mtok=settings.price_in or 0.0, output_per_mtok=settings.price_out or 0.0)
    replay = settings.cassette_mode == "replay"
    cfg = BackendConfig(
        kind=settings.backend,
        model=settings.model,
        base_url=settings.base_url or (_REPLAY_URL if replay else None),
        api_key_env=settings.api_key_env,
        pricing=pricing,
        structured_output=settings.structured_output,
    )
    return build_backend(cfg)


def create_judge(
    kind: Literal["pointwise", "pairwise"], backend: Backend, *, marker_judge: Any = None
) -> Judge[Any, Any]:
    """The judge for a test: the marker's ``judge=`` / ``pairwise_judge=`` (a
    Judge, or a JudgeConfig built on ``backend``), else the default judge of ``kind``. Pairwise judges
    always run both answer orders."""
    if isinstance(marker_judge, Judge):
        judge: Judge[Any, Any] = marker_judge
    elif isinstance(marker_judge, JudgeConfig):
        judge = build_judge(marker_judge, backend=backend)
    elif marker_judge is None:
        judge = build_judge(JudgeConfig(kind=kind), backend=backend)
    else:
        raise TypeError(f"@pytest.mark.judge(judge=...) takes a Judge or a JudgeConfig, got {type(marker_judge)}")
    want = PairwiseInput if kind == "pairwise" else PointwiseInput
    if judge.input_model is not want:
        raise TypeError(
            f"a {kind} assertion needs a judge of {want.__name__}; {judge.name} takes {judge.input_model.__name__}"
        )
    policy = judge.order_policy  # declared by judges that run each answer order as a call (PairwiseJudge)
    if policy is not None and policy.mode != "both":
        return judge.with_order_policy(SwapPolicy(mode="both", on_inconsistent=policy.on_inconsistent))
    return judge
