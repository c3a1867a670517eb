"""Search spaces: the hyperparameters of one recommender to tune, and the checks of ``[tuning]``.

A ``search`` table maps each hyperparameter to one of
- a list of values (a grid axis): ``factors = [32, 64, 128]``;
- a range ``{low, high}``, sampled uniformly, or ``{low, high, log = true}``, uniformly in log;
- ``{choices = [...]}``: unordered values (a categorical axis).
Whether a range is of integers or of floats is the hyperparameter's type in the registry
(recsys_eval.recommend.registry), so ``{low = 8, high = 256}`` gives whole numbers of factors and
real regularisation values alike. Every value, and both ends of a range, pass the registry's check of
that hyperparameter, so a search can never propose a value a plain config would refuse.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recsys_eval.errors import ConfigError, closest

if TYPE_CHECKING:
    import optuna

    from recsys_eval.measure.metrics import MetricKey

    from recsys_eval.pipeline.config import ExperimentConfig, RecommenderConfig


@dataclass(frozen=True)
class Dimension:
    """One hyperparameter's axis: ``values`` (a grid or choices) or a range ``low``..``high``."""

    name: str
    values: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False

    @property
    def is_range(self) -> bool:
        return self.low is not None

    def distribution(self) -> optuna.distributions.BaseDistribution:
        """The optuna distribution of this axis (a grid axis is categorical)."""
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        if not self.is_range:
            return CategoricalDistribution(list(self.values))
        if self.integer:
            return IntDistribution(int(self.low), int(self.high), log=self.log)
        return FloatDistribution(float(self.low), float(self.high), log=self.log)


@dataclass(frozen=True)
class SearchSpace:
    """The axes of one recommender's search, in the config's order."""

    dimensions: tuple[Dimension, ...]

    @property
    def is_grid(self) -> bool:
        return not any(d.is_range for d in self.dimensions)

    def grid(self) -> list[dict[str, Any]]:
        """Every point of a grid, in a fixed order: the config's axis order, the last axis fastest."""
        if not self.is_grid:
            raise ConfigError("a grid search needs a list of values or choices for every hyperparameter")
        names = [d.name for d in self.dimensions]
        return [dict(zip(names, point, strict=True)) for point in itertools.product(*(d.values for d in self.dimensions))]

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {d.name: d.distribution() for d in self.dimensions}


def parse_search(rec: RecommenderConfig, where: str) -> SearchSpace:
    """The search space of a recommender entry; a ConfigError naming ``where.<name>`` and what was
    expected for an unknown hyperparameter, a malformed axis or a value of the wrong type."""
    from recsys_eval.recommend.registry import REGISTRY, Param, check_recommender

    if rec.path is not None:
        raise ConfigError(f"{where}: an external run file has fixed scores; there is nothing to tune")
    if not rec.search:
        raise ConfigError(f"{where}: an empty search; name at least one hyperparameter")
    entry = REGISTRY.get(rec.name)
    overlap = sorted(rec.search.keys() & rec.params.keys())
    if overlap:
        raise ConfigError(f"{where}: {overlap} set both in params and in search; keep each in one of them")
    dimensions = []
    for name, axis in rec.search.items():
        at = f"{where}.{name}"
        if entry is not None and name not in entry.params:
            hint = closest(name, entry.params) if entry.params else "it takes no hyperparameters"
            raise ConfigError(f"{at}: unknown hyperparameter {name!r} of recommender {rec.name!r}: {hint}")
        param: Param | None = entry.params[name] if entry is not None else None

        def check(value: Any, at: str = at, name: str = name) -> None:
            try:  # the registry's own check, with the search's key path
                check_recommender(rec.name, {**rec.params, name: value})
            except ConfigError as exc:
                raise ConfigError(f"{at}: {exc}") from None

        if isinstance(axis, list):
            if not axis:
                raise ConfigError(f"{at}: an empty list of values")
            for value in axis:
                check(value)
            dimensions.append(Dimension(name, values=tuple(axis)))
        elif isinstance(axis, dict) and set(axis) == {"choices"}:
            if not isinstance(axis["choices"], list) or not axis["choices"]:
                raise ConfigError(f"{at}.choices: expected a non-empty list of values, got {axis['choices']!r}")
            for value in axis["choices"]:
                check(value)
            dimensions.append(Dimension(name, values=tuple(axis["choices"])))
        elif isinstance(axis, dict) and {"low", "high"} <= set(axis) <= {"low", "high", "log"}:
            low, high, log = axis["low"], axis["high"], axis.get("log", False)
            integer = param.kind is int if param is not None else isinstance(low, int) and isinstance(high, int)
            if param is not None and param.kind not in (int, float):
                raise ConfigError(f"{at}: {name!r} is not a number; give a list of values or {{choices = [...]}}")
            for end in (low, high):
                if isinstance(end, bool) or not isinstance(end, int | float) or (integer and not isinstance(end, int)):
                    raise ConfigError(f"{at}: range ends must be {'integers' if integer else 'numbers'}, got {end!r}")
                check(end)
            if not isinstance(log, bool):
                raise ConfigError(f"{at}.log: expected true or false, got {log!r}")
            if not low < high:
                raise ConfigError(f"{at}: expected low < high, got low = {low!r}, high = {high!r}")
            if log and low <= 0:
                raise ConfigError(f"{at}: a log range needs low > 0, got {low!r}")
            dimensions.append(Dimension(name, low=low, high=high, log=log, integer=integer))
        else:
            raise ConfigError(
                f"{at}: expected a list of values, {{low, high}}, {{low, high, log = true}} or "
                f"{{choices = [...]}}, got {axis!r}"
            )
    return SearchSpace(tuple(dimensions))


