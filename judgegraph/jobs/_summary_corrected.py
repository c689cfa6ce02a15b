"""The job summary's judge-corrected rates: the report's corrected estimates, over the run's stored rows.

When the source has a label column (``SourceConfig(label=...)``) and some rows carry a human
label, :func:`run_corrected` computes, from every row the store holds for the run (so a resumed
run reports what a fresh one would), the same prediction-powered figures the report shows
(:func:`~judgegraph.jobs._report_data.corrected_rates`), and :func:`corrected_lines` says them
in one line each for ``judgegraph eval``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from ._report_data import corrected_rates, judged_verdict, shown_as_share

if TYPE_CHECKING:
    from ._store import Store

__all__ = ["CorrectedRate", "RateFigure", "corrected_lines", "run_corrected"]


class RateFigure(BaseModel):
    """A rate and its interval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | None = Field(description="None when it cannot be computed")
    low: float | None = Field(description="interval, low end; None when it cannot be computed")
    high: float | None = Field(description="interval, high end; None when it cannot be computed")


class CorrectedRate(BaseModel):
    """One rate of a run, as the judge gives it and corrected for the judge's errors by the human labels."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="'share where A wins', 'share where B wins' (pairwise) or 'mean score'")
    share: bool = Field(description="the rate is a share in [0, 1] (printed as a percentage)")
    method: str = Field(description="'ppi': prediction-powered inference (judgegraph.metrics.ppi_mean)")
    level: float = Field(gt=0, lt=1, description="the intervals' confidence level")
    judge: RateFigure = Field(description="naive: the judge alone over every row with a usable verdict")
    corrected: RateFigure = Field(description="the judge's figure corrected by its errors on the labelled rows")
    human: RateFigure = Field(description="the human labels alone")
    n_judged: int = Field(ge=0, description="rows with a usable verdict: the naive figure's rows")
    n_labelled: int = Field(ge=0, description="of those, the rows with a human label")
    n_excluded: int = Field(
        ge=0, description="rows whose verdict is unusable (unparsed, error, not a score): in no figure"
    )
    n_excluded_labelled: int = Field(ge=0, description="of those, the rows with a human label")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def all_labelled(self) -> bool:
        """Every row with a usable verdict is labelled: the corrected figure is the human figure."""
        return self.n_labelled == self.n_judged


def _figure(value: float | None, interval: Any) -> RateFigure:
    if interval is None:
        return RateFigure(value=value, low=None, high=None)
    return RateFigure(value=value, low=interval.low, high=interval.high)


def run_corrected(store: Store, run_id: str) -> list[CorrectedRate] | None:
    """The run's judge-corrected rates from its stored rows; None when no judged row has a label.

    An empty list: labels, but fewer than two on rows with a usable verdict (too few to correct by).
    Raises ImportError when the ``metrics`` extra (scipy) is missing.
    """
    kind = store.run(run_id).kind
    judged = [j for r in store.rows(run_id) if (j := judged_verdict(kind, r)) is not None]
    if not any(label is not None for _, _, label in judged):
        return None
    out: list[CorrectedRate] = []
    for est in corrected_rates(kind, judged, None):
        n_excluded = len(judged) - est.n_items
        n_excluded_labelled = sum(label is not None for _, _, label in judged) - est.n_labelled
        out.append(
            CorrectedRate(
                name=est.name,
                share=shown_as_share(est.name),
                method=est.method,
                level=est.interval.level,
                judge=_figure(est.naive.value, est.naive.interval),
                corrected=_figure(est.estimate, est.interval),
                human=_figure(est.human_only.value, est.human_only.interval),
                n_judged=est.n_items,
                n_labelled=est.n_labelled,
                n_excluded=n_excluded,
                n_excluded_labelled=n_excluded_labelled,
            )
        )
    return out


_METHODS = {"ppi": "prediction-powered", "ppi++": "prediction-powered, power-tuned", "rogan_gladen": "Rogan-Gladen"}


def _fmt(x: float | None, share: bool) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:.1f}%" if share else f"{x:.3f}"


def _band(f: RateFigure, share: bool) -> str:
    if f.low is None or f.high is None:
        return ""
    if share:
        return f" [{100 * f.low:.1f}, {100 * f.high:.1f}]"
    return f" [{f.low:.3f}, {f.high:.3f}]"


def corrected_lines(rates: list[CorrectedRate]) -> list[str]:
    """One line per rate, e.g. ``share where A wins: judge 82.0% [79.1, 84.6] over 500 rows;
    corrected with 100 human labels 76.4% [70.2, 82.5] (prediction-powered, 95%)``."""
    lines = []
    for r in rates:
        method = _METHODS.get(r.method, r.method)
        level = f"{100 * r.level:g}%"
        judge = f"judge {_fmt(r.judge.value, r.share)}{_band(r.judge, r.share)} over {r.n_judged} rows"
        if r.all_labelled:
            corrected = (
                f"every row human-labelled, so corrected = the human figure {_fmt(r.corrected.value, r.share)}"
                f"{_band(r.corrected, r.share)}"
            )
        else:
            corrected = (
                f"corrected with {r.n_labelled} human labels {_fmt(r.corrected.value, r.share)}"
                f"{_band(r.corrected, r.share)}"
            )
        line = f"{r.name}: {judge}; {corrected} ({method}, {level})"
        if r.n_excluded:
            labelled = f", {r.n_excluded_labelled} of them labelled" if r.n_excluded_labelled else ""
            line += f"; {r.n_excluded} rows without a usable verdict left out{labelled}"
        lines.append(line)
    return lines
