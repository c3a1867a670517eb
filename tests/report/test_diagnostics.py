"""The diagnostics of a run (issue 31) as its results folder and report hold them: the leakage audit
equals the audit of the config's own splits, the distributions those of the per-user values, and the
report has a section for each diagnostic."""

from __future__ import annotations

import math
import shutil
import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from config_text import config_text, ratings_file, split_table
from recsys_eval.cli import main
from latex_tables import compile_tables
from recsys_eval.compare.study import analyse
from recsys_eval.core.results import (
    DISTRIBUTION_CURVES,
    EFFECT_SIZES_TEX,
    LEAKAGE,
    LEAKAGE_USERS,
    USER_SLICES,
    ResultsFolder,
)
from recsys_eval.experiment.runner import config_splits
from recsys_eval.measure.aggregate import per_user
from recsys_eval.pipeline.config import parse_config
from recsys_eval.pipeline.inputs import load_data
from recsys_eval.report.diagnostics import magnitude
from recsys_eval.split import leakage_audit


def user_attributes(data: Path) -> Path:
    """A user attributes file beside the ratings: a made-up group for every other user."""
    path = data.parent / "users.csv"
    users = pl.read_csv(data).get_column("userId").unique().sort()
    pl.DataFrame({"user": users, "group": ["odd" if u % 2 else "even" for u in users]}).write_csv(path)
    return path


def diagnosed_config(data: Path) -> str:
    return config_text(
        "diagnosed", seed=5, dataset=ratings_file(data), split=split_table("holdout", fraction=0.2, per_user=True),
        protocols=["AI+AR+AN", "AI+1R+NN100"],
        recommenders=["popular", "random", {"name": "item_knn", "params": {"k": 50}}],
        metrics={"names": ["ndcg", "recall"], "k": [10], "relevance_threshold": 4},
        output=None, compare={"baseline": "popular", "tests": ["t"]},
        analysis={"slices": ["activity:3", "cold:20", "time:2", "attribute:group", "popularity:0.2"],
                  "user_attributes": str(user_attributes(data))})


@pytest.fixture(scope="module")
def folder(tmp_path_factory, synthetic_ratings) -> Path:
    root = tmp_path_factory.mktemp("diagnosed")
    config = root / "diagnosed.toml"
    config.write_text(diagnosed_config(synthetic_ratings))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(root / "results"), "--quiet"])
    assert exit_info.value.code in (0, None)
    return (root / "results" / "diagnosed" / "latest").resolve()


def test_the_run_writes_the_audit_of_its_own_splits(folder, synthetic_ratings):
    config = parse_config(tomllib.loads(diagnosed_config(synthetic_ratings)))
    expected = leakage_audit(config_splits(config, load_data(config.dataset)))
    results = ResultsFolder.open(folder)
    assert_frame_equal(results.table(LEAKAGE), expected.folds)
    assert_frame_equal(results.table(LEAKAGE_USERS), expected.users)
    assert (folder / "leakage.csv").is_file()


def test_the_report_flags_the_leaking_split(folder):
    markdown = (folder / "report.md").read_text()
    section = markdown.split("## Leakage audit", 1)[1].split("\n## ", 1)[0]
    assert "**Leakage flagged** in 1 of 1 fold(s)" in section
    assert 'id="leakage"' in (folder / "report.html").read_text()


def test_the_effect_size_section_shows_the_paired_tests_effect_sizes(folder):
    paired = ResultsFolder.open(folder).table("paired_tests").filter(
        (pl.col("metric") == "ndcg") & (pl.col("k") == 10) & (pl.col("system") == "item_knn")
        & (pl.col("test") == "t")).row(0, named=True)
    markdown = (folder / "report.md").read_text()
    section = markdown.split("## Effect sizes: nDCG@10", 1)[1].split("\n## ", 1)[0]
    line = next(li for li in section.splitlines() if "| item_knn |" in li)
    assert f"{paired['mean_diff']:+.4f} [{paired['diff_lower']:+.4f}, {paired['diff_upper']:+.4f}]" in line
    assert f"{100 * paired['relative_diff']:+.1f}%" in line and f"{paired['cohens_d']:+.2f}" in line
    assert magnitude(paired["cohens_d"]) in line
    assert 'id="effect_sizes"' in (folder / "report.html").read_text()


