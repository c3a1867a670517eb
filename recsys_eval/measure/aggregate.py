"""Per-unit values to summaries: the averaging rules of DESIGN.md section 6.

- A unit's values become a user's value by the mean over the user's units (one unit under AR, one
  per relevant item under 1R); the summary is the mean over users (macro), with the mean over all
  units (micro) beside it.
- Undefined values (NaN) are left out (``undefined="skip"``, the number of users left out is
  reported) or count as 0 (``"zero"``); the policy is recorded in every summary row.
- Folds: means within each fold, then the mean of the fold means (the ``all`` row).
- Rows with a null ``user`` are values of a whole run (e.g. catalog coverage, micro MAE): they are
  reported as they are (as the mean when the metric has no per-user rows, else as the micro mean).
- F-measure (Forman & Scholz 2010): the summary of ``f1`` is F_tp,fp by default, the F of the
  summed true positives, false positives and false negatives; :func:`f_measure_variants` gives
  F_avg, F_pr,re, F_tp,fp and the skip-undefined F~avg, F~pr,re side by side.
"""

from __future__ import annotations

import polars as pl

from recsys_eval.core.results import check_per_unit
from recsys_eval.errors import DataError, check_choice
from recsys_eval.measure.metrics import N_RELEVANT, UNDEFINED_POLICIES

F_MEASURES = ("tp_fp", "avg", "pr_re")
F_VARIANTS = ("F_tp_fp", "F_avg", "F_avg_skip", "F_pr_re", "F_pr_re_skip")
F_AGGREGATIONS = ("users", "units", "folds")
ALL_FOLDS = "all"
_RUN = ["system", "protocol"]
_GROUP = ["system", "protocol", "fold", "metric", "k"]
SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "system": pl.String,
    "protocol": pl.String,
    "fold": pl.String,
    "metric": pl.String,
    "k": pl.Int32,
    "name": pl.String,
    "mean": pl.Float64,
    "micro_mean": pl.Float64,
    "users_counted": pl.Int64,
    "users_left_out": pl.Int64,
    "undefined": pl.String,
}


def summarize(
    per_unit: pl.DataFrame, *, undefined: str = "skip", f_measure: str = "tp_fp"
) -> pl.DataFrame:
    """One row per (system, protocol, fold, metric, k): mean over users, micro mean over units,
    users counted and left out; plus a fold ``all`` row (mean of the fold means) wherever a system
    and protocol have more than one fold.

    ``f_measure`` chooses what the ``f1`` rows report: ``tp_fp`` (F_tp,fp over the units of the
    fold, and over all folds' units in the ``all`` row), ``avg`` (the mean of per-user F1, as any
    other metric) or ``pr_re`` (F of the mean precision and mean recall).
    """
    check_choice("undefined-value policy", undefined, UNDEFINED_POLICIES)
    check_choice("F-measure variant", f_measure, F_MEASURES)
    per_unit = check_per_unit(per_unit)
    value = _policy_value(undefined)
    # One lazy plan: polars runs the per-user and the micro group-bys in parallel.
    users = per_unit.lazy().filter(pl.col("user").is_not_null())
    per_user = users.group_by([*_GROUP, "user"]).agg(value.mean().alias("value"))
    folds = per_user.group_by(_GROUP).agg(
        pl.col("value").mean().alias("mean"),
        pl.col("value").count().cast(pl.Int64).alias("users_counted"),
        pl.col("value").null_count().cast(pl.Int64).alias("users_left_out"),
    ).join(users.group_by(_GROUP).agg(value.mean().alias("micro_mean")), on=_GROUP, nulls_equal=True)
    run_values = per_unit.lazy().filter(pl.col("user").is_null()).group_by(_GROUP).agg(
        pl.col("value").first().alias("run_value")
    )
    folds = folds.join(run_values, on=_GROUP, how="full", coalesce=True, nulls_equal=True).collect()
    folds = folds.with_columns(
        pl.coalesce("mean", "run_value").alias("mean"),
        pl.when(pl.col("users_counted").is_null())
        .then(pl.col("run_value"))
        .otherwise(pl.coalesce("run_value", "micro_mean"))
        .alias("micro_mean"),
    ).drop("run_value")

    if f_measure != "avg" and folds.filter(pl.col("metric") == "f1").height:
        folds = _replace_f1(folds, per_unit, f_measure)
    all_folds = _all_folds(folds, per_unit, f_measure)
    out = pl.concat([folds.select(_summary_columns()), all_folds.select(_summary_columns())])
    out = out.with_columns(
        pl.when(pl.col("k").is_null())
        .then(pl.col("metric"))
        .otherwise(pl.format("{}@{}", pl.col("metric"), pl.col("k")))
        .alias("name"),
        pl.lit(undefined).alias("undefined"),
    )
    order = _metric_order(per_unit)
    return (
        out.with_columns(
            pl.col("metric").replace_strict(order, default=len(order)).alias("_m"),
            (pl.col("fold") == ALL_FOLDS).alias("_all"),
        )
        .sort(["system", "protocol", "_all", "fold", "_m", "k"], nulls_last=False)
        .select(list(SUMMARY_SCHEMA))
        .cast(SUMMARY_SCHEMA)
    )


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
        items = units.with_columns(rates).group_by([*keys, "user"]).agg(
            tp.sum(), fp.sum(), fn.sum(), pl.col("p").mean(), pl.col("r").mean(), pl.col("f").mean()
        )
    elif over == "units":
        items = units.with_columns(rates)
    else:
        items = units.group_by(keys).agg(tp.sum(), fp.sum(), fn.sum()).with_columns(rates)
        keys = [*_RUN, "k"]
    defined = pl.col("p").is_not_null() & pl.col("r").is_not_null()
    return items.group_by(keys).agg(
        _f_from_counts(tp.sum(), fp.sum(), fn.sum()).alias("F_tp_fp"),
        pl.when(defined).then(pl.col("f")).otherwise(0.0).mean().alias("F_avg"),
        pl.col("f").filter(defined).mean().alias("F_avg_skip"),
        _f(pl.col("p").fill_null(0.0).mean(), pl.col("r").fill_null(0.0).mean()).alias("F_pr_re"),
        _f(pl.col("p").filter(defined).mean(), pl.col("r").filter(defined).mean()).alias("F_pr_re_skip"),
        pl.len().cast(pl.Int64).alias("n_items"),
        (~defined).sum().cast(pl.Int64).alias("n_undefined"),
    ).sort(keys)


