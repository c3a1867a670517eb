"""The one home of averaging: per-unit values -> per-user values -> fold means -> the mean of the fold
means, and the pooled variants beside them (docs/CONVENTIONS.md#averaging).

- A user's value is the mean over the user's units (one unit under AR, one per relevant item under
  1R); a fold's value is the mean over its users (macro), with the mean over all units (micro) beside
  it; a run's value over several folds is the mean of the fold means (the ``all`` rows).
- Undefined values (NaN) are left out (``undefined="skip"``; the users left out are counted) or count
  as 0 (``"zero"``); the policy is recorded in every summary row.
- Rows with a null ``user`` are values of a whole run (catalog coverage, micro MAE): reported as they
  are (as the mean when the metric has no per-user rows, else as the micro mean).
- F-measure (Forman & Scholz 2010): ``f1`` is averaged like every other metric (per user, then
  folds), so that it stands beside precision and recall under the same rule; ``f1_pooled`` is
  F_tp,fp, the F of the true positives, false positives and false negatives summed over the units of
  a fold (and of all folds in the ``all`` row), Forman & Scholz's unbiased aggregate. Every summary
  row names its rule in the ``rule`` column. :func:`f_measure_variants` gives F_avg, F_pr,re,
  F_tp,fp and the skip-undefined variants side by side.

Bit-reproducible, whatever the order: every sum over users is exact (:mod:`recsys_eval.core.exact`)
and rounded once, so a summary is the same bits in every run, on every thread count, and however
its users were chunked or partitioned (the local engine's chunks, a Spark job's partitions:
:class:`SummaryState`). Rows are grouped in a fixed order (the table's own order when each group's
rows are contiguous, as :func:`recsys_eval.measure.measure` writes them; else a stable sort by the
keys), never by a parallel hash aggregation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from recsys_eval.core.results import check_per_unit, partition_labels
from recsys_eval.errors import DataError, check_choice
from recsys_eval.measure.metrics import AUXILIARY_METRICS, N_RELEVANT, UNDEFINED_POLICIES, MetricKey

F_VARIANTS = ("F_tp_fp", "F_avg", "F_avg_skip", "F_pr_re", "F_pr_re_skip")
F_AGGREGATIONS = ("users", "units", "folds")
F_POOLED = "f1_pooled"
ALL_FOLDS = "all"
#: How a summary row was computed (the ``rule`` column).
RULE_USER_MEAN = "user mean"
RULE_POOLED = "pooled"
RULE_RUN = "run value"
_RUN = ["system", "protocol"]
_GROUP = ["system", "protocol", "fold", "metric", "k"]
SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "system": pl.String,
    "protocol": pl.String,
    "fold": pl.String,
    "metric": pl.String,
    "k": pl.Int32,
    "name": pl.String,
    "rule": pl.String,
    "mean": pl.Float64,
    "micro_mean": pl.Float64,
    "users_counted": pl.Int64,
    "users_left_out": pl.Int64,
    "undefined": pl.String,
}


# -- per unit -> per user ----------------------------------------------------------------------
def per_user(per_unit: pl.DataFrame, *, undefined: str = "skip") -> pl.DataFrame:
    """Mean over each user's units: (system, protocol, fold, user, metric, k, value).

    ``undefined="skip"`` leaves NaN units out of the mean (NaN if the user has no defined unit);
    ``"zero"`` counts them as 0. Rows of a whole run (null user) are left out. The rows come in the
    order of the input's groups (deterministic; see the module docstring).
    """
    per_unit = check_per_unit(per_unit)
    labels = partition_labels(per_unit)
    if labels is None:
        users = _user_values(per_unit, undefined)
    else:  # one partition: group on metric, k and user alone, the labels added back once
        users = _user_values(per_unit.drop(_LABELS), undefined).with_columns(
            pl.lit(value).alias(name) for name, value in labels.items())
    return users.select("system", "protocol", "fold", "user", "metric", "k", "value")


def _user_values(per_unit: pl.DataFrame, undefined: str) -> pl.DataFrame:
    """The per-user frame, with each user's sum and count of the units that enter the micro mean.
    The label columns (``system``, ``protocol``, ``fold``) are grouped on when present: a
    partition's frame may carry them once, outside (:class:`PartitionState`)."""
    check_choice("undefined-value policy", undefined, UNDEFINED_POLICIES)
    keys = [*[c for c in _LABELS if c in per_unit.columns], "metric", "k", "user"]
    frame = per_unit.filter(pl.col("user").is_not_null()) if per_unit.get_column("user").null_count() else per_unit
    frame, starts = grouped(frame, keys, then="unit")
    mean, sums, counts = user_means(frame.get_column("value").cast(pl.Float64).to_numpy(), starts, undefined)
    users = frame.select(keys) if len(starts) == frame.height else frame[starts].select(keys)
    return users.select(*keys[:-3], "user", "metric", "k").with_columns(
        pl.Series("value", mean, dtype=pl.Float64), pl.Series("unit_sum", sums),
        pl.Series("unit_count", counts, dtype=pl.Int64),
    )


