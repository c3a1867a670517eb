"""Every shipped config (experiments/*.toml) reports: run in its own shape (its protocols,
recommenders, metrics and cutoffs, tests, tuning) on the tests' synthetic ratings, its report shows
every metric it asks for in report.md and tables.tex, and tables.tex and tables-twocolumn.tex
compile with pdflatex without an overfull box. Kept small to be quick: the dataset is replaced by
the synthetic ratings, the split by two per-user folds (one holdout for single-split configs), the
systems by the baseline, one more, the first tuned one and the first rating predictor, and tuning
by two trials; what the report is given to show (protocols, metrics, cutoffs, tests) is the config's."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest

from config_text import config_text, ratings_file, split_table
from latex_tables import compile_tables
from recsys_eval.cli import main
from recsys_eval.data.synthetic import write_synthetic_items
from recsys_eval.measure.metrics import AUXILIARY_METRICS, MetricKey, display_label
from recsys_eval.report.tables import latex_escape, table_cutoff

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
CONFIGS = sorted(EXPERIMENTS.glob("*.toml"))


#: Rating predictors of the shipped configs (the rating metrics' table needs one).
RATING_PREDICTORS = ("bias", "user_knn_rating")


def some_systems(config: dict) -> list[dict]:
    """The baseline, the first other system, the first tuned one and the first rating predictor."""
    recs = config["recommenders"]
    label = lambda r: r.get("label", r["name"])  # noqa: E731
    baseline = config.get("compare", {}).get("baseline")
    picks = [next((r for r in recs if label(r) == baseline), None),
             next((r for r in recs if label(r) != baseline), None),
             next((r for r in recs if "search" in r), None),
             next((r for r in recs if r["name"] in RATING_PREDICTORS), None)]
    return [r for r in recs if any(r is p for p in picks)]


#: Metrics that read item genres: the synthetic ratings get the synthetic items' genres for them.
GENRE_METRICS = ("calibration", "ild")
#: Splits tied to ML-100K's own dates or folds, replaced by two per-user folds.
REPLACED_SPLITS = ("kfold", "official", "rolling_time")


def shrunk(config: dict, data: Path) -> str:
    """The config's TOML on the synthetic ratings, two folds, two trials per tuned system; a
    protocol's fixed negatives file (ML-100K ids) gives way to sampling the same number."""
    replaced = config["split"]["method"] in REPLACED_SPLITS
    tables = {key: config[key] for key in ("compare", "report", "learning_curve") if key in config}
    if "tuning" in config:
        tables["tuning"] = config["tuning"] | {"trials": 2, "workers": 1}
    dataset = ratings_file(data)
    if any(m in GENRE_METRICS for m in config["metrics"]["names"]):
        dataset["item_features"] = str(write_synthetic_items(data.parent / "items.csv"))
    protocols = [{k: v for k, v in p.items() if k != "negatives"} for p in config["protocols"]]
    return config_text(
        config["name"], seed=config.get("seed"), dataset=dataset,
        split=split_table("kfold", k=2, per_user=True) if replaced else config["split"],
        protocols=protocols, recommenders=some_systems(config), metrics=config["metrics"],
        output=None, **tables)


def asked_labels(config: dict) -> list[str]:
    """What the report must show: the config's ``[report] metrics``, else every metric at the
    tuning cutoff or the smallest-but-one cutoff."""
    if config.get("report", {}).get("metrics"):
        return config["report"]["metrics"]
    metrics = config["metrics"]
    tuned = MetricKey.parse(config["tuning"]["metric"]).k if "tuning" in config else None
    k = table_cutoff(metrics["k"], tuned)
    no_cutoff = {"auc", "mae", "rmse", "gauc"}
    return [m if m in no_cutoff else MetricKey(m, k).label for m in metrics["names"] if m not in AUXILIARY_METRICS]


@pytest.mark.skipif(shutil.which("pdflatex") is None,
                    reason="pdflatex is not installed (Debian: texlive-latex-base texlive-latex-recommended)")
@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_reports_what_it_asks_and_its_latex_compiles(path, tmp_path, synthetic_ratings):
    config = tomllib.loads(path.read_text())
    (tmp_path / "config.toml").write_text(shrunk(config, synthetic_ratings))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(tmp_path / "config.toml"), "--out", str(tmp_path / "results"), "--quiet"])
    assert exit_info.value.code in (0, None)
    folder = (tmp_path / "results" / config["name"] / "latest").resolve()
    markdown, tex = (folder / "report.md").read_text(), (folder / "tables.tex").read_text()
    summary_md = markdown[markdown.index("## Summary"):markdown.index("\n## ", markdown.index("## Summary") + 1)]
    for label in asked_labels(config):
        shown = display_label(label)
        assert f"| {shown} |" in summary_md or f" {shown} |" in summary_md, (path.name, shown)
        assert latex_escape(shown) in tex, (path.name, shown)
    for name, wide in (("tables.tex", False), ("tables-twocolumn.tex", True)):
        log = compile_tables(tmp_path / name.split(".")[0], (folder / name).read_text(), wide=wide) \
            if (tmp_path / name.split(".")[0]).mkdir() is None else ""
        assert not re.search(r"Overfull \\hbox", log), (path.name, name)
