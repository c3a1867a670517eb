import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core import Split
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.targets import Protocol, build_targets, iter_targets, popularity_bins
from recsys_eval.targets import build as build_module

from .reference import check_targets, make_split, unit_slices

# Three users, six items. Threshold 4: Rel(u0) = {2}, Rel(u1) = {0, 4}; u2 has no test item.
TRAIN = [(0, 0, 3), (0, 1, 4), (1, 2, 5), (2, 0, 1), (2, 3, 2)]
TEST = [(0, 2, 5), (0, 3, 2), (1, 0, 4), (1, 4, 5), (1, 5, 1)]

PROTOCOLS = [
    f"{c}+{r}+{n}" for c in ("AI", "TI", "UT") for r in ("AR", "1R") for n in ("AN", "NN1", "NN2", "NN10")
]


@pytest.fixture(scope="module")
def hand():
    return make_split(TRAIN, TEST)


def listed(targets):
    return [(u, items, gains) for _, u, items, gains in unit_slices(targets)]


def test_full_ranking_lists_only_relevant_items(hand):
    ai = build_targets(hand, "AI+AR+AN", threshold=4)
    assert ai.all_candidates and ai.candidates is None
    assert listed(ai) == [(0, [2], [5.0]), (1, [0, 4], [4.0, 5.0])]
    assert ai.n_candidates.tolist() == [4, 5]  # 6 items less 2 and 1 training items
    ti = build_targets(hand, "TI+AR+AN", threshold=4)
    assert ti.candidates.tolist() == [True, False, True, True, True, True]
    assert ti.n_candidates.tolist() == [4, 4]  # TI = {0,2,3,4,5} less {0,1} and {2}


def test_hand_worked_listed_protocols(hand):
    assert listed(build_targets(hand, "UT+AR+AN", threshold=4)) == [
        (0, [2, 3], [5.0, 0.0]),
        (1, [0, 4, 5], [4.0, 5.0, 0.0]),
    ]
    assert listed(build_targets(hand, "AI+1R+AN", threshold=4)) == [
        (0, [2, 3, 4, 5], [5.0, 0.0, 0.0, 0.0]),
        (1, [0, 1, 3, 5], [4.0, 0.0, 0.0, 0.0]),
        (1, [1, 3, 4, 5], [0.0, 0.0, 5.0, 0.0]),
    ]
    assert listed(build_targets(hand, "TI+1R+AN", threshold=4)) == [
        (0, [2, 3, 4, 5], [5.0, 0.0, 0.0, 0.0]),
        (1, [0, 3, 5], [4.0, 0.0, 0.0]),
        (1, [3, 4, 5], [0.0, 5.0, 0.0]),
    ]
    assert listed(build_targets(hand, "UT+1R+AN", threshold=4)) == [
        (0, [2, 3], [5.0, 0.0]),
        (1, [0, 5], [4.0, 0.0]),
        (1, [4, 5], [5.0, 0.0]),
    ]


def test_no_threshold_makes_every_test_item_relevant(hand):
    targets = build_targets(hand, "UT+AR+AN")
    assert listed(targets) == [(0, [2, 3], [5.0, 2.0]), (1, [0, 4, 5], [4.0, 5.0, 1.0])]


def test_data_without_ratings_gets_gain_one():
    split = make_split([(0, 0), (1, 1)], [(0, 1), (0, 2), (1, 0)])
    targets = build_targets(split, "AI+AR+AN")
    assert listed(targets) == [(0, [1, 2], [1.0, 1.0]), (1, [0], [1.0])]


def test_user_without_relevant_items_is_an_ar_unit_but_no_1r_unit():
    split = make_split([(0, 0, 5), (1, 1, 5)], [(0, 1, 5), (1, 0, 1), (1, 2, 2)])
    ar = build_targets(split, "UT+AR+AN", threshold=4)
    assert listed(ar) == [(0, [1], [5.0]), (1, [0, 2], [0.0, 0.0])]
    assert build_targets(split, "AI+AR+AN", threshold=4).n_relevant.tolist() == [1, 0]
    assert build_targets(split, "AI+1R+NN5", threshold=4).unit_user.tolist() == [0]


