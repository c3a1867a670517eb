"""Measure: per-unit metric values and their summaries (DESIGN.md sections 5 and 6)."""

from recsys_eval.measure.api import measure
from recsys_eval.measure.ranking import rank_targets

__all__ = ["measure", "rank_targets"]
