"""The integer fast path of read_delimited gives exactly what polars' reader gives (names, Int64 columns,
values), and hands every file that does not fit it to polars."""

from __future__ import annotations

import numba
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.data import delimited
from recsys_eval.data.delimited import read_delimited


def _both(tmp_path, text: bytes, separator: str = ",", header: bool = True):
    path = tmp_path / "f.csv"
    path.write_bytes(text)
    ours = read_delimited(path, what="f", separator=separator, header=header).frame
    theirs = pl.read_csv(path, separator=separator, has_header=header, infer_schema_length=10_000)
    if not header:
        theirs.columns = [f"column_{i}" for i in range(1, theirs.width + 1)]
    return ours, theirs


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.lists(st.integers(0, 10**18 - 1), min_size=3, max_size=3), min_size=1, max_size=40),
    crlf=st.booleans(),
    final_newline=st.booleans(),
    zeros=st.booleans(),
)
def test_integer_files_read_as_polars_reads_them(tmp_path_factory, rows, crlf, final_newline, zeros):
    end = "\r\n" if crlf else "\n"
    cell = "{:03d}" if zeros else "{}"
    text = end.join(["user,item,rank"] + [",".join(cell.format(v) for v in row) for row in rows])
    ours, theirs = _both(tmp_path_factory.mktemp("f"), (text + (end if final_newline else "")).encode())
    assert ours.equals(theirs)
    assert ours.dtypes == [pl.Int64] * 3


@pytest.mark.parametrize("text", [
    b"user,item\n1,2\n\n3,4\n",  # a blank line
    b"user,item\n1,-2\n",  # a sign
    b"user,item\n1,2.5\n",  # a number with a fraction
    b"user,item\n1,a7\n",  # text
    b"user,item\n1,1234567890123456789\n",  # 19 digits
    b'"user",item\n1,2\n',  # a quoted name
    b"user,item\n1,2,3\n",  # a field too many
    b"user,item\n1\n",  # a field missing
    b"user,item\n1,\n",  # an empty field
    b"user,user\n1,2\n",  # a repeated name
])
def test_files_that_do_not_fit_go_to_polars(tmp_path, text):
    path = tmp_path / "f.csv"
    path.write_bytes(text)
    assert delimited._read_integers(path, ",", True, None) is None
    try:
        expected = pl.read_csv(path, infer_schema_length=10_000)
    except pl.exceptions.PolarsError:
        return  # polars refuses it; read_delimited then names the line (tests/data/test_files.py)
    table = read_delimited(path, what="f", separator=",", header=True)
    assert table.frame.drop_nulls().equals(expected.drop_nulls())


def test_tabs_no_header_and_many_chunks(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 10**9, size=(1_000_000, 2))
    text = "\n".join(f"{a}\t{b}" for a, b in values).encode() + b"\n"
    monkeypatch.setattr(numba, "get_num_threads", lambda: 7)  # ~20 MB: 4 chunks, cut inside lines
    ours, theirs = _both(tmp_path, text, separator="\t", header=False)
    assert len(delimited._chunk_bounds(np.frombuffer(text, dtype=np.uint8), 0, 7)) == 5
    assert ours.equals(theirs)
    assert ours["column_1"].to_numpy().tolist() == values[:, 0].tolist()


def test_chunks_end_at_line_ends(tmp_path):
    data = np.frombuffer(b"12,3\n" * 4_000_000, dtype=np.uint8)
    bounds = delimited._chunk_bounds(data, 0, 3)
    assert bounds[0] == 0 and bounds[-1] == len(data) and len(bounds) == 4
    assert all(data[b - 1] == 10 for b in bounds[1:])


def test_given_integer_types_are_kept(tmp_path):
    path = tmp_path / "f.csv"
    path.write_bytes(b"user,item\n1,2\n3,4\n")
    frame = read_delimited(path, what="f", separator=",", header=True, dtypes={"item": pl.Int32}).frame
    assert frame.dtypes == [pl.Int64, pl.Int32]
    named = read_delimited(path, what="f", separator=",", header=True, columns=["u", "i"],
                           dtypes={"u": pl.Int64, "i": pl.Int64}).frame
    assert named.columns == ["u", "i"] and named["i"].to_list() == [2, 4]
