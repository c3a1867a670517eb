"""Other frameworks' runs: each fixture is written here in the framework's documented layout (RecBole's
atomic file, Elliot's recommendation TSVs, LensKit's item-list Parquet, RePlay's and Microsoft
Recommenders' frames) and must give the per-unit values of the same run written as our CSV; detection
says what it found, and a file that matches nothing is refused naming the formats."""

from __future__ import annotations

import polars as pl
import pytest

from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder
from recsys_eval.data.run_formats import FORMAT_MEANINGS, read_folder
from recsys_eval.data.runs import FORMATS, load_run, read_judgments, read_run
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure import measure
from test_runs import RUN, TEST  # users 1..4, items 10..19; a tie at 0.8 for user 1, broken by item order

METRICS = "precision,recall,ap,ndcg,rr,hit,auc"


def _evaluate(tmp_path, capsys, name, test, run, *extra):
    """Per-unit values of ``recsys-eval evaluate`` and what it printed."""
    out = tmp_path / f"out-{name}"
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--test", str(test), "--run", str(run), "--metrics", METRICS, "--k", "1,2,5",
              "--out", str(out), *extra])
    assert exit_info.value.code in (0, None)
    printed = capsys.readouterr().out
    values = ResultsFolder.open(out).scan_per_unit().collect().drop("system").sort("user", "metric", "k")
    return values, " ".join(printed.split())


@pytest.fixture
def reference(tmp_path, capsys):
    TEST.write_csv(tmp_path / "test.csv")
    RUN.write_csv(tmp_path / "run.csv")
    values, _ = _evaluate(tmp_path, capsys, "csv", tmp_path / "test.csv", tmp_path / "run.csv")
    assert values.height and set(values["user"]) == {1, 2, 3, 4}
    return values


def _ranked(run: pl.DataFrame) -> pl.DataFrame:
    """RUN with each user's rank, best first, ties by item (the order every reader gives them)."""
    return run.sort("user", pl.col("score"), "item", descending=[False, True, False]).with_columns(
        pl.int_range(1, pl.len() + 1).over("user").alias("rank"))


# -- Elliot ------------------------------------------------------------------------------------------
def test_an_elliot_folder_evaluates_like_the_csv(tmp_path, capsys, reference):
    """Elliot writes ``recs/<model>.tsv``: user, item, score, tab-separated, no header; detected."""
    recs = tmp_path / "recs"
    recs.mkdir()
    RUN.write_csv(recs / "BPRMF_factors=10.tsv", separator="\t", include_header=False)
    RUN.with_columns(-pl.col("score")).write_csv(recs / "ItemKNN.tsv", separator="\t", include_header=False)
    files = read_folder(recs)
    assert list(files) == ["BPRMF_factors=10", "ItemKNN"]
    values, printed = _evaluate(tmp_path, capsys, "elliot", tmp_path / "test.csv", files["BPRMF_factors=10"])
    assert values.equals(reference)
    assert "read as Elliot's layout" in printed
    reversed_run, _ = _evaluate(tmp_path, capsys, "knn", tmp_path / "test.csv", files["ItemKNN"])
    assert not reversed_run.equals(reference)  # the files are told apart


# -- RecBole -----------------------------------------------------------------------------------------
def test_a_recbole_atomic_file_evaluates_like_the_csv(tmp_path, capsys, reference):
    """RecBole's atomic-file layout: tab-separated, a header of ``name:type`` fields."""
    lines = ["user_id:token\titem_id:token\tscore:float"]
    lines += [f"{u}\t{i}\t{s}" for u, i, s in RUN.iter_rows()]
    (tmp_path / "BPR.inter").write_text("\n".join(lines) + "\n")
    values, _ = _evaluate(tmp_path, capsys, "recbole", tmp_path / "test.csv", tmp_path / "BPR.inter")
    assert values.equals(reference)
    (tmp_path / "topk.tsv").write_text("\n".join(lines) + "\n")  # another extension: detected by its header
    values, printed = _evaluate(tmp_path, capsys, "recbole-tsv", tmp_path / "test.csv", tmp_path / "topk.tsv")
    assert values.equals(reference) and "read as RecBole's atomic file" in printed


def test_a_recbole_top_k_as_token_sequences_evaluates_like_the_csv(tmp_path, capsys, reference):
    """``full_sort_topk`` saved per user: ``item_id:token_seq`` best first, ``score:float_seq``."""
    ranked = _ranked(RUN)
    lists = ranked.group_by("user", maintain_order=True).agg(
        pl.col("item").cast(pl.String).str.join(" "), pl.col("score").cast(pl.String).str.join(" "))
    lines = ["user_id:token\titem_id:token_seq\tscore:float_seq"]
    lines += [f"{u}\t{items}\t{scores}" for u, items, scores in lists.iter_rows()]
    (tmp_path / "topk.inter").write_text("\n".join(lines) + "\n")
    values, _ = _evaluate(tmp_path, capsys, "seq", tmp_path / "test.csv", tmp_path / "topk.inter")
    assert values.equals(reference)
    # without scores, the sequence's order is the ranking: the CSV with those ranks agrees
    (tmp_path / "ranks.inter").write_text("\n".join(
        ["user_id:token\titem_id:token_seq"] + [f"{u}\t{items}" for u, items, _ in lists.iter_rows()]) + "\n")
    ranked.drop("score").write_csv(tmp_path / "ranks.csv")
    by_rank, _ = _evaluate(tmp_path, capsys, "ranks-csv", tmp_path / "test.csv", tmp_path / "ranks.csv")
    values, _ = _evaluate(tmp_path, capsys, "ranks", tmp_path / "test.csv", tmp_path / "ranks.inter")
    assert values.equals(by_rank)
    assert read_run(tmp_path / "ranks.inter").filter(pl.col("user") == 1)["item"].to_list() == [12, 10, 14, 16]


