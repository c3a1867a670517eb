"""Measure: per-unit metric values and their summaries (docs/CONVENTIONS.md#metrics, #averaging).

``measure`` turns Rankings and Targets into the long per-unit table; ``summarize`` applies the
averaging rules; ``rating_metrics`` and ``beyond_accuracy`` cover rating prediction and
beyond-accuracy metrics; ``f_measure_variants`` and ``auc_variants`` show the cross-validation
variants of Forman & Scholz side by side; the curve functions give ROC/PR points for plots.
"""

from recsys_eval.measure.aggregate import f_counts, f_measure_variants, summarize
from recsys_eval.measure.api import measure
from recsys_eval.measure.auc import auc_variants, pooled_auc
from recsys_eval.measure.beyond import beyond_accuracy, genre_matrix
from recsys_eval.measure.curves import average_pr, average_roc, pr_points, roc_points
from recsys_eval.measure.metrics import ALL_METRICS, METRICS, MetricSpec
from recsys_eval.measure.ranking import rank_targets
from recsys_eval.measure.rating import rating_metrics

__all__ = [
    "ALL_METRICS",
    "METRICS",
    "MetricSpec",
    "auc_variants",
    "average_pr",
    "average_roc",
    "beyond_accuracy",
    "f_counts",
    "f_measure_variants",
    "genre_matrix",
    "measure",
    "pooled_auc",
    "pr_points",
    "rank_targets",
    "rating_metrics",
    "roc_points",
    "summarize",
]