def user_means(value: np.ndarray, starts: np.ndarray, undefined: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per user (a run of units starting at ``starts``): the mean over the user's units, the sum
    and the count of the units that enter it (NaN units left out under ``"skip"``, counted as 0
    under ``"zero"``; NaN for a user without one). The per-user values of :func:`per_user`."""
    defined = ~np.isnan(value)
    if undefined == "zero":
        value = np.where(defined, value, 0.0)
        defined = np.ones(len(value), dtype=bool)
    if len(starts) == len(value):  # one unit per user (AR): a user's value is its unit's
        return value, np.where(defined, value, 0.0), defined.astype(np.int64)
    sums = _reduce(np.where(defined, value, 0.0), starts)
    counts = _reduce(defined.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan), sums, counts


# -- per user -> fold ---------------------------------------------------------------------------
def summarize(per_unit: pl.DataFrame, *, undefined: str = "skip") -> pl.DataFrame:
    """One row per (system, protocol, fold, metric, k): mean over users, micro mean over units,
    users counted and left out, and the ``rule`` that made the value; an ``f1_pooled`` row (F_tp,fp)
    beside every ``f1``; and a fold ``all`` row (mean of the fold means, pooled F over all folds'
    units) wherever a system and protocol have more than one fold. ``per_unit``: polars or pandas.
    """
    per_unit = check_per_unit(per_unit)
    folds = fold_summary(per_unit, undefined=undefined)
    counts = f_count_sums(per_unit) if _has_f1(per_unit) else None
    return with_all_folds(folds, counts)


@dataclass
class PartitionState:
    """What the summary of per-unit values needs, per user: a partition (or a chunk of its users)
    reduced to users x metrics. States of disjoint user chunks merge by concatenation in user order,
    and the summary of the merged state is bit-identical to that of the whole table: every sum runs
    over the same users in the same order, however the users were chunked.

    The key columns a partition holds one value of (``system``, ``protocol``, ``fold``: every
    partition a run writes) are kept once, in ``labels``, not on every user row (at ML-25M size
    that is 48 bytes on each of tens of millions of rows); a table mixing them keeps them as columns."""

    users: pl.DataFrame  # [system, protocol, fold,] user, metric, k, value, unit_sum, unit_count
    run_rows: pl.DataFrame  # system, protocol, fold, metric, k, run_value (null-user rows)
    f_users: pl.DataFrame | None  # [system, protocol, fold,] k, user, tp, fp, fn
    order: dict[str, int]
    labels: dict[str, str] | None = None  # the constant system, protocol, fold of every row

    @classmethod
    def of(cls, per_unit: pl.DataFrame, *, undefined: str = "skip") -> PartitionState:
        per_unit = check_per_unit(per_unit)
        labels = partition_labels(per_unit)
        names = _metric_names(per_unit)
        f_users = f_user_counts(per_unit) if "f1" in names else None
        metrics = per_unit
        if any(name in AUXILIARY_METRICS for name in names):
            metrics = per_unit.filter(~pl.col("metric").is_in(AUXILIARY_METRICS))
        run_rows = _run_rows(metrics)
        if labels is not None:  # group on metric, k and user alone
            metrics = metrics.drop(_LABELS)
            f_users = f_users.drop(_LABELS) if f_users is not None else None
        order = {name: i for i, name in enumerate(n for n in names if n != N_RELEVANT)}
        return cls(_user_values(metrics, undefined), run_rows, f_users, order, labels)

    @classmethod
    def of_users(cls, users: pl.DataFrame, order: dict[str, int]) -> PartitionState:
        """The state of per-user values already reduced from their units (the columns system,
        protocol, fold, user, metric, k, value, unit_sum, unit_count, as :func:`user_means` gives
        them), with no whole-run or F rows; ``order`` the metrics' order."""
        return cls(users, _EMPTY_RUN, None, order)

    @classmethod
    def merge(cls, states: list[PartitionState]) -> PartitionState:
        """The state of the concatenated chunks (given in user order)."""
        order: dict[str, int] = {}
        for s in states:
            for name in s.order:
                order.setdefault(name, len(order))
        labels = states[0].labels if states else None
        if any(s.labels != labels for s in states):  # chunks of different partitions: labels as columns
            labels = None
            states = [PartitionState(s.user_values(), s.run_rows, s._labelled(s.f_users), s.order) for s in states]
        f_users = [s.f_users for s in states if s.f_users is not None]
        return cls(
            pl.concat([s.users for s in states], how="vertical_relaxed"),
            pl.concat([s.run_rows for s in states], how="vertical_relaxed"),
            pl.concat(f_users, how="vertical_relaxed") if f_users else None,
            order,
            labels,
        )

    def user_values(self) -> pl.DataFrame:
        """The per-user frame with its ``system, protocol, fold`` columns."""
        return self._labelled(self.users)

    def _labelled(self, frame: pl.DataFrame | None) -> pl.DataFrame | None:
        if frame is None or self.labels is None:
            return frame
        return frame.with_columns(pl.lit(v, pl.String).alias(c) for c, v in self.labels.items()).select(
            *_LABELS, *[c for c in frame.columns if c not in _LABELS])

    def summary(self, undefined: str) -> pl.DataFrame:
        """The fold rows of these users (see :func:`fold_summary`)."""
        return self.reduced().summary(undefined)

    def reduced(self) -> SummaryState:
        """These users' sums: all a summary with t-intervals needs, small and mergeable."""
        return SummaryState.of(self)


_LABELS = ["system", "protocol", "fold"]


@dataclass
class SummaryState:
    """What the summary of a set of users needs, as exact sums (:mod:`recsys_eval.core.exact`):
    per (system, protocol, fold, metric, k) group ``groups`` holds the users, the users with a
    defined value, the sum of their values and of their squares, and the sum and count of their
    units (the micro mean); per (system, protocol, fold, k) ``f_sums`` holds the users and their
    summed tp, fp, fn (pooled F); ``run_rows`` the whole-run values; ``order`` the metrics' order.

    The states of disjoint users merge by adding integers, in any order, into the state of their
    union: the summary is the same bits however the users were chunked or partitioned (a run's
    chunks, a Spark job's partitions, merged on the driver without any per-user row). Its size is
    that of the summary: kilobytes, whatever the number of users."""

    groups: dict[tuple, list[int]]
    f_sums: dict[tuple, list[int]]
    run_rows: pl.DataFrame
    order: dict[str, int]

    @classmethod
    def of(cls, state: PartitionState) -> SummaryState:
        from recsys_eval.core.exact import group_sums

        keys = _GROUP if state.labels is None else ["metric", "k"]
        users, starts = grouped(state.users, keys, then="user")
        value = users.get_column("value").to_numpy()
        total, square_total = group_sums(value, starts, squares=True)
        unit_total, _ = group_sums(users.get_column("unit_sum").to_numpy(), starts)
        columns = (
            np.diff(np.append(starts, len(value))).tolist(),  # users
            _reduce((~np.isnan(value)).astype(np.int64), starts).tolist(),  # users with a defined value
            total, square_total, unit_total,
            _reduce(users.get_column("unit_count").to_numpy(), starts).tolist(),  # units
        )
        groups = dict(zip(_group_keys(users[starts].select(keys), state.labels), map(list, zip(*columns, strict=True)),
                          strict=True))
        f_sums = {}
        if state.f_users is not None:
            f_keys = [*_RUN, "fold", "k"] if state.labels is None else ["k"]
            counts, f_starts = grouped(state.f_users, f_keys, then="user")
            exact = _exact_totals(counts, f_starts, ("tp", "fp", "fn"))
            f_users = np.diff(np.append(f_starts, counts.height)).tolist()
            f_sums = dict(zip(_group_keys(counts[f_starts].select(f_keys), state.labels),
                              map(list, zip(f_users, *exact, strict=True)), strict=True))
        return cls(groups, f_sums, state.run_rows, dict(state.order))

    @classmethod
    def merge(cls, states: list[SummaryState]) -> SummaryState:
        """The state of the union of disjoint users (exact: any order gives the same sums; the
        first state's run value is kept where several hold one)."""
        groups: dict[tuple, list[int]] = {}
        f_sums: dict[tuple, list[int]] = {}
        order: dict[str, int] = {}
        for state in states:
            for into, part in ((groups, state.groups), (f_sums, state.f_sums)):
                for key, sums in part.items():
                    into[key] = [a + b for a, b in zip(into[key], sums, strict=True)] if key in into else list(sums)
            for name in state.order:
                order.setdefault(name, len(order))
        run_rows = pl.concat([s.run_rows for s in states], how="vertical_relaxed") if states else _EMPTY_RUN
        return cls(groups, f_sums, run_rows, order)

    def summary(self, undefined: str) -> pl.DataFrame:
        """The fold rows: mean over users and micro mean over units (each rounded once), users
        counted and left out, run values, and pooled F (see :func:`fold_summary`)."""
        rows = self._fold_rows()
        if self.run_rows.height:
            rows = _merge_run_rows(rows, _first_per_group(self.run_rows))
        if self.f_sums:
            rows = pl.concat([rows, _pooled_f_rows(self.f_totals())], how="vertical_relaxed")
        return _finish(rows, undefined, self.order)

    def moments(self) -> pl.DataFrame:
        """Per group, over its users' defined values: ``n``, ``mean`` and the sample standard
        deviation ``sd`` (what a t-interval needs; :func:`group_stats` gives the same bits)."""
        from recsys_eval.core.exact import mean_and_sd

        stats = [(s[1], *mean_and_sd(s[1], s[2], s[3])) for s in self.groups.values()]
        return self._keys(_GROUP).with_columns(
            pl.Series("n", [n for n, _, _ in stats], dtype=pl.Int64),
            pl.Series("mean", [m for _, m, _ in stats], dtype=pl.Float64),
            pl.Series("sd", [sd for _, _, sd in stats], dtype=pl.Float64))

    def f_totals(self) -> pl.DataFrame:
        """Per (system, protocol, fold, k): tp, fp, fn summed over the users, and the users (the
        frame :func:`f_count_sums` gives)."""
        from recsys_eval.core.exact import VALUE_SCALE, ratio

        sums = list(self.f_sums.values())
        keys = pl.DataFrame([list(k) for k in self.f_sums], schema={c: SUMMARY_SCHEMA[c] for c in (*_RUN, "fold", "k")},
                            orient="row")
        return keys.with_columns(
            *[pl.Series(c, [ratio(s[i], VALUE_SCALE, 1) for s in sums], dtype=pl.Float64)
              for i, c in enumerate(("tp", "fp", "fn"), start=1)],
            pl.Series("users", [s[0] for s in sums], dtype=pl.Int64))

    def _keys(self, names: list[str]) -> pl.DataFrame:
        return pl.DataFrame([list(k) for k in self.groups], schema={c: SUMMARY_SCHEMA[c] for c in names}, orient="row")

    def _fold_rows(self) -> pl.DataFrame:
        from recsys_eval.core.exact import VALUE_SCALE, ratio

        sums = list(self.groups.values())
        return self._keys(_GROUP).with_columns(
            pl.Series("mean", [ratio(s[2], VALUE_SCALE, s[1]) for s in sums], dtype=pl.Float64),
            pl.Series("micro_mean", [ratio(s[4], VALUE_SCALE, s[5]) for s in sums], dtype=pl.Float64),
            pl.Series("users_counted", [s[1] for s in sums], dtype=pl.Int64),
            pl.Series("users_left_out", [s[0] - s[1] for s in sums], dtype=pl.Int64))


_EMPTY_RUN = pl.DataFrame(schema={**{c: SUMMARY_SCHEMA[c] for c in _GROUP}, "run_value": pl.Float64})


def _group_keys(keys: pl.DataFrame, labels: dict[str, str] | None) -> list[tuple]:
    """Full group keys (system, protocol, fold, metric, k; or system, protocol, fold, k) of the
    rows of ``keys``, which hold the labels themselves or leave them to ``labels``."""
    rows = keys.rows()
    if labels is None:
        return rows
    label = (labels["system"], labels["protocol"], labels["fold"])
    return [(*label, *row) for row in rows]


def fold_summary(per_unit: pl.DataFrame, *, undefined: str = "skip") -> pl.DataFrame:
    """The per-fold rows of :func:`summarize` (no ``all`` rows): what a run computes for each
    (fold, system, protocol) partition as it is written, so that the whole table is never held."""
    return PartitionState.of(per_unit, undefined=undefined).summary(undefined)


def _run_rows(per_unit: pl.DataFrame) -> pl.DataFrame:
    """Values of a whole run (null user): the first row of each group, as it is."""
    if not per_unit.get_column("user").null_count():
        per_unit = per_unit.clear()
    return _first_per_group(per_unit.filter(pl.col("user").is_null()).select(*_GROUP, pl.col("value").alias("run_value")))


def _first_per_group(run: pl.DataFrame) -> pl.DataFrame:
    if not run.height:
        return run
    run, starts = grouped(run, _GROUP)
    return run[starts]


def _merge_run_rows(rows: pl.DataFrame, run_rows: pl.DataFrame) -> pl.DataFrame:
    """A run value is the mean where the metric has no per-user rows, else the micro mean."""
    merged = rows.join(run_rows, on=_GROUP, how="full", coalesce=True, nulls_equal=True, maintain_order="left_right")
    return merged.with_columns(
        pl.coalesce("mean", "run_value").alias("mean"),
        pl.when(pl.col("users_counted").is_null())
        .then(pl.col("run_value"))
        .otherwise(pl.coalesce("run_value", "micro_mean"))
        .alias("micro_mean"),
    ).drop("run_value")


def _pooled_f_rows(sums: pl.DataFrame) -> pl.DataFrame:
    """F_tp,fp per (system, protocol, fold, k) from the summed counts; every user with a unit counts."""
    return sums.select(
        *_RUN, "fold", pl.lit(F_POOLED).alias("metric"), "k",
        _f_from_counts(pl.col("tp"), pl.col("fp"), pl.col("fn")).alias("mean"),
        pl.lit(None, pl.Float64).alias("micro_mean"),
        pl.col("users").alias("users_counted"),
        pl.lit(0, pl.Int64).alias("users_left_out"),
    )


# -- folds -> all --------------------------------------------------------------------------------
def with_all_folds(folds: pl.DataFrame, f_sums: pl.DataFrame | None = None) -> pl.DataFrame:
    """Fold rows and, for every (system, protocol, metric, k) with two or more folds, an ``all`` row:
    the mean of the fold means (folds without a defined mean left out), the mean of the fold micro
    means, users summed; ``f1_pooled`` is F_tp,fp of the counts summed over every fold's units
    (``f_sums``: per system, protocol, fold, k the summed tp, fp, fn and users)."""
    if not folds.height:
        return folds
    key = [*_RUN, "metric", "k"]
    folds, starts, _ = _grouped_with_order(folds.filter(pl.col("fold") != ALL_FOLDS), key)
    n_folds = np.diff(np.append(starts, folds.height))
    multi = n_folds > 1
    if not multi.any():
        return folds
    mean = folds.get_column("mean").fill_null(float("nan")).to_numpy()
    micro = folds.get_column("micro_mean").fill_null(float("nan")).to_numpy()
    counted = folds.get_column("users_counted").fill_null(0).to_numpy()
    left = folds.get_column("users_left_out").fill_null(0).to_numpy()
    has_users = folds.get_column("users_counted").is_not_null().to_numpy()
    first = folds[starts]
    rows = first.select(*key, "name", "rule", "undefined").with_columns(
        pl.lit(ALL_FOLDS).alias("fold"),
        pl.Series("mean", _nan_group_mean(mean, starts)),
        pl.Series("micro_mean", _nan_group_mean(micro, starts)),
        pl.Series("users_counted", _reduce(counted, starts), dtype=pl.Int64),
        pl.Series("users_left_out", _reduce(left, starts), dtype=pl.Int64),
        pl.Series("_has_users", _reduce(has_users.astype(np.int64), starts) > 0),
    ).filter(pl.Series(multi))
    rows = rows.with_columns(
        pl.when(pl.col("_has_users")).then(pl.col("users_counted")).alias("users_counted"),
        pl.when(pl.col("_has_users")).then(pl.col("users_left_out")).alias("users_left_out"),
    ).drop("_has_users")
    if f_sums is not None and f_sums.height:
        rows = _pooled_over_folds(rows, f_sums)
    return _sorted_summary(pl.concat([folds, rows], how="diagonal_relaxed"))


def _pooled_over_folds(rows: pl.DataFrame, f_sums: pl.DataFrame) -> pl.DataFrame:
    sums, starts = grouped(f_sums.sort([*_RUN, "k", "fold"], maintain_order=True), [*_RUN, "k"])
    totals = sums[starts].select(*_RUN, "k").with_columns(
        *[pl.Series(c, _reduce(sums.get_column(c).cast(pl.Float64).to_numpy(), starts)) for c in ("tp", "fp", "fn")],
        pl.lit(F_POOLED).alias("metric"),
    ).select(*_RUN, "metric", "k", _f_from_counts(pl.col("tp"), pl.col("fp"), pl.col("fn")).alias("pooled"))
    joined = rows.join(totals, on=[*_RUN, "metric", "k"], how="left", nulls_equal=True, maintain_order="left")
    return joined.with_columns(pl.coalesce("pooled", "mean").alias("mean")).drop("pooled")


# -- F-measure ----------------------------------------------------------------------------------
def f_counts(per_unit: pl.DataFrame) -> pl.DataFrame:
    """Per unit and cutoff, from the ``f1`` and ``n_relevant`` rows: ``tp`` (hits@k), ``fp``
    (k - tp), ``fn`` (R - tp), recall ``r`` and F1 ``f`` (null where R = 0); the counts frame that
    :func:`f_measure_variants` takes."""
    f1 = per_unit.filter(pl.col("metric") == "f1")
    rel = per_unit.filter(pl.col("metric") == N_RELEVANT)
    if not f1.height:
        raise DataError("per-unit results hold no 'f1' rows: measure metric 'f1' first")
    unit_key = [*_RUN, "fold", "unit"]
    joined = f1.join(
        rel.select([*unit_key, pl.col("value").alias("n_rel")]), on=unit_key, how="left",
        nulls_equal=True, maintain_order="left",
    )
    if joined.get_column("n_rel").null_count():
        raise DataError(
            f"per-unit results have 'f1' rows without '{N_RELEVANT}' rows for the same units: the "
            "F-measure variants need each unit's relevant count (measure() adds it with 'f1')"
        )
    k = pl.col("k").cast(pl.Float64)
    tp, fp, fn = f_unit_counts(pl.col("value").fill_nan(0.0), k, pl.col("n_rel"))
    return joined.with_columns(tp.alias("tp")).select(
        *[*_RUN, "fold", "user", "unit"], pl.col("k"),
        pl.col("tp"),
        fp.alias("fp"),
        fn.alias("fn"),
        _ratio(pl.col("tp"), pl.col("n_rel")).alias("r"),
        pl.col("value").fill_nan(None).alias("f"),
    )


def f_unit_counts(f, k, n_relevant):
    """A unit's (tp, fp, fn) from its F1 ``f`` at cutoff k (0 where undefined) and relevant count R:
    F1 = 2 tp / (k + R) gives tp = f (k + R) / 2, fp = k - tp, fn = R - tp. Polars expressions or
    numpy arrays alike (the analysis's read of the per-unit files takes them in numpy)."""
    tp = f * (k + n_relevant) / 2
    return tp, k - tp, n_relevant - tp


def f_user_counts(per_unit: pl.DataFrame) -> pl.DataFrame:
    """Per (system, protocol, fold, k, user): tp, fp, fn summed over the user's units."""
    counts, starts = grouped(f_counts(per_unit), [*_RUN, "fold", "k", "user"], then="unit")
    return counts[starts].select(*_RUN, "fold", "k", "user").with_columns(
        *[pl.Series(c, _reduce(counts.get_column(c).to_numpy(), starts)) for c in ("tp", "fp", "fn")]
    )


def f_count_sums(counts: pl.DataFrame) -> pl.DataFrame:
    """Per (system, protocol, fold, k): tp, fp, fn summed over the users (exactly, rounded once), and the
    users counted (the pooled F of a fold, and of all folds once summed again). ``counts`` is a
    per-unit table (with ``f1`` and ``n_relevant`` rows) or :func:`f_user_counts`' frame."""
    if "tp" not in counts.columns:
        counts = f_user_counts(counts)
    from recsys_eval.core.exact import VALUE_SCALE, ratio

    counts, starts = grouped(counts, [*_RUN, "fold", "k"], then="user")
    totals = _exact_totals(counts, starts, ("tp", "fp", "fn"))
    return counts[starts].select(*_RUN, "fold", "k").with_columns(
        *[pl.Series(c, [ratio(t, VALUE_SCALE, 1) for t in column], dtype=pl.Float64)
          for c, column in zip(("tp", "fp", "fn"), totals, strict=True)],
        pl.Series("users", np.diff(np.append(starts, counts.height)), dtype=pl.Int64),
    )


def _exact_totals(frame: pl.DataFrame, starts: np.ndarray, columns: tuple[str, ...]) -> list[list[int]]:
    """Per column, the exact sums of each run of rows starting at ``starts`` (core.exact units)."""
    from recsys_eval.core.exact import group_sums

    return [group_sums(frame.get_column(c).cast(pl.Float64).to_numpy(), starts)[0] for c in columns]


def f_measure_variants(counts: pl.DataFrame, *, over: str = "users") -> pl.DataFrame:
    """Forman & Scholz's five F-measure aggregates side by side, from per-unit counts (the frame
    :func:`f_counts` gives, or any with system, protocol, fold, k, tp, fp, fn; ``user`` for
    ``over="users"``).

    The aggregated items are the users of each fold (``"users"``: a user's P, R, F are the means
    over the user's units, TP, FP, FN their sums), the units of each fold (``"units"``), or the folds
    of each system and protocol (``"folds"``: each fold one test set whose TP, FP, FN are its units'
    sums). With P_i = TP/(TP+FP), R_i = TP/(TP+FN), F_i = 2 TP/(2 TP+FP+FN) and V_i = both P_i and R_i
    defined: F_tp_fp = F of the summed counts (the unbiased one); F_avg = mean F_i (F_i = 0 where not
    V_i); F_avg_skip = mean F_i over V_i; F_pr_re = F(mean P, mean R), undefined P, R as 0;
    F_pr_re_skip = F(mean P, mean R) over V_i. Also ``n_items`` and ``n_undefined`` (items not V_i).
    """
    check_choice("F-measure aggregation", over, F_AGGREGATIONS)
    needed = [*_RUN, "fold", "k", "tp", "fp", "fn"] + (["user"] if over == "users" else [])
    missing = [c for c in needed if c not in counts.columns]
    if missing:
        raise DataError(
            f"F-measure counts: missing columns {missing}; expected {needed}, one row per unit "
            "(f_counts(per_unit) gives them)"
        )
    tp, fp, fn = pl.col("tp"), pl.col("fp"), pl.col("fn")
    units = counts.select(needed).with_columns(tp.cast(pl.Float64), fp.cast(pl.Float64), fn.cast(pl.Float64))
    if units.select(pl.any_horizontal((tp < 0).any(), (fp < 0).any(), (fn < 0).any())).item():
        raise DataError("F-measure counts: tp, fp and fn must be non-negative")
    rates = [_ratio(tp, tp + fp).alias("p"), _ratio(tp, tp + fn).alias("r"),
             _f_from_counts(tp, fp, fn).alias("f")]
    keys = [*_RUN, "fold", "k"]
    if over == "users":
        items = units.with_columns(rates).group_by([*keys, "user"], maintain_order=True).agg(
            tp.sum(), fp.sum(), fn.sum(), pl.col("p").mean(), pl.col("r").mean(), pl.col("f").mean()
        )
    elif over == "units":
        items = units.with_columns(rates)
    else:
        items = units.group_by(keys, maintain_order=True).agg(tp.sum(), fp.sum(), fn.sum()).with_columns(rates)
        keys = [*_RUN, "k"]
    defined = pl.col("p").is_not_null() & pl.col("r").is_not_null()
    return items.group_by(keys, maintain_order=True).agg(
        _f_from_counts(tp.sum(), fp.sum(), fn.sum()).alias("F_tp_fp"),
        pl.when(defined).then(pl.col("f")).otherwise(0.0).mean().alias("F_avg"),
        pl.col("f").filter(defined).mean().alias("F_avg_skip"),
        _f(pl.col("p").fill_null(0.0).mean(), pl.col("r").fill_null(0.0).mean()).alias("F_pr_re"),
        _f(pl.col("p").filter(defined).mean(), pl.col("r").filter(defined).mean()).alias("F_pr_re_skip"),
        pl.len().cast(pl.Int64).alias("n_items"),
        (~defined).sum().cast(pl.Int64).alias("n_undefined"),
    ).sort(keys)


# -- deterministic grouping ---------------------------------------------------------------------
def grouped(frame: pl.DataFrame, keys: list[str], *, then: str | None = None) -> tuple[pl.DataFrame, np.ndarray]:
    """``frame`` with the rows of each ``keys`` group contiguous, and the groups' start offsets.

    The table's own order is kept when its groups are already contiguous (as measure() writes them);
    otherwise it is stably sorted by the keys (and ``then``), so the order, and every sum over it,
    is the same in every run.
    """
    starts, contiguous = _runs(frame, keys)
    if not contiguous:
        frame = frame.sort([*keys, *([then] if then else [])], maintain_order=True, nulls_last=True)
        starts, _ = _runs(frame, keys)
    return frame, starts


def group_stats(frame: pl.DataFrame, keys: list[str], value: str = "value") -> pl.DataFrame:
    """Per ``keys`` group, over its defined (non-NaN, non-null) values: ``n``, ``mean`` and the
    sample standard deviation ``sd`` (NaN below two values) from exact sums (as
    :meth:`SummaryState.moments`); ``rows`` counts the group's rows, defined or not."""
    frame, starts = grouped(frame, keys)
    values = frame.get_column(value).cast(pl.Float64).fill_null(float("nan")).to_numpy()
    return frame[starts].select(keys).with_columns(*run_stats(values, starts),
                                                   pl.Series("rows", np.diff(np.append(starts, len(values))), dtype=pl.Int64))


def run_stats(values: np.ndarray, starts: np.ndarray) -> tuple[pl.Series, pl.Series, pl.Series]:
    """``n``, ``mean`` and ``sd`` (as :func:`group_stats` defines them, from exact sums) of the
    defined values of each run of ``values`` (NaN where undefined) starting at ``starts``."""
    from recsys_eval.core.exact import group_sums, mean_and_sd

    n = _reduce((~np.isnan(values)).astype(np.int64), starts)
    total, square_total = group_sums(values, starts, squares=True)
    stats = [mean_and_sd(*sums) for sums in zip(n.tolist(), total, square_total, strict=True)]
    return (pl.Series("n", n, dtype=pl.Int64), pl.Series("mean", [m for m, _ in stats], dtype=pl.Float64),
            pl.Series("sd", [sd for _, sd in stats], dtype=pl.Float64))


def _grouped_with_order(frame: pl.DataFrame, keys: list[str]) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """Like :func:`grouped`, also returning the row permutation applied (for aligned arrays)."""
    indexed = frame.with_row_index("_row")
    indexed, starts = grouped(indexed, keys)
    order = indexed.get_column("_row").to_numpy()
    return indexed.drop("_row"), starts, order


def _runs(frame: pl.DataFrame, keys: list[str]) -> tuple[np.ndarray, bool]:
    """The start offsets of the runs of equal ``keys`` tuples, and whether no tuple starts two runs.
    That holds at once when the tuples of all but the last key start one block each and the last
    key rises from run to run within a block (users in order, as measure() writes them); otherwise
    the runs' tuples are hashed."""
    if not frame.height:
        return np.zeros(0, dtype=np.int64), True
    outer, last = keys[:-1], pl.col(keys[-1])
    flags = frame.select(
        pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in outer]).alias("block")
        if outer else pl.lit(False).alias("block"),
        last.ne_missing(last.shift(1)).alias("run"),
        (last > last.shift(1)).fill_null(False).alias("rising"),
    )
    block = flags.get_column("block").to_numpy().copy()
    block[0] = True
    run = block | flags.get_column("run").to_numpy()
    starts = np.flatnonzero(run)
    within = run & ~block
    if (not outer or not frame[np.flatnonzero(block)].select(outer).is_duplicated().any()) and \
            flags.get_column("rising").to_numpy()[within].all():
        return starts, True
    return starts, not frame[starts].select(keys).is_duplicated().any()


