"""The 1R fast path (rank_one_relevant + closed-form metrics) against today's materialised path
(rank_targets + the general ranking kernel), and the exact AUC of full rankings against fully
listed rankings and a brute-force count."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core import Interactions, Split
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure import measure
from recsys_eval.recommend import Recommender, make_recommender, rank_one_relevant, rank_targets, recommend_top_k
from recsys_eval.targets import build_targets

METRICS = ["precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "half_life", "auc"]
KS = [1, 2, 3, 5, 10, 40]


def random_split(seed: int, n_users: int = 30, n_items: int = 40) -> Split:
    """Random ratings 1..5, a random fifth of them in test; every user and item occurs."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n_users, n_items)) < 0.25
    mask[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    mask[rng.integers(0, n_users, n_items), np.arange(n_items)] = True
    users, items = np.nonzero(mask)
    frame = pl.DataFrame({"user": users, "item": items, "rating": rng.integers(1, 6, len(users)).astype(np.float64)})
    data = Interactions.from_frame(frame)
    test = rng.random(len(users)) < 0.25
    return Split(data.with_frame(data.frame.filter(~pl.Series(test))), data.with_frame(data.frame.filter(pl.Series(test))), "r")


class Table(Recommender):
    """Scores from a fixed users x items table (ties, -inf and NaN where put), by block and by pair."""

    def __init__(self, table: np.ndarray):
        self.table, self.n_items = table.astype(np.float32), table.shape[1]

    def fit(self, train):
        return self

    def score(self, users, items):
        return self.table[np.asarray(users), np.asarray(items)]

    def score_block(self, users):
        return self.table[np.asarray(users)]


class ItemOnly(Table):
    """The same scores for every user, announced through item_scores (the global-order path)."""

    def item_scores(self):
        return self.table[0]


def tied_table(rng: np.random.Generator, n_users: int, n_items: int, levels: int) -> np.ndarray:
    table = rng.integers(0, levels, (n_users, n_items)).astype(np.float32)
    table[rng.random((n_users, n_items)) < 0.15] = -np.inf
    return table


def per_unit(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort("metric", "k", "unit", nulls_last=True)


def assert_same(old: pl.DataFrame, new: pl.DataFrame) -> None:
    """Bit-identical values (NaN where NaN) for every unit, metric and k."""
    old, new = per_unit(old), per_unit(new)
    assert old.select("user", "unit", "metric", "k").equals(new.select("user", "unit", "metric", "k"))
    a, b = old.get_column("value").to_numpy(), new.get_column("value").to_numpy()
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    assert same.all(), (old.filter(~pl.Series(same)).head(5), new.filter(~pl.Series(same)).head(5))


def both_paths(model, split, protocol, *, fresh=False, seed=1, ties="first", gain="graded", neutral=0.0):
    listed = build_targets(split, protocol, threshold=3, seed=seed, fresh_negatives=fresh)
    compact = build_targets(split, protocol, threshold=3, seed=seed, fresh_negatives=fresh, one_relevant=True)
    options = dict(metrics=METRICS, k=KS, ties=ties, gain=gain, neutral=neutral)
    rankings = rank_targets(model, listed)
    old = measure(rankings, listed, **options)
    from_listed = measure(rank_one_relevant(model, split.train, listed), listed, **options)
    ranks = rank_one_relevant(model, split.train, compact)
    from_compact = measure(ranks, compact, **options)
    return old, from_listed, from_compact, rankings, listed, ranks


def sampled_rank_of(rankings, targets) -> np.ndarray:
    """The runner's recomputation: the relevant item's position in its unit's ranking, 0 if absent."""
    relevant = targets.items[targets.gain > 0]
    unit = np.repeat(np.arange(rankings.n_units), rankings.lengths)
    position = np.arange(len(rankings.items)) - rankings.offsets[unit] + 1
    hit = rankings.items == relevant[unit]
    rank = np.zeros(rankings.n_units, dtype=np.int64)
    rank[unit[hit]] = position[hit]
    return rank


PROTOCOLS = ["AI+1R+NN5", "AI+1R+NN100", "TI+1R+NN3", "UT+1R+NN2", "AI+1R+AN", "TI+1R+AN", "UT+1R+AN"]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), levels=st.sampled_from([2, 4, 1000]), protocol=st.sampled_from(PROTOCOLS),
       ties=st.sampled_from(["first", "average"]), fresh=st.booleans(), item_only=st.booleans(),
       gain=st.sampled_from(["graded", "binary", "exp"]))
def test_fast_path_equals_materialised_path_with_ties_and_minus_inf(seed, levels, protocol, ties, fresh, item_only, gain):
    split = random_split(seed)
    rng = np.random.default_rng(seed)
    table = tied_table(rng, split.n_users, split.n_items, levels)
    if item_only:
        table[:] = table[0]
    model = (ItemOnly if item_only else Table)(table)
    fresh = fresh and "NN" in protocol
    old, from_listed, from_compact, rankings, listed, ranks = both_paths(
        model, split, protocol, fresh=fresh, seed=seed, ties=ties, gain=gain, neutral=2.0)
    assert_same(old, from_listed)
    assert_same(old, from_compact)
    assert ranks.sampled_rank.tolist() == sampled_rank_of(rankings, listed).tolist()


