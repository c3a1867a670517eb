"""A slow, obvious reference of the target-item protocols, with Python sets, for the tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from recsys_eval.core import Interactions, Split, Targets


def make_split(train: list[tuple], test: list[tuple], *, name: str = "hand") -> Split:
    """A Split from rows ``(user, item, rating)`` or ``(user, item)`` (no rating column).

    Raw ids are indexed as sorted unique values, so ids 0..n-1 that all occur keep their numbers.
    """
    rows = [(*r, 0) for r in train] + [(*r, 1) for r in test]
    columns = ["user", "item", "rating", "side"] if len(rows[0]) == 4 else ["user", "item", "side"]
    frame = pl.DataFrame(rows, schema=columns, orient="row")
    if "rating" in columns:
        frame = frame.with_columns(pl.col("rating").cast(pl.Float64))
    data = Interactions.from_frame(frame.drop("side"))
    side = frame.get_column("side") == 1
    return Split(data.with_frame(data.frame.filter(~side)), data.with_frame(data.frame.filter(side)), name)


@dataclass
class Truth:
    """Per user, by sets: Tr(u), Te(u) with ratings, Rel(u), the test items TI and the item count."""

    train: dict[int, set[int]]
    test: dict[int, dict[int, float]]
    relevant: dict[int, set[int]]
    test_items: set[int]
    n_items: int
    train_counts: np.ndarray

    def candidates(self, user: int, axis: str, pool: set[int] | None = None) -> set[int]:
        if axis == "AI":
            base = set(range(self.n_items))
        elif axis == "TI":
            base = set(self.test_items)
        else:
            base = set(self.test[user])
        if pool is not None:
            base &= pool
        return base - self.train[user]

    def gain(self, user: int, item: int) -> float:
        return self.test[user][item]


def truth(split: Split, threshold: float | None, pool: set[int] | None = None) -> Truth:
    """The sets of DESIGN.md section 4, computed row by row; ``pool`` restricts test items."""
    train: dict[int, set[int]] = {u: set() for u in range(split.n_users)}
    for u, i in zip(split.train.users.tolist(), split.train.items.tolist()):
        train[u].add(i)
    test: dict[int, dict[int, float]] = {u: {} for u in range(split.n_users)}
    ratings = split.test.ratings
    for row, (u, i) in enumerate(zip(split.test.users.tolist(), split.test.items.tolist())):
        if pool is None or i in pool:
            test[u][i] = 1.0 if ratings is None else float(ratings[row])
    relevant = {
        u: {i for i, r in items.items() if threshold is None or ratings is None or r >= threshold}
        for u, items in test.items()
    }
    return Truth(
        train, test, relevant, set(split.test.items.tolist()), split.n_items, split.train.item_counts()
    )


def unit_slices(targets: Targets):
    for k in range(targets.n_units):
        lo, hi = targets.offsets[k], targets.offsets[k + 1]
        yield k, int(targets.unit_user[k]), targets.items[lo:hi].tolist(), targets.gain[lo:hi].tolist()


def check_targets(
    targets: Targets,
    split: Split,
    protocol,
    threshold: float | None,
    *,
    fresh: bool = False,
    weighted: bool = False,
    pool: set[int] | None = None,
) -> None:
    """Assert every set property of ``targets`` against the reference sets."""
    t = truth(split, threshold, pool)
    users = [u for u in range(split.n_users) if t.test[u]]
    if protocol.relevant == "AR":
        expected_units = [(u, None) for u in users]
    else:
        expected_units = [(u, i) for u in users for i in sorted(t.relevant[u])]
    assert targets.unit_user.tolist() == [u for u, _ in expected_units]
    assert targets.protocol == protocol.name
    if protocol.full_ranking:
        assert targets.all_candidates
        if protocol.candidates == "AI" and pool is None:
            assert targets.candidates is None
        else:
            expected_mask = np.zeros(split.n_items, dtype=bool)
            expected_mask[sorted(_pool_of(t, protocol, pool))] = True
            assert np.array_equal(targets.candidates, expected_mask)
        for k, u, items, gains in unit_slices(targets):
            assert items == sorted(t.relevant[u])
            assert gains == [t.gain(u, i) for i in items]
            assert targets.n_candidates[k] == len(t.candidates(u, protocol.candidates, pool))
        return
    assert not targets.all_candidates
    shared: dict[int, list[int]] = {}
    for k, u, items, gains in unit_slices(targets):
        assert items == sorted(set(items)), "items sorted and distinct within a unit"
        relevant_part = {i for i, g in zip(items, gains) if g > 0}
        others = [i for i, g in zip(items, gains) if g == 0]
        assert all(g == 0 or g == t.gain(u, i) for i, g in zip(items, gains))
        if protocol.relevant == "AR":
            assert relevant_part == t.relevant[u]
        else:
            assert relevant_part == {expected_units[k][1]}
        cand = t.candidates(u, protocol.candidates, pool)
        available = cand - t.relevant[u]
        if weighted:
            available = {i for i in available if t.train_counts[i] > 0}
        assert set(others) <= available
        assert not set(items) & t.train[u], "a user's training items are never its targets"
        if protocol.nonrelevant == "AN":
            assert set(others) == cand - t.relevant[u]
        else:
            assert len(others) == min(protocol.n, len(available))
        if protocol.relevant == "1R" and not fresh:
            assert shared.setdefault(u, others) == others, "1R units of a user share N(u)"


def _pool_of(t: Truth, protocol, pool: set[int] | None) -> set[int]:
    base = set(range(t.n_items)) if protocol.candidates == "AI" else set(t.test_items)
    return base if pool is None else base & pool