# -- helpers ------------------------------------------------------------------------------------
def _policy_value(undefined: str) -> pl.Expr:
    """The value column with NaN (undefined) as null (skip) or 0 (zero)."""
    if undefined == "zero":
        return pl.col("value").fill_nan(0.0)
    return pl.col("value").fill_nan(None)


def _summary_columns() -> list[str]:
    return [*_GROUP, "mean", "micro_mean", "users_counted", "users_left_out"]


def _metric_order(per_unit: pl.DataFrame) -> dict[str, int]:
    names = per_unit.get_column("metric").unique(maintain_order=True).to_list()
    return {name: i for i, name in enumerate(names)}


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den).otherwise(None)


def _f(p: pl.Expr, r: pl.Expr) -> pl.Expr:
    """Harmonic mean 2PR/(P+R); 0 when P + R = 0; null when either is undefined."""
    return pl.when(p + r > 0).then(2 * p * r / (p + r)).otherwise(pl.when(p.is_not_null() & r.is_not_null()).then(0.0))


def _f_from_counts(tp: pl.Expr, fp: pl.Expr, fn: pl.Expr) -> pl.Expr:
    den = 2 * tp + fp + fn
    return pl.when(den > 0).then(2 * tp / den).otherwise(0.0)


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
        nulls_equal=True,
    )
    if joined.get_column("n_rel").null_count():
        raise DataError(
            f"per-unit results have 'f1' rows without '{N_RELEVANT}' rows for the same units: the "
            "F-measure variants need each unit's relevant count (measure() adds it with 'f1')"
        )
    k = pl.col("k").cast(pl.Float64)
    tp = pl.when(pl.col("value").is_nan()).then(0.0).otherwise(pl.col("value") * (k + pl.col("n_rel")) / 2)
    return joined.with_columns(tp.alias("tp")).select(
        *[*_RUN, "fold", "user", "unit"], pl.col("k"),
        pl.col("tp"),
        (k - pl.col("tp")).alias("fp"),
        (pl.col("n_rel") - pl.col("tp")).alias("fn"),
        _ratio(pl.col("tp"), pl.col("n_rel")).alias("r"),
        pl.col("value").fill_nan(None).alias("f"),
    )


def _f_tp_fp(per_unit: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    counts = f_counts(per_unit)
    return counts.group_by(keys).agg(
        _f_from_counts(pl.col("tp").sum(), pl.col("fp").sum(), pl.col("fn").sum()).alias("f_tp_fp"),
        pl.col("user").n_unique().cast(pl.Int64).alias("users"),
    )


def _replace_f1(folds: pl.DataFrame, per_unit: pl.DataFrame, f_measure: str) -> pl.DataFrame:
    keys = [*_RUN, "fold", "k"]
    if f_measure == "tp_fp":
        f = _f_tp_fp(per_unit, keys).rename({"f_tp_fp": "f_value"})
        update = [
            pl.col("f_value").alias("mean"),
            pl.lit(None, pl.Float64).alias("micro_mean"),
            pl.col("users").alias("users_counted"),
            pl.lit(0, pl.Int64).alias("users_left_out"),
        ]
    else:
        f = f_measure_variants(f_counts(per_unit), over="users").select(
            *keys, pl.col("F_pr_re").alias("f_value")
        )
        update = [pl.col("f_value").alias("mean"), pl.lit(None, pl.Float64).alias("micro_mean")]
    is_f1 = pl.col("metric") == "f1"
    f1 = folds.filter(is_f1).join(f, on=keys, how="left", nulls_equal=True).with_columns(update)
    return pl.concat([folds.filter(~is_f1), f1.select(folds.columns)])


def _all_folds(folds: pl.DataFrame, per_unit: pl.DataFrame, f_measure: str) -> pl.DataFrame:
    key = [*_RUN, "metric", "k"]
    multi = folds.group_by(key).agg(pl.col("fold").n_unique().alias("n_folds")).filter(
        pl.col("n_folds") > 1
    )
    rows = folds.join(multi, on=key, nulls_equal=True).group_by(key).agg(
        pl.col("mean").mean(),
        pl.col("micro_mean").mean(),
        pl.col("users_counted").sum(),
        pl.col("users_left_out").sum(),
    ).with_columns(pl.lit(ALL_FOLDS).alias("fold"))
    if f_measure == "tp_fp" and rows.filter(pl.col("metric") == "f1").height:
        pooled = _f_tp_fp(per_unit, [*_RUN, "k"])
        is_f1 = pl.col("metric") == "f1"
        f1 = rows.filter(is_f1).join(pooled, on=[*_RUN, "k"], how="left", nulls_equal=True)
        f1 = f1.with_columns(pl.col("f_tp_fp").alias("mean"), pl.lit(None, pl.Float64).alias("micro_mean"))
        rows = pl.concat([rows.filter(~is_f1), f1.select(rows.columns)])
    return rows
