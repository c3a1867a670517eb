"""The beyond-accuracy families end to end (issue 30's done-when): ``recsys-eval run`` with
calibration, ARP, APLT, PopREO, serendipity and EPC beside nDCG, on the synthetic ratings with an
``[dataset] item_features`` file, writes them per user, in the summary and in the report; the
run-level PopREO is the same whatever the chunking of users."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import config_text, ratings_file
from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder
from recsys_eval.data.synthetic import write_synthetic_items

NAMES = ["ndcg", "calibration", "arp", "aplt", "pop_reo", "serendipity", "epc"]


def run_config(tmp_path: Path, ratings: Path, name: str, *, report: bool, **tables) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    items = write_synthetic_items(tmp_path / "items.csv")
    dataset = {**ratings_file(ratings), "item_features": str(items)}
    text = config_text(name, seed=3, dataset=dataset, recommenders=["popular", "random"],
                       metrics={"names": NAMES, "k": [5, 10], "relevance_threshold": 3.5,
                                "calibration_alpha": 0.02},
                       output={"report": report}, **tables)
    config = tmp_path / f"{name}.toml"
    config.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"])
    assert exit_info.value.code in (0, None)
    return next(p for p in (tmp_path / "out" / name).iterdir() if not p.name.startswith(".") and not p.is_symlink())


def test_run_writes_beyond_accuracy_metrics_per_user_in_summary_and_report(tmp_path, synthetic_ratings):
    folder = run_config(tmp_path, synthetic_ratings, "beyond", report=True)
    per_unit = ResultsFolder.open(folder).scan_per_unit().collect()
    summary = pl.read_parquet(folder / "summary.parquet")
    for name in NAMES:
        rows = per_unit.filter(pl.col("metric") == name)
        assert set(rows["k"].unique()) == {5, 10}, name
        if name == "pop_reo":  # one run-level row per system and cutoff
            assert rows["user"].is_null().all() and rows.height == 2 * 2
        else:
            assert rows["user"].null_count() == 0 and rows["value"].drop_nans().len() > 0, name
        assert summary.filter(pl.col("metric") == name).height == 2 * 2, name
    popular = per_unit.filter((pl.col("system") == "popular") & (pl.col("k") == 10))
    random = per_unit.filter((pl.col("system") == "random") & (pl.col("k") == 10))

    def mean(frame, name):
        return frame.filter(pl.col("metric") == name)["value"].drop_nans().mean()

    # MostPop lists the most popular items: a higher ARP, fewer long-tail items and no item outside
    # its own top k, so no serendipity; random lists are the reverse
    assert mean(popular, "arp") > mean(random, "arp")
    assert mean(popular, "aplt") < mean(random, "aplt")
    assert mean(popular, "serendipity") == 0.0
    report = (folder / "report.md").read_text()
    for label in ("C_KL@10", "ARP@10", "APLT@10", "PopREO@10", "Ser@10", "EPC@10"):
        assert label in report, label


def test_run_level_popreo_counts_every_chunk_of_users(tmp_path, synthetic_ratings):
    chunked = run_config(tmp_path / "a", synthetic_ratings, "chunked", report=False, run={"users_per_chunk": 37})
    whole = run_config(tmp_path / "b", synthetic_ratings, "whole", report=False, run={"users_per_chunk": 100000})
    key = ["system", "protocol", "fold", "metric", "k"]
    a = pl.read_parquet(chunked / "summary.parquet").sort(key)
    b = pl.read_parquet(whole / "summary.parquet").sort(key)
    assert a.select(key).equals(b.select(key)) and a.filter(pl.col("metric") == "pop_reo").height == 4
    assert np.allclose(a["mean"].to_numpy(), b["mean"].to_numpy(), rtol=1e-12, atol=0, equal_nan=True)


def test_report_tables_compile_in_latex(tmp_path, synthetic_ratings):
    from latex_tables import compile_tables

    folder = run_config(tmp_path, synthetic_ratings, "latex", report=True)
    tables = (folder / "tables.tex").read_text()
    assert "C\\_KL@10" in tables and "PopREO@10" in tables
    compile_tables(tmp_path, tables)


def test_item_features_file_errors_name_the_file_and_column(tmp_path, synthetic_ratings, capsys):
    bad = tmp_path / "items.csv"
    bad.write_text("item,tags\n1001,a|b\n")
    text = config_text("bad", dataset={**ratings_file(synthetic_ratings), "item_features": str(bad)},
                       metrics={"names": ["calibration"], "k": [5]})
    config = tmp_path / "bad.toml"
    config.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert "items.csv" in err and "'genres'" in err and "item_feature_column" in err
