"""The config as run: a run saves the resolved config (overrides applied, defaults and absolute paths
written out) as its config.toml, with the file as written and the overrides beside it; the saved
config reruns the same experiment, and paths in a config are read beside the config file."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import polars as pl
import pytest

from config_text import COLUMNS, config_text
from recsys_eval.cli import main
from recsys_eval.core.results import CONFIG, CONFIG_ORIGINAL, OVERRIDES, ResultsFolder
from recsys_eval.errors import ConfigError
from recsys_eval.experiment.checks import check_names
from recsys_eval.pipeline.config import load_config, resolved_text

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "experiments").glob("*.toml")) + [ROOT / "recsys_eval" / "experiment" / "starter.toml"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_config_reads_back_from_its_resolved_text(path, tmp_path):
    config = load_config(path, ["metrics.k=[3, 7, 10]", "seed=11"])
    saved = tmp_path / "config.toml"
    saved.write_text(resolved_text(config))
    again = load_config(saved)
    assert again.model_dump() == config.model_dump()
    assert again.metrics.k == [3, 7, 10] and again.seed == 11


def _cli(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out = capsys.readouterr()
    return exit_info.value.code or 0, out.out + out.err


def _per_unit(folder: Path) -> pl.DataFrame:
    keys = ["fold", "system", "protocol", "user", "metric", "k"]
    return ResultsFolder.open(folder).scan_per_unit().collect().sort(keys)


def test_a_run_with_overrides_saves_a_config_that_reruns_it(tmp_path, capsys, synthetic_ratings, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(synthetic_ratings, project / "ratings.csv")
    config = project / "exp.toml"
    config.write_text(config_text(
        "rerun", seed=1, dataset={"path": "ratings.csv", "columns": COLUMNS},  # beside the config
        recommenders=["popular", {"name": "item_knn", "params": {"k": 20}}],
        metrics={"names": ["ndcg", "recall"], "k": [10]}, output={"report": False}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # neither the config's folder nor the results'
    overrides = ["--set", "metrics.k=[5, 10]", "--set", "recommenders.1.params.k=7", "--set", "seed=4"]
    code, out = _cli(["run", str(config), "--out", "first", "-q", *overrides], capsys)
    assert code == 0, out
    first = ResultsFolder.open(next((elsewhere / "first" / "rerun").glob("2*")))
    resolved = tomllib.loads(first.text(CONFIG))
    assert resolved["metrics"]["k"] == [5, 10] and resolved["seed"] == 4
    assert resolved["recommenders"][1]["params"] == {"k": 7}
    assert resolved["dataset"]["path"] == str(project / "ratings.csv")
    assert first.text(CONFIG_ORIGINAL) == config.read_text()
    assert first.text(OVERRIDES).splitlines() == ["--set metrics.k=[5, 10]", "--set recommenders.1.params.k=7",
                                                   "--set seed=4"]

    code, out = _cli(["run", str(first.file(CONFIG)), "--out", "second", "-q"], capsys)
    assert code == 0, out
    second = ResultsFolder.open(next((elsewhere / "second" / "rerun").glob("2*")))
    assert second.text(CONFIG) == first.text(CONFIG) and not second.file(OVERRIDES).exists()
    rerun, original = _per_unit(second.path), _per_unit(first.path)
    assert set(original.get_column("k").unique()) == {5, 10} and original.height > 0
    assert rerun.equals(original)


def test_a_missing_file_is_named_with_where_relative_paths_are_read(tmp_path):
    config = tmp_path / "exp.toml"
    config.write_text(config_text("missing", dataset={"path": "data/absent.csv"}))
    with pytest.raises(ConfigError, match=r"dataset.path: the dataset file '.*data/absent.csv' is not a file "
                                          r"\(a relative path is read from the config's folder\)"):
        check_names(load_config(config))


@pytest.mark.parametrize("protocol, refused", [("AI+AR+AN", True), ("TI+AR+AN", True), ("AI+1R+AN", False),
                                               ("AI+AR+NN50", False), ("UT+AR+AN", False)])
def test_average_ties_are_refused_where_a_full_ranking_cuts_tie_groups_at_the_depth(tmp_path, protocol, refused):
    config = tmp_path / "ties.toml"
    config.write_text(config_text("ties", dataset={"name": "ml-100k"}, protocols=[protocol],
                                  metrics={"names": ["ndcg"], "k": [10], "ties": "average"}))
    if refused:
        with pytest.raises(ConfigError, match=rf"metrics.ties: 'average' with the full-ranking protocol '{re.escape(protocol)}'"
                                              r": its lists stop at run.depth = 100"):
            check_names(load_config(config))
    else:
        check_names(load_config(config))
