"""Core types shared by every stage: Interactions, Split, Targets, Rankings."""

from recsys_eval._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "recsys_eval.core.interactions": ["DUPLICATE_POLICIES", "Interactions"],
    "recsys_eval.core.split": ["Split"],
    "recsys_eval.core.units": ["Rankings", "Targets"],
})
