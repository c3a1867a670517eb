"""Averaged vs pooled AUC across folds (Forman & Scholz 2010; DESIGN.md section 6).

``AUC_avg`` (the default everywhere): per-unit AUC, per-user means, the mean over users within each
fold, then the mean of the fold means. ``AUC_merge`` pools the scored (relevant, non-relevant) pairs
of every unit of every fold into one Mann-Whitney count, as if all scores were on one calibrated
scale; it is offered only to show the difference, never as the default. Target items a truncated
ranking left out tie below every ranked score (one pooled last group).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import ConfigError
from recsys_eval.measure.aggregate import summarize
from recsys_eval.measure.api import measure, target_roles


def auc_variants(folds: Sequence[tuple[Rankings, Targets]], *, undefined: str = "skip") -> pl.DataFrame:
    """``variant`` (``auc_avg``, ``auc_merge``) and ``value`` over the given (rankings, targets) folds."""
    if not folds:
        raise ConfigError("auc_variants: no fold given")
    fold_means = []
    for i, (rankings, targets) in enumerate(folds):
        summary = summarize(measure(rankings, targets, metrics=["auc"], k=1, fold=str(i)),
                            undefined=undefined)
        fold_means.append(summary.filter(pl.col("metric") == "auc").get_column("mean")[0])
    return pl.DataFrame(
        {"variant": ["auc_avg", "auc_merge"],
         "value": [float(np.nanmean(np.array(fold_means, dtype=np.float64))), pooled_auc(folds)]}
    )


def pooled_auc(folds: Sequence[tuple[Rankings, Targets]]) -> float:
    """AUC_merge: one Mann-Whitney count over the scored pairs of every unit of every fold."""
    rel_scores, non_scores = [], []
    rel_left = non_left = 0
    for rankings, targets in folds:
        if rankings.scores is None:
            raise ConfigError("pooled AUC compares scores across units: the rankings need scores")
        role, n_rel, n_non, _ = target_roles(rankings, targets)
        rel_scores.append(rankings.scores[role == 1])
        non_scores.append(rankings.scores[role == 0])
        rel_left += int(n_rel.sum()) - len(rel_scores[-1])
        non_left += int(n_non.sum()) - len(non_scores[-1])
    rel = np.concatenate(rel_scores).astype(np.float64)
    non = np.sort(np.concatenate(non_scores).astype(np.float64))
    n_rel, n_non = len(rel) + rel_left, len(non) + non_left
    if n_rel == 0 or n_non == 0:
        return float("nan")
    below = np.searchsorted(non, rel, side="left")
    tied = np.searchsorted(non, rel, side="right") - below
    correct = (below + 0.5 * tied).sum() + len(rel) * non_left + 0.5 * rel_left * non_left
    return float(correct / (n_rel * n_non))