def test_recbole_judgments_and_bad_sequences(tmp_path):
    lines = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    lines += [f"{u}\t{i}\t{r}\t0" for u, i, r in TEST.iter_rows()]
    (tmp_path / "ml.inter").write_text("\n".join(lines) + "\n")
    assert read_judgments(tmp_path / "ml.inter").equals(TEST.cast({"rating": pl.Float64}))
    (tmp_path / "bad.inter").write_text("user_id:token\titem_id:token_seq\tscore:float_seq\n1\t10 11\t0.5\n")
    with pytest.raises(DataError, match=r"bad.inter, line 2: the sequences item_id, score have different lengths"):
        read_run(tmp_path / "bad.inter")


# -- LensKit -----------------------------------------------------------------------------------------
def test_lenskit_item_list_parquet_native_and_flat_evaluate_like_the_csv(tmp_path, capsys, reference):
    """LensKit 2025 ``ItemListCollection.save_parquet``: native (a row per list, ``items`` a list of
    ``item_id, score, rank`` structs) and flat (``user_id, item_id, score, rank``)."""
    flat = _ranked(RUN).rename({"user": "user_id", "item": "item_id"})
    native = flat.group_by("user_id", maintain_order=True).agg(pl.struct("item_id", "score", "rank").alias("items"))
    native.write_parquet(tmp_path / "native.parquet")
    flat.write_parquet(tmp_path / "flat.parquet")
    _ranked(RUN).write_csv(tmp_path / "ranked.csv")  # ranks and scores: ordered by rank, no tie left
    by_rank, _ = _evaluate(tmp_path, capsys, "ranked-csv", tmp_path / "test.csv", tmp_path / "ranked.csv")
    assert not by_rank.equals(reference)  # AUC counts the tie at 0.8 as half; the ranks break it
    for name in ("native", "flat"):
        values, printed = _evaluate(tmp_path, capsys, name, tmp_path / "test.csv", tmp_path / f"{name}.parquet")
        assert values.equals(by_rank) and "LensKit" in printed
        given, _ = _evaluate(tmp_path, capsys, f"{name}-given", tmp_path / "test.csv", tmp_path / f"{name}.parquet",
                             "--format", "lenskit", "--test-format", "csv")
        assert given.equals(by_rank)


# -- RePlay and Microsoft Recommenders frames (the Python API) ------------------------------------------
@pytest.mark.parametrize("run_names, test_names, fmt", [
    ({"user": "query_id", "item": "item_id", "score": "rating"}, {"user": "query_id", "item": "item_id"}, "replay"),
    ({"user": "user_idx", "item": "item_idx", "score": "relevance"},
     {"user": "user_idx", "item": "item_idx", "rating": "relevance"}, "replay"),
    ({"user": "userID", "item": "itemID", "score": "prediction"}, {"user": "userID", "item": "itemID"},
     "msrecommenders"),
])
@pytest.mark.parametrize("pandas", [False, True])
def test_framework_frames_measure_like_ours(run_names, test_names, fmt, pandas):
    reference = measure_input(load_run(TEST, RUN))
    run, test = RUN.rename(run_names), TEST.rename(test_names)
    if pandas:
        run, test = run.to_pandas(), test.to_pandas()
    detected = load_run(test, run)
    assert measure_input(detected).equals(reference)
    assert any(f"read as format {fmt!r}" in note for note in detected.notes), detected.notes
    given = load_run(test, run, run_format=fmt, test_format=fmt)
    assert measure_input(given).equals(reference) and not any("read as" in note for note in given.notes)


def measure_input(data) -> pl.DataFrame:
    return measure(data.rankings, data.targets, metrics=METRICS.split(","), k=[1, 2, 5],
                   user_ids=data.user_ids).sort("user", "metric", "k")


# -- detection and its messages ------------------------------------------------------------------------
def test_a_trec_run_in_a_txt_file_is_detected(tmp_path, capsys, reference):
    (tmp_path / "run.txt").write_text("".join(
        f"{u} Q0 {i} {r} {s} sys\n" for r, (u, i, s) in enumerate(RUN.iter_rows(), start=1)))
    values, printed = _evaluate(tmp_path, capsys, "trec-txt", tmp_path / "test.csv", tmp_path / "run.txt")
    assert values.equals(reference) and "read as a TREC run" in printed


def test_nothing_matches_says_which_formats_there_are(tmp_path):
    (tmp_path / "run.dat").write_text("1;10;0.5\n")
    with pytest.raises(DataError, match=r"run.dat: cannot tell the format .* nor from the first line .*recbole"):
        read_run(tmp_path / "run.dat")
    (tmp_path / "run.csv").write_text("uid,iid,s\n1,10,0.5\n")
    with pytest.raises(DataError, match=r"run.csv: missing column\(s\) user, item.* give the format, one of .*replay"):
        read_run(tmp_path / "run.csv")
    frame = pl.DataFrame({"query_id": [1], "score": [0.5]})
    with pytest.raises(DataError, match=r"in the RePlay layout, expected columns query_id, item_id or user_idx"):
        read_run(frame, format="replay")
    with pytest.raises(ConfigError, match="unknown format 'recbol'"):
        read_run(frame, format="recbol")


def test_every_format_is_described():
    assert set(FORMAT_MEANINGS) == set(FORMATS)
