"""``recsys-eval split``: a dataset or a file in, a folder of Parquet and JSON out."""

import json

import polars as pl
import pytest

from recsys_eval.cli import main
from recsys_eval.split import load_split, load_splits

from .helpers import ml100k_dir


@pytest.fixture(autouse=True)
def _derived_files_in_tmp(monkeypatch, tmp_path):
    """Parquet caches of a read-only data home go to a fresh folder, not the user's cache."""
    monkeypatch.setenv("RECSYS_EVAL_CACHE", str(tmp_path / "derived"))


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.fixture
def ratings_csv(tmp_path):
    path = tmp_path / "ratings.csv"
    pl.DataFrame({
        "userId": [1, 1, 1, 2, 2, 2, 3, 3],
        "movieId": [10, 20, 30, 10, 20, 40, 30, 40],
        "stars": [4.0, 3.0, 5.0, 2.0, 1.0, 4.0, 5.0, 3.0],
        "when": [1, 2, 3, 4, 5, 6, 7, 8],
    }).write_csv(path)
    return path


def test_split_a_file_and_read_it_back(tmp_path, ratings_csv, capsys):
    out = tmp_path / "split"
    code, stdout, _ = run([
        "split", str(ratings_csv), str(out), "-m", "leave_last_n", "--seed", "4",
        "--columns", "user=userId,item=movieId,rating=stars,timestamp=when",
    ], capsys)
    assert code in (0, None)
    assert "leave_last_n: train 5 rows, test 3 rows" in stdout
    split = load_split(out)
    assert sorted(split.test.to_raw().get_column("item").to_list()) == [30, 40, 40]
    assert json.loads((out / "split.json").read_text())["seed"] == 4


def test_existing_folder_needs_force(tmp_path, ratings_csv, capsys):
    out = tmp_path / "split"
    out.mkdir()
    argv = ["split", str(ratings_csv), str(out), "-p", "fraction=0.5",
            "--columns", "user=userId,item=movieId"]
    code, _, err = run(argv, capsys)
    assert code == 1 and "exists" in err and "--force" in err
    code, _, _ = run([*argv, "--force"], capsys)
    assert code in (0, None) and len(load_split(out).test) == 4


def test_bad_parameters_are_reported_without_traceback(tmp_path, ratings_csv, capsys):
    base = ["split", str(ratings_csv), str(tmp_path / "x"), "--columns", "user=userId,item=movieId"]
    code, _, err = run([*base, "-p", "fractoin=0.2"], capsys)
    assert code == 1 and "no parameter 'fractoin'" in err and "Traceback" not in err
    code, _, err = run([*base, "-p", "fraction=2"], capsys)
    assert code == 1 and "fraction must lie in (0, 1)" in err
    code, _, err = run([*base, "-p", "fraction"], capsys)
    assert code == 1 and "expected key=value" in err
    code, _, err = run(["split", "ml-100kk", str(tmp_path / "y"), "-p", "fraction=0.2"], capsys)
    assert code == 1 and "neither a file nor a known dataset" in err and "ml-100k" in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_dataset_by_name_with_folds(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RECSYS_EVAL_DATA", str(ml100k_dir().parent))
    out = tmp_path / "cv"
    code, stdout, _ = run(["split", "ml-100k", str(out), "-m", "kfold", "-p", "k=5",
                           "-p", "per_user=true", "--seed", "1"], capsys)
    assert code in (0, None) and stdout.count("fold") >= 5
    folds = load_splits(out)
    assert [f.name for f in folds] == ["fold1", "fold2", "fold3", "fold4", "fold5"]
    assert sum(len(f.test) for f in folds) == 100_000


def test_official_folds_and_a_date(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RECSYS_EVAL_DATA", str(ml100k_dir().parent))
    code, stdout, _ = run(["split", "ml-100k", str(tmp_path / "o"), "-m", "official",
                           "-p", 'names=["u1", "ua"]'], capsys)
    assert code in (0, None) and "u1: train 80,000 rows, test 20,000 rows" in stdout
    assert [f.name for f in load_splits(tmp_path / "o")] == ["u1", "ua"]
    code, stdout, _ = run(["split", "ml-100k", str(tmp_path / "t"), "-m", "time",
                           "-p", "at=1998-01-01"], capsys)
    split = load_split(tmp_path / "t")
    assert split.train.timestamps.max() < 883_612_800 <= split.test.timestamps.min()
