"""Multiple-comparison corrections of p-values within one family of tests.

Holm's step-down (the default; docs/CONVENTIONS.md#comparing-systems) controls the family-wise error rate like
Bonferroni but is uniformly more powerful; Benjamini-Hochberg controls the false discovery rate.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from recsys_eval.errors import DataError, check_choice

CORRECTIONS = ("holm", "bonferroni", "bh", "none")


def adjust_pvalues(pvalues: np.ndarray, method: str = "holm") -> np.ndarray:
    """Adjusted p-values of one family; NaN entries stay NaN and do not count in the family size m.

    - bonferroni: min(1, m p)
    - holm: sorted ascending p_(1..m), adjusted p_(i) = max over j <= i of min(1, (m - j + 1) p_(j))
    - bh: Benjamini-Hochberg, ``scipy.stats.false_discovery_control(p, method="bh")``
    - none: p unchanged
    """
    check_choice("correction", method, CORRECTIONS)
    pvalues = np.asarray(pvalues, dtype=np.float64)
    valid = ~np.isnan(pvalues)
    outside = valid & ((pvalues < 0) | (pvalues > 1))
    if outside.any():
        raise DataError(
            f"p-values must lie in [0, 1] (NaN for none); got {int(outside.sum())} outside, e.g. "
            f"{pvalues[outside][0]!r}"
        )
    adjusted = np.full(pvalues.shape, np.nan)
    p = pvalues[valid]
    m = p.size
    if m == 0:
        return adjusted
    if method == "none":
        adjusted[valid] = p
    elif method == "bonferroni":
        adjusted[valid] = np.minimum(1.0, m * p)
    elif method == "bh":
        adjusted[valid] = stats.false_discovery_control(p, method="bh")
    else:
        order = np.argsort(p, kind="stable")
        stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
        holm = np.empty(m)
        holm[order] = stepped
        adjusted[valid] = holm
    return adjusted
