"""Metric names, what each needs, and their checks.

The names are the ones used everywhere (per-unit table, summaries, configs, CLI). A summary names
a metric at a cutoff ``ndcg@10``; MAP and MRR are the means of ``ap`` and ``rr``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from recsys_eval.errors import ConfigError, closest

#: Ranking metrics computed at every cutoff k, in the column order of the ranking kernel.
CUTOFF_METRICS: tuple[str, ...] = (
    "precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "half_life",
)
#: Ranking metrics over the unit's whole target set (k is null).
WHOLE_METRICS: tuple[str, ...] = ("auc",)
#: Auxiliary per-unit count: the unit's relevant items R. Emitted beside ``f1`` so that the
#: F-measure variants (F_tp,fp needs the summed TP, FP and FN) can be computed from the table.
N_RELEVANT = "n_relevant"
#: Per-unit rows that are not metrics of their own: left out of tests, agreement and reports.
AUXILIARY_METRICS: tuple[str, ...] = (N_RELEVANT, "sampled_rank", "full_candidates")
RANKING_METRICS: tuple[str, ...] = CUTOFF_METRICS + WHOLE_METRICS
RATING_METRICS: tuple[str, ...] = ("mae", "rmse", "kendall", "spearman", "ndpm")
BEYOND_METRICS: tuple[str, ...] = (
    "catalog_coverage", "user_coverage", "prediction_coverage", "novelty", "gini", "entropy", "ild",
)
#: Beyond-accuracy metrics cut at k (the others are whole-list or per-run values).
BEYOND_CUTOFF: tuple[str, ...] = ("catalog_coverage", "novelty", "gini", "entropy", "ild")
#: Values of a whole run rather than of a unit: one row with null user and unit.
RUN_LEVEL: tuple[str, ...] = ("catalog_coverage", "prediction_coverage", "gini", "entropy")
ALL_METRICS: tuple[str, ...] = RANKING_METRICS + RATING_METRICS + BEYOND_METRICS

GAINS = ("graded", "binary", "exp")
TIES = ("first", "average")
AP_DENOMINATORS = ("relevant", "min_rk")
UNDEFINED_POLICIES = ("skip", "zero")


def check_metrics(metrics: str | Iterable[str], allowed: Sequence[str] = ALL_METRICS) -> list[str]:
    """The metric names as a list without repeats; an unknown name raises with the closest one."""
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise ConfigError("no metric given: " + closest("", allowed))
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or name not in allowed:
            raise ConfigError(f"unknown metric {name!r}: {closest(str(name), allowed)}")
        if name not in out:
            out.append(name)
    return out


def check_cutoffs(k: int | Iterable[int]) -> list[int]:
    """Cutoffs as a sorted list of distinct positive ints; k <= 0 or a non-integer raises."""
    values = [k] if hasattr(k, "__index__") else list(k)
    if not values:
        raise ConfigError("no cutoff k given: expected positive integers such as 1, 5, 10")
    out = set()
    for value in values:
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise ConfigError(f"cutoff k must be a positive integer, got {value!r}")
        if int(value) <= 0:
            raise ConfigError(f"cutoff k must be a positive integer, got {int(value)}")
        out.add(int(value))
    return sorted(out)


def label(metric: str, k: int | None) -> str:
    """The summary name of a metric at a cutoff: ``ndcg@10``, or ``auc`` without one."""
    return metric if k is None else f"{metric}@{k}"
