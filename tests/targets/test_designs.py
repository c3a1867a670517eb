import numpy as np
import polars as pl
import pytest

from recsys_eval.errors import ConfigError, DataError
from recsys_eval.targets import Protocol, popularity_bins, uniform_test

from .reference import check_targets, make_split, unit_slices
from .test_summary import random_split


def pairs(interactions):
    frame = interactions.frame
    return set(zip(frame["user"].to_list(), frame["item"].to_list(),
                   frame["rating"].to_list() if "rating" in frame.columns else [None] * len(frame)))


@pytest.mark.parametrize("threshold", [None, 4])
@pytest.mark.parametrize("n_per_item", [1, 3, 6])
def test_uniform_test_gives_every_item_the_same_relevant_count(threshold, n_per_item):
    split = random_split(3, n_users=400, n_items=120)
    moved, report = uniform_test(split, n_per_item, threshold=threshold, seed=5)
    ratings = moved.test.ratings
    relevant = np.ones(len(ratings), bool) if threshold is None else ratings >= threshold
    per_item = np.bincount(moved.test.items[relevant], minlength=split.n_items)
    kept = np.unique(moved.test.items)
    assert set(np.unique(per_item[kept])) == {n_per_item}
    assert report["items_in_test"] == len(kept)
    # nothing lost or invented: the two sides together are the original interactions
    assert pairs(moved.train) | pairs(moved.test) == pairs(split.train) | pairs(split.test)
    assert not {(u, i) for u, i, _ in pairs(moved.train)} & {(u, i) for u, i, _ in pairs(moved.test)}
    assert pairs(split.train) <= pairs(moved.train) and pairs(moved.test) <= pairs(split.test)
    assert len(moved.train) - len(split.train) == (
        report["relevant_moved_to_train"] + report["left_out_moved_to_train"]
    )
    assert report["test_rows_after"] == len(moved.test)
    # items left out had fewer relevant test ratings; kept items keep their non-relevant ratings
    before = np.bincount(split.test.items[np.ones(len(split.test), bool) if threshold is None
                                          else split.test.ratings >= threshold], minlength=split.n_items)
    assert np.array_equal(np.flatnonzero(before >= n_per_item), kept)
    assert report["items_left_out"] == int(((before > 0) & (before < n_per_item)).sum())
    if threshold is not None:
        low = split.test.frame.filter(pl.col("rating") < threshold)
        low_kept = low.filter(pl.col("item").is_in(kept.tolist()))
        assert pairs(moved.test.with_frame(low_kept)) <= pairs(moved.test)
    assert moved.info["uniform_test"] == report and moved.name == split.name


def test_uniform_test_is_seeded():
    split = random_split(3, n_users=300, n_items=80)
    a, _ = uniform_test(split, 2, seed=1)
    b, _ = uniform_test(split, 2, seed=1)
    c, _ = uniform_test(split, 2, seed=2)
    assert a.test.frame.equals(b.test.frame)
    assert not a.test.frame.equals(c.test.frame)


def test_uniform_test_errors():
    split = make_split([(0, 0, 5)], [(0, 1, 5), (1, 1, 5), (1, 2, 5)])
    with pytest.raises(DataError, match=r"leaves no item in test \(the most .* is 2\)"):
        uniform_test(split, 3)
    with pytest.raises(ConfigError, match="n_per_item"):
        uniform_test(split, 0)
    moved, report = uniform_test(split, 2)
    assert moved.test.items.tolist() == [1, 1] and report["left_out_moved_to_train"] == 1


@pytest.mark.parametrize("m", [2, 3, 5, 10])
def test_popularity_bins_partition_items_with_equal_ratings(m):
    split = random_split(4, n_users=600, n_items=200)
    counts = split.train.item_counts()
    bins = popularity_bins(split, m, "TI+AR+NN20", threshold=4, seed=2)
    assert [info["bin"] for info, _ in bins] == list(range(1, m + 1))
    assert sum(info["items"] for info, _ in bins) == split.n_items
    assert sum(info["train_ratings"] for info, _ in bins) == counts.sum()
    # consecutive popularity ranges, ascending
    for (a, _), (b, _) in zip(bins, bins[1:]):
        assert a["max_item_ratings"] <= b["min_item_ratings"]
    # (nearly) equal ratings: each bin within the largest item's count of an m-th of all ratings
    share = counts.sum() / m
    for info, _ in bins:
        assert abs(info["train_ratings"] - share) <= counts.max()
    # every bin's targets stay inside its items, and units partition the test users' items
    seen = np.zeros(split.n_items, bool)
    for info, targets in bins:
        low, high = info["min_item_ratings"], info["max_item_ratings"]
        members = set(np.flatnonzero((counts >= low) & (counts <= high)))
        assert set(targets.items.tolist()) <= members
        seen[targets.items] = True
    assert seen.any()


def test_each_bin_follows_the_protocol_within_its_items():
    split = random_split(5, n_users=200, n_items=60)
    for name in ["AI+AR+AN", "TI+AR+AN", "AI+1R+NN5", "UT+AR+NN3", "TI+1R+AN"]:
        protocol = Protocol.parse(name)
        bins = popularity_bins(split, 4, protocol, threshold=4, seed=9)
        order = np.lexsort((np.arange(split.n_items), split.train.item_counts()))
        start = 0
        for info, targets in bins:
            pool = set(order[start:start + info["items"]].tolist())
            start += info["items"]
            check_targets(targets, split, protocol, 4, pool=pool)
            if targets.all_candidates:
                assert set(np.flatnonzero(targets.candidates)) <= pool


def test_a_dominant_item_still_leaves_every_bin_an_item():
    train = [(u, 0, 3) for u in range(50)] + [(0, 1, 3), (1, 2, 3), (2, 3, 3)]
    split = make_split(train, [(3, 1, 5), (4, 2, 5)])
    bins = popularity_bins(split, 3, "AI+AR+AN")
    assert [info["items"] for info, _ in bins] == [2, 1, 1]
    assert bins[-1][0]["max_item_ratings"] == 50


def test_popularity_bin_errors():
    split = make_split([(0, 0, 3), (1, 1, 3)], [(0, 1, 5), (1, 2, 5)])
    for m in (1, 4, 2.5):
        with pytest.raises(ConfigError, match="from 2 to the number of items"):
            popularity_bins(split, m, "AI+AR+AN")
    with pytest.raises(DataError, match="above every rating"):
        popularity_bins(split, 2, "AI+1R+NN2", threshold=6)
    for _, targets in popularity_bins(split, 3, "AI+1R+NN2"):
        for _, u, items, gains in unit_slices(targets):
            assert sum(g > 0 for g in gains) == 1
