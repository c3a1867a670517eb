"""``recsys-eval evaluate`` end to end on small files, and on each bad input."""

from __future__ import annotations

import math

import polars as pl
import pytest

from recsys_eval.core.results import ResultsFolder
from recsys_eval.cli import main

TEST = "user,item,rating\n1,10,5\n1,11,3\n1,12,1\n2,10,4\n3,13,2\n"
RUN = "user,item,score\n1,10,0.9\n1,12,0.8\n1,14,0.8\n2,11,0.5\n2,10,0.4\n4,10,1.0\n"
TRAIN = "user,item\n1,15\n2,14\n"


@pytest.fixture
def files(tmp_path):
    def write(name, text):
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write


def _evaluate(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", *args])
    return exit_info.value.code, capsys.readouterr()


def test_end_to_end(files, tmp_path, capsys):
    out = tmp_path / "result"
    args = ["--test", files("test.csv", TEST), "--run", files("mysys.csv", RUN), "--train",
            files("train.csv", TRAIN), "--threshold", "3", "--metrics", "precision,ndcg,auc,f1,mae,novelty",
            "--k", "1,2", "--out", str(out)]
    code, io = _evaluate(args, capsys)
    assert code in (0, None)
    assert "ndcg@2" in io.out and "1 RUN users are not in TEST" in io.out
    per_unit = ResultsFolder.open(out).scan_per_unit().collect()
    assert per_unit.columns == ["system", "protocol", "fold", "user", "unit", "metric", "k", "value"]
    assert set(per_unit["system"]) == {"mysys"}
    assert set(per_unit.drop_nulls("user")["user"]) == {1, 2, 3}  # raw ids; user 4 ignored
    summary = pl.read_csv(out / "summary.csv")
    mean = dict(zip(summary["name"], summary["mean"]))
    # user 1: relevant 10, 11 (ratings 5, 3); user 2: 10; user 3: none (undefined, left out)
    assert mean["precision@1"] == pytest.approx(1 / 3)
    assert mean["ndcg@1"] == pytest.approx(0.5)
    # AUC over 6 catalogue items less unseen train items: user 1: (3 + 0.5) / 6, user 2: 3 / 4
    assert mean["auc"] == pytest.approx((3.5 / 6 + 3 / 4) / 2)
    assert mean["f1@1"] == pytest.approx(2 / 6)  # F_tp,fp: TP 1, FP 2, FN 2
    assert mean["mae"] == pytest.approx((2.15 + 3.6) / 2)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temp folder left
    code, io = _evaluate(args, capsys)
    assert code == 1 and "exists" in io.err
    code, io = _evaluate([*args, "--force"], capsys)
    assert code in (0, None)


def test_an_evaluated_run_is_a_results_folder_that_report_and_compare_open(files, tmp_path, capsys):
    """The folder evaluate writes is a run of one fold: the report renders it, compare analyses it,
    and the Python API reads its summary with intervals and its manifest."""
    from recsys_eval.compare.study import analyse

    out = tmp_path / "result"
    args = ["--test", files("test.csv", TEST), "--run", files("mysys.csv", RUN), "--threshold", "3",
            "--metrics", "precision,ndcg,rr", "--k", "1,2", "--out", str(out)]
    assert _evaluate(args, capsys)[0] in (0, None)
    folder = ResultsFolder.open(out)
    assert folder.manifest.kind == "evaluate" and folder.manifest.systems == ["mysys"]
    summary = folder.table("summary")
    assert {"lower", "upper"} <= set(summary.columns)
    ndcg = summary.filter(pl.col("name") == "ndcg@2").row(0, named=True)
    assert ndcg["lower"] <= ndcg["mean"] <= ndcg["upper"]
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(out)])
    assert exit_info.value.code in (0, None)
    page = (out / "report.html").read_text()
    assert "mysys" in page and "nDCG@2" in page
    assert (out / "tables.tex").is_file()
    analyse(out)  # one system: nothing to test against, and no error