@pytest.mark.parametrize("name", PROTOCOLS)
@pytest.mark.parametrize("threshold", [None, 4])
def test_every_combination_on_the_hand_split(hand, name, threshold):
    protocol = Protocol.parse(name)
    check_targets(build_targets(hand, protocol, threshold=threshold, seed=3), hand, protocol, threshold)
    if protocol.relevant == "1R" and protocol.nonrelevant == "NN":
        fresh = build_targets(hand, protocol, threshold=threshold, seed=3, fresh_negatives=True)
        check_targets(fresh, hand, protocol, threshold, fresh=True)
    if protocol.nonrelevant == "NN":
        popular = build_targets(hand, protocol, threshold=threshold, seed=3, sampling="popularity")
        check_targets(popular, hand, protocol, threshold, weighted=True)


@st.composite
def small_splits(draw):
    n_users = draw(st.integers(1, 6))
    n_items = draw(st.integers(2, 12))
    cells = draw(
        st.lists(st.tuples(st.integers(0, n_users - 1), st.integers(0, n_items - 1)),
                 min_size=1, max_size=45, unique=True)
    )
    sides = draw(st.lists(st.booleans(), min_size=len(cells), max_size=len(cells)))
    ratings = draw(st.lists(st.integers(1, 5), min_size=len(cells), max_size=len(cells)))
    rows = [(u, i, float(r)) for (u, i), r in zip(cells, ratings)]
    test = [row for row, is_test in zip(rows, sides) if is_test]
    if not test:
        test, rows = rows[:1], rows
        sides = [True] + sides[1:]
    train = [row for row, is_test in zip(rows, sides) if not is_test]
    return make_split(train, test)


@st.composite
def protocols(draw):
    candidates = draw(st.sampled_from(["AI", "TI", "UT"]))
    relevant = draw(st.sampled_from(["AR", "1R"]))
    if draw(st.booleans()):
        return Protocol(candidates, relevant, "AN")
    return Protocol(candidates, relevant, "NN", draw(st.integers(1, 6)))


@settings(max_examples=250, deadline=None)
@given(
    split=small_splits(),
    protocol=protocols(),
    threshold=st.sampled_from([None, 3.0]),
    seed=st.integers(0, 2**63),
    fresh=st.booleans(),
    weighted=st.booleans(),
)
def test_set_properties_hold_on_random_splits(split, protocol, threshold, seed, fresh, weighted):
    sampled = protocol.nonrelevant == "NN"
    fresh = fresh and sampled and protocol.relevant == "1R"
    weighted = weighted and sampled
    options = dict(threshold=threshold, seed=seed, fresh_negatives=fresh,
                   sampling="popularity" if weighted else "uniform")
    ratings = np.concatenate([split.train.ratings, split.test.ratings])
    if threshold is not None and ratings.max() < threshold:
        with pytest.raises(DataError, match="above every rating"):
            build_targets(split, protocol, **options)
        return
    if protocol.relevant == "1R" and threshold is not None and split.test.ratings.max() < threshold:
        with pytest.raises(DataError, match="needs relevant test items"):
            build_targets(split, protocol, **options)
        return
    targets = build_targets(split, protocol, **options)
    check_targets(targets, split, protocol, threshold, fresh=fresh, weighted=weighted)
    again = build_targets(split, protocol, **options, chunk_size=1)
    assert np.array_equal(again.items, targets.items) and np.array_equal(again.offsets, targets.offsets)


def random_split(seed, n_users=300, n_items=200, density=0.08):
    rng = np.random.default_rng(seed)
    cells = np.argwhere(rng.random((n_users, n_items)) < density)
    ratings = rng.integers(1, 6, len(cells))
    is_test = rng.random(len(cells)) < 0.25
    rows = [(int(u), int(i), float(r)) for (u, i), r in zip(cells, ratings)]
    return make_split([r for r, t in zip(rows, is_test) if not t], [r for r, t in zip(rows, is_test) if t])


