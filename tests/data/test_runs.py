"""Runs and judgments in every format: identical values whatever the format, a slow reference for the
index, ranx as an independent computation, and one message per bad file naming file, column, value."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core.results import ResultsFolder
from recsys_eval.cli import main
from recsys_eval.data.runs import load_run, read_judgments, read_run, to_ranx, write_ranx, write_trec
from recsys_eval.errors import ConfigError, DataError, OutputError, RecsysEvalError
from recsys_eval.measure import measure

# users 1..4, items 10..19; ratings 1..5 (all relevant without a threshold); run scores with a tie
TEST = pl.DataFrame({
    "user": [1, 1, 1, 2, 2, 3, 4, 4],
    "item": [10, 11, 12, 10, 15, 13, 19, 11],
    "rating": [5.0, 3.0, 1.0, 4.0, 2.0, 2.0, 1.0, 5.0],
})
RUN = pl.DataFrame({
    "user": [1, 1, 1, 1, 2, 2, 2, 3, 3, 5],
    "item": [12, 10, 14, 16, 11, 10, 15, 17, 13, 10],
    "score": [0.9, 0.8, 0.8, 0.1, 0.7, 0.6, 0.5, 0.3, 0.2, 1.0],
})
METRICS = "precision,recall,ap,ndcg,rr,hit,auc,half_life"


def _per_unit(tmp_path, name, test, run, *extra):
    out = tmp_path / f"out-{name}"
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--test", str(test), "--run", str(run), "--metrics", METRICS, "--k", "1,2,5",
              "--out", str(out), *extra])
    assert exit_info.value.code in (0, None)
    return ResultsFolder.open(out).scan_per_unit().collect().drop("system").sort("user", "metric", "k")


def _write_all_formats(tmp_path):
    """The same TEST and RUN in every format: (name, test path, run path, extra CLI args)."""
    runs = {}
    RUN.write_csv(tmp_path / "run.csv")
    RUN.write_csv(tmp_path / "run.tsv", separator="\t")
    RUN.write_parquet(tmp_path / "run.parquet")
    RUN.write_csv(tmp_path / "headerless.txt", separator="\t", include_header=False)
    (tmp_path / "run.trec").write_text("".join(
        f"{u} Q0 {i} {r} {s} sys\n" for r, (u, i, s) in enumerate(RUN.iter_rows(), start=1)))
    ranx_run: dict = {}
    for u, i, s in RUN.iter_rows():
        ranx_run.setdefault(str(u), {})[str(i)] = s
    (tmp_path / "run.json").write_text(json.dumps(ranx_run))
    TEST.write_csv(tmp_path / "test.csv")
    TEST.write_parquet(tmp_path / "test.parquet")
    TEST.write_csv(tmp_path / "test.elliot", separator="\t", include_header=False)
    (tmp_path / "test.qrels").write_text("".join(f"{u}\t0\t{i}\t{int(g)}\n" for u, i, g in TEST.iter_rows()))
    qrels: dict = {}
    for u, i, g in TEST.iter_rows():
        qrels.setdefault(str(u), {})[str(i)] = int(g)
    (tmp_path / "qrels.json").write_text(json.dumps(qrels))
    runs["csv"] = (tmp_path / "test.csv", tmp_path / "run.csv", [])
    runs["tsv"] = (tmp_path / "test.csv", tmp_path / "run.tsv", [])
    runs["parquet"] = (tmp_path / "test.parquet", tmp_path / "run.parquet", [])
    runs["header-less tsv"] = (tmp_path / "test.csv", tmp_path / "headerless.txt",
                               ["--format", "tsv", "--columns", "user,item,score", "--test-format", "csv"])
    runs["elliot"] = (tmp_path / "test.elliot", tmp_path / "headerless.txt", ["--format", "elliot"])
    runs["trec"] = (tmp_path / "test.qrels", tmp_path / "run.trec", [])
    runs["ranx"] = (tmp_path / "qrels.json", tmp_path / "run.json", [])
    return runs


def test_every_format_gives_identical_per_unit_values(tmp_path):
    runs = _write_all_formats(tmp_path)
    reference = _per_unit(tmp_path, "csv", *runs.pop("csv")[:2])
    assert reference.height and set(reference["user"]) == {1, 2, 3, 4}
    # hand-worked: user 1 ranks 12 (relevant), 10 (relevant) tied with 14 at 0.8, 10 first by item order
    p2 = reference.filter((pl.col("user") == 1) & (pl.col("metric") == "precision") & (pl.col("k") == 2))
    assert p2["value"].to_list() == [1.0]
    for name, (test, run, extra) in runs.items():
        assert _per_unit(tmp_path, name, test, run, *extra).equals(reference), name


def test_pandas_and_polars_frames_give_the_same_input_as_files(tmp_path):
    TEST.write_csv(tmp_path / "test.csv")
    RUN.write_csv(tmp_path / "run.csv")
    files = load_run(tmp_path / "test.csv", tmp_path / "run.csv")
    for test, run in ((TEST, RUN), (TEST.to_pandas(), RUN.to_pandas())):
        frames = load_run(test, run)
        for got, want in ((frames.rankings, files.rankings), (frames.targets, files.targets)):
            assert np.array_equal(got.offsets, want.offsets) and np.array_equal(got.items, want.items)
        assert frames.user_ids.equals(files.user_ids) and frames.notes == files.notes


def test_gain_binary_changes_ndcg_only(tmp_path):
    TEST.write_csv(tmp_path / "test.csv")
    RUN.write_csv(tmp_path / "run.csv")
    graded = _per_unit(tmp_path, "graded", tmp_path / "test.csv", tmp_path / "run.csv")
    binary = _per_unit(tmp_path, "binary", tmp_path / "test.csv", tmp_path / "run.csv", "--gain", "binary")
    is_ndcg = pl.col("metric") == "ndcg"
    assert graded.filter(~is_ndcg).equals(binary.filter(~is_ndcg))  # half-life utility included
    assert not graded.filter(is_ndcg).equals(binary.filter(is_ndcg))


# -- the index against a slow reference ------------------------------------------------------------
ids = st.one_of(st.integers(-3, 40), st.sampled_from(["a", "b", "c", "u7", "zz"]))


@settings(max_examples=60, deadline=None)
@given(
    test_pairs=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 12), st.sampled_from([1.0, 2.0, 4.5])),
                        min_size=1, max_size=30, unique_by=lambda t: t[:2]),
    run_pairs=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 14), st.sampled_from([0.1, 0.5, 0.5, 2.0])),
                       min_size=1, max_size=40, unique_by=lambda t: t[:2]),
    train_pairs=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 16)), max_size=40),  # repeats allowed
    text_users=st.booleans(),
    seed=st.integers(0, 100),
    pieces=st.integers(1, 3),
)
def test_load_run_builds_what_a_slow_reference_builds(test_pairs, run_pairs, train_pairs, text_users, seed, pieces):
    def user_id(u):
        return f"u{u}" if text_users else u * 3 - 4

    test = pl.DataFrame({"user": [user_id(u) for u, _, _ in test_pairs], "item": [i for _, i, _ in test_pairs],
                         "rating": [g for _, _, g in test_pairs]})
    run = pl.DataFrame({"user": [user_id(u) for u, _, _ in run_pairs], "item": [i for _, i, _ in run_pairs],
                        "score": [s for _, _, s in run_pairs]}).sample(fraction=1.0, shuffle=True, seed=seed)
    train = pl.DataFrame({"user": [user_id(u) for u, _ in train_pairs], "item": [i for _, i in train_pairs]},
                         schema={"user": test["user"].dtype, "item": pl.Int64})
    if not set(test["user"]) & set(run["user"]):
        with pytest.raises(DataError, match="share no user"):
            load_run(test, run)
        return
    # in chunks, as a Parquet file of several row groups is read: the index reads each in place
    got = load_run(*(_in_chunks(frame, pieces) for frame in (test, run)), _in_chunks(train, pieces) if len(train) else None)
    catalogue = sorted(set(test["item"]) | set(run["item"]) | set(train["item"]))
    users = sorted(set(test["user"]))
    assert got.user_ids.to_list() == users and got.item_ids.to_list() == catalogue
    for unit, user in enumerate(users):
        judged = sorted((catalogue.index(i), g) for u, i, g in test.iter_rows() if u == user)
        t = slice(got.targets.offsets[unit], got.targets.offsets[unit + 1])
        assert got.targets.items[t].tolist() == [i for i, _ in judged]
        assert got.targets.gain[t].tolist() == [g for _, g in judged]
        ranked = sorted((-s, catalogue.index(i)) for u, i, s in run.iter_rows() if u == user)
        r = slice(got.rankings.offsets[unit], got.rankings.offsets[unit + 1])
        assert got.rankings.items[r].tolist() == [i for _, i in ranked]
        assert got.rankings.scores[r].tolist() == [-s for s, _ in ranked]
    left_out = [len({i for u, i in train.iter_rows() if u == user}
                    - {i for u, i, _ in test.iter_rows() if u == user}
                    - {i for u, i, _ in run.iter_rows() if u == user}) for user in users]
    assert got.targets.n_candidates.tolist() == [len(catalogue) - n for n in left_out]
    if got.train is not None:  # each unit reads its own user's TRAIN profile (calibration, serendipity...)
        for unit, user in enumerate(users):
            own = {catalogue.index(i) for u, i in train.iter_rows() if u == user}
            assert set(got.train.filter(pl.col("user") == unit).get_column("item")) == own
        assert got.train.get_column("user").n_unique() == train.get_column("user").n_unique()
    scored = {(u, i): s for u, i, s in run.iter_rows()}
    judged_and_scored = sorted((users.index(u), catalogue.index(i), g, scored[u, i])
                               for u, i, g in test.iter_rows() if (u, i) in scored)
    assert [(users.index(u), catalogue.index(i), g, p) for u, i, g, p in got.predictions.iter_rows()] == judged_and_scored


def _in_chunks(frame: pl.DataFrame, pieces: int) -> pl.DataFrame:
    """``frame`` as up to ``pieces`` chunks of rows."""
    size = -(-len(frame) // pieces)
    return pl.concat([frame.slice(p * size, size) for p in range(pieces)], rechunk=False)


def test_train_items_leave_the_candidates_unless_tested_or_ranked():
    train = pl.DataFrame({"user": [1, 1, 1, 1, 2, 9], "item": [10, 14, 18, 18, 18, 19]})
    got = load_run(TEST, RUN, train)
    n_items = got.item_ids.len()  # every item of TEST, RUN and TRAIN
    assert n_items == len(set(TEST["item"]) | set(RUN["item"]) | set(train["item"]))
    # user 1: 10 tested, 14 ranked, 18 neither (its repeat counts once); user 2: 18
    assert got.targets.n_candidates.tolist() == [n_items - 1, n_items - 1, n_items, n_items]
    assert any("RUN ranks 2 items that are in the same user's TRAIN" in n for n in got.notes)  # 10, 14
    # TRAIN's users numbered as the units (users 1 and 2 are units 0 and 1), then the others (5: 4, 9: 5)
    assert got.train.sort("user", "item").rows() == [(0, 0), (0, 4), (0, 8), (1, 8), (5, 9)]


def test_rank_runs_are_ordered_by_rank_whatever_the_row_order():
    run = pl.DataFrame({"user": [1, 2, 1, 1], "item": [10, 10, 11, 12], "rank": [3, 1, 1, 2]})
    got = load_run(TEST, run)
    ranked = got.rankings.items[: got.rankings.offsets[1]]
    assert got.item_ids.gather(ranked).to_list() == [11, 12, 10] and got.rankings.scores is None


@pytest.mark.parametrize("seed", range(4))
def test_files_already_in_order_give_what_shuffled_files_give(seed):
    """TEST grouped by user in item order, RUN in rank order, TRAIN grouped by user: read in their
    own order (no row list built) they give what the same rows shuffled give (row lists built and
    followed), long lists (> 32 rows a user) included."""
    rng = np.random.default_rng(seed)
    n_users, n_items = 40, 90
    def pairs(n, users):
        keys = np.unique(rng.integers(0, users, n) * n_items + rng.integers(0, n_items, n))
        return pl.DataFrame({"user": keys // n_items, "item": keys % n_items})  # by user, then item

    test = pairs(1600, n_users)
    test = test.with_columns(rating=pl.Series(rng.integers(1, 6, test.height).astype(float)))
    run = pairs(1500, n_users + 3).sample(fraction=1.0, shuffle=True, seed=seed)  # 3 users not in TEST
    run = run.with_columns(score=pl.Series(rng.random(run.height))).sort("user", "score", descending=[False, True])
    run = run.with_columns(rank=pl.int_range(1, pl.len() + 1).over("user"))
    train = pairs(900, n_users + 5)
    in_order = load_run(test, run, train)
    shuffled = [f.sample(fraction=1.0, shuffle=True, seed=seed + 1) for f in (test, run, train)]
    by_user = [f.sort("user", maintain_order=True) for f in shuffled]  # grouped, not in item or rank order
    for other in (load_run(*shuffled), load_run(*by_user)):
        for attribute in ("targets", "rankings"):
            ours, theirs = getattr(in_order, attribute), getattr(other, attribute)
            for name in ("offsets", "items", "gain", "n_candidates"):
                if hasattr(ours, name):
                    assert np.array_equal(getattr(ours, name), getattr(theirs, name)), (attribute, name)
        assert in_order.rankings.scores is None and other.rankings.scores is None  # ranked by rank
        assert in_order.train.sort("user", "item").equals(other.train.sort("user", "item"))
        assert in_order.notes == other.notes and any("not in TEST" in note for note in in_order.notes)
    assert max(np.diff(in_order.targets.offsets)) > 32 and in_order.train.height == train.height


# -- writers and ranx, an independent computation --------------------------------------------------
def test_written_trec_and_ranx_runs_read_back_and_ranx_agrees(tmp_path):
    ranx = pytest.importorskip("ranx")
    test = TEST.filter(pl.col("user") != 4)  # ranx needs a list for every judged user
    run = RUN.with_columns(pl.col("score") + pl.int_range(pl.len()) * 1e-3)  # no ties: ranx breaks them its way
    data = load_run(test, run)
    write_trec(data.rankings, tmp_path / "out.trec", user_ids=data.user_ids, item_ids=data.item_ids)
    write_ranx(data.rankings, tmp_path / "out.json", user_ids=data.user_ids, item_ids=data.item_ids)
    for path in (tmp_path / "out.trec", tmp_path / "out.json"):
        again = load_run(test, read_run(path))
        assert np.array_equal(again.rankings.items, data.rankings.items)
    qrels = to_ranx(data.targets, user_ids=data.user_ids, item_ids=data.item_ids)
    ours = measure(data.rankings, data.targets, metrics=["precision", "recall", "ap", "ndcg", "rr"], k=[2, 5],
                   user_ids=data.user_ids)
    runs = to_ranx(ours)
    for path, kind in ((tmp_path / "out.trec", "trec"), (tmp_path / "out.json", "json")):
        theirs = ranx.Run.from_file(str(path), kind=kind)
        for ours_name, ranx_name in (("precision", "precision"), ("recall", "recall"), ("ap", "map"),
                                     ("ndcg", "ndcg"), ("rr", "mrr")):
            for k in (2, 5):
                values = ranx.evaluate(qrels, theirs, f"{ranx_name}@{k}", return_mean=False)
                by_user = dict(zip(theirs.get_query_ids(), values, strict=True))
                mine = runs["system"].scores[f"{ours_name}@{k}"]
                assert mine.keys() == by_user.keys()
                assert all(abs(mine[u] - by_user[u]) < 1e-12 for u in mine), (ours_name, k)


def test_to_ranx_refuses_what_ranx_cannot_hold():
    data = load_run(TEST.with_columns(pl.col("rating") / 2), RUN)
    with pytest.raises(DataError, match="grades are integers"):
        to_ranx(data.targets)
    with pytest.raises(ConfigError, match="takes Rankings, Targets or a per-unit table"):
        to_ranx([1, 2])


# -- bad files: one message naming the file, the column and the value ------------------------------
@pytest.mark.parametrize("name, content, message", [
    ("r.csv", b"user,item,score\n", "r.csv: has a header and no rows"),
    ("r.csv", b"", "r.csv: missing column"),
    ("r.csv", b"user,item,score\n1,2,0.5\nnan,3,0.4\n", "r.csv: column 'user' has 1 missing .* line 3: 'nan'"),
    ("r.csv", b"user,item,score\na,2,0.5\n  ,3,0.4\n", "r.csv: column 'user' has 1 missing .* line 3: '  '"),
    ("r.csv", b"user,item,score\n1,2,0.5\n1,,0.4\n", "r.csv: column 'item' has 1 missing .* line 3: None"),
    ("r.csv", b"user,item,score\n1,2,abc\n", r"r.csv: column 'score' is not numeric \(first at line 2: 'abc'\)"),
    ("r.csv", b"user,item,score\n1,2,0.5\n1,3,nan\n", "r.csv: column 'score' has 1 NaN .* line 3, user 1, item 3"),
    ("r.csv", b"user,item,score\n1,2,0.5\n1,3,0.4\n1,2,0.3\n",
     r"r.csv: 1 row\(s\) repeat the \(user, item\) pair .* user 1, item 2 \(line 2, again at line 4\)"),
    ("r.csv", b"user,item,rank\n1,2,1\n1,3,1\n", "r.csv: column 'rank' is not 1..L .* user 1 has 2 rows with ranks 1, 1"),
    ("r.csv", b"user,item,rank\n1,2,1\n1,3,3\n", "column 'rank' is not 1..L .* ranks 1, 3; expected each of 1, 2"),
    ("r.csv", b"user,item,rank\n1,2,0\n1,3,1\n", "column 'rank' is not 1..L .* ranks 0, 1"),
    ("r.csv", b"user,item,rank\n1,2,-1\n", "column 'rank' is not 1..L .* ranks -1"),
    ("r.csv", b"user,item,rank\n1,2,1.5\n", r"column 'rank' holds non-integer values \(first at line 2: 1.5\)"),
    ("r.csv", "user,item,score\n1,café,0.5\n".encode("latin-1"), "r.csv, line 2: bytes that are not UTF-8"),
    ("r.trec", b"1 Q0 2 1\n", "r.trec, line 1: 4 fields; expected 6"),
    ("r.trec", b"1 Q0 2 1 0.5 t\n1 Q0 3 2 x t\n", "r.trec: column 'score' is not numeric .* line 2: 'x'"),
    ("r.trec", b"1  Q0\t2 1 0.5 t\n1 Q0 2 2 0.4 t\n", r"r.trec: 1 row\(s\) repeat .* user 1, item 2"),
    ("r.json", b"[1, 2]", "r.json: expected a JSON object"),
    ("r.json", b'{"1": 2}', "r.json: user '1' maps to int"),
    ("r.json", b'{"1": {"2": "x"}}', "r.json: column 'score' has 1 NaN .* entry 1"),
    ("r.json", b"{", "r.json, line 1: not JSON"),
    ("r.xlsx", b"", "r.xlsx: cannot tell the format from the extension"),
    ("r.parquet", b"user,item\n", "r.parquet: not a readable Parquet file"),
])
def test_bad_run_files(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(RecsysEvalError, match=message):
        read_run(tmp_path / name)


@pytest.mark.parametrize("frame, message", [
    (pl.DataFrame({"user": [1.0, float("nan")], "item": [1, 2], "score": [1.0, 2.0]}), "'user' has 1 missing .* row 2: nan"),
    (pl.DataFrame({"user": [1.0, 2.5], "item": [1, 2], "score": [1.0, 2.0]}), "'user' .* row 2: 2.5\\); expected a whole-number"),
    (pl.DataFrame({"user": ["a", None], "item": [1, 2], "score": [1.0, 2.0]}), "'user' has 1 missing .* row 2: None"),
    (pl.DataFrame({"user": [1], "item": [[1]], "score": [1.0]}), "'item' has type List"),
])
def test_bad_ids_in_parquet(tmp_path, frame, message):
    frame.write_parquet(tmp_path / "r.parquet")
    with pytest.raises(DataError, match=f"r.parquet: column {message}"):
        read_run(tmp_path / "r.parquet")


def test_bad_judgments_and_layouts(tmp_path):
    (tmp_path / "t.qrels").write_text("1 0 2 1\n1 0 2 0\n")
    with pytest.raises(DataError, match=r"t.qrels: 1 row\(s\) repeat .* user 1, item 2 .* one row per"):
        read_judgments(tmp_path / "t.qrels")
    (tmp_path / "t.tsv").write_text("1\t2\t3\n")
    with pytest.raises(DataError, match="t.tsv: 3 fields per line; expected 2"):
        read_judgments(tmp_path / "t.tsv", columns=["user", "item"])
    with pytest.raises(ConfigError, match="unknown format 'excel'"):
        read_judgments(tmp_path / "t.tsv", format="excel")
    with pytest.raises(DataError, match="absent.qrels: no such file"):
        read_judgments(tmp_path / "absent.qrels")


def test_header_less_columns_may_skip_fields(tmp_path):
    (tmp_path / "t.tsv").write_text("1\tx\t2\t3\n4\ty\t5\t1\n")
    frame = read_judgments(tmp_path / "t.tsv", columns=["user", "_", "item", "rating"])
    assert frame.rows() == [(1, 2, 3.0), (4, 5, 1.0)]


def test_qrels_grades_from_one_are_relevant_and_the_cli_says_so(tmp_path, capsys):
    (tmp_path / "t.qrels").write_text("1 0 10 2\n1 0 11 0\n2 0 10 1\n")
    (tmp_path / "r.csv").write_text("user,item,score\n1,11,0.9\n1,10,0.5\n2,10,0.1\n")
    with pytest.raises(SystemExit):
        main(["evaluate", "--test", str(tmp_path / "t.qrels"), "--run", str(tmp_path / "r.csv"),
              "--metrics", "precision", "--k", "1", "--out", str(tmp_path / "o")])
    assert "grade >= 1" in re.sub(r"\s+", " ", capsys.readouterr().out)
    per_unit = ResultsFolder.open(tmp_path / "o").scan_per_unit().collect().sort("user")
    assert per_unit["value"].to_list() == [0.0, 1.0]  # item 11 graded 0: judged non-relevant


def test_a_run_written_over_a_folder_fails_naming_the_path_and_leaves_nothing(tmp_path):
    data = load_run(TEST, RUN)
    blocked = tmp_path / "out.trec"
    blocked.mkdir()  # a folder where the file should go: the rename cannot replace it
    with pytest.raises(OutputError, match="out.trec"):
        write_trec(data.rankings, blocked, user_ids=data.user_ids, item_ids=data.item_ids)
    assert [p.name for p in tmp_path.iterdir()] == ["out.trec"] and blocked.is_dir()
