"""Paired significance tests between systems over the users both were measured on (docs/CONVENTIONS.md#comparing-systems).

For every protocol x fold x metric x k and system pair (each system against a baseline, or all
pairs), the per-user differences d = system - baseline over the users with a defined value for both
give: the paired t-test, Wilcoxon's signed-rank test, the sign test, a randomization test that
flips the signs of the differences, and McNemar's test where both systems' per-user values are
binary (hit@k under AR). Beside every p-value: the p-value adjusted within its family (the pairs
of one protocol x fold x metric x k x test) and the effect sizes (docs/CONVENTIONS.md#effect-sizes):
the mean difference with its t-interval, the relative difference mean(a) / mean(b) - 1 with a
paired percentile-bootstrap interval, and the standardised paired effect d_z = mean(d) / sd(d)
(column ``cohens_d``; Lakens 2013, "Calculating and reporting effect sizes", eq. 6).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import polars as pl
from scipy import stats

from recsys_eval.compare.corrections import CORRECTIONS, adjust_pvalues
from recsys_eval.compare.frames import (
    Partition,
    check_per_user,
    mask_groups,
    partitions,
)
from recsys_eval.compare.resampling import (
    bootstrap_interval,
    bootstrap_means,
    permutation_pvalues,
    sign_flip_means,
)
from recsys_eval.compare.signed_rank import wilcoxon_columns
from recsys_eval.core.rng import derive_seed
from recsys_eval.errors import ConfigError, DataError, check_choice, closest

TESTS = ("t", "wilcoxon", "sign", "permutation", "mcnemar")
ALTERNATIVES = ("two-sided", "greater", "less")
MCNEMAR_METHODS = ("exact", "chi2")
FAMILY = ("protocol", "fold", "metric", "k", "test")
RESULT_COLUMNS = (
    "protocol", "fold", "metric", "k", "system", "baseline", "test", "statistic", "p_value",
    "p_adjusted", "significant", "n", "n_dropped", "mean_diff", "diff_lower", "diff_upper", "relative_diff",
    "relative_lower", "relative_upper", "cohens_d",
)


def system_pairs(systems: Sequence[str], baseline: str | None) -> list[tuple[str, str]]:
    """(system, baseline) pairs: every other system against ``baseline``, or all pairs in order."""
    systems = sorted(set(systems))
    if len(systems) < 2:
        raise ConfigError(f"paired tests need at least two systems; the results hold {systems}")
    if baseline is None:
        return list(combinations(systems, 2))
    if baseline not in systems:
        raise ConfigError(f"baseline {baseline!r} is not a system of this run: {closest(baseline, systems)}")
    return [(s, baseline) for s in systems if s != baseline]


def paired_tests(
    per_user_frame: pl.DataFrame,
    *,
    baseline: str | None = None,
    tests: Sequence[str] = TESTS,
    correction: str = "holm",
    alternative: str = "two-sided",
    level: float = 0.95,
    alpha: float = 0.05,
    n_resamples: int = 1000,
    seed: int = 0,
    mcnemar: str = "exact",
) -> pl.DataFrame:
    """Paired tests of each system against ``baseline`` (or all pairs when None).

    Tests (``scipy.stats`` for each distribution): ``t`` (``ttest_rel``), ``wilcoxon`` (zero
    differences dropped), ``sign`` (``binomtest`` on the non-zero differences), ``permutation``
    (random sign flips of the differences, ``n_resamples`` of them shared by all pairs measured on
    the same users; exact enumeration when 2**n <= n_resamples; the statistic is the mean difference,
    p = (count + 1) / (resamples + 1)), ``mcnemar`` (binary values only: exact binomial test on
    the discordant users, or ``mcnemar="chi2"`` with continuity correction
    (|b - c| - 1)^2 / (b + c), two-sided). ``alternative="greater"`` asks whether the system beats
    the baseline. When every difference is 0 a test reports statistic 0 and p = 1.

    One row per protocol x fold x metric x k x pair x test with: statistic, p_value, p_adjusted
    (``correction`` within the family of pairs), significant (p_adjusted < alpha), n (users with
    both values), n_dropped (users measured for one of the two but not both, or undefined for
    either), mean_diff with its ``level`` t-interval (diff_lower, diff_upper), relative_diff =
    mean(system) / mean(baseline) - 1 with its ``level`` percentile-bootstrap interval
    (relative_lower, relative_upper: ``n_resamples`` resamples of the users, the same users for
    both systems, from a seed of its own per protocol and fold, so the other tests' draws do not
    change; docs/CONVENTIONS.md#effect-sizes), and
    cohens_d, the paired d_z = mean(d) / sd(d).
    """
    columns = test_columns(partitions(per_user_frame), baseline=baseline, tests=tests, correction=correction,
                           alternative=alternative, level=level, n_resamples=n_resamples, seed=seed, mcnemar=mcnemar)
    return correct(pl.DataFrame(columns, schema=TEST_SCHEMA), correction, alpha)


#: The uncorrected rows of :func:`test_columns`, before p_adjusted and significant.
TEST_SCHEMA = {"protocol": pl.String, "fold": pl.String, "metric": pl.String, "k": pl.Int32, "system": pl.String,
               "baseline": pl.String, "test": pl.String, "statistic": pl.Float64, "p_value": pl.Float64,
               "n": pl.Int64, "n_dropped": pl.Int64, "mean_diff": pl.Float64, "diff_lower": pl.Float64,
               "diff_upper": pl.Float64, "relative_diff": pl.Float64, "relative_lower": pl.Float64,
               "relative_upper": pl.Float64, "cohens_d": pl.Float64}


def test_columns(
    parts: list[Partition],
    *,
    baseline: str | None = None,
    tests: Sequence[str] = TESTS,
    correction: str = "holm",
    alternative: str = "two-sided",
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    mcnemar: str = "exact",
    relative_resamples: int | None = None,
) -> dict[str, list]:
    """The rows of :func:`paired_tests` before the correction, as lists by column (:data:`TEST_SCHEMA`):
    no frame is built per partition, so that many small groups of users (the slices) cost their
    arithmetic alone. The tests draw from a generator seeded by ``seed``, the relative difference's
    bootstrap from a seed of its own per partition, so that adding a test does not change the interval;
    ``relative_resamples`` (default ``n_resamples``) of them, 0 for the estimate without its interval."""
    tests = _check_options(tests, correction, alternative, mcnemar, level)
    systems = sorted({s for part in parts for s in part.columns["system"]})
    pairs = system_pairs(systems, baseline)
    rng = np.random.default_rng(seed)
    columns: dict[str, list] = {name: [] for name in TEST_SCHEMA}
    for part in parts:
        keys, a_cols, b_cols = _pair_columns(part, pairs)
        first, second = part.values[:, a_cols], part.values[:, b_cols]
        boot = np.random.default_rng(derive_seed(seed, "relative difference", part.protocol, part.fold))
        relative = _relative(part.values, np.asarray(a_cols), np.asarray(b_cols), level,
                             n_resamples if relative_resamples is None else relative_resamples, boot)
        for test, values in _test_partition(part, first, second, a_cols, b_cols, tests, alternative, level,
                                            n_resamples, rng, mcnemar):
            keep = ~np.isnan(values["p_value"]) | (test != "mcnemar")
            chosen = [key for key, kept in zip(keys, keep, strict=True) if kept]
            for i, name in enumerate(("metric", "k", "system", "baseline")):
                columns[name] += [key[i] for key in chosen]
            columns["protocol"] += [part.protocol] * len(chosen)
            columns["fold"] += [part.fold] * len(chosen)
            columns["test"] += [test] * len(chosen)
            for name, array in (values | relative).items():
                columns[name] += array[keep].tolist()
    return columns


def comparable_columns(part: Partition, baseline: str | None) -> list[np.ndarray]:
    """The groups of a partition's columns that are tested together: the cutoffs of one metric
    that the same set of systems has (e.g. MAE only for the rating predictors), each group's
    columns ascending; a group with one system, or without the baseline, is left out."""
    keys = part.columns.rows()
    members: dict[tuple, set[str]] = {}
    for system, metric, k in keys:
        members.setdefault((metric, k), set()).add(system)
    groups: dict[tuple, list[int]] = {}
    for col, (_, metric, k) in enumerate(keys):
        systems = members[metric, k]
        if len(systems) >= 2 and (baseline is None or baseline in systems):
            groups.setdefault((metric, *sorted(systems)), []).append(col)
    return [np.asarray(cols) for cols in groups.values()]


def partition_tests(part: Partition, *, correction: str = "holm", alpha: float = 0.05, **options) -> pl.DataFrame:
    """:func:`paired_tests` of one partition, each group of its comparable columns
    (:func:`comparable_columns`) tested on its own, as :func:`paired_tests` tests the per-user
    rows of the group alone (its draws from ``seed`` afresh): the same rows, bit for bit, with no
    frame laid out per group. ``options`` as for :func:`test_columns`."""
    columns: dict[str, list] = {name: [] for name in TEST_SCHEMA}
    for cols in comparable_columns(part, options.get("baseline")):
        for name, values in test_columns([part.select(cols)], correction=correction, **options).items():
            columns[name] += values
    return correct(pl.DataFrame(columns, schema=TEST_SCHEMA), correction, alpha)


def fold_paired_tests(
    per_user_frame: pl.DataFrame,
    *,
    baseline: str | None = None,
    correction: str = "holm",
    alternative: str = "two-sided",
    level: float = 0.95,
    alpha: float = 0.05,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pl.DataFrame:
    """Paired t-test over fold means (test ``t_folds``), per protocol x metric x k and pair.

    A fold mean is the mean over the fold's users with a defined value. Caveat: the folds of a
    cross-validation share most of their training data, so fold results are not independent and
    this test is optimistic (its p-values too small); read it beside the per-user tests. Same
    columns as :func:`paired_tests`, with fold "all" and n counting folds; the effect sizes are
    those of :func:`paired_tests` with the folds as the units: relative_diff = mean of the
    system's fold means / mean of the baseline's - 1, its interval from ``n_resamples`` bootstrap
    resamples of the folds (docs/CONVENTIONS.md#effect-sizes).
    """
    frame = check_per_user(per_user_frame)
    if frame["fold"].n_unique() < 2:
        raise ConfigError("a paired t-test over fold means needs at least two folds; the results hold one")
    fold_means = (
        frame.with_columns(pl.col("value").fill_nan(None))
        .group_by(["system", "protocol", "fold", "metric", "k"])
        .agg(pl.col("value").mean().fill_null(float("nan")))
        .with_columns(user=pl.col("fold"), fold=pl.lit("all"))
    )
    columns = test_columns(partitions(fold_means, "fold means"), baseline=baseline, tests=("t",),
                           correction=correction, alternative=alternative, level=level,
                           n_resamples=n_resamples, seed=seed)
    columns["test"] = ["t_folds"] * len(columns["test"])
    return correct(pl.DataFrame(columns, schema=TEST_SCHEMA), correction, alpha)


def _check_options(tests, correction, alternative, mcnemar, level) -> tuple[str, ...]:
    if isinstance(tests, str):
        tests = (tests,)
    for test in tests:
        check_choice("test", test, TESTS)
    check_choice("correction", correction, CORRECTIONS)
    check_choice("alternative", alternative, ALTERNATIVES)
    check_choice("McNemar method", mcnemar, MCNEMAR_METHODS)
    if mcnemar == "chi2" and alternative != "two-sided" and "mcnemar" in tests:
        raise ConfigError("McNemar's chi-square test is two-sided only; use mcnemar='exact' for a one-sided test")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"confidence level {level!r}: expected a number strictly between 0 and 1")
    if not tests:
        raise ConfigError(f"no test asked for: expected some of {', '.join(TESTS)}")
    return tuple(dict.fromkeys(tests))


def _test_partition(part: Partition, first: np.ndarray, second: np.ndarray, a_cols: list[int], b_cols: list[int],
                    tests: tuple[str, ...], alternative: str, level: float, n_resamples: int,
                    rng: np.random.Generator, mcnemar: str):
    """(test, its columns) for each test, over the pairs whose sides are ``first`` and ``second``."""
    diffs = first - second
    both = ~np.isnan(diffs)
    n = both.sum(axis=0)
    seen = (part.present[:, a_cols] | part.present[:, b_cols]).sum(axis=0)
    t_stat, t_p, mean, lower, upper, cohen = _paired_t(diffs, n, alternative, level)
    shared = {"n": n.astype(np.int64), "n_dropped": (seen - n).astype(np.int64), "mean_diff": mean,
              "diff_lower": lower, "diff_upper": upper, "cohens_d": cohen}
    for test in tests:
        if test == "t":
            statistic, pvalue = t_stat, t_p
        elif test == "permutation":
            statistic, pvalue = _permutation(diffs, both, alternative, n_resamples, rng)
        elif test == "wilcoxon":
            statistic, pvalue = _wilcoxon_columns(diffs, both, alternative)
        else:
            statistic, pvalue = np.full(n.shape, np.nan), np.full(n.shape, np.nan)
            for c in range(diffs.shape[1]):
                if n[c] == 0:
                    continue
                if test == "mcnemar":
                    x, y = first[both[:, c], c], second[both[:, c], c]
                    if np.all((x == 0) | (x == 1)) and np.all((y == 0) | (y == 1)):
                        statistic[c], pvalue[c] = _mcnemar(x, y, alternative, mcnemar)
                else:
                    statistic[c], pvalue[c] = _sign(diffs[both[:, c], c], alternative)
        yield test, {"statistic": statistic, "p_value": pvalue, **shared}


def _pair_columns(part: Partition, pairs: list[tuple[str, str]]) -> tuple[list[tuple], list[int], list[int]]:
    """The (metric, k, system, baseline) keys of a partition and the value columns of each side."""
    keys, a_cols, b_cols = [], [], []
    for metric, k in sorted({(m, k) for _, m, k in part.columns.iter_rows()},
                            key=lambda mk: (mk[0], mk[1] is None, mk[1] or 0)):
        for system, baseline in pairs:
            a, b = part.column(system, metric, k), part.column(baseline, metric, k)
            if a is None or b is None:
                raise _no_overlap(part, metric, k, system, baseline)
            keys.append((metric, k, system, baseline))
            a_cols.append(a)
            b_cols.append(b)
    overlap = (part.present[:, a_cols] & part.present[:, b_cols]).any(axis=0)
    if not overlap.all():
        metric, k, system, baseline = keys[int(np.argmin(overlap))]
        raise _no_overlap(part, metric, k, system, baseline)
    return keys, a_cols, b_cols


def _no_overlap(part: Partition, metric: str, k: int | None, system: str, baseline: str) -> DataError:
    return DataError(f"no user was measured for both {system!r} and {baseline!r} (protocol {part.protocol!r}, "
                     f"fold {part.fold!r}, metric {metric!r}, k {k!r}): a paired test needs overlapping users")


def _relative(values: np.ndarray, a_cols: np.ndarray, b_cols: np.ndarray, level: float, n_resamples: int,
              rng: np.random.Generator) -> dict[str, np.ndarray]:
    """relative_diff = mean(a) / mean(b) - 1 for each pair of columns (a, b) of ``values``, over the
    users with both values, and its percentile interval from ``n_resamples`` bootstrap resamples of
    those users (one draw of users serves both systems, so the interval is paired; a column shared
    by several pairs, the baseline's, is resampled once); NaN where the baseline's mean is 0."""
    first, second = values[:, a_cols], values[:, b_cols]
    both = ~np.isnan(first - second)
    estimate, lower, upper = (np.full(first.shape[1], np.nan) for _ in range(3))
    for rows, cols in mask_groups(both):
        if rows.size == 0:
            continue
        a, b = first[np.ix_(rows, cols)], second[np.ix_(rows, cols)]
        with np.errstate(invalid="ignore", divide="ignore"):
            base = b.mean(axis=0)
            estimate[cols] = np.where(base == 0, np.nan, a.mean(axis=0) / base - 1.0)
            if n_resamples:
                needed, where = np.unique(np.r_[a_cols[cols], b_cols[cols]], return_inverse=True)
                means = bootstrap_means(values[np.ix_(rows, needed)], n_resamples, rng)[:, where]
                ratios = means[:, : len(cols)] / means[:, len(cols):] - 1.0
                finite = np.isfinite(ratios).all(axis=0)
                low, high = bootstrap_interval(np.where(np.isfinite(ratios), ratios, 0.0), estimate[cols],
                                               level=level, method="percentile")
                lower[cols], upper[cols] = np.where(finite, low, np.nan), np.where(finite, high, np.nan)
    return {"relative_diff": estimate, "relative_lower": lower, "relative_upper": upper}


def _paired_t(diffs: np.ndarray, n: np.ndarray, alternative: str, level: float):
    """Paired t on the columns of ``diffs`` (NaN skipped): t = mean / (sd / sqrt(n)), df = n - 1.

    Returns t, p, mean, the mean's t-interval and Cohen's d = mean / sd. Constant differences give
    t = +-inf and p = 0; all-zero differences give t = 0 and p = 1.
    """
    nf = n.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(diffs, axis=0) / nf
        sd = np.sqrt(np.nansum((diffs - mean) ** 2, axis=0) / (nf - 1))
        se = sd / np.sqrt(nf)
        t = mean / se
        t = np.where((mean == 0) & (sd == 0), 0.0, t)
        df = nf - 1
        if alternative == "two-sided":
            p = 2.0 * stats.t.sf(np.abs(t), df)
        elif alternative == "greater":
            p = stats.t.sf(t, df)
        else:
            p = stats.t.cdf(t, df)
        p = np.where((mean == 0) & (sd == 0), 1.0, p)
        half = np.where(sd == 0, 0.0, stats.t.ppf(0.5 + level / 2.0, df) * se)
        cohen = np.where((mean == 0) & (sd == 0), 0.0, mean / sd)
    small = nf < 2
    t, p, half, cohen = (np.where(small, np.nan, x) for x in (t, p, half, cohen))
    mean = np.where(nf == 0, np.nan, mean)
    return t, p, mean, mean - half, mean + half, cohen


def _permutation(diffs, both, alternative, n_resamples, rng):
    statistic = np.full(diffs.shape[1], np.nan)
    pvalue = np.full(diffs.shape[1], np.nan)
    for rows, cols in mask_groups(both):
        if rows.size == 0:
            continue
        block = diffs[np.ix_(rows, cols)]
        observed = block.mean(axis=0)
        null, exact = sign_flip_means(block, n_resamples, rng)
        statistic[cols] = observed
        pvalue[cols] = permutation_pvalues(null, observed, alternative, exact)
    return statistic, pvalue


def _wilcoxon_columns(diffs: np.ndarray, both: np.ndarray, alternative: str) -> tuple[np.ndarray, np.ndarray]:
    """Wilcoxon's signed-rank test of every column over its users with both values: the columns
    measured on the same users ranked together (:func:`~recsys_eval.compare.signed_rank.wilcoxon_columns`,
    scipy's test of each column alone, bit for bit: its own zeros dropped, ties corrected and
    distribution chosen)."""
    statistic, pvalue = np.full(diffs.shape[1], np.nan), np.full(diffs.shape[1], np.nan)
    for rows, cols in mask_groups(both):
        if rows.size:
            statistic[cols], pvalue[cols] = wilcoxon_columns(diffs[np.ix_(rows, cols)], alternative)
    return statistic, pvalue


def _sign(d: np.ndarray, alternative: str) -> tuple[float, float]:
    """Sign test: the number of positive differences against Binomial(non-zero differences, 1/2)."""
    positive, negative = int(np.sum(d > 0)), int(np.sum(d < 0))
    if positive + negative == 0:
        return 0.0, 1.0
    return float(positive), float(stats.binomtest(positive, positive + negative, 0.5, alternative=alternative).pvalue)


def _mcnemar(x: np.ndarray, y: np.ndarray, alternative: str, method: str) -> tuple[float, float]:
    """McNemar on binary outcomes: b = users only the system hits, c = users only the baseline hits.

    exact: Binomial(b + c, 1/2) test of b (statistic min(b, c) when two-sided, else b); chi2:
    (|b - c| - 1)^2 / (b + c) against chi-square with 1 degree of freedom.
    """
    b = int(np.sum((x == 1) & (y == 0)))
    c = int(np.sum((x == 0) & (y == 1)))
    if b + c == 0:
        return 0.0, 1.0
    if method == "chi2":
        statistic = (abs(b - c) - 1.0) ** 2 / (b + c)
        return statistic, float(stats.chi2.sf(statistic, 1))
    pvalue = stats.binomtest(b, b + c, 0.5, alternative=alternative).pvalue
    return float(min(b, c) if alternative == "two-sided" else b), float(pvalue)


def correct(frame: pl.DataFrame, correction: str, alpha: float, labels: Sequence[str] = ()) -> pl.DataFrame:
    """The uncorrected rows of :func:`test_columns` with p_adjusted (``correction`` within each
    family: :data:`FAMILY`, within each value of the ``labels`` columns) and significant, in
    :data:`RESULT_COLUMNS` order then ``labels``, sorted by labels, then family and pair."""
    frame = frame.with_row_index("_row")
    adjusted = np.full(frame.height, np.nan)
    pvalues = frame["p_value"].to_numpy()
    for rows in frame.group_by([*labels, *FAMILY], maintain_order=True).agg("_row")["_row"]:
        idx = rows.to_numpy()
        adjusted[idx] = adjust_pvalues(pvalues[idx], correction)
    return (
        frame.with_columns(p_adjusted=adjusted)
        .with_columns(significant=pl.col("p_adjusted") < alpha)
        .select(*RESULT_COLUMNS, *labels)
        .sort([*labels, "protocol", "fold", "metric", "k", "test", "system", "baseline"], nulls_last=True)
    )
