"""``evaluate --engine spark`` reads TREC and Elliot files as the local engine does (told by the
extension or ``--format``), and refuses the formats only the local engine reads, naming those
Spark reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recsys_eval.engine.formats import SPARK_FORMATS, spark_format
from recsys_eval.errors import ConfigError, DataError


@pytest.mark.parametrize(("path", "given", "expected"), [
    ("hdfs://nn/runs/bm25.trec", None, "trec"), ("qrels.qrels", None, "trec"), ("run.run", None, "trec"),
    ("s3a://b/run.parquet", None, "parquet"), ("run.tsv", None, "tsv"), ("run.txt", None, "csv"),
    ("folder/", None, "csv"), ("run.tsv", "elliot", "elliot"), ("run.out", "trec", "trec"),
])
def test_the_format_spark_reads(path, given, expected):
    assert spark_format(path, given, "run", "RUN") == expected


@pytest.mark.parametrize(("path", "given", "fmt"), [
    ("run.json", None, "ranx"), ("run.inter", None, "recbole"), ("run.parquet", "lenskit", "lenskit"),
])
def test_formats_of_the_local_engine_are_refused_naming_sparks(path, given, fmt):
    with pytest.raises(ConfigError, match=rf"RUN: a {fmt} run file is read by the local engine only; the Spark "
                                          rf"engine reads {', '.join(SPARK_FORMATS)}"):
        spark_format(path, given, "run", "RUN")


def _trec_files(tmp_path) -> dict[str, str]:
    """TREC qrels with grades 0-3 (0: judged non-relevant) and a TREC run with ties whose fields are
    separated by runs of blanks, and the same as Elliot TSVs."""
    rng = np.random.default_rng(7)
    qrels = pl.DataFrame({"user": np.repeat(np.arange(30), 4), "item": rng.integers(0, 40, 120)}).unique(
        ["user", "item"], maintain_order=True)
    qrels = qrels.with_columns(pl.Series("rating", rng.integers(0, 4, qrels.height)))
    run = pl.DataFrame({"user": np.repeat(np.arange(2, 34), 6), "item": rng.integers(0, 40, 192)}).unique(
        ["user", "item"], maintain_order=True)
    run = run.with_columns(pl.Series("score", rng.integers(0, 5, run.height) / 4))
    paths = {"qrels": tmp_path / "test.qrels", "trec": tmp_path / "sys.trec", "elliot_test": tmp_path / "test.tsv",
             "elliot_run": tmp_path / "sys.tsv"}
    paths["qrels"].write_text("".join(f"{u} 0 {i} {r}\n" for u, i, r in qrels.iter_rows()))
    ranked = run.with_columns(pl.col("score").rank("ordinal", descending=True).over("user").alias("rank"))
    paths["trec"].write_text("".join(f"{u}  Q0 {i}\t{k}   {s} sys\n" for u, i, s, k in ranked.iter_rows()))
    # Elliot's ratings are 1-5: without a threshold every rating is relevant, and must be positive
    paths["elliot_test"].write_text("".join(f"{u}\t{i}\t{r + 1}\n" for u, i, r in qrels.iter_rows()))
    paths["elliot_run"].write_text("".join(f"{u}\t{i}\t{s}\n" for u, i, s in run.iter_rows()))
    return {name: str(path) for name, path in paths.items()}


@pytest.mark.spark
@pytest.mark.parametrize(("test", "run", "format"), [("qrels", "trec", None), ("elliot_test", "elliot_run", "elliot")])
def test_text_formats_give_the_local_summary(spark, tmp_path, capsys, test, run, format):
    from recsys_eval.cli import main

    paths = _trec_files(tmp_path)
    args = ["evaluate", "--test", paths[test], "--run", paths[run], "--metrics", "precision,ndcg,ap,rr", "--k", "1,5",
            *(["--format", format] if format else [])]
    for engine in ("local", "spark"):
        with pytest.raises(SystemExit) as exit_info:
            main([*args, "--out", str(tmp_path / engine), "--engine", engine, "--partitions", "3"])
        assert exit_info.value.code in (0, None)
    printed = capsys.readouterr().out
    assert "ndcg@5" in printed
    if format is None:  # TREC qrels: grades >= 1 relevant, users without one count as zero, on both engines
        assert printed.count("grade >= 1") == 2
    assert (tmp_path / "spark" / "summary.csv").read_bytes() == (tmp_path / "local" / "summary.csv").read_bytes()


@pytest.mark.spark
def test_a_line_of_the_wrong_width_is_named(spark, tmp_path):
    from recsys_eval.engine.runs import evaluate_spark

    paths = _trec_files(tmp_path)
    bad = tmp_path / "bad.trec"
    bad.write_text("1 Q0 3 1 0.5 sys\n2 Q0 4\n")
    with pytest.raises(DataError, match=r"RUN .*bad.trec: a line of 3 fields \('2 Q0 4'\); expected 6"):
        evaluate_spark(spark, paths["qrels"], str(bad), str(tmp_path / "out"))
    with pytest.raises(ConfigError, match="ranx"):
        evaluate_spark(spark, paths["qrels"], str(tmp_path / "run.json"), str(tmp_path / "out"))
    # a TREC run whose extension tells no format is read as CSV: the message says how to tell it
    text = tmp_path / "sys.txt"
    text.write_text(Path(paths["trec"]).read_text())
    with pytest.raises(DataError, match=r"missing column\(s\) user, item.*unless --format or its extension tells"):
        evaluate_spark(spark, paths["qrels"], str(text), str(tmp_path / "out"))
    evaluate_spark(spark, paths["qrels"], str(text), str(tmp_path / "out"), run_format="trec")
    assert (tmp_path / "out" / "summary.csv").exists()