def check_measured(config: ExperimentConfig, metric: str, where: str) -> MetricKey:
    """``metric`` ("ndcg@10") parsed, once checked to be a per-user ranking metric the run measures
    at that cutoff; a ConfigError naming ``where`` otherwise."""
    from recsys_eval.measure.metrics import RANKING_METRICS, MetricKey

    key = MetricKey.parse(metric, where=where)
    name, k = key.name, key.k
    if name not in RANKING_METRICS:
        raise ConfigError(f"{where} {metric!r}: expected a per-user ranking metric: {closest(name, RANKING_METRICS)}")
    if name not in config.metrics.names:
        raise ConfigError(f"{where} {metric!r}: {name!r} is not measured: "
                          f"{closest(name, config.metrics.names)} (metrics.names)")
    if k is not None and k not in config.metrics.k:
        raise ConfigError(f"{where} {metric!r}: k = {k} is not measured; metrics.k is {config.metrics.k}")
    return key


def check_study(config: ExperimentConfig) -> None:
    """Check the cross-dataset settings of ``[compare]`` (raised as ValueError, as :func:`check_tuning`)."""
    c = config.compare
    try:
        if config.datasets is None:
            return
        check_measured(config, study_metric(config), "compare.datasets_metric")
        labels = [p.display for p in config.protocols if p.design != "percentiles"]
        if c.datasets_protocol is not None and c.datasets_protocol not in labels:
            raise ConfigError(f"compare.datasets_protocol {c.datasets_protocol!r}: not a protocol of the run: "
                              f"{closest(c.datasets_protocol, labels)}")
        systems = [r.display for r in config.recommenders]
        if c.posthoc == "holm" and c.baseline not in systems:
            raise ConfigError(f"compare.posthoc 'holm' compares every system with compare.baseline: "
                              f"{closest(str(c.baseline), systems)}")
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def study_metric(config: ExperimentConfig) -> str:
    """The metric@k systems are ranked by over datasets."""
    if config.compare.datasets_metric is not None:
        return config.compare.datasets_metric
    return config.tuning.metric if config.tuning is not None else "ndcg@10"


def check_tuning(config: ExperimentConfig) -> None:
    """Check ``[tuning]`` against the rest of the config (raised as ValueError so that the schema
    reports it with the file name): every search space, a budget that allows a trial, a metric
    and protocol the run measures, a validation splitter that exists."""
    try:
        _check_tuning(config)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def _check_tuning(config: ExperimentConfig) -> None:
    searched = [(i, r) for i, r in enumerate(config.recommenders) if r.search is not None]
    tuning = config.tuning
    if tuning is None:
        if searched:
            i, r = searched[0]
            raise ConfigError(f"recommenders[{i}].search ({r.display!r}): a search needs a [tuning] table")
        return
    if not searched:
        raise ConfigError("tuning: no recommender has a search; add [recommenders.search] or remove [tuning]")
    spaces = [parse_search(r, f"recommenders[{i}].search") for i, r in searched]
    if tuning.method == "grid":
        for (i, _), space in zip(searched, spaces, strict=True):
            ranged = [d.name for d in space.dimensions if d.is_range]
            if ranged:
                raise ConfigError(f"recommenders[{i}].search.{ranged[0]}: method 'grid' needs a list of "
                                  "values or {choices = [...]}, not a range")
    check_measured(config, tuning.metric, "tuning.metric")
    labels = [p.display for p in config.protocols if p.design != "percentiles"]
    if tuning.protocol is not None and tuning.protocol not in labels:
        raise ConfigError(f"tuning.protocol {tuning.protocol!r}: not a protocol of the run: {closest(tuning.protocol, labels)}")
    if not labels:
        raise ConfigError("tuning.protocol: the run has no protocol without popularity bins to tune on")
    if tuning.validation.method == "official":
        raise ConfigError("tuning.validation.method: the official folds split u.data, not a train side")
    from recsys_eval.split import check_split

    try:
        check_split(tuning.validation.method, tuning.validation.params)
    except ConfigError as exc:
        raise ConfigError(f"tuning.validation: {exc}") from None


def tuning_protocol(config: ExperimentConfig):
    """The protocol entry tuning maximises on: ``tuning.protocol``, else the first standard one."""
    wanted = config.tuning.protocol
    return next(p for p in config.protocols if p.design != "percentiles" and (wanted is None or p.display == wanted))