@pytest.mark.parametrize("name,params", [
    ("popular", {}), ("random", {}), ("als", {"factors": 8, "iterations": 3}),
    ("item_knn", {"similarity": "cosine", "k": 10}), ("user_knn", {"k": 5}),
])
@pytest.mark.parametrize("protocol", ["AI+1R+NN10", "AI+1R+AN", "TI+1R+AN"])
def test_fast_path_equals_materialised_path_for_models(name, params, protocol):
    split = random_split(3, n_users=40, n_items=60)
    model = make_recommender(name, params, seed=5, threads=1).fit(split.train)
    for ties in ("first", "average"):
        old, from_listed, from_compact, rankings, listed, ranks = both_paths(model, split, protocol, ties=ties)
        assert_same(old, from_listed)
        assert_same(old, from_compact)  # 1R+AN scored by score blocks, as the listed targets are
    for fresh in (True,) if "NN" in protocol else ():
        old, from_listed, from_compact, *_ = both_paths(model, split, protocol, fresh=fresh)
        assert_same(old, from_compact)


def test_nan_scores_raise_on_every_path():
    split = random_split(4)
    table = tied_table(np.random.default_rng(4), split.n_users, split.n_items, 3)
    table[:, 7] = np.nan
    for protocol in ("AI+1R+NN100", "AI+1R+AN"):
        for compact in (False, True):
            targets = build_targets(split, protocol, threshold=3, one_relevant=compact)
            with pytest.raises(DataError, match="NaN"):
                rank_one_relevant(Table(table), split.train, targets)


def test_beyond_accuracy_metrics_need_rankings():
    split = random_split(5)
    targets = build_targets(split, "AI+1R+NN5", threshold=3, one_relevant=True)
    ranks = rank_one_relevant(Table(np.ones((split.n_users, split.n_items))), split.train, targets)
    with pytest.raises(ConfigError, match="novelty"):
        measure(ranks, targets, metrics=["ndcg", "novelty"], k=5)
    with pytest.raises(ConfigError, match="rank_one_relevant"):
        rank_targets(Table(np.ones((split.n_users, split.n_items))), targets)


def brute_auc(table: np.ndarray, split: Split, targets, candidates=None) -> np.ndarray:
    seen = split.train.csr().toarray() > 0
    out = []
    for i in range(targets.n_units):
        u = targets.unit_user[i]
        rel = targets.items[targets.offsets[i]:targets.offsets[i + 1]]
        allowed = ~seen[u] if candidates is None else ~seen[u] & candidates
        allowed[rel] = False
        non = table[u, allowed]
        if len(rel) == 0 or len(non) == 0:
            out.append(np.nan)
            continue
        s = table[u, rel][:, None]
        out.append(((s > non).sum() + 0.5 * (s == non).sum()) / (len(rel) * len(non)))
    return np.array(out)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), levels=st.sampled_from([2, 5, 1000]), protocol=st.sampled_from(["AI+AR+AN", "TI+AR+AN"]),
       depth=st.integers(1, 12), item_only=st.booleans(), chunk=st.sampled_from([1, 7, 2048]))
def test_exact_auc_does_not_depend_on_the_depth(seed, levels, protocol, depth, item_only, chunk):
    split = random_split(seed)
    table = tied_table(np.random.default_rng(seed), split.n_users, split.n_items, levels)
    if item_only:
        table[:] = table[0]
    model = (ItemOnly if item_only else Table)(table)
    targets = build_targets(split, protocol, threshold=3)
    cut = recommend_top_k(model, split.train, targets.unit_user, depth, candidates=targets.candidates,
                          targets=targets, chunk_size=chunk)
    full = recommend_top_k(model, split.train, targets.unit_user, split.n_items, candidates=targets.candidates,
                           targets=targets)
    np.testing.assert_array_equal(cut.auc, full.auc)
    np.testing.assert_allclose(cut.auc, brute_auc(table, split, targets, targets.candidates), rtol=1e-12)
    plain = recommend_top_k(model, split.train, targets.unit_user, split.n_items, candidates=targets.candidates)
    assert plain.auc is None
    # every candidate listed: the kernel's tie rule has nothing left out, and agrees bit for bit
    listed = measure(plain, targets, metrics=["auc", "ndcg"], k=[1, 5])
    exact = measure(cut, targets, metrics=["auc"], k=1)
    assert_same(listed.filter(pl.col("metric") == "auc"), exact)
    np.testing.assert_array_equal(cut.items, recommend_top_k(model, split.train, targets.unit_user, depth,
                                                             candidates=targets.candidates).items)


@pytest.mark.parametrize("name,params", [("popular", {}), ("als", {"factors": 8, "iterations": 3}),
                                         ("item_knn", {"similarity": "cosine", "k": 10}), ("random", {})])
