"""Core types shared by every stage: Interactions, Split, Targets, Rankings."""

from recsys_eval.core.interactions import DUPLICATE_POLICIES, Interactions
from recsys_eval.core.split import Split
from recsys_eval.core.units import Rankings, Targets

__all__ = ["DUPLICATE_POLICIES", "Interactions", "Rankings", "Split", "Targets"]
