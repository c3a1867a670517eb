"""Which metrics a run's depth truncates: a run file lists each user's top items, not every
candidate, and a metric that reads deeper than the lists go measures the truncated ranking, not the
full one (docs/CONVENTIONS.md#auc). AUC reads every candidate's place (unlisted ones tie
below the listed), R-precision the top R, a cutoff metric the top k; each is flagged when some unit's
list stops short of what it reads and of its target set, so that a number is never taken for the
full ranking's without a word.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from recsys_eval.core.units import Rankings, Targets
from recsys_eval.measure.metrics import METRICS, Depth


def truncation_notes(rankings: Rankings, targets: Targets, names: Iterable[str], cutoffs: Iterable[int]) -> list[str]:
    """One line per metric (per cutoff) of ``names`` that some unit's list is too short for: the
    units affected and the run's depth. Lists whose scores were read over every candidate
    (``rankings.auc``) leave AUC exact and are not flagged for it."""
    listed = np.diff(rankings.offsets)
    sizes = targets.sizes
    depth = int(listed.max(initial=0))
    notes = []
    for name in names:
        spec = METRICS.get(name)
        if spec is None or spec.depth is None:
            continue
        if spec.depth is Depth.WHOLE and rankings.auc is None:
            short = listed < sizes
            reads = "every candidate's place (unlisted ones tie below the listed)"
        elif spec.depth is Depth.RELEVANT:
            short = listed < np.minimum(targets.n_relevant, sizes)
            reads = "the top R of each user's list (R: the user's relevant count)"
        else:
            for k in cutoffs if spec.cutoff and spec.depth is Depth.CUTOFF else ():
                if k <= depth:  # some list reaches k: only a list shorter than its target set is short
                    continue
                short = listed < np.minimum(k, sizes)
                if short.any():
                    notes.append(_note(spec.label(k), short, f"the top {k}", depth))
            continue
        if short.any():
            notes.append(_note(spec.label(), short, reads, depth))
    return notes


def _note(label: str, short: np.ndarray, reads: str, depth: int) -> str:
    return (f"{label} reads {reads}, but the run lists at most {depth:,} items per user and stops short for "
            f"{int(short.sum()):,} of {len(short):,} users: it is the value of the truncated lists, not of a "
            "full ranking (list every candidate for the exact value)")
