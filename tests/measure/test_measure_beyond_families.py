"""Calibration, popularity bias, discovery and serendipity (issue 30) against the slow reference
written from the papers (beyond_reference.py) on hypothesis-generated runs, to 1e-12; hand-worked
examples; bounds and identities; the inputs each needs."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from beyond_reference import parity, per_unit
from hypothesis import given, settings
from hypothesis import strategies as st
from measure_build import rankings_of, targets_of, values

from recsys_eval.core.interactions import Interactions
from recsys_eval.errors import ConfigError
from recsys_eval.measure import measure
from recsys_eval.measure.beyond import beyond_accuracy

N_ITEMS = 10
CUTS = [1, 3, 5]
UNIT_METRICS = ["arp", "aplt", "aclt", "surprisal", "epc", "efd", "unexpectedness", "serendipity", "calibration"]
N_GENRES = 4


@st.composite
def run(draw):
    """Units (one per user), train pairs with repeats, relevant sets, item genres, parameters."""
    n_users = draw(st.integers(2, 5))
    pair = st.tuples(st.integers(0, n_users - 1), st.integers(0, N_ITEMS - 1))
    train = draw(st.lists(pair, min_size=2, max_size=30))
    if len({u for u, _ in train}) < 2:
        train.append(((train[0][0] + 1) % n_users, draw(st.integers(0, N_ITEMS - 1))))
    units = []
    for user in range(n_users):
        ranked = draw(st.lists(st.integers(0, N_ITEMS - 1), max_size=7, unique=True))
        relevant = set(draw(st.lists(st.integers(0, N_ITEMS - 1), max_size=4, unique=True)))
        units.append((user, ranked, relevant))
    genres = {i: set(draw(st.lists(st.integers(0, N_GENRES - 1), max_size=3, unique=True))) for i in range(N_ITEMS)}
    alpha = draw(st.sampled_from([0.01, 0.2, 0.5]))
    share = draw(st.sampled_from([0.1, 0.2, 0.5, 0.9]))
    return units, train, genres, alpha, share


def measured(units, train, genres, alpha, share, names):
    rankings = rankings_of([ranked for _, ranked, _ in units])
    targets = targets_of([{i: 1.0 for i in relevant} | {9: 0.0} if 9 not in relevant else {i: 1.0 for i in relevant}
                          for _, _, relevant in units], N_ITEMS)
    matrix = np.zeros((N_ITEMS, N_GENRES), dtype=bool)
    for i, gs in genres.items():
        matrix[i, list(gs)] = True
    frame = pl.DataFrame({"user": [u for u, _ in train], "item": [i for _, i in train]})
    return beyond_accuracy(rankings, k=CUTS, n_items=N_ITEMS, metrics=names, train=frame, genres=matrix,
                           targets=targets, params={"calibration_alpha": alpha, "head_share": share})


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12 * max(1.0, abs(b))


@settings(max_examples=150, deadline=None)
@given(run())
def test_per_unit_metrics_equal_the_reference(case):
    units, train, genres, alpha, share = case
    frame = measured(units, train, genres, alpha, share, UNIT_METRICS)
    for name in UNIT_METRICS:
        for k in CUTS:
            got = values(frame, name, k)
            want = [per_unit(name, unit, k, train=train, n_items=N_ITEMS, genres=genres, alpha=alpha, share=share)
                    for unit in units]
            assert all(same(g, w) for g, w in zip(got, want, strict=True)), (name, k, got, want)


@settings(max_examples=150, deadline=None)
@given(run())
def test_popularity_parity_equals_the_reference(case):
    from beyond_reference import head_items, holders

    units, train, genres, alpha, share = case
    frame = measured(units, train, genres, alpha, share, ["pop_rsp", "pop_reo"])
    head = head_items(holders(train, N_ITEMS), share)
    for name, opportunity in (("pop_rsp", False), ("pop_reo", True)):
        for k in CUTS:
            got = values(frame, name, k)
            want = parity(units, k, head, N_ITEMS, train, equal_opportunity=opportunity)
            assert len(got) == 1 and same(got[0], want), (name, k, got, want)


def test_hand_worked_example():
    # train: users 0, 1, 2; phi = [3, 2, 1, 0, ...] over items 0..3 (items 4.. unseen)
    train = pl.DataFrame({"user": [0, 1, 2, 0, 1, 2], "item": [0, 0, 0, 1, 1, 2]})
    # user 0 ranks [3, 1, 2] with item 2 relevant; user 1 ranks [0, 4] with 4 relevant
    rankings = rankings_of([[3, 1, 2], [0, 4]])
    targets = targets_of([{2: 1.0}, {4: 1.0}], 6)
    genres = np.zeros((6, 2), dtype=bool)
    genres[0, 0] = genres[1, 1] = genres[2, [0, 1]] = genres[3, 0] = True
    f = beyond_accuracy(rankings, k=[2, 3], n_items=6, train=train, genres=genres, targets=targets,
                        metrics=["arp", "aplt", "aclt", "epc", "efd", "unexpectedness", "serendipity",
                                 "calibration", "pop_reo"])
    assert values(f, "arp", 3) == pytest.approx([(0 + 2 + 1) / 3, (3 + 0) / 2])
    # catalogue {0, 1, 2}: the head is its ceil(0.2 x 3) = 1 most popular item, item 0
    assert values(f, "aplt", 3) == pytest.approx([1.0, 0.5]) and values(f, "aclt", 3) == [3.0, 1.0]
    d1, d2, d3 = 1.0, 1 / math.log2(3), 1 / math.log2(4)
    # EPC: user 0's hit at rank 3, item 2 held by 1 of 3 users; user 1's hit at rank 2, unseen item
    assert values(f, "epc", 3) == pytest.approx([d3 * (1 - 1 / 3) / (d1 + d2 + d3), d2 * 1.0 / (d1 + d2)])
    # EFD: p(i | seen) = phi / 6; the unseen item 4 takes the smallest, 1/6
    assert values(f, "efd", 3) == pytest.approx([d3 * math.log2(6) / (d1 + d2 + d3), d2 * math.log2(6) / (d1 + d2)])
    # MostPop for user 0 (has 0, 1): 2, 3, 4...; for user 1 (has 0, 1): the same. Top 2 = {2, 3}
    assert values(f, "unexpectedness", 2) == pytest.approx([1 / 2, 1.0])
    # user 1's hit 4 is outside MostPop's top 2 {2, 3}, inside its top 3 {2, 3, 4}; user 0's hit 2
    # is inside both
    assert values(f, "serendipity", 2) == pytest.approx([0.0, 1 / 2])
    assert values(f, "serendipity", 3) == pytest.approx([0.0, 0.0])
    # calibration at k = 2 for user 0: profile {0, 1} -> p = (1/2, 1/2); list {3, 1} -> q = (1/2, 1/2)
    assert values(f, "calibration", 2)[0] == pytest.approx(0.0, abs=1e-15)
    # user 1: profile {0, 1} -> p = (1/2, 1/2); list [0, 4] (4 without genres) -> q = (1, 0)
    a = 0.01
    assert values(f, "calibration", 2)[1] == pytest.approx(
        0.5 * math.log(0.5 / ((1 - a) * 1 + a * 0.5)) + 0.5 * math.log(0.5 / (a * 0.5)))
    # PopREO at 3: head {0}: no relevant head item -> undefined; at 2 as well
    assert all(math.isnan(v) for v in values(f, "pop_reo", 3))


def test_bounds_and_identities():
    rng = np.random.default_rng(5)
    n_items, n_users = 40, 30
    train = pl.DataFrame({"user": rng.integers(0, n_users, 400), "item": rng.integers(0, n_items, 400)})
    lists = [list(rng.permutation(n_items)[: rng.integers(0, 12)]) for _ in range(n_users)]
    targets = targets_of([{int(i): 1.0 for i in rng.choice(n_items, 4, replace=False)} for _ in range(n_users)],
                         n_items)
    genres = rng.random((n_items, 5)) < 0.4
    f = beyond_accuracy(rankings_of(lists), k=[5, 10], n_items=n_items, train=train, genres=genres, targets=targets,
                        metrics=["aplt", "aclt", "unexpectedness", "serendipity", "calibration", "epc"])
    for k in (5, 10):
        lengths = np.array([min(len(x), k) for x in lists], dtype=float)
        aplt, aclt = np.array(values(f, "aplt", k)), np.array(values(f, "aclt", k))
        filled = lengths > 0
        np.testing.assert_allclose(aplt[filled] * lengths[filled], aclt[filled], rtol=1e-12)
        assert np.all(np.isnan(aplt[~filled])) and np.all(aclt[~filled] == 0)
        unexpected, serendipitous = np.array(values(f, "unexpectedness", k)), np.array(values(f, "serendipity", k))
        assert np.all(serendipitous[filled] <= unexpected[filled])
        calibration = np.array(values(f, "calibration", k))
        assert np.all(calibration[~np.isnan(calibration)] >= 0)
        assert np.all(calibration[~np.isnan(calibration)] <= math.log(1 / 0.01) + 1e-12)  # sum p log(1/alpha)
        epc = np.array(values(f, "epc", k))
        assert np.all((epc >= 0) & (epc <= 1))


def test_interactions_and_a_frame_give_the_same_values():
    rng = np.random.default_rng(8)
    pairs = pl.DataFrame({"user": rng.integers(0, 20, 300), "item": rng.integers(0, 15, 300)}).unique()
    data = Interactions.from_frame(pairs)
    as_frame = pl.DataFrame({"user": data.users, "item": data.items})
    lists = [list(rng.permutation(data.n_items)[:6]) for _ in range(data.n_users)]
    rankings = rankings_of(lists)
    targets = targets_of([{int(i): 1.0 for i in rng.choice(data.n_items, 3, replace=False)}
                          for _ in range(data.n_users)], data.n_items)
    genres = rng.random((data.n_items, 3)) < 0.5
    names = [*UNIT_METRICS, "pop_rsp", "pop_reo"]

    def run_on(train):
        return beyond_accuracy(rankings, k=[2, 6], n_items=data.n_items, train=train, genres=genres, targets=targets,
                               metrics=names)

    assert run_on(data).equals(run_on(as_frame))


def test_measure_passes_parameters_and_targets():
    train = pl.DataFrame({"user": [0, 0, 1, 2], "item": [0, 1, 0, 2]})
    genres = np.eye(4, dtype=bool)
    targets = targets_of([{3: 1.0}, {1: 1.0}], 4)
    rankings = rankings_of([[0, 3], [1]])
    low = measure(rankings, targets, metrics=["calibration", "aplt", "epc"], k=2, train=train, genres=genres)
    high = measure(rankings, targets, metrics=["calibration", "aplt"], k=2, train=train, genres=genres,
                   calibration_alpha=0.5, head_share=0.9)
    assert values(low, "calibration", 2) != values(high, "calibration", 2)
    assert values(low, "aplt", 2) != values(high, "aplt", 2)
    assert values(low, "epc", 2)[1] > 0  # user 1's relevant item 1 at rank 1
    with pytest.raises(ConfigError, match="calibration_alpha"):
        measure(rankings, targets, metrics=["calibration"], k=2, train=train, genres=genres, calibration_alpha=1.5)


@pytest.mark.parametrize(("name", "needs"), [("calibration", "item genres"), ("arp", "train interactions"),
                                            ("epc", "the rankings. targets"), ("pop_reo", "the rankings. targets")])
def test_beyond_metrics_name_the_input_they_need(name, needs):
    given = {"train": pl.DataFrame({"user": [0], "item": [0]}), "genres": np.ones((2, 1), dtype=bool)}
    if needs == "item genres":  # the others lack what the name says
        given.pop("genres")
    if needs == "train interactions":
        given.pop("train")
    with pytest.raises(ConfigError, match=f"{name} needs {needs}"):
        beyond_accuracy(rankings_of([[0]]), k=1, n_items=2, metrics=[name], **given)


@settings(max_examples=60, deadline=None)
@given(run())
def test_each_metric_alone_equals_it_among_all(case):
    """The shared pass reads relevance, MostPop and genres only when a metric asks: each alone gives
    the values it has among all the others."""
    units, train, genres, alpha, share = case
    together = measured(units, train, genres, alpha, share, UNIT_METRICS)
    for name in UNIT_METRICS:
        alone = measured(units, train, genres, alpha, share, [name])
        for k in CUTS:
            assert all(same(a, b) for a, b in zip(values(alone, name, k), values(together, name, k), strict=True))


def long_run(seed: int, n_genres: int, n_users: int = 40, n_items: int = 300):
    """Lists of 0 to 100 items and train profiles of 0 to 150 over ``n_genres`` genres (0 to 6 an
    item, some items without), the last user without train rows, and targets."""
    rng = np.random.default_rng(seed)
    genres = np.zeros((n_items, n_genres), dtype=bool)
    for item in range(n_items):
        genres[item, rng.choice(n_genres, size=rng.integers(0, min(7, n_genres + 1)), replace=False)] = True
    seen = [set(rng.choice(n_items, size=rng.integers(0, 151), replace=False).tolist()) if user < n_users - 1
            else set() for user in range(n_users)]
    train = pl.DataFrame({"user": [u for u, items in enumerate(seen) for _ in items],
                          "item": [i for items in seen for i in sorted(items)]}, schema={"user": pl.Int64, "item": pl.Int64})
    lists = [rng.permutation(n_items)[: rng.integers(0, 101)].tolist() for _ in range(n_users)]
    relevant = [{int(i): 1.0 for i in rng.choice(n_items, size=rng.integers(0, 30), replace=False)} for _ in lists]
    return lists, relevant, train, seen, genres


@pytest.mark.parametrize(("n_genres", "alpha"), [(20, 0.01), (70, 0.3), (3, 0.01)])
def test_calibration_of_long_lists_equals_the_reference(n_genres, alpha):
    """Every cutoff of the benchmark's (1 to 100) of lists up to 100 long, profiles up to 150 items
    and up to 6 genres an item, packed or not: the kernel's C_KL (the list's genre sums as prefixes,
    log p read from the profile, one logarithm a genre both hold) agrees with the reference's sum
    over every genre of the profile to 1e-12."""
    from beyond_reference import calibration

    lists, _, train, seen, genres = long_run(n_genres, n_genres)
    by_item = {i: set(np.flatnonzero(row).tolist()) for i, row in enumerate(genres)}
    cuts = [1, 5, 10, 20, 50, 100]
    frame = beyond_accuracy(rankings_of(lists), k=cuts, n_items=len(genres), metrics=["calibration"], train=train,
                            genres=genres, params={"calibration_alpha": alpha})
    for k in cuts:
        want = [calibration(ranked[:k], seen[user], by_item, alpha) for user, ranked in enumerate(lists)]
        got = values(frame, "calibration", k)
        assert all(same(g, w) for g, w in zip(got, want, strict=True)), (k, got, want)
    assert any(math.isnan(v) for v in values(frame, "calibration", 100))  # the user without train


def test_values_do_not_depend_on_threads_or_chunks_of_users():
    """The same units measured on one thread, on two (other chunk bounds), and as two chunks of
    users measured apart give every per-unit value bit for bit."""
    import dataclasses

    import numba

    lists, relevant, train, _, genres = long_run(3, 20, n_users=300)
    data = Interactions(train.cast(pl.Int32), pl.Series("user_id", np.arange(len(lists))),
                        pl.Series("item_id", np.arange(len(genres))), source="long run")
    names = [*UNIT_METRICS, "ild", "novelty", "user_coverage"]

    def measured_units(lo: int, hi: int) -> np.ndarray:
        users = np.arange(lo, hi, dtype=np.int32)
        rankings = dataclasses.replace(rankings_of(lists[lo:hi]), unit_user=users)
        targets = dataclasses.replace(targets_of(relevant[lo:hi], len(genres)), unit_user=users)
        frame = beyond_accuracy(rankings, k=[1, 5, 10, 20, 50, 100], n_items=len(genres), metrics=names,
                                train=data, genres=genres, targets=targets)
        return frame.sort("metric", "k", "unit", maintain_order=True).get_column("value").to_numpy()

    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = measured_units(0, len(lists))
    finally:
        numba.set_num_threads(threads)
    whole = measured_units(0, len(lists))
    assert one.tobytes() == whole.tobytes()
    parts = [measured_units(0, 137), measured_units(137, len(lists))]
    per_metric = len(whole) // len(lists)  # rows of each (metric, k), units ascending within
    joined = np.concatenate([np.concatenate([part.reshape(per_metric, -1)[row] for part in parts])
                             for row in range(per_metric)])
    assert joined.tobytes() == whole.tobytes()
