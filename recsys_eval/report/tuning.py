"""Tables and a figure of a run's tuning, from its trial log (``tuning.parquet``): the chosen
hyperparameters per fold and system, the validation curve (value by trial and best so far) per
system, and the tuning cost. Frames in; frames and a matplotlib figure out, which the report's
"Tuning" section shows for a folder with a ``tuning.parquet`` (recsys_eval.report.build).
"""

from __future__ import annotations

import polars as pl

from recsys_eval.core.results import TUNING_PARAM_PREFIX as PARAM_PREFIX

_RUN = ["fold", "system"]


def chosen_parameters(trials: pl.DataFrame) -> pl.DataFrame:
    """One row per (fold, system): its best trial (highest validation value, the earliest on ties,
    as recsys_eval.tune.log.best_trial chooses) with its hyperparameters as columns."""
    params = [c for c in trials.columns if c.startswith(PARAM_PREFIX)]
    best = (trials.filter(pl.col("value").is_not_nan())
            .sort([*_RUN, "value", "trial"], descending=[False, False, True, False])
            .unique(_RUN, keep="first", maintain_order=True))
    return best.select(*_RUN, "trial", "value", *[pl.col(c).alias(c.removeprefix(PARAM_PREFIX)) for c in params])


def validation_curves(trials: pl.DataFrame) -> pl.DataFrame:
    """Value by trial and the best value so far, per (fold, system), in trial order."""
    return trials.sort([*_RUN, "trial"]).select(
        *_RUN, "trial", "value",
        pl.col("value").fill_nan(None).cum_max().forward_fill().over(_RUN).alias("best_so_far"),
    )


def tuning_cost(trials: pl.DataFrame) -> pl.DataFrame:
    """Per system: trials run (over every fold), fit and evaluation seconds in total and per trial."""
    return trials.group_by("system", maintain_order=True).agg(
        pl.len().alias("trials"), pl.col("fit_seconds").sum(), pl.col("eval_seconds").sum(),
        ((pl.col("fit_seconds") + pl.col("eval_seconds")).sum() / pl.len()).alias("seconds_per_trial"),
    )


def curve_figure(trials: pl.DataFrame, systems: list[str] | None = None, ylabel: str = "validation value"):
    """Small multiples at page width with shared axes, a panel per tuned system (config order):
    every fold's validation value by trial (dots) and best so far (line), folds in greys (the
    system colours are the systems')."""
    from recsys_eval.report import style

    plt = style.plt
    curves = validation_curves(trials)
    found = curves.get_column("system").unique(maintain_order=True).to_list()
    systems = [s for s in systems or [] if s in found] + [s for s in found if s not in (systems or [])]
    folds = curves.get_column("fold").unique(maintain_order=True).to_list()
    shades = style.other_colors(folds[::-1])  # the darkest grey for the first fold
    with plt.rc_context(style.RC):
        fig, axes = style.grid(len(systems), sharex=True, sharey=True, extra=0.4)
        for ax, system in zip(axes.flat, systems):
            for (fold,), rows in curves.filter(pl.col("system") == system).group_by("fold", maintain_order=True):
                ax.plot(rows["trial"], rows["best_so_far"], label=str(fold), color=shades[fold])
                ax.scatter(rows["trial"], rows["value"], s=6, color=shades[fold], alpha=0.7)
            ax.set_title(system)
        for ax in style.bottom_axes(axes, len(systems)):
            ax.set_xlabel("trial")
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel)
        style.legend_below(fig, axes.flat[0], ncols=len(folds), title="fold")
    return fig
