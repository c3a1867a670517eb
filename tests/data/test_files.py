"""load_file: your own interactions from CSV, other delimited text and Parquet, with clear errors."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from recsys_eval.data import load_file
from recsys_eval.errors import ConfigError, DataError


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_with_a_column_mapping(tmp_path):
    path = _write(tmp_path, "r.csv", "uid,iid,stars,when,extra\nu1,i9,4,10,x\nu2,i9,2.5,20,y\nu1,i3,5,30,z\n")
    data = load_file(path, {"user": "uid", "item": "iid", "rating": "stars", "timestamp": "when"})
    assert data.user_ids.to_list() == ["u1", "u2"] and data.item_ids.to_list() == ["i3", "i9"]
    assert data.frame.to_dicts() == [
        {"user": 0, "item": 1, "rating": 4.0, "timestamp": 10},
        {"user": 1, "item": 1, "rating": 2.5, "timestamp": 20},
        {"user": 0, "item": 0, "rating": 5.0, "timestamp": 30},
    ]
    assert data.source == str(path)


def test_default_role_names_and_implicit_data(tmp_path):
    path = _write(tmp_path, "r.tsv", "user\titem\n3\t1\n1\t2\n")
    data = load_file(path)
    assert data.frame.columns == ["user", "item"]
    assert data.user_ids.to_list() == [1, 3]


@pytest.mark.parametrize(
    ("text", "kwargs"),
    [
        ("1::10::4::100\n2::10::3::200\n", {}),
        ("1;10;4;100\n2;10;3;200\n", {"separator": ";"}),
        ("1|10|4|100\n2|10|3|200\n", {}),
    ],
)
def test_headerless_files_and_separators(tmp_path, text, kwargs):
    path = _write(tmp_path, "r.dat", text)
    data = load_file(
        path,
        {"user": "column_1", "item": "column_2", "rating": "column_3", "timestamp": "column_4"},
        header=False,
        **kwargs,
    )
    assert data.to_raw().rows() == [(1, 10, 4.0, 100), (2, 10, 3.0, 200)]


def test_timestamp_format(tmp_path):
    path = _write(tmp_path, "r.csv", "user,item,timestamp\n1,2,2020-01-02 03:04:05\n")
    data = load_file(
        path, {"user": "user", "item": "item", "timestamp": "timestamp"}, timestamp_format="%Y-%m-%d %H:%M:%S"
    )
    assert data.timestamps[0] == int(datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp())


def test_parquet(tmp_path):
    path = tmp_path / "r.parquet"
    pl.DataFrame(
        {"u": [5, 6], "i": ["a", "b"], "r": [1.0, 2.0], "t": [datetime(2001, 1, 1), datetime(2002, 1, 1)]}
    ).write_parquet(path)
    data = load_file(path, {"user": "u", "item": "i", "rating": "r", "timestamp": "t"})
    assert data.timestamps.tolist() == [978307200, 1009843200]
    assert data.item_ids.to_list() == ["a", "b"]


def test_duplicates_policy_is_passed_on(tmp_path):
    path = _write(tmp_path, "r.csv", "user,item,rating\n1,2,3\n1,2,5\n")
    with pytest.raises(DataError, match=r"1 \(user, item\) pairs occur more than once"):
        load_file(path)
    assert load_file(path, duplicates="mean").ratings.tolist() == [4.0]


@pytest.mark.parametrize(
    ("text", "columns", "kwargs", "message"),
    [
        (
            "user,item,rating\n1,2,3\n1,3,abc\n",
            None,
            {},
            r"line 3: column 'rating' has 'abc'; expected a number",
        ),
        ("user,item,rating\n" + "1,2,3\n" * 20_000 + "1,x,3\n", None, {"duplicates": "last"}, None),
        ("user,item,rating\n1,2,3\n1,,3\n", None, {}, r"line 3: no value in column 'item'"),
        ("user,item,rating\n1,2,3\n1,2,3,4\n", None, {}, r"line 3: 4 fields separated by ','; expected 3"),
        (
            "user,item,timestamp\n1,2,2020-01-01\n1,3,yesterday\n",
            None,
            {"timestamp_format": "%Y-%m-%d"},
            r"line 3: column 'timestamp' has 'yesterday'; expected a time in the format '%Y-%m-%d'",
        ),
        (
            "user,item,timestamp\n1,2,10\n1,3,2020-01-01\n",
            None,
            {},
            r"line 3: column 'timestamp' has '2020-01-01'; expected integer seconds",
        ),
        ("uid,iid\n1,2\n", None, {}, r"no columns named 'user' and 'item' \(the file has \['uid', 'iid'\]\)"),
        (
            "uid,iid\n1,2\n",
            {"user": "uid", "item": "iidd"},
            {},
            r"no column 'iidd' \(for item\).*did you mean 'iid'",
        ),
        ("user,item\n1.5,2\n", None, {}, r"column 'user' has 1 missing or unusable ids \(first at line 2: 1\.5\); expected a whole-number id"),
        # pandas writes NaN into an integer column as "nan" (and the column becomes text): never an id
        ("user,item\n1,2\nnan,3\n", None, {}, r"column 'user' has 1 missing or unusable ids \(first at line 3: 'nan'\)"),
        ("user,item\n1,2\n2,NULL\n", None, {}, r"column 'item' has 1 missing .* line 3: 'NULL'"),
    ],
)
def test_bad_input_names_file_line_and_column(tmp_path, text, columns, kwargs, message):
    path = _write(tmp_path, "bad.csv", text)
    if message is None:  # a text id after 20,000 integer ones: ids become text, no error
        assert load_file(path, columns, **kwargs).n_items == 2
        return
    with pytest.raises(DataError, match=rf"bad\.csv.*{message}"):
        load_file(path, columns, **kwargs)


def test_bad_arguments(tmp_path):
    path = _write(tmp_path, "r.csv", "user,item\n1,2\n")
    with pytest.raises(ConfigError, match=r"unknown role 'usr'.*did you mean 'user'"):
        load_file(path, {"usr": "user", "item": "item"})
    with pytest.raises(ConfigError, match="must map the role 'item'"):
        load_file(path, {"user": "user"})
    with pytest.raises(DataError, match=r"no file .*nope\.csv"):
        load_file(tmp_path / "nope.csv")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match=r"bad\.parquet: not a readable Parquet file"):
        load_file(bad)
    one = _write(tmp_path, "one.txt", "justonecolumn\n1\n")
    with pytest.raises(DataError, match="cannot tell the field separator"):
        load_file(one)


def test_double_colon_file_with_single_colons_inside_fields(tmp_path):
    """The fast path reads '::' as ':' with empty fields between; a ':' inside an id sends the file
    down the general path, which must give the same table a '::' split gives."""
    path = _write(tmp_path, "r.dat", "u:1::i1::4\nu2::i:2::5\n")
    data = load_file(path, {"user": "column_1", "item": "column_2", "rating": "column_3"}, header=False)
    assert data.to_raw().rows() == [("u:1", "i1", 4.0), ("u2", "i:2", 5.0)]