def test_the_old_two_file_layout_gets_a_clear_message(tmp_path, capsys):
    old = tmp_path / "old"
    old.mkdir()
    pl.DataFrame({"user": [1]}).write_parquet(old / "per_unit.parquet")
    (old / "summary.csv").write_text("system\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(old)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and "earlier version" in err and "evaluate" in err and "Traceback" not in err


def test_ranks_and_average_ties(files, tmp_path, capsys):
    run = "user,item,rank\n1,11,1\n1,10,2\n2,10,1\n"
    out = tmp_path / "r"
    code, _ = _evaluate(["--test", files("t.csv", TEST), "--run", files("r.csv", run), "--metrics",
                         "precision", "--k", "1", "--out", str(out)], capsys)
    assert code in (0, None)
    summary = pl.read_csv(out / "summary.csv")
    assert summary["mean"][0] == pytest.approx(2 / 3)  # every TEST row relevant without threshold
    tied = "user,item,score\n1,12,1.0\n1,10,1.0\n"
    code, _ = _evaluate(["--test", files("t.csv", TEST), "--run", files("tied.csv", tied), "--threshold", "3",
                         "--metrics", "precision", "--k", "1", "--ties", "average", "--out", str(tmp_path / "a")],
                        capsys)
    per_unit = ResultsFolder.open(tmp_path / "a").scan_per_unit().collect()
    assert per_unit.filter(pl.col("user") == 1)["value"][0] == pytest.approx(0.5)
    assert per_unit.filter(pl.col("user") == 3)["value"][0] == 0.0  # no relevant item: precision 0


@pytest.mark.parametrize(
    "run, extra, message",
    [
        (RUN, ["--metrics", "ndgc"], "did you mean 'ndcg'"),
        (RUN, ["--k", "0"], "positive integer"),
        (RUN, ["--k", "1,x"], "not an integer"),
        ("user,item\n1,10\n", [], "r.csv: missing column\\(s\\) score or rank"),
        ("user,score\n1,0.5\n", [], "missing column\\(s\\) item;"),
        ("user,item,score\n1,10,0.5\n1,10,0.4\n", [],
         "r.csv: 1 row\\(s\\) repeat the \\(user, item\\) pair .* user 1, item 10 \\(line 2, again at line 3\\)"),
        ("user,item,rank\n1,10,1\n1,11,1\n", [], "'rank' is not 1..L .* user 1 has 2 rows with ranks 1, 1"),
        ("user,item,score\n1,10,nan\n", [], "NaN or infinite"),
        ("user,item,score\n1,10,inf\n", [], "NaN or infinite"),
        ("user,item,rank\n1,10,1\n1,11,3\n", [], "not 1..L"),
        ("user,item,rank\n1,10,2\n", [], "not 1..L"),
        ("user,item,score\n7,10,0.5\n", [], "share no user"),
        ("user,item,score\n1,10,high\n", [], "'score' is not numeric"),
        (RUN, ["--metrics", "novelty"], "needs --train"),
        (RUN, ["--gain", "linear"], "unknown gain"),
    ],
)
def test_bad_run_inputs(files, tmp_path, capsys, run, extra, message):
    code, io = _evaluate(["--test", files("t.csv", TEST), "--run", files("r.csv", run),
                          "--out", str(tmp_path / "o"), *extra], capsys)
    assert code == 1
    assert "Traceback" not in io.err
    assert pytest.importorskip("re").search(message, io.err.replace("\n", "")), io.err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "test, extra, message",
    [
        ("user,item,rating\n1,10,good\n", [], "'rating' is not numeric"),
        ("user,item\n1,10\n", ["--threshold", "3"], "threshold needs ratings"),
        ("user,item,rating\n1,10,4\n1,10,5\n", [], "t.csv: 1 row\\(s\\) repeat the \\(user, item\\) pair"),
        ("user,item,rating\n1,10,1\n", ["--threshold", "3"], "no relevant row"),
    ],
)
def test_bad_test_inputs(files, tmp_path, capsys, test, extra, message):
    code, io = _evaluate(["--test", files("t.csv", test), "--run", files("r.csv", RUN),
                          "--out", str(tmp_path / "o"), *extra], capsys)
    assert code == 1
    assert pytest.importorskip("re").search(message, io.err.replace("\n", "")), io.err


