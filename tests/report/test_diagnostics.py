"""The diagnostics of a run (issue 31) as its results folder and report hold them: the leakage audit
equals the audit of the config's own splits, and the report has a section for each diagnostic."""

from __future__ import annotations

import tomllib
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from config_text import config_text, ratings_file, split_table
from recsys_eval.cli import main
from recsys_eval.core.results import LEAKAGE, LEAKAGE_USERS, ResultsFolder
from recsys_eval.experiment.runner import config_splits
from recsys_eval.pipeline.config import parse_config
from recsys_eval.pipeline.inputs import load_data
from recsys_eval.split import leakage_audit


def diagnosed_config(data: Path) -> str:
    return config_text(
        "diagnosed", seed=5, dataset=ratings_file(data), split=split_table("holdout", fraction=0.2, per_user=True),
        recommenders=["popular", "random", {"name": "item_knn", "params": {"k": 50}}],
        metrics={"names": ["ndcg", "recall"], "k": [10], "relevance_threshold": 4},
        output=None, compare={"baseline": "popular", "tests": ["t"]})


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
