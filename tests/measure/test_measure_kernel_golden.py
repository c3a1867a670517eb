"""The ranking kernel's matrix, bit for bit, against the values main's kernel gave (commit 58530cc,
before its arguments were grouped into typed structs and its column offsets came from the metric
registry) on seeded random batches: ties, graded gains, empty lists, units without relevant items,
items outside the target set, full ranking, every option.

``data/kernel_main.npz`` holds those values. Regenerate it (``python tests/measure/
test_measure_kernel_golden.py``) only when a metric's definition changes on purpose, and say so in
the commit: a refactoring must leave every value identical.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from measure_build import rankings_of, targets_of

from recsys_eval.measure.api import ranking_values

GOLDEN = Path(__file__).parent / "data" / "kernel_main.npz"
N_ITEMS = 40
N_UNITS = 50
CUTS = [1, 3, 5, 10, 20]
#: One case per combination of full ranking, ties and scores; the other options cycle with it.
CASES = [
    {"full": full, "ties": ties, "with_scores": scored, "gain": gain, "ap_denominator": ap,
     "half_life": half_life, "neutral": neutral}
    for (full, ties, scored), gain, ap, half_life, neutral in zip(
        itertools.product([False, True], ["first", "average"], [True, False]),
        itertools.cycle(["graded", "binary", "exp"]), itertools.cycle(["relevant", "min_rk", "relevant"]),
        itertools.cycle([5.0, 2.0]), itertools.cycle([0.0, 0.0, 1.5]),
    )
]


def batch(case: dict, seed: int):
    """Random units for one case: listed targets with gains, a ranking with tied scores."""
    rng = np.random.default_rng(seed)
    units, lists, scores, sizes = [], [], [], []
    for _ in range(N_UNITS):
        listed = rng.choice(N_ITEMS, size=rng.integers(0, 16), replace=False)
        gains = rng.choice([0.0, 0.0, 1.0, 2.0, 3.5, 5.0], size=len(listed))
        pool = np.arange(N_ITEMS) if case["full"] or rng.random() < 0.5 else listed
        ranked = rng.choice(pool, size=rng.integers(0, min(len(pool), 21) + 1), replace=False)
        drawn = rng.integers(0, 4, size=len(ranked)).astype(np.float64)
        order = np.argsort(-drawn, kind="stable")
        units.append(dict(zip(listed.tolist(), gains.tolist())))
        lists.append(ranked[order].tolist())
        scores.append(drawn[order].tolist())
        sizes.append(len(set(listed.tolist()) | set(ranked.tolist())) + int(rng.integers(0, 6)))
    rankings = rankings_of(lists, scores if case["with_scores"] else None)
    targets = targets_of(units, N_ITEMS, n_candidates=sizes if case["full"] else None)
    return rankings, targets


def kernel_values(case: dict, seed: int) -> np.ndarray:
    rankings, targets = batch(case, seed)
    options = {key: case[key] for key in ("ties", "gain", "ap_denominator", "half_life", "neutral")}
    return ranking_values(rankings, targets, CUTS, **options)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_kernel_values_identical_to_main(index):
    expected = np.load(GOLDEN)[f"case{index}"]
    got = kernel_values(CASES[index], seed=index)
    assert got.shape == expected.shape
    differ = ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
    assert not differ.any(), f"{int(differ.sum())} values differ, first at {np.argwhere(differ)[0]}"


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    np.savez_compressed(GOLDEN, **{f"case{i}": kernel_values(c, seed=i) for i, c in enumerate(CASES)})
