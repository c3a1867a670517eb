"""The tuned study as a user runs it, ``recsys-eval run experiments/ml100k-tuned.toml --set
tuning.trials=3``, shrunk to the tests' synthetic ratings (:func:`test_shipped_configs.shrunk`: its
protocols, metrics, cutoffs, tests and tuning; a few of its systems, two folds): the report shows MAE,
RMSE and every cutoff asked for; ``compare`` prints the report's headline metric; its figures are
drawn at print width in 8-9 pt; its LaTeX compiles; and the saved config.toml, run again, writes the
same results files byte for byte (only the files that record when and how long differ)."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import polars as pl
import pytest

from latex_tables import compile_tables
from pdf_pages import font_sizes, page_size
from recsys_eval.cli import main
from test_shipped_configs import EXPERIMENTS, shrunk

pytestmark = pytest.mark.slow  # two tuned runs: about a minute on a quiet machine

STUDY = EXPERIMENTS / "ml100k-tuned.toml"
#: What a rerun may change: the run's time and memory, and the seconds its steps and trials took
#: (shown in the report's tuning cost and in its title). Everything else must be the same bytes.
TIMED_FILES = {"timings.csv", "report.md", "report.html", "tuning_budget.csv"}
TIMED_COLUMNS = {"manifest.json": ("created", "peak_rss_mb"), "tuning.parquet": ("fit_seconds", "eval_seconds"),
                 "tuning_budget.parquet": ("trial_seconds",)}
#: The ``--set`` options, written by the first run only (the second has none).
FIRST_ONLY = {Path("overrides.txt")}


def _run(args: list[str]) -> Path:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code in (0, None)
    return (Path(args[args.index("--out") + 1]) / "ml100k-tuned" / "latest").resolve()


def _section(markdown: str, title: str) -> str:
    start = markdown.index(f"## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end > 0 else None]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, synthetic_ratings) -> tuple[Path, Path]:
    """The study run with ``--set tuning.trials=3``, and its saved config.toml run again."""
    root = tmp_path_factory.mktemp("tuned-study")
    (root / "study.toml").write_text(shrunk(tomllib.loads(STUDY.read_text()), synthetic_ratings))
    first = _run(["run", str(root / "study.toml"), "--out", str(root / "first"), "--quiet",
                  "--set", "tuning.trials=3"])
    second = _run(["run", str(first / "config.toml"), "--out", str(root / "second"), "--quiet"])
    return first, second


def test_the_saved_config_is_the_run_with_its_override(runs):
    first, _ = runs
    resolved = tomllib.loads((first / "config.toml").read_text())
    assert resolved["tuning"]["trials"] == 3
    assert (first / "overrides.txt").read_text().split() == ["--set", "tuning.trials=3"]
    trials = pl.read_parquet(first / "tuning.parquet")
    assert trials.group_by("fold", "system").len().get_column("len").unique().to_list() == [3]


def test_the_report_shows_mae_rmse_and_every_cutoff_asked_for(runs):
    first, _ = runs
    asked = tomllib.loads(STUDY.read_text())["metrics"]
    markdown, page = (first / "report.md").read_text(), (first / "report.html").read_text()
    ratings = _section(markdown, "Summary")
    ratings = ratings[ratings.index("**ratings**"):]
    assert "| system | MAE | RMSE |" in ratings and "<th>MAE</th><th>RMSE</th>" in page
    cutoffs = _section(markdown, "nDCG at every cutoff")
    header = "| system | " + " | ".join(f"nDCG@{k}" for k in asked["k"]) + " |"
    assert cutoffs.count(header) == len(tomllib.loads(STUDY.read_text())["protocols"])
    assert all(f"<th>nDCG@{k}</th>" in page for k in asked["k"]) and 'id="cutoffs"' in page
    assert "MAE" in (first / "tables.tex").read_text()


def test_compare_prints_the_headline_metric_of_the_report(runs, capsys):
    first, _ = runs
    headline = _section((first / "report.md").read_text(), "At a glance")
    assert "by nDCG@10" in headline  # the tuned metric (cutoffs 1, 5, 10, 20, 50: not the table's default, @5)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(first), "--tests", "t", "--out", str(first.parent / "compared")])
    assert exit_info.value.code in (0, None)
    assert "Paired tests against the baseline: nDCG@10 " in capsys.readouterr().out


def test_the_figures_are_drawn_at_print_width_in_8_to_9_points(runs):
    first, _ = runs
    pdfs = sorted((first / "figures").glob("*.pdf"))
    assert {"ndcg@10-by-protocol.pdf", "tuning-validation-curves.pdf", "metrics-by-k-AI+AR+AN.pdf"} <= {
        p.name for p in pdfs}
    for pdf in pdfs:
        width, height = page_size(pdf)
        assert round(width / 72, 2) in (3.3, 7.0) and 0 < height / 72 <= 9, (pdf.name, width / 72, height / 72)
        assert font_sizes(pdf) and font_sizes(pdf) <= {8.0, 9.0}, (pdf.name, font_sizes(pdf))


@pytest.mark.skipif(shutil.which("pdflatex") is None,
                    reason="pdflatex is not installed (Debian: texlive-latex-base texlive-latex-recommended)")
@pytest.mark.parametrize("name, wide", [("tables.tex", False), ("tables-twocolumn.tex", True)])
def test_the_latex_tables_compile_without_an_overfull_box(runs, tmp_path, name, wide):
    first, _ = runs
    log = compile_tables(tmp_path, (first / name).read_text(), wide=wide)
    assert not re.search(r"Overfull \\hbox", log)


def test_the_saved_config_reruns_to_the_same_files(runs):
    first, second = runs
    files = {p.relative_to(first) for p in first.rglob("*") if p.is_file()}
    assert files - FIRST_ONLY == {p.relative_to(second) for p in second.rglob("*") if p.is_file()}
    assert {p.parts[0] for p in files} >= {"figures", "per_unit"}
    for path in sorted(files - FIRST_ONLY):
        a, b = first / path, second / path
        if path.name in TIMED_FILES:
            continue
        if path.name == "config.original.toml":  # the file each run was given: the second, the first's config
            assert b.read_bytes() == (first / "config.toml").read_bytes()
        elif path.name == "manifest.json":
            timed = TIMED_COLUMNS[path.name]
            strip = lambda p: {k: v for k, v in json.loads(p.read_text()).items() if k not in timed}  # noqa: E731
            assert strip(a) == strip(b)
        elif path.name in TIMED_COLUMNS:
            assert pl.read_parquet(a).drop(TIMED_COLUMNS[path.name]).equals(
                pl.read_parquet(b).drop(TIMED_COLUMNS[path.name])), path
        else:
            assert a.read_bytes() == b.read_bytes(), path