@pytest.mark.parametrize("name", ["AI+AR+NN20", "TI+1R+NN30", "UT+AR+NN2", "AI+1R+AN"])
@pytest.mark.parametrize("fresh", [False, True])
def test_same_seed_same_targets_whatever_the_chunk_size(name, fresh):
    split = random_split(1)
    protocol = Protocol.parse(name)
    if fresh and not (protocol.relevant == "1R" and protocol.nonrelevant == "NN"):
        return
    runs = [build_targets(split, name, threshold=3, seed=11, fresh_negatives=fresh, chunk_size=c)
            for c in (1, 7, 64, 100_000)]
    chunks = list(iter_targets(split, name, threshold=3, seed=11, fresh_negatives=fresh, chunk_size=13))
    for run in runs[1:]:
        for field in ("unit_user", "offsets", "items", "gain"):
            assert np.array_equal(getattr(run, field), getattr(runs[0], field))
    assert np.array_equal(np.concatenate([c.items for c in chunks]), runs[0].items)
    assert np.array_equal(np.concatenate([c.unit_user for c in chunks]), runs[0].unit_user)
    assert sum(c.n_units for c in chunks) == runs[0].n_units
    if protocol.nonrelevant == "NN":
        other = build_targets(split, name, threshold=3, seed=12, fresh_negatives=fresh)
        assert not np.array_equal(other.items, runs[0].items)


def test_fresh_negatives_differ_between_units_of_a_user():
    split = random_split(2)
    shared = build_targets(split, "AI+1R+NN10", threshold=3, seed=5)
    fresh = build_targets(split, "AI+1R+NN10", threshold=3, seed=5, fresh_negatives=True)
    assert np.array_equal(shared.unit_user, fresh.unit_user)

    def negatives(targets):
        out = {}
        for _, u, items, gains in unit_slices(targets):
            out.setdefault(u, []).append(tuple(i for i, g in zip(items, gains) if g == 0))
        return out

    shared_sets, fresh_sets = negatives(shared), negatives(fresh)
    multi = [u for u, sets in fresh_sets.items() if len(sets) > 1]
    assert multi
    assert all(len(set(shared_sets[u])) == 1 for u in multi)
    assert sum(len(set(fresh_sets[u])) > 1 for u in multi) == len(multi)


def test_bad_input_errors(hand):
    with pytest.raises(DataError, match="above every rating"):
        build_targets(hand, "AI+AR+NN5", threshold=5.5)
    only_low_tests = make_split([(0, 0, 5)], [(0, 1, 2), (1, 0, 1)])
    with pytest.raises(DataError, match="needs relevant test items"):
        build_targets(only_low_tests, "AI+1R+NN5", threshold=4)
    assert build_targets(only_low_tests, "AI+AR+NN5", threshold=4).n_relevant.tolist() == [0, 0]
    with pytest.raises(DataError, match="needs test ratings"):
        build_targets(make_split([(0, 0)], [(0, 1)]), "AI+AR+AN", threshold=4)
    with pytest.raises(DataError, match="ratings <= 0 would be relevant"):
        build_targets(make_split([(0, 0, 1)], [(0, 1, 0)]), "AI+AR+AN")
    with pytest.raises(DataError, match="test side is empty"):
        build_targets(_empty_test(), "AI+AR+AN")
    with pytest.raises(ConfigError, match="fresh_negatives applies to 1R"):
        build_targets(hand, "AI+AR+NN5", fresh_negatives=True)
    with pytest.raises(ConfigError, match="applies to NN protocols"):
        build_targets(hand, "AI+1R+AN", sampling="popularity")
    with pytest.raises(ConfigError, match="did you mean 'popularity'"):
        build_targets(hand, "AI+1R+NN5", sampling="populrity")
    with pytest.raises(ConfigError, match="chunk_size"):
        build_targets(hand, "AI+1R+NN5", chunk_size=0)
    with pytest.raises(ConfigError, match="three parts"):
        build_targets(hand, "AI+1R")