def test_magnitudes_follow_cohens_bounds():
    assert [magnitude(d) for d in (0.0, -0.19, 0.2, -0.49, 0.5, 0.79, -0.8, 3.0, float("nan"))] == [
        "negligible", "negligible", "small", "small", "medium", "medium", "large", "large", "–"]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_the_effect_size_table_compiles(folder, tmp_path):
    body = (folder / EFFECT_SIZES_TEX).read_text()
    assert r"$d_z$" in body and "item\\_knn" in body
    assert "Overfull" not in compile_tables(tmp_path, body)


def test_the_distributions_table_is_that_of_the_per_user_values(folder):
    results = ResultsFolder.open(folder)
    units = results.scan_per_unit(protocol="AI+AR+AN").filter(pl.col("metric") == "ndcg").collect()
    users = per_user(units).filter(pl.col("value").is_not_nan())
    table = results.table("distributions").filter((pl.col("metric") == "ndcg") & (pl.col("protocol") == "AI+AR+AN"))
    for system in ("popular", "item_knn"):
        values = users.filter(pl.col("system") == system).get_column("value").to_numpy()
        row = table.filter(pl.col("system") == system).row(0, named=True)
        assert row["n"] == values.size and row["q25"] == pytest.approx(np.quantile(values, 0.25))
        assert row["share_zero"] == pytest.approx(np.mean(values == 0))
    markdown = (folder / "report.md").read_text()
    assert "## Per-user distributions: nDCG@10" in markdown
    for ext in ("png", "pdf", "svg"):
        assert (folder / "figures" / f"ndcg@10-distributions.{ext}").is_file()


def test_the_report_draws_the_curves_of_the_per_user_values(folder):
    """The distribution_curves table the figure draws: each system's quantile function (numpy's)
    and Lorenz polygon (np.interp through (i/n, S_i / S_n)) of its per-user values, on 101 points."""
    results = ResultsFolder.open(folder)
    users = per_user(results.scan_per_unit(protocol="AI+AR+AN").filter(pl.col("metric") == "ndcg").collect())
    curves = results.table(DISTRIBUTION_CURVES).filter((pl.col("metric") == "ndcg") & (pl.col("protocol") == "AI+AR+AN"))
    for system in ("popular", "item_knn"):
        x = np.sort(users.filter((pl.col("system") == system) & pl.col("value").is_not_nan()).get_column("value").to_numpy())
        own = curves.filter(pl.col("system") == system)
        p = own.get_column("p").to_numpy()
        assert own.height == 101 and set(own.get_column("fold")) == {"holdout"}
        np.testing.assert_allclose(own.get_column("quantile"), np.quantile(x, p))
        polygon = np.interp(p, np.arange(x.size + 1) / x.size, np.concatenate([[0.0], np.cumsum(x)]) / x.sum())
        np.testing.assert_allclose(own.get_column("lorenz"), polygon, atol=1e-12)


def test_distributions_false_leaves_them_out_and_analyse_can_add_them(tmp_path, synthetic_ratings):
    config = tmp_path / "plain.toml"
    config.write_text(config_text(
        "plain", seed=2, dataset=ratings_file(synthetic_ratings), recommenders=["popular", "random"],
        output=None, compare={"baseline": "popular", "tests": ["t"]}, analysis={"distributions": False}))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet"])
    assert exit_info.value.code in (0, None)
    folder = ResultsFolder.open((tmp_path / "results" / "plain" / "latest").resolve())
    assert folder.manifest.distributions is False
    assert not folder.has_table("distributions") and not folder.has_table(DISTRIBUTION_CURVES)
    assert "Per-user distributions" not in folder.file("report.md").read_text()
    assert not list(folder.file("figures").glob("*distributions*"))
    assert folder.has_table("paired_tests")  # the rest of the analysis is there
    tables = analyse(folder, distributions=True, out=tmp_path / "with")
    assert {"distributions", DISTRIBUTION_CURVES} <= set(tables)
    assert (tmp_path / "with" / f"{DISTRIBUTION_CURVES}.parquet").is_file()
    assert not (tmp_path / "with" / f"{DISTRIBUTION_CURVES}.csv").exists()  # Parquet only: its rows are many