def _reduce(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of consecutive runs starting at ``starts``, in row order."""
    if not len(starts):
        return np.zeros(0, dtype=values.dtype)
    return np.add.reduceat(values, starts)


def _nan_group_mean(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    defined = ~np.isnan(values)
    n = _reduce(defined.astype(np.int64), starts)
    total = _reduce(np.where(defined, values, 0.0), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), np.nan)


# -- helpers ------------------------------------------------------------------------------------
def _has_f1(per_unit: pl.DataFrame) -> bool:
    return bool(per_unit.select((pl.col("metric") == "f1").any()).item())


def _finish(rows: pl.DataFrame, undefined: str, order: dict[str, int]) -> pl.DataFrame:
    rule = (
        pl.when(pl.col("metric") == F_POOLED).then(pl.lit(RULE_POOLED))
        .when(pl.col("users_counted").is_null()).then(pl.lit(RULE_RUN))
        .otherwise(pl.lit(RULE_USER_MEAN))
    )
    out = rows.with_columns(
        MetricKey.label_column().alias("name"),
        rule.alias("rule"),
        pl.lit(undefined).alias("undefined"),
        pl.col("mean").fill_nan(None),
        pl.col("micro_mean").fill_nan(None),
    )
    return _sorted_summary(out, order)


def _sorted_summary(out: pl.DataFrame, order: dict[str, int] | None = None) -> pl.DataFrame:
    """Summary rows in a fixed order: system, protocol, the folds then ``all``, metric (in the order
    first measured; f1_pooled right after f1), k."""
    if order is None:
        order = {m: i for i, m in enumerate(out.get_column("metric").unique(maintain_order=True).to_list())}
    order = {m: float(i) for m, i in order.items()}
    extras = [c for c in out.columns if c not in SUMMARY_SCHEMA]
    if "f1" in order:
        order[F_POOLED] = order["f1"] + 0.5
    return (
        out.with_columns(
            pl.col("metric").replace_strict(order, default=len(order), return_dtype=pl.Float64).alias("_m"),
            (pl.col("fold") == ALL_FOLDS).alias("_all"),
        )
        .sort(["system", "protocol", "_all", "fold", "_m", "k"], nulls_last=False, maintain_order=True)
        .select([*SUMMARY_SCHEMA, *extras])
        .cast(SUMMARY_SCHEMA)
        .with_columns(pl.col("mean", "micro_mean").fill_nan(None))
    )


def _metric_names(per_unit: pl.DataFrame) -> list[str]:
    """The metrics of a per-unit table in the order first measured (from the rows where the
    metric changes: a table holds each metric's rows together, so that is a handful)."""
    metric = per_unit.get_column("metric")
    return metric.filter(metric.ne_missing(metric.shift(1))).unique(maintain_order=True).to_list()


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den).otherwise(None)


def _f(p: pl.Expr, r: pl.Expr) -> pl.Expr:
    """Harmonic mean 2PR/(P+R); 0 when P + R = 0; null when either is undefined."""
    return pl.when(p + r > 0).then(2 * p * r / (p + r)).otherwise(pl.when(p.is_not_null() & r.is_not_null()).then(0.0))


def _f_from_counts(tp: pl.Expr, fp: pl.Expr, fn: pl.Expr) -> pl.Expr:
    den = 2 * tp + fp + fn
    return pl.when(den > 0).then(2 * tp / den).otherwise(0.0)