def test_exact_auc_of_models_at_depth_10_and_all_items(name, params):
    split = random_split(8, n_users=50, n_items=70)
    model = make_recommender(name, params, seed=2, threads=1).fit(split.train)
    targets = build_targets(split, "AI+AR+AN", threshold=3)
    depth10 = recommend_top_k(model, split.train, targets.unit_user, 10, targets=targets)
    every = recommend_top_k(model, split.train, targets.unit_user, split.n_items, targets=targets)
    np.testing.assert_array_equal(depth10.auc, every.auc)
    listed = measure(recommend_top_k(model, split.train, targets.unit_user, split.n_items), targets, metrics="auc", k=1)
    assert_same(listed, measure(depth10, targets, metrics="auc", k=1))
    truncated = measure(recommend_top_k(model, split.train, targets.unit_user, 10), targets, metrics="auc", k=1)
    assert not np.allclose(truncated.get_column("value").to_numpy(), listed.get_column("value").to_numpy())


def test_hand_worked_closed_forms():
    from recsys_eval.core.units import RelevantRanks
    from recsys_eval.core import Targets

    # unit 0: rank 3 of 6; unit 1: two ties, one of smaller index; unit 2: not ranked; unit 3: no negative
    ranks = RelevantRanks(np.array([0, 0, 1, 2], np.int32), np.array([2, 1, 3, 0]), np.array([0, 2, 2, 0]),
                          np.array([0, 1, 0, 0]), np.array([5, 4, 5, 0]), np.array([4.0, 1.0, 5.0, 2.0], np.float32),
                          np.array([True, True, False, True]))
    targets = Targets(ranks.unit_user, np.arange(5, dtype=np.int64), np.array([1, 2, 3, 4], np.int32),
                      ranks.gain, 10, "AI+1R+NN5", one_relevant=True, unit_group=np.arange(4),
                      negative_offsets=np.array([0, 5, 9, 14, 14]), negatives=np.zeros(14, np.int32))
    assert ranks.sampled_rank.tolist() == [3, 3, 0, 1]

    def values(ties):
        frame = measure(ranks, targets, metrics=["precision", "rr", "ndcg", "hit", "auc"], k=[2, 3, 10], ties=ties)
        return {(m, k, u): v for m, k, u, v in frame.select("metric", "k", "unit", "value").iter_rows()}

    first, average = values("first"), values("average")
    assert first["precision", 2, 0] == 0 and first["precision", 3, 0] == pytest.approx(1 / 3)
    assert first["rr", 10, 0] == pytest.approx(1 / 3) and first["ndcg", 10, 0] == pytest.approx(0.5)
    assert first["auc", None, 0] == pytest.approx(0.6) and first["auc", None, 1] == pytest.approx(0.5)
    assert average["rr", 10, 1] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert average["ndcg", 10, 1] == pytest.approx((1 / np.log2(3) + 1 / np.log2(4) + 1 / np.log2(5)) / 3)
    assert average["hit", 2, 1] == pytest.approx(1 / 3) and average["precision", 3, 1] == pytest.approx(2 / 9)
    for ties in (first, average):
        assert ties["hit", 10, 2] == 0 and ties["ndcg", 10, 2] == 0 and ties["auc", None, 2] == pytest.approx(0.2)
        assert ties["rr", 2, 3] == 1 and np.isnan(ties["auc", None, 3])


def test_one_relevant_targets_are_not_saved_as_lists(tmp_path):
    from recsys_eval.targets import save_targets

    targets = build_targets(random_split(6), "AI+1R+AN", threshold=3, one_relevant=True)
    with pytest.raises(ConfigError, match="one-relevant"):
        save_targets(targets, tmp_path / "t.parquet")


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), levels=st.sampled_from([2, 4, 1000]), protocol=st.sampled_from(PROTOCOLS),
       ties=st.sampled_from(["first", "average"]), p=st.sampled_from([0.5, 0.8]))
def test_closed_forms_of_metrics_with_their_own_kernel_equal_the_ranked_lists(seed, levels, protocol, ties, p):
    """R-precision and RBP of 1R units from their specs' closed forms equal their kernels' values on
    the ranked lists (rounding apart: the closed form is not the kernel's sum)."""
    split = random_split(seed)
    model = Table(tied_table(np.random.default_rng(seed), split.n_users, split.n_items, levels))
    listed = build_targets(split, protocol, threshold=3, seed=seed)
    compact = build_targets(split, protocol, threshold=3, seed=seed, one_relevant=True)
    options = dict(metrics=["rprecision", "rbp"], k=KS, ties=ties, rbp_persistence=p)
    lists = per_unit(measure(rank_targets(model, listed), listed, **options))
    closed = per_unit(measure(rank_one_relevant(model, split.train, compact), compact, **options))
    assert lists.select("user", "unit", "metric", "k").equals(closed.select("user", "unit", "metric", "k"))
    np.testing.assert_allclose(closed.get_column("value").to_numpy(), lists.get_column("value").to_numpy(),
                               rtol=1e-12, atol=1e-15)
