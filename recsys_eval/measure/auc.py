"""Per-user vs pooled AUC across folds (Forman & Scholz 2010; docs/CONVENTIONS.md#pooled-auc).

``auc`` (the default everywhere, the summary's value): per-unit AUC, per-user means, the mean over
users within each fold, then the mean of the fold means. Forman & Scholz's two pooled variants pool
the scored (relevant, non-relevant) pairs of units into one Mann-Whitney count, as if all scores
were on one calibrated scale: ``auc_avg`` within each fold, then the mean of the fold values;
``auc_merge`` over every unit of every fold at once. They are offered only to show the difference,
never as the default. Target items a truncated ranking left out tie below every ranked score (one
pooled last group, kept as score -inf). The names match :mod:`recsys_eval.compare.audit`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from recsys_eval.core.scored import label_rows, sampled_positions
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import ConfigError
from recsys_eval.measure.aggregate import summarize
from recsys_eval.measure.api import measure, target_roles

def auc_variants(folds: Sequence[tuple[Rankings, Targets]], *, undefined: str = "skip") -> pl.DataFrame:
    """``variant`` and ``value`` over the given (rankings, targets) folds: ``auc`` (per-user AUC,
    user -> fold -> mean, as in the summary), ``auc_avg`` (the mean over folds of each fold's pooled
    AUC) and ``auc_merge`` (every fold's pairs pooled at once); folds where a value is undefined are
    left out of its mean."""
    if not folds:
        raise ConfigError("auc_variants: no fold given")
    user_means, fold_pooled = [], []
    for i, (rankings, targets) in enumerate(folds):
        summary = summarize(measure(rankings, targets, metrics=["auc"], k=1, fold=str(i)),
                            undefined=undefined)
        user_means.append(summary.filter(pl.col("metric") == "auc").get_column("mean")[0])
        fold_pooled.append(pooled_auc([(rankings, targets)]))
    return pl.DataFrame(
        {"variant": ["auc", "auc_avg", "auc_merge"],
         "value": [_defined_mean(user_means), _defined_mean(fold_pooled), pooled_auc(folds)]}
    )


def _defined_mean(values: list[float | None]) -> float:
    """The mean of the defined values (NaN when none is)."""
    array = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    return float(np.nanmean(array)) if np.isfinite(array).any() else float("nan")


def pooled_auc(folds: Sequence[tuple[Rankings, Targets]]) -> float:
    """AUC_merge: one Mann-Whitney count over the scored pairs of every unit of every fold."""
    frame = pl.concat([scored_targets(rankings, targets) for rankings, targets in folds])
    return weighted_auc(frame)


def scored_targets(
    rankings: Rankings, targets: Targets, *, sample: int | None = None, seed: int = 0
) -> pl.DataFrame:
    """The scored targets of one fold as rows ``score, label (1/0), weight``: every ranked target
    with weight 1, and per label one row at score -inf weighing the targets the ranking left out.

    With ``sample``, a label with more ranked targets than that is represented by a seeded uniform
    sample of ``sample`` of them, each weighing (ranked count) / sample: an unbiased estimate of the
    pooled count at bounded memory.
    """
    if rankings.scores is None:
        raise ConfigError("pooled AUC compares scores across units: the rankings need scores")
    role, n_rel, n_non, _ = target_roles(rankings, targets)
    rng = np.random.default_rng(seed)
    parts = []
    for label, total in ((1, int(n_rel.sum())), (0, int(n_non.sum()))):
        scores = rankings.scores[role == label]
        kept, weight = sampled_positions(len(scores), sample, rng)
        parts += label_rows(label, scores[kept], weight, total - len(scores))
    return pl.concat(parts)


def weighted_auc(scored: pl.DataFrame) -> float:
    """Mann-Whitney AUC of rows ``score, label[, weight]``: the weighted share of (relevant,
    non-relevant) pairs the relevant one wins, ties counting one half; NaN without both labels."""
    weight = scored.get_column("weight").to_numpy() if "weight" in scored.columns else np.ones(scored.height)
    score = scored.get_column("score").to_numpy().astype(np.float64)
    positive = scored.get_column("label").to_numpy() == 1
    rel, rel_w = score[positive], weight[positive]
    order = np.argsort(score[~positive], kind="stable")
    non, non_w = score[~positive][order], weight[~positive][order]
    total_rel, total_non = rel_w.sum(), non_w.sum()
    if total_rel == 0 or total_non == 0:
        return float("nan")
    below_w = np.concatenate([[0.0], np.cumsum(non_w)])
    below = below_w[np.searchsorted(non, rel, side="left")]
    tied = below_w[np.searchsorted(non, rel, side="right")] - below
    return float((rel_w * (below + 0.5 * tied)).sum() / (total_rel * total_non))
