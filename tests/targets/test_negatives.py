"""Negatives as data: the two layouts read by hand, the units they make against the definition
(relevant items plus the file's negatives), a write-read round trip giving the sampled units
exactly, and every check's error naming its first offender and count."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recsys_eval.errors import ConfigError, DataError
from recsys_eval.targets import build_targets, negatives_of, qrels, read_negatives, write_negatives

from .reference import make_split, unit_slices

# Users 10, 11, 12; items 100..107 (raw ids, not indices). Threshold 4: Rel(10) = {102}, Rel(11) = {100, 104}.
TRAIN = [(10, 100, 3), (10, 101, 4), (11, 102, 5), (12, 100, 1), (12, 103, 2), (12, 107, 5)]
TEST = [(10, 102, 5), (10, 103, 2), (11, 100, 4), (11, 104, 5), (11, 105, 1)]


@pytest.fixture
def hand():
    return make_split(TRAIN, TEST)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def units(targets, split):
    ids = split.train
    return [(ids.user_ids[u], [ids.item_ids[i] for i in items], list(gains)) for _, u, items, gains in unit_slices(targets)]


def test_ncf_layout_by_hand(hand, tmp_path):
    # user 11 has two lines (one per held-out item) listing the same negatives, spaces or tabs
    path = write(tmp_path, "hand.test.negative", "(10,102)\t104\t107\n(11,100)\t107 103\n(11,104) 103\t107\n\n")
    negatives = read_negatives(path, hand.train)
    targets = build_targets(hand, "AI+1R+NN2", threshold=4, negatives=negatives)
    assert units(targets, hand) == [
        (10, [102, 104, 107], [5, 0, 0]),
        (11, [100, 103, 107], [4, 0, 0]),
        (11, [103, 104, 107], [0, 5, 0]),
    ]
    ar = build_targets(hand, "AI+AR+NN2", threshold=4, negatives=negatives)
    # AR: the relevant items and the negatives; 105 (rated 1) is neither listed nor relevant
    assert units(ar, hand) == [(10, [102, 104, 107], [5, 0, 0]), (11, [100, 103, 104, 107], [4, 0, 5, 0])]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_table_layout(hand, tmp_path, suffix):
    import polars as pl

    table = pl.DataFrame({"user": [10, 10, 11, 11], "item": [104, 107, 107, 103]})
    path = tmp_path / f"neg{suffix}"
    table.write_csv(path) if suffix == ".csv" else table.write_parquet(path)
    negatives = read_negatives(path, hand.train)
    assert units(build_targets(hand, "AI+1R+NN2", threshold=4, negatives=negatives), hand)[0] == (
        10, [102, 104, 107], [5, 0, 0])
    assert negatives.held_out is None


@pytest.mark.parametrize("text, message", [
    ("(10,102)\t101\t107\n(11,100)\t107\n", r"1 negatives are training items of their user, first user 10 item 101"),
    ("(10,102)\t102\t107\n(11,100)\t107\t104\n", r"2 negatives are relevant test items of their user, first user 10 item 102"),
    ("(10,102)\t104\n", r"1 users with test units have no negatives in the file, first user 11"),
    ("(10,102)\t104\t107\t105\n(11,100)\t107\n", r"1 users with test units have more than n = 2 negatives, first user 10"),
    ("(10,103)\t104\n(11,100)\t107\n", r"1 held-out \(user, item\) pairs of the file are not relevant test pairs"),
    ("(10,102)\t104\n(11,100)\t107\n(11,104)\t103\n", r"1 users have lines listing different negatives, first user 11"),
    ("(10,102)\t104\t999\n(11,100)\t107\n", r"1 item ids are not in the dataset, first '999' on line 1"),
    ("10 102 104\n", r"not in the NCF negatives layout .*line 1"),
])
def test_every_check_names_its_first_offender(hand, tmp_path, text, message):
    path = write(tmp_path, "bad.negative", text)
    with pytest.raises(DataError, match=message):
        build_targets(hand, "AI+1R+NN2", threshold=4, negatives=read_negatives(path, hand.train))


def test_negatives_replace_only_a_shared_uniform_sample(hand, tmp_path):
    negatives = read_negatives(write(tmp_path, "n.negative", "(10,102)\t104\n(11,100)\t107\n"), hand.train)
    for protocol, options in (("AI+AR+AN", {}), ("UT+1R+NN2", {}), ("AI+1R+NN2", {"fresh_negatives": True}),
                              ("AI+1R+NN2", {"sampling": "popularity"})):
        with pytest.raises(ConfigError, match="negatives from a file"):
            build_targets(hand, protocol, threshold=4, negatives=negatives, **options)


SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.integers(0, 2**31), st.sampled_from(["AI+1R+NN5", "AI+AR+NN5", "TI+1R+NN3", "TI+AR+NN20"]),
       st.booleans(), st.sampled_from([".parquet", ".negative"]))
def test_written_negatives_read_back_to_the_sampled_units(tmp_path_factory, seed, protocol, compact, layout):
    from recsys_eval.data.synthetic import synthetic_interactions
    from recsys_eval.split import holdout

    split = holdout(synthetic_interactions(80, 100, 2400, seed=seed % 7), 0.3, per_user=True, seed=seed)
    # every test item relevant (as in NCF): each unit has a held-out pair, so both layouts hold it
    sampled = build_targets(split, protocol, seed=seed, one_relevant=compact)
    judged = qrels(split)
    rows = np.repeat(np.arange(judged.n_users), np.diff(judged.indptr))
    relevant = judged.gain > 0
    folder = tmp_path_factory.mktemp("negatives")
    write_negatives(*negatives_of(sampled), (rows[relevant], judged.items[relevant]), split.train,
                    folder / "n.parquet", folder / "n.negative")
    fixed = build_targets(split, protocol, seed=seed + 1, one_relevant=compact,
                          negatives=read_negatives(folder / f"n{layout}", split.train))
    for name in ("unit_user", "offsets", "items", "gain", "negatives", "negative_offsets", "unit_group"):
        a, b = getattr(sampled, name, None), getattr(fixed, name, None)
        assert (a is None and b is None) or np.array_equal(a, b), name
