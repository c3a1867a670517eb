"""Measure: per-unit metric values and their summaries (docs/CONVENTIONS.md, metrics and averaging).

``measure`` turns Rankings and Targets into the long per-unit table; ``summarize`` applies the
averaging rules; ``rating_metrics`` and ``beyond_accuracy`` cover rating prediction and
beyond-accuracy metrics; ``f_measure_variants`` and ``auc_variants`` show the cross-validation
variants of Forman & Scholz side by side; the curve functions give ROC/PR points for plots.
"""

from recsys_eval._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "recsys_eval.measure.aggregate": ["f_counts", "f_measure_variants", "summarize"],
    "recsys_eval.measure.api": ["measure"],
    "recsys_eval.measure.auc": ["auc_variants", "pooled_auc"],
    "recsys_eval.measure.beyond": ["beyond_accuracy", "genre_matrix"],
    "recsys_eval.measure.curves": ["average_pr", "average_roc", "pr_points", "roc_points"],
    "recsys_eval.measure.metrics": ["ALL_METRICS", "METRICS", "MetricSpec"],
    "recsys_eval.measure.rating": ["rating_metrics"],
})
