"""External runs: round trips through files, unranked and unknown items, and each bad input."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from recommend_data import per_unit, random_data, random_targets

from recsys_eval.core import Interactions, Targets
from recsys_eval.errors import DataError, RecsysEvalError
from recsys_eval.recommend import (
    ExternalRun,
    UnknownIdsWarning,
    make_recommender,
    rank_targets,
    recommend_top_k,
)


def raw_data(seed: int = 4) -> Interactions:
    """random_data with raw ids that are not the indices (users 'u0'.., items 1000..)."""
    data = random_data(seed)
    frame = data.frame.with_columns(
        pl.format("u{}", pl.col("user")).alias("user"), (pl.col("item") + 1000).alias("item")
    )
    return Interactions.from_frame(frame)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".tsv"])
def test_round_trip_of_an_internal_run_gives_its_rankings(tmp_path, suffix):
    data = raw_data()
    model = make_recommender("als", {"factors": 6, "iterations": 2}, seed=2, threads=1).fit(data)
    users = np.arange(data.n_users)
    internal = recommend_top_k(model, data, users, 10)
    frame = data.to_raw(internal.to_frame().select("user", "item", "score"))
    path = tmp_path / f"run{suffix}"
    if suffix == ".parquet":
        frame.write_parquet(path)
    else:
        frame.write_csv(path, separator="\t" if suffix == ".tsv" else ",")
    external = ExternalRun.from_file(path, data)
    assert external.unknown["rows"] == 0
    assert per_unit(recommend_top_k(external, data, users, 10)) == per_unit(internal)
    # scoring listed targets: the run's order over the items it listed, unlisted items left out
    targets = random_targets(np.random.default_rng(0), data, 30, max_size=data.n_items)
    listed = set(zip(internal.to_frame()["user"], internal.to_frame()["item"], strict=True))
    expected = [[j for j in per_unit(rank_targets(model, targets))[i] if (targets.unit_user[i], j) in listed]
                for i in range(targets.n_units)]
    assert per_unit(rank_targets(external, targets)) == expected


def test_ranks_instead_of_scores(tmp_path):
    data = raw_data()
    model = make_recommender("bpr", {"factors": 6, "iterations": 3}, seed=2).fit(data)
    internal = recommend_top_k(model, data, np.arange(data.n_users), 10)
    frame = data.to_raw(internal.to_frame().select("user", "item", "rank"))
    frame.sample(fraction=1.0, shuffle=True, seed=1).write_csv(tmp_path / "run.csv")  # row order is irrelevant
    by_rank = ExternalRun.from_file(tmp_path / "run.csv", data)
    assert per_unit(recommend_top_k(by_rank, data, np.arange(data.n_users), 10)) == per_unit(internal)


def test_scores_keep_their_order_beyond_float32_precision_and_ties_go_to_the_item_index():
    data = random_data(4)
    frame = pl.DataFrame({"user": [0, 0, 0, 0], "item": [10, 11, 12, 13],
                          "score": [1.0 + 2e-12, 1.0 + 1e-12, 1.0, 1.0 + 2e-12]})
    run = ExternalRun(frame, data)
    targets = Targets(np.array([0], np.int32), np.array([0, 5]), np.array([9, 10, 11, 12, 13], np.int32),
                      np.zeros(5, np.float32), data.n_items, "t")
    assert per_unit(rank_targets(run, targets)) == [[10, 13, 11, 12]]  # item 9 was not ranked


def test_unknown_ids_are_reported_not_silently_dropped():
    data = random_data(4)
    frame = pl.DataFrame({"user": [0, 0, 0, 999, 998], "item": [3, 4, 777, 3, 3], "score": [1.0, 2.0, 3.0, 4.0, 5.0]})
    with pytest.warns(UnknownIdsWarning, match="3 rows .* e.g. \\[999, 998\\].* e.g. \\[777\\]"):
        run = ExternalRun(frame, data)
    assert run.unknown == {"rows": 3, "users": [999, 998], "items": [777]}
    assert "3 rows" in run.unknown_message()
    assert run.score(np.array([0, 0, 0]), np.array([4, 3, 5])).tolist() == [-1.0, -2.0, -np.inf]  # minus dense ranks


def test_a_run_that_ranks_none_of_the_test_users_is_an_error():
    data = random_data(4)
    run = ExternalRun(pl.DataFrame({"user": [0], "item": [3], "score": [1.0]}), data)
    run.check_overlap(np.array([0, 5]))
    with pytest.raises(DataError, match="none of the 2 test users"):
        run.check_overlap(np.array([1, 5]))


@pytest.mark.parametrize("frame,message", [
    (pl.DataFrame({"user": [0], "score": [1.0]}), "missing column\\(s\\) item"),
    (pl.DataFrame({"user": [0], "item": [1]}), "missing column\\(s\\) score or rank"),
    (pl.DataFrame({"user": [0, 0, 1], "item": [1, 1, 1], "score": [1.0, 2.0, 3.0]}),
     "1 row\\(s\\) repeat the \\(user, item\\) pair .* e.g. user 0, item 1 \\(row 1, again at row 2\\)"),
    (pl.DataFrame({"user": [0, 1], "item": [1, 1], "score": [1.0, float("nan")]}), "'score' has 1 NaN.*row 2"),
    (pl.DataFrame({"user": [0], "item": [1], "rank": [None]}, schema_overrides={"rank": pl.Int64}), "'rank' has 1"),
    (pl.DataFrame({"user": [0], "item": [1], "score": ["high"]}), "'score' is not numeric \\(first at row 1: 'high'\\)"),
    (pl.DataFrame({"user": [0], "item": [1], "score": [[1.0]]}), "'score' has type List"),
    (pl.DataFrame({"user": [0, None], "item": [1, 2], "score": [1.0, 2.0]}), "'user' has 1 missing or unusable ids \\(first at row 2: None\\)"),
    (pl.DataFrame({"user": ["0", "nan"], "item": [1, 2], "score": [1.0, 2.0]}), "'user' has 1 missing .* row 2: 'nan'"),
    (pl.DataFrame({"user": [0.0, float("nan")], "item": [1, 2], "score": [1.0, 2.0]}), "'user' has 1 missing .* row 2: nan"),
    (pl.DataFrame({"user": [0, 0], "item": [1, 2], "rank": [1, 1]}), "'rank' is not 1..L .* user 0 has 2 rows with ranks 1, 1"),
    (pl.DataFrame({"user": [0, 0], "item": [1, 2], "rank": [0, 1]}), "'rank' is not 1..L .* ranks 0, 1; expected each of 1, 2"),
    (pl.DataFrame({"user": [0, 0], "item": [1, 2], "rank": [1, 3]}), "'rank' is not 1..L .* ranks 1, 3"),
    (pl.DataFrame({"user": [0], "item": [1], "rank": [-1]}), "'rank' is not 1..L"),
    (pl.DataFrame({"user": [500], "item": [1], "score": [1.0]}), "none of the run's 1 \\(user, item\\) rows"),
    (pl.DataFrame({"user": [], "item": [], "score": []}), "no rows"),
])
def test_bad_runs(frame, message):
    with pytest.raises(DataError, match=message):
        ExternalRun(frame, random_data(4), source="run.csv")


def test_a_run_with_rank_and_score_is_ordered_by_rank():
    data = random_data(4)
    frame = pl.DataFrame({"user": [0] * 4, "item": [10, 11, 12, 13], "rank": [3, 1, 2, 4], "score": [0.1, 0.0, 0.5, 0.9]})
    targets = Targets(np.array([0], np.int32), np.array([0, 4]), np.array([10, 11, 12, 13], np.int32),
                      np.zeros(4, np.float32), data.n_items, "t")
    assert per_unit(rank_targets(ExternalRun(frame, data), targets)) == [[11, 12, 10, 13]]


def test_nan_written_as_text_in_a_csv_is_reported(tmp_path):
    (tmp_path / "run.csv").write_text("user,item,score\n0,1,0.5\n0,2,nan\n")
    with pytest.raises(DataError, match="run.csv: column 'score' has 1 NaN.*line 3"):
        ExternalRun.from_file(tmp_path / "run.csv", random_data(4))


def test_bad_run_files(tmp_path):
    data = random_data(4)
    with pytest.raises(DataError, match="absent.csv: no such file"):
        ExternalRun.from_file(tmp_path / "absent.csv", data)
    (tmp_path / "run.xlsx").write_text("{}")
    with pytest.raises(RecsysEvalError, match="run.xlsx: cannot tell the format from the extension '.xlsx'"):
        ExternalRun.from_file(tmp_path / "run.xlsx", data)
    (tmp_path / "run.parquet").write_text("user,item,score\n")
    with pytest.raises(DataError, match="run.parquet: not a readable Parquet file"):
        ExternalRun.from_file(tmp_path / "run.parquet", data)


def test_scoring_pairs_held_in_columns_of_several_chunks():
    """Pairs from a frame of several chunks (as the MovieLens parquet cache loads) come out of
    polars as writeable arrays whose views numpy will not make writeable: scipy's pair indexing
    tried, and the rank agreement metrics of an external run ended in ``cannot set WRITEABLE flag``."""
    data = raw_data()
    frame = data.to_raw(pl.DataFrame({"user": [0, 1, 2], "item": [3, 4, 5], "score": [1.0, 2.0, 3.0]}))
    run = ExternalRun(frame, data)
    pairs = pl.concat([pl.DataFrame({"user": [0, 1], "item": [3, 5]}), pl.DataFrame({"user": [2], "item": [5]})],
                      rechunk=False).cast(pl.Int32)
    users, items = pairs.get_column("user").to_numpy(), pairs.get_column("item").to_numpy()
    assert users.flags.writeable  # the arrays that broke scipy's indexing
    np.testing.assert_array_equal(run.score(users, items), [-1, -np.inf, -1])
