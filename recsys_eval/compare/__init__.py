"""Compare stage: intervals, paired tests, protocol agreement, sampled-metric correction, audits.

Everything starts from the per-unit results table (``recsys_eval.core.results``): :func:`per_user`
averages a user's units, and every other function works on that per-user frame or on summaries.
"""

from recsys_eval._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "recsys_eval.compare.agreement": [
        "ordering_agreement", "pair_agreement", "protocol_agreement", "swapped_pairs"
    ],
    "recsys_eval.compare.audit": [
        "AggregationAudit", "aggregation_audit", "auc_aggregation", "f_measure_variants", "ordering_changes"
    ],
    "recsys_eval.compare.corrections": ["CORRECTIONS", "adjust_pvalues"],
    "recsys_eval.compare.datasets": ["friedman_test", "holm_posthoc", "nemenyi_test", "rank_systems"],
    "recsys_eval.compare.distributions": [
        "distribution_curves", "distribution_summary", "lorenz"
    ],
    "recsys_eval.compare.slices": ["popularity_parts", "slice_means", "slice_tests", "unit_slices"],
    "recsys_eval.compare.intervals": ["confidence_intervals", "fold_confidence_intervals"],
    # a user's units averaged (its home is the measure stage's aggregation), where comparing starts
    "recsys_eval.measure.aggregate": ["per_user"],
    "recsys_eval.compare.paired": ["TESTS", "fold_paired_tests", "paired_tests", "system_pairs"],
    "recsys_eval.compare.sampled": [
        "corrected_values", "rank_distribution", "rank_metric", "sampled_correction"
    ],
    # the leakage audit lives with the splits it reads; exported here beside the other diagnostics
    "recsys_eval.split.leakage": ["LeakageAudit", "leakage_audit"],
    "recsys_eval.split.slices": ["user_slices"],
})
