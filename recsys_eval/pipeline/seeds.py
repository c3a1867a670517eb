"""Every seed of a run, in one place: each derives from the run's seed and the *definition* of what
it randomises (a protocol's name and options, a recommender's name and hyperparameters), never from
a label, so that relabelling changes no sample (recsys_eval.core.rng; docs/CONVENTIONS.md#seeds-and-reproducibility)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recsys_eval.core.rng import derive_seed


@dataclass(frozen=True)
class Seeds:
    """The seeds derived from one run seed."""

    run: int

    def split(self) -> int:
        return derive_seed(self.run, "split")

    def targets(self, fold: str, protocol_definition: dict[str, Any]) -> int:
        """A protocol's samples (NN negatives, uniform-test moves) on one fold."""
        return derive_seed(self.run, "targets", fold, protocol_definition)

    def recommender(self, fold: str, recommender_definition: dict[str, Any]) -> int:
        return derive_seed(self.run, "recommender", fold, recommender_definition)

    def intervals(self, fold: str, label_definition: dict[str, Any] | str) -> int:
        """The bootstrap of a (fold, result label): every system of that label and fold shares its
        resamples, and a relabelled protocol keeps them."""
        return derive_seed(self.run, "intervals", fold, label_definition)

    def auc_pool(self, fold: str, recommender_definition: dict[str, Any], target_definition: dict[str, Any],
                 first_user: int) -> int:
        """The sample of scored targets one chunk (from ``first_user``) keeps for the pooled AUC."""
        return derive_seed(self.run, "auc-pool", fold, recommender_definition, target_definition, first_user)

    def learning_curve(self) -> int:
        return derive_seed(self.run, "learning_curve")
