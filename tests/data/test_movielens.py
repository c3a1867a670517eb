"""MovieLens loaders: exact counts on the shared copies, each file format on small files written here,
and the Parquet cache (fresh, stale, corrupt, read-only data home)."""

from __future__ import annotations

import csv
import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

from recsys_eval.data import (
    dataset_path,
    list_datasets,
    load_dataset,
    movielens,
    presence,
)
from recsys_eval.data.home import is_writable
from recsys_eval.errors import DataError

GENRES_100K = [
    "unknown",
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
]

# Counts published by GroupLens (README files) and, for the shared copies, checked by hand there.
EXPECTED = {
    "ml-100k": (100_000, 943, 1_682),
    "ml-latest-small": (100_836, 610, 9_724),
    "ml-1m": (1_000_209, 6_040, 3_706),
    "ml-10m": (10_000_054, 69_878, 10_677),
    "ml-20m": (20_000_263, 138_493, 26_744),
    "ml-25m": (25_000_095, 162_541, 59_047),
    "ml-32m": (32_000_204, 200_948, 84_432),
}


def _snapshot(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*"))


# -- the shared copies ------------------------------------------------------------------------
@pytest.mark.parametrize("name", [d.name for d in list_datasets()])
def test_exact_counts_of_every_dataset_present(shared_home, name):
    if presence(name, shared_home) == "absent":
        pytest.skip(f"{name} is not in {shared_home}")
    data = load_dataset(name, download=False)  # through RECSYS_EVAL_DATA
    assert (len(data), data.n_users, data.n_items) == EXPECTED[name]
    assert data.frame.columns == ["user", "item", "rating", "timestamp"]
    assert data.items_meta.height == data.n_items


def test_ml100k_matches_an_independent_reading(shared_home):
    path = shared_home / "ml-100k" / "u.data"
    if not path.is_file():
        pytest.skip("no ml-100k in the shared data")
    with open(path, newline="") as stream:
        rows = [tuple(map(int, r)) for r in csv.reader(stream, delimiter="\t")]
    assert (len(rows), len({r[0] for r in rows}), len({r[1] for r in rows})) == (100_000, 943, 1_682)
    data = load_dataset("ml-100k", shared_home, download=False)
    raw = data.to_raw()
    assert (
        list(zip(raw["user"], raw["item"], raw["rating"].cast(pl.Int64), raw["timestamp"], strict=True))
        == rows
    )
    meta = data.items_meta.row(int(data.item_index([1])[0]), named=True)
    assert meta["title"] == "Toy Story (1995)" and meta["year"] == 1995
    assert meta["genres"] == ["Animation", "Children's", "Comedy"]
    # ISO-8859-1 titles decoded
    titles = data.items_meta["title"]
    assert titles.str.contains("é").any()


def test_ml_latest_small_from_the_zip_matches_pandas(shared_home, tmp_path):
    archive = shared_home / "ml-latest-small.zip"
    if not archive.is_file():
        pytest.skip("no ml-latest-small.zip in the shared data")
    before = _snapshot(shared_home)
    data = load_dataset("ml-latest-small", shared_home, download=False)
    with zipfile.ZipFile(archive) as zf:
        expected = pd.read_csv(io.BytesIO(zf.read("ml-latest-small/ratings.csv")))
        movies = pd.read_csv(io.BytesIO(zf.read("ml-latest-small/movies.csv")))
    raw = data.to_raw()
    assert raw["user"].to_list() == expected["userId"].to_list()
    assert raw["item"].to_list() == expected["movieId"].to_list()
    assert np.array_equal(raw["rating"].to_numpy(), expected["rating"].to_numpy(dtype=np.float32))
    assert raw["timestamp"].to_list() == expected["timestamp"].to_list()
    rated = movies[movies.movieId.isin(expected.movieId)].sort_values("movieId")
    meta = data.items_meta
    assert meta["title"].to_list() == [t.strip() for t in rated.title]
    assert meta["genres"].to_list() == [
        [] if g == "(no genres listed)" else g.split("|") for g in rated.genres
    ]
    if not is_writable(shared_home):  # a read-only copy stays untouched: the cache goes elsewhere
        assert _snapshot(shared_home) == before
        assert list(Path(os.environ["RECSYS_EVAL_CACHE"]).glob("ml-latest-small-*/parquet/manifest.json"))


def test_dataset_path_of_a_read_only_archive_extracts_to_the_derived_folder(shared_home):
    if not (shared_home / "ml-latest-small.zip").is_file():
        pytest.skip("no ml-latest-small.zip in the shared data")
    if is_writable(shared_home):
        pytest.skip("the shared data home is writable")
    folder = dataset_path("ml-latest-small", shared_home, download=False)
    assert folder.is_relative_to(Path(os.environ["RECSYS_EVAL_CACHE"]))
    assert (folder / "ratings.csv").stat().st_size == 2_483_723
    assert dataset_path("ml-latest-small", shared_home, download=False) == folder
    if (shared_home / "ml-100k" / "u1.base").is_file():
        assert dataset_path("ml-100k", shared_home) == shared_home / "ml-100k"


# -- each format on small files ------------------------------------------------------------------
def _flags(*names: str) -> str:
    return "|".join("1" if g in names else "0" for g in GENRES_100K)


@pytest.fixture
def home_100k(tmp_path) -> Path:
    folder = tmp_path / "home" / "ml-100k"
    folder.mkdir(parents=True)
    (folder / "u.data").write_text("196\t242\t3\t881250949\n186\t302\t3\t891717742\n22\t242\t1\t878887116\n")
    items = (
        f"242|Kolya (1996)|24-Jan-1997||http://x|{_flags('Comedy')}\n"
        f"302|Café au lait (1994)|01-Jan-1994||http://y|{_flags('Drama', 'Romance')}\n"
        f"303|unknown||||{_flags('unknown')}\n"
    )
    (folder / "u.item").write_bytes(items.encode("iso-8859-1"))
    return folder.parent


def test_ml100k_format(home_100k):
    data = load_dataset("ml-100k", home_100k, download=False)
    assert data.user_ids.to_list() == [22, 186, 196]
    assert data.item_ids.to_list() == [242, 302]
    assert data.frame.to_dicts() == [
        {"user": 2, "item": 0, "rating": 3.0, "timestamp": 881250949},
        {"user": 1, "item": 1, "rating": 3.0, "timestamp": 891717742},
        {"user": 0, "item": 0, "rating": 1.0, "timestamp": 878887116},
    ]
    assert data.items_meta.to_dicts() == [
        {"item": 0, "title": "Kolya (1996)", "year": 1996, "genres": ["Comedy"]},
        {"item": 1, "title": "Café au lait (1994)", "year": 1994, "genres": ["Drama", "Romance"]},
    ]


def test_ml1m_format(tmp_path):
    folder = tmp_path / "ml-1m"
    folder.mkdir()
    (folder / "ratings.dat").write_text(
        "1::1193::5::978300760\n1::661::3::978302109\n2::1193::4::978298413\n"
    )
    (folder / "movies.dat").write_bytes(
        "1193::One Flew Over the Cuckoo's Nest (1975)::Drama\n"
        "661::Star Wars: Episode IV - A New Hope (1977)::Action|Adventure|Fantasy|Sci-Fi\n"
        "999::Sépia (1990)::Drama\n".encode("iso-8859-1")
    )
    data = load_dataset("ml-1m", tmp_path, download=False)
    assert (len(data), data.n_users, data.n_items) == (3, 2, 2)
    assert data.to_raw().rows() == [
        (1, 1193, 5.0, 978300760),
        (1, 661, 3.0, 978302109),
        (2, 1193, 4.0, 978298413),
    ]
    assert data.items_meta.to_dicts() == [
        {
            "item": 0,
            "title": "Star Wars: Episode IV - A New Hope (1977)",
            "year": 1977,
            "genres": ["Action", "Adventure", "Fantasy", "Sci-Fi"],
        },
        {"item": 1, "title": "One Flew Over the Cuckoo's Nest (1975)", "year": 1975, "genres": ["Drama"]},
    ]


def test_csv_format_with_quotes_and_no_genres(tmp_path):
    folder = tmp_path / "ml-latest-small"
    folder.mkdir()
    (folder / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,10,4.5,5\n2,20,0.5,6\n")
    (folder / "movies.csv").write_text(
        'movieId,title,genres\n10,"Heat, The (1995)",Action|Crime\n20,Babylon 5 ,(no genres listed)\n'
    )
    data = load_dataset("ml-latest-small", tmp_path, download=False)
    assert data.frame["rating"].to_list() == [4.5, 0.5]
    assert data.items_meta.to_dicts() == [
        {"item": 0, "title": "Heat, The (1995)", "year": 1995, "genres": ["Action", "Crime"]},
        {"item": 1, "title": "Babylon 5", "year": None, "genres": []},
    ]


@pytest.mark.parametrize(
    ("ratings", "message"),
    [
        ("1\t2\t3\t4\n1\t3\tx\t5\n", r"u\.data, line 2: column 'rating' has 'x'; expected a number"),
        ("1\t2\t3\t4\n1\t3\t4\n", r"u\.data, line 2: no value in column 'timestamp'"),
        ("1\t2\t3\t4\n\n1\t3\t4\t5\t6\n", r"u\.data, line 3: 5 fields separated by '\\t'; expected 4"),
        ("1\t2\t3\t4\n2.5\t3\t4\t5\n", r"u\.data, line 2: column 'user' has '2.5'; expected an integer"),
    ],
)
def test_unparseable_line_is_named(home_100k, ratings, message):
    (home_100k / "ml-100k" / "u.data").write_text(ratings)
    with pytest.raises(DataError, match=message):
        load_dataset("ml-100k", home_100k, download=False)


def test_double_colon_line_numbers(tmp_path):
    folder = tmp_path / "ml-1m"
    folder.mkdir()
    (folder / "ratings.dat").write_text("1::2::3::4\n1::2::3::4\n1:2::3::4\n")
    (folder / "movies.dat").write_text("2::A (1990)::Drama\n")
    with pytest.raises(
        DataError, match=r"ratings\.dat, line 3: 3 fields separated by the separator; expected 4"
    ):
        load_dataset("ml-1m", tmp_path, download=False)


def test_missing_item_file_is_named(home_100k):
    (home_100k / "ml-100k" / "u.item").unlink()
    with pytest.raises(DataError, match=r"lacks u\.item"):
        load_dataset("ml-100k", home_100k, download=False)


def test_unknown_dataset_suggests_the_closest():
    with pytest.raises(DataError, match=r"unknown dataset 'ml-10k'.*'ml-100k'.*did you mean 'ml-100k'"):
        load_dataset("ml-10k", download=False)


# -- the Parquet cache ------------------------------------------------------------------------------
def _no_parse(monkeypatch):
    def fail(source):
        raise AssertionError("parsed although the cache is fresh")

    monkeypatch.setattr(movielens, "parse_dataset", fail)


def _same(a, b) -> None:
    assert a.frame.equals(b.frame)
    assert a.user_ids.equals(b.user_ids) and a.item_ids.equals(b.item_ids)
    assert a.items_meta.equals(b.items_meta)


def test_cache_is_written_beside_the_data_and_read_back(home_100k, monkeypatch):
    first = load_dataset("ml-100k", home_100k, download=False)
    cache = home_100k / ".recsys-eval" / "ml-100k" / "parquet"
    assert sorted(p.name for p in cache.iterdir()) == [
        "interactions.parquet",
        "items.parquet",
        "manifest.json",
        "users.parquet",
    ]
    _no_parse(monkeypatch)
    _same(load_dataset("ml-100k", home_100k, download=False), first)
    # a new modification time over the same content keeps the cache
    os.utime(home_100k / "ml-100k" / "u.data", ns=(1, 1))
    _same(load_dataset("ml-100k", home_100k, download=False), first)


def test_stale_cache_is_rebuilt(home_100k):
    assert len(load_dataset("ml-100k", home_100k, download=False)) == 3
    path = home_100k / "ml-100k" / "u.data"
    stat = path.stat()
    text = path.read_text().replace("196\t242\t3", "196\t242\t5")  # same size, same mtime below
    path.write_text(text)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert load_dataset("ml-100k", home_100k, download=False).to_raw().row(0)[2] == 5.0
    with open(path, "a") as stream:
        stream.write("7\t302\t2\t881250950\n")
    assert len(load_dataset("ml-100k", home_100k, download=False)) == 4


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "manifest"])
def test_corrupt_cache_is_rebuilt(home_100k, damage):
    first = load_dataset("ml-100k", home_100k, download=False)
    cache = home_100k / ".recsys-eval" / "ml-100k" / "parquet"
    target = cache / ("manifest.json" if damage == "manifest" else "interactions.parquet")
    raw = target.read_bytes()
    if damage == "truncate":
        target.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        target.write_bytes(raw[:100] + bytes([raw[100] ^ 0xFF]) + raw[101:])
    elif damage == "delete":
        target.unlink()
    else:
        target.write_text("{not json")
    _same(load_dataset("ml-100k", home_100k, download=False), first)
    assert target.read_bytes() == raw  # rebuilt identically


def test_read_only_home_caches_in_the_derived_root(home_100k, monkeypatch):
    before = sorted(str(p) for p in home_100k.rglob("*"))
    for path in [home_100k, home_100k / "ml-100k"]:
        path.chmod(0o555)
    try:
        first = load_dataset("ml-100k", home_100k, download=False)
        assert sorted(str(p) for p in home_100k.rglob("*")) == before
        derived = Path(os.environ["RECSYS_EVAL_CACHE"])
        assert len(list(derived.glob("ml-100k-*/parquet/manifest.json"))) == 1
        _no_parse(monkeypatch)
        _same(load_dataset("ml-100k", home_100k, download=False), first)
    finally:
        for path in [home_100k, home_100k / "ml-100k"]:
            path.chmod(0o755)
