"""Analysis and report of a results folder (a run on the tests' synthetic dataset): tables against
scipy, every number set beside another averaged like the summary, every section present, the page
self-contained, the LaTeX table against a golden file, and the page opened in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from scipy import stats

from config_text import config_text, ratings_file, split_table
from latex_tables import compile_tables
from recsys_eval.cli import main
from recsys_eval.compare.study import analyse
from recsys_eval.core.results import ResultsFolder
from recsys_eval.errors import DataError
from recsys_eval.report.tables import Block, Cell, to_latex

HERE = Path(__file__).parent


def reported_config(data: Path) -> str:
    return config_text(
        "reported", seed=3, dataset=ratings_file(data), split=split_table("kfold", k=2, per_user=True),
        protocols=["AI+AR+AN", "AI+1R+AN", "AI+1R+NN50", {"name": "AI+AR+AN", "design": "percentiles", "bins": 3}],
        recommenders=["popular", "random", {"name": "item_knn", "params": {"k": 50}}],
        metrics={"names": ["precision", "recall", "f1", "ndcg", "auc"], "k": [5, 10], "relevance_threshold": 4},
        output=None, compare={"baseline": "popular", "tests": ["t", "wilcoxon"]},
        learning_curve={"fractions": [0.5, 1.0]})


@pytest.fixture(scope="module")
def folder(tmp_path_factory, synthetic_ratings) -> Path:
    root = tmp_path_factory.mktemp("report")
    config = root / "reported.toml"
    config.write_text(reported_config(synthetic_ratings))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(root / "results"), "--quiet"])
    assert exit_info.value.code in (0, None)
    folder = next(p for p in (root / "results" / "reported").iterdir() if p.name[0].isdigit())
    assert (root / "results" / "reported" / "latest").resolve() == folder.resolve()
    return folder


def test_paired_tests_equal_scipy_on_the_same_users(folder):
    tests = pl.read_parquet(folder / "paired_tests.parquet")
    row = tests.filter((pl.col("protocol") == "AI+AR+AN") & (pl.col("fold") == "fold1")
                       & (pl.col("metric") == "ndcg") & (pl.col("k") == 10)
                       & (pl.col("system") == "item_knn") & (pl.col("test") == "t"))
    assert row.height == 1 and row["baseline"][0] == "popular"
    per_unit = ResultsFolder.open(folder).scan_per_unit().collect().filter(
        (pl.col("protocol") == "AI+AR+AN") & (pl.col("fold") == "fold1") & (pl.col("metric") == "ndcg")
        & (pl.col("k") == 10) & pl.col("value").is_not_nan())
    wide = per_unit.pivot(on="system", index="user", values="value").drop_nulls(["item_knn", "popular"])
    expected = stats.ttest_rel(wide["item_knn"].to_numpy(), wide["popular"].to_numpy())
    assert row["p_value"][0] == pytest.approx(expected.pvalue, rel=1e-9)
    assert row["n"][0] == wide.height
    # two systems tested against the baseline: Holm multiplies the smaller p by 2
    family = tests.filter((pl.col("protocol") == "AI+AR+AN") & (pl.col("fold") == "fold1")
                          & (pl.col("metric") == "ndcg") & (pl.col("k") == 10) & (pl.col("test") == "t"))
    p = sorted(family["p_value"].to_list())
    assert sorted(family["p_adjusted"].to_list())[0] == pytest.approx(min(1.0, 2 * p[0]))


def test_analysis_tables(folder):
    agreement = pl.read_parquet(folder / "agreement.parquet")
    assert {"protocol_a", "protocol_b", "tau", "swaps"} <= set(agreement.columns)
    assert agreement["tau"].is_between(-1, 1).all()
    sampled = pl.read_parquet(folder / "sampled_correction.parquet")
    assert set(sampled["estimate"].unique()) == {"sampled", "rescale", "bias_variance", "full"}
    full = sampled.filter((pl.col("estimate") == "full") & (pl.col("metric") == "recall") & (pl.col("k") == 10))
    summary = pl.read_parquet(folder / "summary.parquet")
    expected = summary.filter((pl.col("protocol") == "AI+1R+AN") & (pl.col("fold") == "all")
                              & (pl.col("metric") == "recall") & (pl.col("k") == 10) & (pl.col("system") == "popular"))
    assert full.filter(pl.col("system") == "popular")["value"][0] == pytest.approx(expected["mean"][0])
    bins = pl.read_parquet(folder / "popularity_bins.parquet")
    assert sorted(bins["bin"].unique().to_list()) == [1, 2, 3]
    exposure = pl.read_parquet(folder / "exposure.parquet")
    shares = exposure.group_by("system", "protocol").agg(pl.col("share").sum())
    assert shares["share"].to_list() == pytest.approx([1.0] * shares.height)
    curve = pl.read_parquet(folder / "learning_curve.parquet")
    assert sorted(curve["fraction"].unique().to_list()) == [0.5, 1.0]


def test_aggregation_audit_of_the_cross_validated_run(folder):
    summary = pl.read_parquet(folder / "summary.parquet").filter(pl.col("fold") == "all")
    f_variants = pl.read_parquet(folder / "aggregation_f.parquet")
    reported = summary.filter(pl.col("metric") == "f1_pooled").select("system", "protocol", "k", "mean")
    both = f_variants.join(reported, on=["system", "protocol", "k"])
    assert both.height == f_variants.height == reported.height
    assert both["F_tp_fp"].to_list() == pytest.approx(both["mean"].to_list())  # the reported pooled F1
    assert (both["n_items"] == 2).all()
    auc = pl.read_parquet(folder / "aggregation_auc.parquet")
    assert set(auc["protocol"]) == {"AI+AR+AN", "AI+1R+AN", "AI+1R+NN50", "AI+AR+AN+pct3/bin1",
                                    "AI+AR+AN+pct3/bin2", "AI+AR+AN+pct3/bin3"}
    random = auc.filter(pl.col("system") == "random")
    for column in ("auc", "auc_avg", "auc_merge"):
        assert random[column].to_list() == pytest.approx([0.5] * random.height, abs=0.03), column
    # a unit's AUC against a uniform sample of its non-relevant items estimates its full AUC without bias
    full = auc.filter(pl.col("protocol") == "AI+1R+AN").sort("system")
    sampled = auc.filter(pl.col("protocol") == "AI+1R+NN50").sort("system")
    assert sampled["auc"].to_list() == pytest.approx(full["auc"].to_list(), abs=0.01)
    assert (auc["auc_merge"] - auc["auc_avg"]).abs().max() < 0.02  # same scale in both folds
    changes = pl.read_parquet(folder / "aggregation_audit.parquet")
    assert set(changes["table"]) == {"f_measure", "auc"}
    assert (changes["n_swaps"] == changes["swaps"].list.len()).all()


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.srcs, self.images = [], [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        for key in ("src", "href"):
            if key in attrs:
                self.srcs.append(attrs[key])
        self.images += tag == "img"


def test_report_has_every_section_and_loads_nothing_from_the_network(folder):
    page = (folder / "report.html").read_text()
    parser = _Collect()
    parser.feed(page)
    for section in ("config", "data", "summary", "figures", "paired_tests", "fold_paired_tests", "agreement",
                    "aggregation_audit", "glossary"):
        assert section in parser.ids, section
    assert parser.images >= 5
    assert not [s for s in parser.srcs if re.match(r"(?i)(https?:)?//", s)]
    markdown = (folder / "report.md").read_text()
    groups, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            groups.append(current)
            current = []
    assert groups
    for group in groups:  # every Markdown table: a header, a separator, rows of the same width
        assert re.fullmatch(r"\|(-+:?\|)+", group[1]), group[1]
        assert len({line.count("|") for line in group}) == 1, group
    assert (folder / "tables.tex").read_text().startswith("\\begin{table}")
    assert page.index('id="summary"') < page.index('id="glossary"') < page.index('id="config"')
    assert "<details>" in page and "AI+1R+NN50" in page and "sample of n = 50 per ranking" in page
    for stem in ("ndcg@10-by-protocol", "ndcg-by-k", "ndcg@10-protocol-agreement"):
        for ext in ("pdf", "svg", "png"):
            assert (folder / "figures" / f"{stem}.{ext}").is_file(), (stem, ext)


def test_latex_table_matches_golden_file():
    blocks = [
        Block("AI+AR+AN", ["ndcg@10", "rmse"], {
            "pop_ular": {"ndcg@10": Cell(0.1, 0.05, 0.15, False, False), "rmse": Cell(1.0, None, None, False, False)},
            "als": {"ndcg@10": Cell(0.2, 0.1, 0.3, True, True), "rmse": Cell(0.9, None, None, True, False)},
        }),
        Block("AI+1R+NN100", ["ndcg@10"], {
            "pop_ular": {"ndcg@10": Cell(0.5, None, None, True, False)},
            "als": {"ndcg@10": Cell(0.4, None, None, False, False)},
        }),
    ]
    assert to_latex(blocks, caption=r"Results \& more for {protocol}", label="tab:r") == (HERE / "golden_table.tex").read_text()


def test_p_values_are_formatted_as_papers_print_them():
    from recsys_eval.report.tables import format_p

    assert [format_p(p) for p in (5.885e-238, 0.000999, 0.001, 0.04567, 0.5, None)] == [
        "< 0.001", "< 0.001", "0.00100", "0.0457", "0.500", "–"]


def test_significance_table_names_the_metric_and_the_direction():
    from recsys_eval.report.build import significance_table

    paired = pl.DataFrame({"protocol": ["B", "A", "A"], "fold": "f", "metric": ["rmse", "rmse", "ndcg"],
                           "k": [None, None, 10], "system": ["x", "x", "x"], "baseline": "b", "test": "t",
                           "mean_diff": [-0.1, 0.2, 0.2], "p_value": [1e-9, 0.2, 0.2],
                           "p_adjusted": [1e-9, 0.4, 0.4], "n": 9})
    table = significance_table(paired, "rmse", 0.05, protocols=["A", "B"])
    assert table.select("protocol", "metric", "vs baseline", "p", "significant").rows() == [
        ("A", "RMSE", "worse", "0.200", "no"), ("B", "RMSE", "better", "< 0.001", "yes")]


def test_set_overrides_are_toml_values_and_bad_paths_name_the_key():
    from recsys_eval.errors import ConfigError
    from recsys_eval.pipeline.config import apply_overrides

    data = {"metrics": {"k": [10]}, "recommenders": [{"name": "als", "params": {}}]}
    apply_overrides(data, ["metrics.k=[5, 20]", "recommenders.0.params.factors=32", "recommenders.0.name=bpr",
                           "compare.baseline=\"popular\""])
    assert data == {"metrics": {"k": [5, 20]}, "recommenders": [{"name": "bpr", "params": {"factors": 32}}],
                    "compare": {"baseline": "popular"}}
    for bad, message in (("compare.baseline.x=1", "'compare.baseline' is a value"),
                         ("metrics.k.x=1", "names an array entry"), ("recommenders.3.name=x", "'recommenders.3'"),
                         ("metrics", "expected key.path=value")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            apply_overrides(data, [bad])


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize("wide", [False, True])
def test_latex_tables_fit_the_text_width(tmp_path, wide):
    from recsys_eval.report.tables import latex_caption

    columns = [f"{m}@{k}" for m in ("precision", "recall", "ndcg", "ap") for k in (10, 20)]
    cell = Cell(0.1234, 0.1111, 0.1357, False, True)
    blocks = [Block("AI+1R+NN100", columns, {name: dict.fromkeys(columns, cell)
                                             for name in ("popular", "item_knn_cosine", "als")})]
    caption = latex_caption("A study & more", protocol="{protocol}", intervals=True, test="t", correction="holm",
                            alpha=0.05, baseline="popular")
    body = to_latex(blocks, caption=caption, label="tab:x", intervals=True, wide=wide)
    assert "Overfull" not in compile_tables(tmp_path, body, wide=wide)
    assert "P@10" in body and "nDCG@20" in body and "MAP@20" in body and r"$\dagger$" in body


def test_incomplete_folder_is_a_clear_error(tmp_path):
    (tmp_path / "manifest.json").write_text('{"format": 2}')
    with pytest.raises(DataError, match="missing config.toml, per_unit, summary.parquet"):
        analyse(tmp_path)


def test_a_missing_partition_is_refused_with_its_name(folder, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    victim = ResultsFolder.open(copy).partitions()[3]
    victim.unlink()
    with pytest.raises(DataError, match=re.escape(str(victim.relative_to(copy)))):
        ResultsFolder.open(copy).scan_per_unit()
    with pytest.raises(DataError, match="missing"):
        analyse(copy, out=tmp_path / "tables")


def test_sampled_table_averages_like_the_summary(folder):
    sampled = pl.read_parquet(folder / "sampled_correction.parquet").filter(pl.col("estimate") == "sampled")
    summary = pl.read_parquet(folder / "summary.parquet").filter(
        (pl.col("protocol") == "AI+1R+NN50") & (pl.col("fold") == "all") & (pl.col("rule") == "user mean"))
    both = sampled.join(summary, on=["system", "protocol", "metric", "k"], how="inner")
    assert both.height == sampled.height > 0
    assert both["value"].to_list() == pytest.approx(both["mean"].to_list(), rel=1e-12, abs=1e-15)


def test_unknown_baseline_is_a_clear_error(folder):
    from recsys_eval.errors import ConfigError

    with pytest.raises(ConfigError, match="did you mean 'popular'"):
        analyse(folder, baseline="populr", out=folder.parent / "elsewhere")


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_report_renders_in_headless_chromium_without_console_errors(folder, tmp_path):
    result = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path}",
         "--enable-logging=stderr", "--v=0", "--dump-dom", (folder / "report.html").as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = _Collect()
    dom.feed(result.stdout)
    for section in ("config", "summary", "figures", "agreement", "glossary"):
        assert section in dom.ids
    assert dom.images == len(list((folder / "figures").glob("*.png")))
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line and "ERROR" in line.upper()]
    assert console == []


def test_compare_and_report_commands(folder, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(folder), "--tests", "t,sign", "--correction", "bonferroni"])
    assert exit_info.value.code in (0, None)
    out = folder / "comparisons" / "baseline-popular_t-sign_bonferroni_alpha-0.05"
    tests = pl.read_parquet(out / "paired_tests.parquet")
    assert set(tests["test"].unique()) == {"t", "sign"}
    printed = capsys.readouterr().out
    # a cross-validated run: the paired t over the fold means, as the report marks its tables
    assert "Paired tests against the baseline: nDCG@10 (paired t over the fold means)" in " ".join(printed.split())
    table = [line for line in printed.splitlines() if not line.startswith("tables: ")]
    assert max(map(len, table)) <= 80 and "…" not in printed
    # one row per protocol and system, protocols in config order, each the fold-means test's
    rows = [line.split() for line in table if line.split() and line.split()[0].startswith("AI+")]
    assert len(rows) == 6 * 2
    assert list(dict.fromkeys(r[0] for r in rows)) == ["AI+AR+AN", "AI+1R+AN", "AI+1R+NN50", "AI+AR+AN+pct3/bin1",
                                                       "AI+AR+AN+pct3/bin2", "AI+AR+AN+pct3/bin3"]
    over_folds = pl.read_parquet(out / "fold_paired_tests.parquet").filter(
        (pl.col("metric") == "ndcg") & (pl.col("k") == 10))
    expected = {(r["protocol"], r["system"]): f"{r['mean_diff']:+.4f}" for r in over_folds.iter_rows(named=True)}
    assert {(r[0], r[1]): r[2] for r in rows} == expected
    with pytest.raises(SystemExit) as exit_info:  # never overwritten without --force
        main(["compare", str(folder), "--tests", "t,sign", "--correction", "bonferroni"])
    assert exit_info.value.code == 1
    for args, message in ((["--baseline", "nobody"], "nobody"), (["--tests", "wilcoxn"], "did you mean 'wilcoxon'"),
                          (["--correction", "holmes"], "did you mean 'holm'")):
        with pytest.raises(SystemExit) as exit_info:
            main(["compare", str(folder), *args])
        assert exit_info.value.code == 1
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(folder)])
    assert exit_info.value.code == 1  # the run wrote its report already
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(folder), "--force"])
    assert exit_info.value.code in (0, None)


def test_report_of_an_incomplete_folder_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(tmp_path)])
    assert exit_info.value.code == 1
    assert "missing manifest.json" in capsys.readouterr().err


def test_bars_leave_out_missing_values():
    from recsys_eval.report import figures

    frame = pl.DataFrame({"system": ["a", "a", "b", "b"], "estimate": ["sampled", "full"] * 2,
                          "value": [0.5, None, 0.4, None]})
    fig = figures.grouped_bars(frame, group="system", series="estimate", value="value", title="t", ylabel="y", xlabel="x")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["sampled"]
    assert figures.grouped_bars(frame.filter(pl.col("estimate") == "full"), group="system", series="estimate",
                                value="value", title="t", ylabel="y", xlabel="x") is None


@pytest.mark.skipif(
    not (Path(os.environ.get("RECSYS_EVAL_DATA", "")) / "ml-100k" / "u.data").is_file(),
    reason="the README's main job runs on ML-100K, not in RECSYS_EVAL_DATA",
)
def test_the_readme_main_job_runs_with_its_report(tmp_path):
    """`uv run recsys-eval run experiments/quickstart.toml`: a sampled protocol without its full
    counterpart, so the sampled-correction figure has no full-ranking bars."""
    config = HERE.parents[1] / "experiments" / "quickstart.toml"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path), "--quiet"])
    assert exit_info.value.code in (0, None)
    folder = next(p for p in (tmp_path / "quickstart").iterdir() if not p.name.startswith("."))
    assert (folder / "report.html").is_file() and (folder / "tables.tex").is_file()


def test_curves_average_units_within_a_fold_then_folds():
    from recsys_eval.report.curves import combine_curves

    # fold f1: two chunks, y 0.2 over 1 unit and 0.6 over 3 units -> 0.5; fold f2: 0.1 over 2 units;
    # a chunk without units (y NaN) weighs nothing; all: (0.5 + 0.1) / 2
    rows = pl.DataFrame({"system": "s", "protocol": "p", "fold": ["f1", "f1", "f2", "f2"], "curve": "roc",
                         "x": 0.5, "y": [0.2, 0.6, 0.1, float("nan")], "units": [1, 3, 2, 0]})
    rows = rows.with_columns(pl.when(pl.col("units") > 0).then(pl.col("y")).otherwise(0.0).alias("y"))
    out = {r["fold"]: (r["y"], r["units"]) for r in combine_curves(rows).iter_rows(named=True)}
    assert out["f1"] == (pytest.approx(0.5), 4) and out["f2"] == (pytest.approx(0.1), 2)
    assert out["all"] == (pytest.approx(0.3), 6)
    empty = combine_curves(rows.filter(pl.col("units") == 0))
    assert empty["y"].to_list() == [None]


def test_roc_curves_enclose_the_summary_auc_and_pr_curves_fall(folder):
    """The area under the averaged ROC (trapezoids on its grid) is the mean of the units' areas.
    Where every target is ranked (1R protocols: one relevant item, its targets all listed) a unit's
    area is its AUC, so the area is the summary's mean over units (``micro_mean``) up to the grid.
    (Under AR+AN a truncated list's unlisted targets tie last on the curve, while the AUC uses
    their exact scores, so there only the unit counts are compared: a unit is a user.)"""
    curves = pl.read_parquet(folder / "curves.parquet")
    summary = pl.read_parquet(folder / "summary.parquet").filter(
        pl.col("protocol").is_in(["AI+AR+AN", "AI+1R+AN", "AI+1R+NN50"]) & (pl.col("metric") == "auc"))
    assert summary.height == 3 * 3 * 3  # protocols x systems x (two folds and all)
    for row in summary.iter_rows(named=True):
        roc = curves.filter((pl.col("curve") == "roc") & (pl.col("protocol") == row["protocol"])
                            & (pl.col("system") == row["system"]) & (pl.col("fold") == row["fold"])).sort("x")
        x, y = roc["x"].to_numpy(), roc["y"].to_numpy()
        assert x[0] == 0 and x[-1] == 1 and y[-1] == pytest.approx(1.0)
        if row["protocol"] == "AI+AR+AN":
            assert roc["units"][0] == row["users_counted"], row
        else:
            area = float(((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2).sum())
            assert area == pytest.approx(row["micro_mean"], abs=0.004), row
    pr = curves.filter(pl.col("curve") == "pr").sort("system", "protocol", "fold", "x")
    falls = pr.group_by("system", "protocol", "fold").agg((pl.col("y").diff().drop_nulls() <= 1e-12).all())
    assert falls["y"].all() and falls.height > 0
    for stem in ("roc-by-protocol", "pr-by-protocol"):
        assert (folder / "figures" / f"{stem}.svg").is_file()


def tuned_config(data: Path) -> str:
    return config_text(
        "tuned", seed=7, dataset=ratings_file(data), protocols=["AI+1R+NN50"],
        recommenders=["popular", {"name": "user_knn", "search": {"k": [3, 10, 40]}}],
        metrics={"names": ["precision", "ndcg"], "k": [10], "relevance_threshold": 4}, output=None,
        tuning={"method": "grid", "metric": "ndcg@10"})


def test_a_tuned_run_reports_the_chosen_parameters_and_the_trials(tmp_path, synthetic_ratings):
    config = tmp_path / "tuned.toml"
    config.write_text(tuned_config(synthetic_ratings))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path), "--quiet"])
    assert exit_info.value.code in (0, None)
    folder = (tmp_path / "tuned" / "latest").resolve()
    trials = pl.read_parquet(folder / "tuning.parquet")
    best = max(trials.iter_rows(named=True), key=lambda r: (r["value"], -r["trial"]))
    markdown = (folder / "report.md").read_text()
    tuning = markdown[markdown.index("## Tuning"):]
    assert "maximising nDCG@10" in tuning
    chosen = tuning[tuning.index("**Chosen hyperparameters**"):tuning.index("**Tuning cost")]
    rows = [line for line in chosen.splitlines() if line.startswith("| holdout")]
    assert len(rows) == 1 and f"| user_knn | {best['trial']} |" in rows[0] and rows[0].endswith(f"| {best['param_k']} |")
    assert 'id="tuning"' in (folder / "report.html").read_text()
    assert (folder / "figures" / "tuning-validation-curves.pdf").is_file()


def test_values_tied_with_the_best_are_all_bold():
    from recsys_eval.report.tables import summary_blocks

    summary = pl.DataFrame({"system": ["x", "y", "z"], "protocol": "p", "fold": "all", "metric": "ndcg", "k": 10,
                            "mean": [0.5, 0.5 - 1e-12, 0.5 - 1e-6]})
    cells = summary_blocks(summary, fold="all")[0].rows
    assert [cells[s]["ndcg@10"].best for s in "xyz"] == [True, True, False]


def test_figures_are_drawn_at_print_width_with_8_to_9_point_fonts(folder):
    from pdf_pages import font_sizes, page_size

    pdfs = sorted((folder / "figures").glob("*.pdf"))
    assert len(pdfs) >= 5
    for pdf in pdfs:
        width, height = page_size(pdf)
        assert round(width / 72, 2) in (3.3, 7.0), (pdf.name, width / 72)
        assert 0 < height / 72 <= 9, (pdf.name, height / 72)
        assert font_sizes(pdf) and font_sizes(pdf) <= {8.0, 9.0}, (pdf.name, font_sizes(pdf))


def _section(markdown: str, title: str) -> str:
    start = markdown.index(f"## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end > 0 else None]


def test_the_report_shows_every_metric_asked_for_and_first_what_ran_and_who_won(folder):
    markdown = (folder / "report.md").read_text()
    asked = ["P@10", "R@10", "F1@10", "nDCG@10", "AUC"]  # reported_config: 5 metrics at k = 5, 10 -> 10
    summary_md = _section(markdown, "Summary")
    tex = (folder / "tables.tex").read_text()
    for label in asked:
        assert f"| {label} |" in summary_md or f" {label} |" in summary_md, label
        assert label in tex, label
    glance = _section(markdown, "At a glance")
    assert markdown.index("## At a glance") < markdown.index("## Summary")
    assert "**split**: kfold (k = 2, per_user = true), 2 folds" in glance and "rating >= 4" in glance
    summary = pl.read_parquet(folder / "summary.parquet").filter(
        (pl.col("fold") == "all") & (pl.col("metric") == "ndcg") & (pl.col("k") == 10))
    for protocol in ("AI+AR+AN", "AI+1R+NN50"):
        best = summary.filter(pl.col("protocol") == protocol).sort("mean", descending=True).row(0, named=True)
        assert f"  - {protocol}: {best['system']} {best['mean']:.4f} [{best['lower']:.4f}, {best['upper']:.4f}]" in glance


def test_significance_is_one_matrix_per_protocol_marked_after_correction(folder):
    section = _section((folder / "report.md").read_text(), "Significance against the baseline: paired t over fold means")
    tests = pl.read_parquet(folder / "fold_paired_tests.parquet").filter(
        (pl.col("protocol") == "AI+AR+AN") & (pl.col("metric") == "ndcg") & (pl.col("k") == 10)
        & (pl.col("test") == "t"))
    lines = section[section.index("**AI+AR+AN**"):].splitlines()[2:]
    table = lines[:next(i for i, line in enumerate(lines) if not line.startswith("|"))]
    rows = {line.split("|")[1].strip(): line for line in table[2:]}
    assert set(rows) == {"random", "item_knn"}  # every system but the baseline, once
    header = [c.strip() for c in table[0].split("|")[1:-1]]
    column = header.index("nDCG@10")
    for r in tests.iter_rows(named=True):
        cell = rows[r["system"]].split("|")[1:-1][column].strip()
        mark = "▲" if r["p_adjusted"] < 0.05 and r["mean_diff"] > 0 else "▼" if r["p_adjusted"] < 0.05 else ""
        assert cell == f"{r['mean_diff']:+.4f}" + (f" {mark}" if mark else ""), (r["system"], cell)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_a_wide_block_continues_in_a_second_table_that_compiles(tmp_path):
    columns = [f"{m}@10" for m in ("precision", "recall", "f1", "ndcg", "ap", "rr", "hit", "catalog_coverage",
                                   "novelty", "gini")] + ["auc"]
    cell = Cell(0.1234, 0.1111, 0.1357, False, True)
    blocks = [Block("AI+AR+AN", columns, {name: dict.fromkeys(columns, cell) for name in ("popular", "als")})]
    body = to_latex(blocks, caption="Study, {protocol}.", label="tab:x", intervals=True)
    assert body.count(r"\begin{table}") == 2 and "Part 2 of 2" in body
    for label in ("P@10", "Gini@10", "AUC", "nDCG@10"):
        assert label in body, label
    assert "Overfull" not in compile_tables(tmp_path, body)


def test_a_run_logged_to_a_file_prints_a_line_per_step_and_ends_at_the_report(tmp_path, synthetic_ratings, capsys):
    config = tmp_path / "tuned.toml"
    config.write_text(tuned_config(synthetic_ratings))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path)])  # captured stdout: not a terminal
    assert exit_info.value.code in (0, None)
    lines = capsys.readouterr().out.splitlines()
    for step in ("load and prepare", "split", "[holdout] tune user_knn", "[holdout] fit", "[holdout] rank and measure",
                 "summarise and write results", "analyse (tests, agreement, audits)", "report (tables, figures, report.html)"):
        assert any(re.fullmatch(rf"{re.escape(step)}: done in \d+\.\d s", line) for line in lines), step
    assert not any("━" in line for line in lines)  # no progress bars in a log
    folder = (tmp_path / "tuned" / "latest").resolve()
    assert lines[-1] == f"report: {folder / 'report.html'}"
    assert any(line.startswith("winner:") and "by nDCG@10" in line for line in lines)  # the tuned metric


def test_an_interrupted_run_says_how_to_resume(tmp_path, synthetic_ratings, capsys, monkeypatch):
    import recsys_eval.experiment.runner as runner

    config = tmp_path / "tuned.toml"
    config.write_text(tuned_config(synthetic_ratings))

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_fold", interrupt)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path), "--set", "seed=4"])
    assert exit_info.value.code == 130
    out = capsys.readouterr().out
    assert f"resume with: recsys-eval run {config} --resume --out {tmp_path} --set seed=4" in out
