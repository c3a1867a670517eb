"""Compare stage: intervals, paired tests, protocol agreement, sampled-metric correction, audits.

Everything starts from the per-unit results table (``recsys_eval.core.results``): :func:`per_user`
averages a user's units, and every other function works on that per-user frame or on summaries.
"""

from recsys_eval.compare.agreement import (
    ordering_agreement,
    pair_agreement,
    protocol_agreement,
    swapped_pairs,
)
from recsys_eval.compare.audit import (
    AggregationAudit,
    aggregation_audit,
    auc_aggregation,
    f_measure_variants,
    ordering_changes,
)
from recsys_eval.compare.corrections import CORRECTIONS, adjust_pvalues
from recsys_eval.compare.datasets import (
    friedman_test,
    holm_posthoc,
    nemenyi_test,
    rank_systems,
)
from recsys_eval.compare.intervals import (
    confidence_intervals,
    fold_confidence_intervals,
    per_user,
)
from recsys_eval.compare.paired import (
    TESTS,
    fold_paired_tests,
    paired_tests,
    system_pairs,
)
from recsys_eval.compare.sampled import (
    corrected_values,
    rank_distribution,
    rank_metric,
    sampled_correction,
)

__all__ = [
    "CORRECTIONS",
    "TESTS",
    "AggregationAudit",
    "adjust_pvalues",
    "aggregation_audit",
    "auc_aggregation",
    "confidence_intervals",
    "corrected_values",
    "f_measure_variants",
    "fold_confidence_intervals",
    "fold_paired_tests",
    "friedman_test",
    "holm_posthoc",
    "nemenyi_test",
    "ordering_agreement",
    "ordering_changes",
    "pair_agreement",
    "paired_tests",
    "per_user",
    "protocol_agreement",
    "rank_distribution",
    "rank_metric",
    "rank_systems",
    "sampled_correction",
    "swapped_pairs",
    "system_pairs",
]
