"""ROC and precision-recall curves of a run, kept on a small fixed grid for the report.

The runner calls :func:`curve_rows` on every chunk of units it ranks (the rankings are in memory
then, and only then): the chunk's vertically averaged ROC (``ROC_POINTS`` false positive rates) and
interpolated PR (``PR_POINTS`` recall levels), each with the number of units averaged
(:func:`recsys_eval.measure.curves.average_roc`, :func:`~recsys_eval.measure.curves.average_pr`).
A run thus stores ``ROC_POINTS + PR_POINTS`` rows per (fold, system, protocol, chunk), never
anything of size users x items.

:func:`combine_curves` gives the curves the report draws, by the averaging rule of
``docs/CONVENTIONS.md#curves`` and ``#averaging``: within a fold, the mean over its units (the chunk
means weighted by their unit counts); the ``all`` fold, the mean of the fold curves.
"""

from __future__ import annotations

import polars as pl

#: Grid sizes: false positive rates 0, 0.005, ..., 1 and recall levels 0, 0.1, ..., 1 (the
#: 11-point interpolated PR of TREC). A good ranking's ROC rises steeply near 0, where linear
#: interpolation between grid points cuts the corner: its trapezoid area falls short of the AUC by
#: up to ~0.015 on a 51-point grid and ~0.004 on this one.
ROC_POINTS, PR_POINTS = 201, 11
_KEYS = ["system", "protocol", "fold", "curve", "x"]


def curve_rows(rankings, targets, *, system: str, protocol: str, fold: str) -> pl.DataFrame:
    """A chunk's averaged curves: ``system, protocol, fold, curve ("roc" | "pr"), x, y, units``.

    ``x`` is the false positive rate (ROC) or the recall level (PR); ``y`` the mean true positive
    rate or interpolated precision over the chunk's ``units`` that define the curve (relevant and
    non-relevant targets for ROC, relevant ones for PR)."""
    from recsys_eval.core.units import Rankings
    from recsys_eval.measure import curves

    if isinstance(rankings, Rankings):
        roc = curves.average_roc(rankings, targets, ROC_POINTS)
        pr = curves.average_pr(rankings, targets, PR_POINTS)
    else:  # 1R units ranked in closed form (recsys_eval.recommend.one_relevant): their places
        roc = curves.average_roc_one_relevant(rankings.ranks, ROC_POINTS)
        pr = curves.average_pr_one_relevant(rankings.ranks, PR_POINTS)
    roc = roc.rename({"fpr": "x", "tpr": "y"})
    pr = pr.rename({"recall": "x", "precision": "y"})
    return pl.concat([roc.with_columns(curve=pl.lit("roc")), pr.with_columns(curve=pl.lit("pr"))]).select(
        pl.lit(system).alias("system"), pl.lit(protocol).alias("protocol"), pl.lit(fold).alias("fold"),
        "curve", pl.col("x").cast(pl.Float64), pl.col("y").cast(pl.Float64), pl.col("units").cast(pl.Int64),
    )


def combine_curves(rows: pl.DataFrame) -> pl.DataFrame:
    """Chunk rows (:func:`curve_rows`) to one curve per (system, protocol, fold) and per (system,
    protocol) over the folds (``fold = "all"``, with several folds): the fold curve is
    sum(y * units) / sum(units) over its chunks, the mean over the fold's units; ``all`` is the
    mean of the fold curves that have units. A curve without units has ``y`` null."""
    folds = (
        rows.group_by(_KEYS, maintain_order=True)
        .agg(((pl.col("y") * pl.col("units")).sum() / pl.col("units").sum()).alias("y"),
             pl.col("units").sum())
        .with_columns(pl.when(pl.col("units") > 0).then(pl.col("y")).alias("y"))
    )
    if folds.get_column("fold").n_unique() < 2:
        return folds
    overall = (
        folds.group_by([k for k in _KEYS if k != "fold"], maintain_order=True)
        .agg(pl.col("y").mean(), pl.col("units").sum())
        .with_columns(fold=pl.lit("all"))
        .select(folds.columns)
    )
    return pl.concat([folds, overall])
