"""The official ML-100K folds equal their files."""

from collections import Counter

import polars as pl
import pytest

from recsys_eval.core import Interactions
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split import official_folds

from .helpers import ml100k, ml100k_dir, read_ml100k_file


def raw_rows(side: Interactions) -> Counter:
    frame = side.to_raw().with_columns(pl.col("rating").cast(pl.Int64))
    return Counter(frame.select("user", "item", "rating", "timestamp").iter_rows())


def file_rows(path) -> Counter:
    return Counter(read_ml100k_file(path).iter_rows())


def test_five_folds_equal_the_files_and_partition_u_data():
    folder = ml100k_dir()
    data = ml100k()
    folds = official_folds(data, folder)
    assert [f.name for f in folds] == ["u1", "u2", "u3", "u4", "u5"]
    assert len(folds[0].test) == 20_000
    together = Counter()
    for fold in folds:
        assert raw_rows(fold.test) == file_rows(folder / f"{fold.name}.test")
        assert raw_rows(fold.train) == file_rows(folder / f"{fold.name}.base")
        assert fold.info["file_lines_not_in_data"] == 0
        assert fold.info["data_rows_in_neither_file"] == 0
        together += raw_rows(fold.test)
    assert together == file_rows(folder / "u.data")


def test_ua_and_ub_hold_ten_test_ratings_per_user():
    data = ml100k()
    for fold in official_folds(data, ml100k_dir(), names=("ua", "ub")):
        counts = fold.test.frame.group_by("user").len().get_column("len")
        assert len(fold.test) == 9_430 and (counts == 10).all()
        assert len(fold.train) + len(fold.test) == 100_000


def test_default_folder_is_the_data_home(monkeypatch):
    folder = ml100k_dir()
    monkeypatch.setenv("RECSYS_EVAL_DATA", str(folder.parent))
    (fold,) = official_folds(ml100k(), names="u3")
    assert fold.name == "u3" and fold.info["params"]["folder"] == str(folder)


def test_lines_of_prepared_data_are_left_out_and_counted():
    data = ml100k()
    liked = data.with_frame(data.frame.filter(pl.col("rating") >= 4))
    (fold,) = official_folds(liked, ml100k_dir(), names=["u1"])
    u1 = read_ml100k_file(ml100k_dir() / "u1.test")
    u1_base = read_ml100k_file(ml100k_dir() / "u1.base")
    assert len(fold.test) == (u1["rating"] >= 4).sum()
    assert fold.info["file_lines_not_in_data"] == (u1["rating"] < 4).sum() + (u1_base["rating"] < 4).sum()
    assert (fold.test.ratings >= 4).all()


def test_bad_names_and_missing_files(tmp_path):
    data = ml100k()
    with pytest.raises(ConfigError, match="unknown official fold 'u6'"):
        official_folds(data, ml100k_dir(), names=["u6"])
    with pytest.raises(DataError, match="no official fold file .*u1.base"):
        official_folds(data, tmp_path)
    (tmp_path / "u1.base").write_text("1\t1\t5\n")
    (tmp_path / "u1.test").write_text("1\t2\t5\t3\n")
    with pytest.raises(DataError, match="u1.base"):
        official_folds(data, tmp_path, names="u1")
    (tmp_path / "u1.base").write_text("999999\t1\t5\t3\n")
    with pytest.raises(DataError, match="none of its 1 lines"):
        official_folds(data, tmp_path, names="u1")
    (tmp_path / "u1.base").write_text("196\t242\t3\t881250949\n196\t242\t3\t881250949\n")
    with pytest.raises(DataError, match="u1.base: user 196, item 242 is listed on more than one line"):
        official_folds(data, tmp_path, names="u1")
    (tmp_path / "u1.base").write_text("196\t242\t3\t881250949\n")
    (tmp_path / "u1.test").write_text("196\t242\t3\t881250949\n")
    with pytest.raises(DataError, match="share 1 interactions"):
        official_folds(data, tmp_path, names="u1")