def test_the_slice_tables_and_section(folder):
    results = ResultsFolder.open(folder)
    slices = results.table(USER_SLICES)
    assert set(slices.get_column("slice")) == {"activity:3", "cold:20", "time:2", "attribute:group"}
    assert set(slices.filter(pl.col("slice") == "attribute:group").get_column("group")) == {"odd", "even"}
    means = results.table("slices").filter((pl.col("metric") == "ndcg") & (pl.col("slice") == "cold:20")
                                           & (pl.col("system") == "item_knn") & (pl.col("protocol") == "AI+AR+AN"))
    users = per_user(results.scan_per_unit(protocol="AI+AR+AN").filter(
        (pl.col("metric") == "ndcg") & (pl.col("system") == "item_knn")).collect())
    joined = users.join(slices.filter(pl.col("slice") == "cold:20"), on=["fold", "user"])
    for group, mean in means.select("group", "mean").iter_rows():
        by_hand = joined.filter((pl.col("group") == group) & pl.col("value").is_not_nan()).get_column("value").mean()
        assert mean == pytest.approx(by_hand)
    groups = slices.select("slice", "group").unique().height
    # one t test per group, protocol, metric (ndcg, recall) and system against popular
    tests = results.table("slice_tests").filter(pl.col("system") == "item_knn")
    assert tests.filter(pl.col("slice") != "popularity:0.2").height == groups * 2 * 2
    markdown = (folder / "report.md").read_text()
    assert "## Slices of users: nDCG@10" in markdown and "cold (< 20 train)" in markdown
    assert (folder / "figures" / "ndcg@10-by-slice.png").is_file()


def test_the_popularity_slice_means_equal_the_units_filtered_by_their_items_group_by_hand(folder, synthetic_ratings):
    """Under AI+1R+NN100 a unit is one relevant test item: its group is recomputed here from the
    fold's split (train users per item, the top ceil(0.2 |C|) the head, outside the top
    ceil(0.8 |C|) the tail), its item found as its user's n-th relevant item in index order, and
    each group's mean is the mean over users of their units' mean in the group."""
    config = parse_config(tomllib.loads(diagnosed_config(synthetic_ratings)))
    split = config_splits(config, load_data(config.dataset))[0]
    holders = np.bincount(split.train.items, minlength=split.n_items)
    ranked = np.lexsort((np.arange(split.n_items), -holders))
    catalogue = np.count_nonzero(holders)
    group = np.full(split.n_items, "tail", dtype=object)
    group[ranked[: math.ceil(0.8 * catalogue)]] = "mid"
    group[ranked[: math.ceil(0.2 * catalogue)]] = "head"
    test = split.test.frame.filter(pl.col("rating") >= 4).sort("user", "item")
    items = test.select(pl.Series("user", split.train.user_ids.gather(test.get_column("user"))).cast(pl.Int64),
                        pl.int_range(pl.len()).over("user").alias("n"),
                        pl.Series("kind", group[test.get_column("item").to_numpy()], dtype=pl.String))
    results = ResultsFolder.open(folder)
    units = results.scan_per_unit(protocol="AI+1R+NN100").filter(
        (pl.col("metric") == "ndcg") & (pl.col("system") == "item_knn")).collect()
    units = units.with_columns(n=pl.col("unit").rank("dense").over("user").cast(pl.Int64) - 1).join(items, on=["user", "n"])
    means = results.table("slices").filter((pl.col("slice") == "popularity:0.2") & (pl.col("metric") == "ndcg")
                                           & (pl.col("system") == "item_knn"))
    assert means.height == 3 and set(means.get_column("protocol")) == {"AI+1R+NN100"}
    for label, mean, n in means.select("group", "mean", "n").iter_rows():
        users = units.filter(pl.col("kind") == label.split(" ")[0]).group_by("user").agg(pl.col("value").mean())
        assert (mean, n) == (pytest.approx(users.get_column("value").mean()), users.height)
    markdown = (folder / "report.md").read_text()
    assert "head (top 20%)" in markdown.split("## Slices of users", 1)[1]


@pytest.mark.parametrize(("analysis", "message"), [
    ({"slices": ["actvity:3"]}, ["actvity:3", "activity:N"]),
    ({"slices": ["attribute:x"]}, ["attribute:x", "user_attributes"]),
    ({"slices": ["popularity:0.7"]}, ["popularity:0.7", "(0, 0.5]"]),
    ({"slices": ["popularity:0.2"]}, ["popularity:0.2", "1R", "percentiles"]),
    ({"distributions": "sometimes"}, ["distributions", "sometimes", "boolean"]),
])
def test_a_bad_analysis_key_is_a_config_error_naming_it(tmp_path, synthetic_ratings, capsys, analysis, message):
    config = tmp_path / "bad.toml"
    config.write_text(config_text("bad", dataset=ratings_file(synthetic_ratings), analysis=analysis))
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(config)])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and all(m in err for m in message), err