def _empty_test():
    split = make_split([(0, 0, 1)], [(0, 1, 1)])
    return Split(split.train, split.test.with_frame(split.test.frame.head(0)), "empty")


def test_a_pair_in_train_and_test_is_an_error():
    split = make_split([(0, 0, 1)], [(0, 1, 1)])
    both = Split(split.train, split.train, "overlap")
    with pytest.raises(DataError, match="in both train and test"):
        build_targets(both, "AI+AR+AN")


def test_listing_too_many_pairs_is_refused(hand, monkeypatch):
    monkeypatch.setattr(build_module, "MAX_LISTED", 5)
    with pytest.raises(ConfigError, match="lists 12 .* pairs"):
        build_targets(hand, "AI+1R+AN", threshold=4)


def test_same_targets_whatever_the_number_of_threads():
    import numba

    split = random_split(4, n_users=2500, n_items=150, density=0.04)
    default = build_targets(split, "AI+1R+NN20", threshold=3, seed=8)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = build_targets(split, "AI+1R+NN20", threshold=3, seed=8)
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(default.items, single.items) and np.array_equal(default.gain, single.gain)


def expanded(compact, split):
    """The listed target set of every unit of one-relevant targets, rebuilt the obvious way."""
    seen = {u: set() for u in range(split.n_users)}
    for u, i in zip(split.train.users.tolist(), split.train.items.tolist()):
        seen[u].add(i)
    out = []
    for unit in range(compact.n_units):
        u = int(compact.unit_user[unit])
        relevant = int(compact.items[unit])
        if compact.all_candidates:
            pool = range(split.n_items) if compact.candidates is None else np.flatnonzero(compact.candidates)
            others = set(compact.items[compact.unit_user == u].tolist())
            negatives = [i for i in pool if i not in seen[u] and i not in others]
        else:
            g = compact.unit_group[unit]
            negatives = compact.negatives[compact.negative_offsets[g]:compact.negative_offsets[g + 1]].tolist()
            assert negatives == sorted(negatives) and relevant not in negatives
        out.append((u, sorted([relevant, *negatives]), float(compact.gain[unit])))
    return out


@pytest.mark.parametrize("name", ["AI+1R+NN20", "TI+1R+NN5", "UT+1R+NN2", "AI+1R+AN", "TI+1R+AN", "UT+1R+AN"])
@pytest.mark.parametrize("fresh", [False, True])
@pytest.mark.parametrize("sampling", ["uniform", "popularity"])
def test_one_relevant_targets_hold_the_listed_target_sets(name, fresh, sampling):
    split = random_split(3)
    nn = Protocol.parse(name).nonrelevant == "NN"
    if (fresh or sampling != "uniform") and not nn:
        return
    options = dict(threshold=3, seed=9, fresh_negatives=fresh, sampling=sampling)
    listed = build_targets(split, name, **options)
    compact = build_targets(split, name, **options, one_relevant=True)
    assert compact.one_relevant and np.array_equal(compact.unit_user, listed.unit_user)
    assert np.array_equal(compact.sizes, listed.sizes)
    assert np.array_equal(compact.n_relevant, listed.n_relevant)
    want = [(u, items, max(gains)) for _, u, items, gains in unit_slices(listed)]
    assert expanded(compact, split) == want
    if nn and not fresh:  # one sample per user, listed once
        assert len(compact.negative_offsets) - 1 == len(np.unique(compact.unit_user))
    chunks = list(iter_targets(split, name, **options, one_relevant=True, chunk_size=7))
    assert np.array_equal(np.concatenate([c.items for c in chunks]), compact.items)
    bins = popularity_bins(split, 3, name, **options, one_relevant=True)
    assert all(t.one_relevant for _, t in bins)
