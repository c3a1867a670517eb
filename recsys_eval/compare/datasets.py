"""Comparing systems over several datasets with rank statistics (Demšar, JMLR 7, 2006).

Each dataset is one block: the systems are ranked on it by the metric's value (1 = best, ties share
their average rank), and the ranks are averaged over the N datasets into R_j for each of the k
systems. Ranks make datasets of different difficulty and metric scale comparable, and the tests
below assume nothing about the values' distribution (Demšar's recommendation for this setting).

- Friedman: chi2_F = 12 N / (k (k + 1)) * (sum_j R_j^2 - k (k + 1)^2 / 4), chi2 with k - 1 degrees
  of freedom; divided by 1 - sum (t^3 - t) / (N k (k^2 - 1)) over the groups of t tied systems
  when ties are corrected (as ``scipy.stats.friedmanchisquare`` does; Demšar's formula does not).
  Iman and Davenport's F_F = (N - 1) chi2_F / (N (k - 1) - chi2_F), F with (k - 1, (k - 1)(N - 1))
  degrees of freedom, is less conservative and the one Demšar recommends.
- Post-hoc tests compare rank differences with their standard error SE = sqrt(k (k + 1) / (6 N)):
  Nemenyi (all pairs): two systems differ when |R_i - R_j| > CD = q_alpha SE, q_alpha the
  studentized range quantile for k groups and infinite degrees of freedom over sqrt 2;
  Holm (each system against a control): z = (R_i - R_control) / SE, two-sided normal p-values
  adjusted by Holm's step-down procedure.

Input is a long frame with one row per (dataset, system) and a value column (``mean`` as in a
summary, for one metric at one cutoff, protocol and fold); every system must have a value on
every dataset.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

from recsys_eval.compare.corrections import adjust_pvalues
from recsys_eval.errors import ConfigError, DataError, closest


def rank_systems(
    table: pl.DataFrame,
    *,
    value: str = "mean",
    metric: str | None = None,
    higher_is_better: bool | None = None,
) -> pl.DataFrame:
    """Average rank of every system over the datasets: columns system, mean_rank, n_datasets.

    Sorted best first. The direction is ``higher_is_better`` when given; else taken from
    ``metric`` (or the table's single ``metric`` value): lower is better for error metrics
    (mae, rmse, ndpm, gini), higher for every other.
    """
    systems, ranks = _rank_matrix(table, value, metric, higher_is_better)
    return pl.DataFrame(
        {"system": systems, "mean_rank": ranks.mean(axis=0), "n_datasets": ranks.shape[0]}
    ).sort("mean_rank", "system")


def friedman_test(
    table: pl.DataFrame,
    *,
    value: str = "mean",
    metric: str | None = None,
    higher_is_better: bool | None = None,
    tie_correction: bool = True,
) -> pl.DataFrame:
    """Friedman's chi2_F and Iman-Davenport's F_F with their p-values: one row.

    Columns n_datasets, n_systems, chi2, chi2_df, chi2_p, f, f_df1, f_df2, f_p. With every
    dataset ranking the systems alike, chi2_F = N (k - 1) and F_F is infinite (p = 0).
    """
    _, ranks = _rank_matrix(table, value, metric, higher_is_better)
    n, k = ranks.shape
    mean_ranks = ranks.mean(axis=0)
    chi2 = 12.0 * n / (k * (k + 1)) * (np.sum(mean_ranks**2) - k * (k + 1) ** 2 / 4.0)
    if tie_correction:
        ties = sum(np.sum(counts**3 - counts) for counts in (np.unique(row, return_counts=True)[1] for row in ranks))
        # every dataset ties all systems: no information, the statistic is undefined (0 / 0)
        chi2 = chi2 / (1.0 - ties / (n * k * (k * k - 1.0))) if ties < n * k * (k * k - 1.0) else np.nan
    denominator = n * (k - 1) - chi2
    f = (n - 1) * chi2 / denominator if denominator > 0 else np.inf
    df1, df2 = k - 1, (k - 1) * (n - 1)
    return pl.DataFrame(
        {
            "n_datasets": n, "n_systems": k,
            "chi2": chi2, "chi2_df": df1, "chi2_p": stats.chi2.sf(chi2, df1),
            "f": f, "f_df1": df1, "f_df2": df2, "f_p": stats.f.sf(f, df1, df2),
        }
    )


def nemenyi_test(
    table: pl.DataFrame,
    *,
    alpha: float = 0.05,
    value: str = "mean",
    metric: str | None = None,
    higher_is_better: bool | None = None,
) -> pl.DataFrame:
    """Nemenyi's test of every pair of systems: one row per pair.

    Columns system, other, rank_diff (R_system - R_other, negative when system ranks better),
    p_value (studentized range, k groups, infinite df, of |rank_diff| sqrt 2 / SE),
    critical_difference (CD at ``alpha``) and significant (|rank_diff| > CD, i.e. p < alpha).
    """
    _check_alpha(alpha)
    systems, ranks = _rank_matrix(table, value, metric, higher_is_better)
    n, k = ranks.shape
    mean_ranks = ranks.mean(axis=0)
    se = _rank_se(n, k)
    cd = stats.studentized_range.ppf(1.0 - alpha, k, np.inf) / np.sqrt(2.0) * se
    i, j = np.triu_indices(k, 1)
    diff = mean_ranks[i] - mean_ranks[j]
    p = stats.studentized_range.sf(np.abs(diff) * np.sqrt(2.0) / se, k, np.inf)
    return pl.DataFrame(
        {
            "system": [systems[a] for a in i], "other": [systems[b] for b in j], "rank_diff": diff,
            "p_value": np.minimum(p, 1.0), "critical_difference": cd, "significant": np.abs(diff) > cd,
        }
    )


def holm_posthoc(
    table: pl.DataFrame,
    control: str,
    *,
    alpha: float = 0.05,
    value: str = "mean",
    metric: str | None = None,
    higher_is_better: bool | None = None,
) -> pl.DataFrame:
    """Every other system against ``control``: z of the rank difference, Holm-adjusted p-values.

    Columns system, control, rank_diff (R_system - R_control: negative when the system ranks
    better), z, p_value (two-sided), p_adjusted (Holm over the k - 1 comparisons), significant
    (p_adjusted < alpha).
    """
    _check_alpha(alpha)
    systems, ranks = _rank_matrix(table, value, metric, higher_is_better)
    if control not in systems:
        raise ConfigError(f"control system {control!r} is not in the table: {closest(control, systems)}")
    n, k = ranks.shape
    mean_ranks = ranks.mean(axis=0)
    c = systems.index(control)
    others = [s for s in range(k) if s != c]
    diff = mean_ranks[others] - mean_ranks[c]
    z = diff / _rank_se(n, k)
    p = 2.0 * stats.norm.sf(np.abs(z))
    adjusted = adjust_pvalues(p, "holm")
    return pl.DataFrame(
        {
            "system": [systems[s] for s in others], "control": control, "rank_diff": diff, "z": z,
            "p_value": p, "p_adjusted": adjusted, "significant": adjusted < alpha,
        }
    )


def _rank_se(n: int, k: int) -> float:
    return float(np.sqrt(k * (k + 1) / (6.0 * n)))


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"alpha {alpha!r}: expected a number in (0, 1)")


def _rank_matrix(
    table: pl.DataFrame, value: str, metric: str | None, higher_is_better: bool | None
) -> tuple[list[str], np.ndarray]:
    """Systems (sorted) and the datasets x systems matrix of within-dataset ranks (1 = best)."""
    missing = [c for c in ("dataset", "system", value) if c not in table.columns]
    if missing:
        raise DataError(f"dataset x system table: missing columns {missing}; expected dataset, system, {value}")
    if higher_is_better is None:
        higher_is_better = _higher_is_better(table, metric)
    duplicated = table.filter(pl.struct("dataset", "system").is_duplicated())
    if duplicated.height:
        row = duplicated.row(0, named=True)
        raise DataError(
            f"dataset x system table: more than one {value!r} for dataset {row['dataset']!r}, system "
            f"{row['system']!r}; expected one row per (dataset, system) for one metric@k, protocol and fold"
        )
    wide = table.select("dataset", "system", pl.col(value).cast(pl.Float64)).pivot(
        on="system", index="dataset", values=value
    ).sort("dataset")
    systems = sorted(c for c in wide.columns if c != "dataset")
    values = wide.select(systems).to_numpy()
    if np.isnan(values).any():  # pivot leaves null (-> NaN) where a system has no row
        d, s = np.argwhere(np.isnan(values))[0]
        raise DataError(
            f"dataset x system table: no {value!r} for system {systems[s]!r} on dataset "
            f"{wide['dataset'][int(d)]!r}; every system needs a value on every dataset"
        )
    if values.shape[0] < 2 or values.shape[1] < 2:
        raise DataError(
            f"dataset x system table: {values.shape[0]} datasets and {values.shape[1]} systems; "
            "ranking systems over datasets needs at least two of each"
        )
    return systems, stats.rankdata(-values if higher_is_better else values, axis=1)


def _higher_is_better(table: pl.DataFrame, metric: str | None) -> bool:
    from recsys_eval.measure.metrics import MetricKey, lower_is_better

    if metric is None and "metric" in table.columns:
        names = table.get_column("metric").unique().to_list()
        if len(names) > 1:
            raise DataError(f"dataset x system table: several metrics {sorted(names)}; rank one metric at a time")
        metric = names[0] if names else None
    return metric is None or not lower_is_better(MetricKey.parse(metric).name)
