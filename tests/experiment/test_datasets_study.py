"""A [[datasets]] study end to end: one complete results folder per dataset, and the cross-dataset
tables (values, mean ranks, Friedman, post-hoc) computed from those folders' summaries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from config_text import config_text, ratings_file
from recsys_eval.core.results import CROSS_DATASET, ResultsFolder
from recsys_eval.data.synthetic import write_synthetic_ratings
from recsys_eval.pipeline.config import load_config
from recsys_eval.experiment.runner import run_experiment

@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("datasets")
    return [write_synthetic_ratings(folder / f"shop{i}.csv", users=150, items=200, interactions=5000, seed=i)
            for i in range(3)]


def _study(tmp_path: Path, files: list[Path], posthoc: str = "nemenyi"):
    path = tmp_path / "study.toml"
    path.write_text(config_text(
        "three", seed=5, datasets=[ratings_file(f) for f in files],
        recommenders=["popular", "random", {"name": "item_knn", "params": {"k": 50}}],
        metrics={"names": ["ndcg", "precision"], "k": [10], "relevance_threshold": 4},
        compare={"baseline": "popular", "datasets_metric": "ndcg@10", "posthoc": posthoc}))
    return run_experiment(load_config(path), path.read_text(), out_root=tmp_path / "results", quiet=True)


def test_every_dataset_gets_its_results_and_the_ranks_come_from_their_summaries(tmp_path, files):
    outcome = _study(tmp_path, files)
    root = tmp_path / "results" / "three"
    assert outcome.folder.parent == root / CROSS_DATASET
    means = {}
    for f in files:
        runs = [p for p in (root / f.stem).iterdir() if not p.name.startswith(".")]
        assert len(runs) == 1
        summary = ResultsFolder.open(runs[0]).table("summary")
        rows = summary.filter((pl.col("metric") == "ndcg") & (pl.col("k") == 10) & (pl.col("rule") == "user mean"))
        means[f.stem] = dict(rows.select("system", "mean").iter_rows())
    values = pl.read_parquet(outcome.folder / "values.parquet")
    assert {(d, s): m for d, s, m in values.select("dataset", "system", "mean").iter_rows()} == {
        (d, s): m for d, by_system in means.items() for s, m in by_system.items()}

    # mean ranks and Friedman's statistic, recomputed from the per-dataset summaries
    systems = ["popular", "random", "item_knn"]
    matrix = np.array([[means[f.stem][s] for s in systems] for f in files])
    expected_ranks = stats.rankdata(-matrix, axis=1).mean(axis=0)
    ranks = dict(pl.read_parquet(outcome.folder / "ranks.parquet").select("system", "mean_rank").iter_rows())
    assert [ranks[s] for s in systems] == pytest.approx(expected_ranks.tolist())
    friedman = pl.read_parquet(outcome.folder / "friedman.parquet").row(0, named=True)
    assert friedman["chi2"] == pytest.approx(stats.friedmanchisquare(*matrix.T).statistic)
    assert (outcome.folder / "nemenyi.parquet").is_file() and (outcome.folder / f"{CROSS_DATASET}.md").is_file()
    assert not [p for p in (root / CROSS_DATASET).iterdir() if p.name.startswith(".")]  # no work folder left


def test_a_second_study_never_overwrites_the_first(tmp_path, files):
    first = _study(tmp_path, files[:2], posthoc="holm")
    second = _study(tmp_path, files[:2], posthoc="holm")
    assert first.folder != second.folder and first.folder.is_dir() and second.folder.is_dir()
    holm = pl.read_parquet(second.folder / "holm.parquet")
    assert set(holm.get_column("system")) == {"random", "item_knn"}  # each against the baseline, popular


def test_two_datasets_get_a_report_with_the_diagram_and_warnings_and_open_in_report_and_compare(
        tmp_path, files, capsys):
    from recsys_eval.cli import main

    path = tmp_path / "two.toml"
    path.write_text(config_text(
        "two", seed=5, datasets=[ratings_file(f) for f in files[:2]], recommenders=["popular", "random"],
        metrics={"names": ["ndcg"], "k": [10], "relevance_threshold": 4}, output={"report": True}))
    outcome = run_experiment(load_config(path), path.read_text(), out_root=tmp_path / "results", quiet=True)
    assert set(outcome.datasets) == {f.stem for f in files[:2]}
    markdown = (outcome.folder / f"{CROSS_DATASET}.md").read_text()
    assert "2 datasets: Friedman's test and its post-hoc need at least 3" in markdown
    assert "F_F is infinite and its p-value 0 by the formula" in markdown  # popular beats random on both
    page = (outcome.folder / "report.html").read_text()
    assert "data:image/png;base64," in page and "Nemenyi" in page and "need at least 3" in page
    assert (outcome.folder / "figures" / "critical_difference.pdf").is_file()
    for args, expected in ((["report", str(outcome.folder), "--force"], "report.html"),
                           (["compare", str(outcome.folder)], "is a study over datasets")):
        with pytest.raises(SystemExit):
            main(args)
        out = capsys.readouterr()
        assert expected in out.out + out.err and "interrupted" not in out.out + out.err


def test_critical_difference_groups_are_the_maximal_runs_within_cd():
    from recsys_eval.report.datasets import critical_difference_groups

    ranks = {"a": 1.0, "b": 1.5, "c": 2.4, "d": 3.9, "e": 4.0}
    # within CD = 1.0: a-b (c is 1.4 from a), b-c (0.9), d-e; c-d is 1.5 apart
    assert critical_difference_groups(ranks, 1.0) == [("a", "b"), ("b", "c"), ("d", "e")]
    assert critical_difference_groups(ranks, 2.5) == [("a", "b", "c"), ("b", "c", "d", "e")]
    assert critical_difference_groups(ranks, 3.0) == [("a", "b", "c", "d", "e")]
    assert critical_difference_groups(ranks, 0.2) == [("d", "e")]
