"""Scored targets, the rows pooled AUC is computed from: ``score, label (1 relevant, 0 not),
weight``, a label's targets that no ranking listed kept as one row at score -inf weighing them all
(docs/CONVENTIONS.md#pooled-auc). Rankings of every kind (recsys_eval.measure.auc for lists,
recsys_eval.recommend.one_relevant for 1R units) sample them the same way, with these two."""

from __future__ import annotations

import numpy as np
import polars as pl

SCORED_SCHEMA = {"score": pl.Float64, "label": pl.Int8, "weight": pl.Float64}


def sampled_positions(n: int, sample: int | None, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Which of a label's ``n`` ranked targets (in ranking order) a sample keeps, and
    the weight of each: all of them at weight 1, or, when ``n > sample``, a seeded uniform sample
    of ``sample`` positions (ascending) weighing n / sample each."""
    if sample is not None and n > sample:
        return np.sort(rng.choice(n, sample, replace=False)), n / sample
    return np.arange(n), 1.0


def label_rows(label: int, scores: np.ndarray, weight: float, left: int) -> list[pl.DataFrame]:
    """The scored rows of one label: its kept scores, and one row at -inf weighing the ``left``
    targets no ranking listed."""
    parts = [pl.DataFrame({"score": np.asarray(scores, dtype=np.float64), "label": label, "weight": weight},
                          schema=SCORED_SCHEMA)]
    if left:
        parts.append(pl.DataFrame({"score": [-np.inf], "label": [label], "weight": [float(left)]},
                                  schema=SCORED_SCHEMA))
    return parts
