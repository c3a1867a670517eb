import numpy as np
import polars as pl
import pytest

from recsys_eval.errors import DataError, OutputError
from recsys_eval.targets import build_targets, load_targets, save_targets

from .reference import make_split

FIELDS = ("unit_user", "offsets", "items", "gain")


@pytest.fixture(scope="module")
def split():
    # raw ids that are not indices, a user whose test items are all non-relevant
    train = [(10, 100, 4), (10, 101, 5), (20, 102, 3), (30, 100, 2)]
    test = [(10, 102, 5), (10, 103, 2), (20, 100, 4), (20, 104, 5), (30, 103, 1)]
    return make_split(train, test)


@pytest.mark.parametrize("name", ["AI+AR+AN", "TI+AR+AN", "UT+AR+AN", "AI+1R+NN2", "TI+AR+NN1"])
def test_round_trip(split, name, tmp_path):
    targets = build_targets(split, name, threshold=4, seed=3)
    path = save_targets(targets, tmp_path / "deep" / "targets.parquet")
    loaded = load_targets(path)
    for field in FIELDS:
        assert np.array_equal(getattr(loaded, field), getattr(targets, field))
        assert getattr(loaded, field).dtype == getattr(targets, field).dtype
    assert (loaded.protocol, loaded.n_items, loaded.all_candidates) == (
        targets.protocol, targets.n_items, targets.all_candidates)
    if targets.all_candidates:
        assert np.array_equal(loaded.n_candidates, targets.n_candidates)
    if targets.candidates is None:
        assert loaded.candidates is None
    else:
        assert np.array_equal(loaded.candidates, targets.candidates)
    assert not list(tmp_path.glob("deep/.*partial"))


def test_file_lists_raw_ids_for_external_systems(split, tmp_path):
    targets = build_targets(split, "AI+AR+AN", threshold=4)
    frame = pl.read_parquet(save_targets(targets, tmp_path / "t.parquet", ids=split.train))
    # user 30 (index 2) has no relevant item: one row with a null item keeps the unit
    lonely = frame.filter(pl.col("user_id") == 30).select("item", "gain", "n_candidates")
    assert lonely.rows() == [(None, None, 4)]
    assert frame.filter(pl.col("user_id") == 20).get_column("item_id").to_list() == [100, 104]
    assert load_targets(tmp_path / "t.parquet").n_relevant.tolist() == [1, 2, 0]


def test_bad_files(tmp_path):
    with pytest.raises(DataError, match="no such targets file"):
        load_targets(tmp_path / "missing.parquet")
    pl.DataFrame({"unit": [0], "item": [1]}).write_parquet(tmp_path / "plain.parquet")
    with pytest.raises(DataError, match="not a targets file"):
        load_targets(tmp_path / "plain.parquet")


def test_a_failed_write_keeps_the_earlier_file_and_names_the_path(split, tmp_path, monkeypatch):
    first = build_targets(split, "AI+AR+NN1", threshold=4, seed=1)
    path = save_targets(first, tmp_path / "targets.parquet")
    before = path.read_bytes()

    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    with pytest.raises(OutputError, match="targets.parquet"):
        save_targets(build_targets(split, "AI+AR+NN2", threshold=4, seed=2), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["targets.parquet"]  # no scratch file left