def test_missing_file(tmp_path, capsys, files):
    code, io = _evaluate(["--test", str(tmp_path / "none.csv"), "--run", files("r.csv", RUN),
                          "--out", str(tmp_path / "o")], capsys)
    assert code == 1 and "none.csv: no such file" in io.err


def test_parquet_and_string_ids(tmp_path, capsys):
    pl.DataFrame({"user": ["a", "b"], "item": ["x", "y"]}).write_parquet(tmp_path / "t.parquet")
    pl.DataFrame({"user": ["a", "b"], "item": ["x", "x"], "score": [1.0, 1.0]}).write_parquet(tmp_path / "r.parquet")
    code, _ = _evaluate(["--test", str(tmp_path / "t.parquet"), "--run", str(tmp_path / "r.parquet"),
                         "--metrics", "hit", "--k", "1", "--out", str(tmp_path / "o")], capsys)
    assert code in (0, None)
    per_unit = ResultsFolder.open(tmp_path / "o").scan_per_unit().collect()
    assert dict(zip(per_unit["user"], per_unit["value"])) == {"a": 1.0, "b": 0.0}


def test_intra_list_diversity_from_a_genres_file(files, tmp_path, capsys):
    genres = "item,genres\n10,Drama|Comedy\n12,Drama\n14,\n11,Horror\n"
    code, _ = _evaluate(["--test", files("t.csv", TEST), "--run", files("r.csv", RUN), "--genres",
                         files("g.csv", genres), "--metrics", "ild", "--k", "2", "--out", str(tmp_path / "o")],
                        capsys)
    assert code in (0, None)
    per_unit = ResultsFolder.open(tmp_path / "o").scan_per_unit().collect().sort("user")
    # user 1 top 2: items 10 {Drama, Comedy} and 12 {Drama}: 1 - 1/2; user 2: 11 and 10: 1
    assert per_unit["value"].to_list()[:2] == pytest.approx([0.5, 1.0])


def test_calibration_popularity_and_discovery_from_train_and_genres_files(files, tmp_path, capsys):
    genres = "item,genres\n10,Drama|Comedy\n11,Horror\n12,Drama\n14,Comedy\n15,Drama\n"
    metrics = "calibration,arp,aplt,epc,serendipity,pop_reo"
    code, _ = _evaluate(["--test", files("t.csv", TEST), "--run", files("r.csv", RUN), "--train",
                         files("tr.csv", TRAIN), "--genres", files("g.csv", genres), "--threshold", "3",
                         "--metrics", metrics, "--k", "2", "--param", "calibration_alpha=0.1",
                         "--out", str(tmp_path / "o")], capsys)
    assert code in (0, None)
    rows = ResultsFolder.open(tmp_path / "o").scan_per_unit().collect()
    assert set(rows["metric"]) == set(metrics.split(","))
    calibration = rows.filter((pl.col("metric") == "calibration") & (pl.col("user") == 1))["value"][0]
    # user 1: profile {15: Drama} -> p = (Drama 1); top 2 = 10 {Drama, Comedy}, 12 {Drama} ->
    # q(Drama) = (1/2 + 1) / 2 = 3/4; C_KL = log(1 / (0.9 x 3/4 + 0.1 x 1))
    assert calibration == pytest.approx(-math.log(0.9 * 0.75 + 0.1))
    arp = rows.filter((pl.col("metric") == "arp") & (pl.col("user") == 2))["value"][0]
    assert arp == 0.0  # user 2's top 2, items 11 and 10, no train user has


def test_a_beyond_metric_without_its_file_names_the_option(files, tmp_path, capsys):
    code, captured = _evaluate(["--test", files("t.csv", TEST), "--run", files("r.csv", RUN), "--train",
                                files("tr.csv", TRAIN), "--metrics", "calibration", "--out", str(tmp_path / "o")],
                               capsys)
    assert code == 1 and "metric 'calibration' needs --genres" in captured.err
