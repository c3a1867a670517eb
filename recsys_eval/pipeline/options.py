"""What measuring and ranking take from a config, validated once: the config's ``[metrics]`` and
``[run]`` become :class:`MeasureOptions` and :class:`RankOptions`, which the local fold, the Spark
fold, the tuner and the learning curve all use, so that none of them reads the config again."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only named: a caller that has a config has imported it
    from recsys_eval.pipeline.config import ExperimentConfig, MetricsConfig, RunConfig


@dataclass(frozen=True)
class MeasureOptions:
    """The metrics of a run and how they are computed and averaged.

    ``ranking``: the metrics of rankings (ranking and beyond-accuracy ones, config order);
    ``rating``: the metrics of predicted ratings; ``k``: the cutoffs, ascending."""

    ranking: tuple[str, ...]
    rating: tuple[str, ...]
    k: tuple[int, ...]
    gain: str = "graded"
    ties: str = "first"
    undefined: str = "skip"
    relevance_threshold: float | None = None
    #: Every metric parameter's value (``rbp_persistence``...), defaults filled in.
    params: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_config(cls, metrics: MetricsConfig) -> MeasureOptions:
        from recsys_eval.measure.metrics import RATING_METRICS, metric_params

        names = metrics.names
        return cls(tuple(m for m in names if m not in RATING_METRICS), tuple(m for m in names if m in RATING_METRICS),
                   tuple(metrics.k), metrics.gain, metrics.ties, metrics.undefined, metrics.relevance_threshold,
                   metric_params(metrics.params))

    @classmethod
    def of(cls, names: list[str], cutoffs: list[int], *, gain: str = "graded", ties: str = "first",
           undefined: str = "skip", threshold: float | None = None,
           params: dict[str, float] | None = None) -> MeasureOptions:
        """The options of metric names and cutoffs as the API and ``recsys-eval evaluate`` take
        them: the choices checked, rating metrics set apart, every parameter's default filled in."""
        from recsys_eval.errors import check_choice
        from recsys_eval.measure.metrics import GAINS, RATING_METRICS, TIES, UNDEFINED_POLICIES, metric_params

        check_choice("gain", gain, GAINS)
        check_choice("ties policy", ties, TIES)
        check_choice("undefined-value policy", undefined, UNDEFINED_POLICIES)
        return cls(tuple(m for m in names if m not in RATING_METRICS), tuple(m for m in names if m in RATING_METRICS),
                   tuple(cutoffs), gain, ties, undefined, threshold, metric_params(params or {}))

    def kwargs(self) -> dict:
        """The keywords of :func:`recsys_eval.measure.measure` for the ranking metrics."""
        return {"metrics": list(self.ranking), "k": list(self.k), "gain": self.gain, "ties": self.ties, **self.params}

    @property
    def kmax(self) -> int:
        """The largest cutoff: all a top-k list needs for the cutoff metrics."""
        return self.k[-1]

    @property
    def run_level(self) -> tuple[str, ...]:
        """The metrics of a whole run (coverage, Gini, entropy), computed from exposure counts."""
        from recsys_eval.measure.beyond import RUN_METRICS

        return tuple(m for m in self.ranking if m in RUN_METRICS)

    def only(self, name: str, k: int | None) -> MeasureOptions:
        """These options for one metric (at ``k``, or at every cutoff when ``k`` is None)."""
        return replace(self, ranking=(name,), rating=(), k=(k,) if k is not None else self.k)


@dataclass(frozen=True)
class RankOptions:
    """How rankings are made: a full ranking lists its top ``depth`` items (the largest cutoff, at
    least ``[run] depth``); scoring goes ``chunk_size`` users at a time; ``exact_auc`` places each
    relevant item among all of its user's candidates (a second pass over every score, paid only
    when AUC is measured)."""

    depth: int
    chunk_size: int = 2048
    exact_auc: bool = False

    @classmethod
    def from_config(cls, config: ExperimentConfig) -> RankOptions:
        return cls.for_measure(MeasureOptions.from_config(config.metrics), config.run)

    @classmethod
    def for_measure(cls, measure: MeasureOptions, run: RunConfig) -> RankOptions:
        """What the metrics of ``measure`` need ranked, with the ``[run]`` settings (the depth of
        a fold whose units hold at most one relevant item: :meth:`deep_enough` deepens it)."""
        return cls(max(measure.kmax, run.depth), run.chunk_size, "auc" in measure.ranking)

    def deep_enough(self, measure: MeasureOptions, max_relevant: int) -> RankOptions:
        """These options listing as deep as the metrics need for units of up to ``max_relevant``
        relevant items (R-precision reads the top R; :func:`~recsys_eval.measure.metrics.ranking_depth`)."""
        from recsys_eval.measure.metrics import ranking_depth

        return replace(self, depth=ranking_depth(measure.ranking, measure.k, max_relevant, self.depth))
