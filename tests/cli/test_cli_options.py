"""Command-line conveniences: ``--set`` overrides for run and validate, plugin modules beside the
config, booleans shown as plain flags."""

from __future__ import annotations

import re
import sys

import pytest

from config_text import config_text, ratings_file
from recsys_eval.cli import main


def opts_config(data) -> str:
    return config_text("opts", dataset=ratings_file(data, timestamp=False), output=None)


PLUGIN = '''
import numpy as np
from recsys_eval.recommend import Recommender


class Newest(Recommender):
    def fit(self, train):
        self.n_items = train.n_items
        return self

    def score(self, users, items):
        return np.asarray(items, np.float32)
'''


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out = capsys.readouterr()
    return exit_info.value.code or 0, out.out, out.err


def test_validate_applies_set_overrides_and_names_a_bad_one(tmp_path, capsys, synthetic_ratings):
    config = tmp_path / "opts.toml"
    config.write_text(opts_config(synthetic_ratings))
    code, out, _ = _cli(["validate", str(config), "--set", "metrics.k=[5, 20]", "--set", 'metrics.names=["ap"]'], capsys)
    assert code == 0 and "metrics ap at k = 5, 20" in out
    code, _, err = _cli(["validate", str(config), "--set", "name.x=1"], capsys)
    assert code == 1 and "--set name.x: 'name' is a value, not a table" in err and "Traceback" not in err
    code, _, err = _cli(["validate", str(config), "--set", "metrics.k=[0]"], capsys)
    assert code == 1 and "metrics.k" in err


def test_a_plugin_beside_the_config_imports_without_pythonpath(tmp_path, capsys, synthetic_ratings, monkeypatch):
    (tmp_path / "readme_plugin_models.py").write_text(PLUGIN)
    config = tmp_path / "opts.toml"
    config.write_text(opts_config(synthetic_ratings))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.chdir(tmp_path.parent)  # not the config's folder
    code, out, err = _cli(["validate", str(config), "--set", "recommenders.0.name=readme_plugin_models:Newest"],
                          capsys)
    assert code == 0, err
    assert "1 recommenders" in out


@pytest.mark.parametrize("command", ["run", "validate", "compare", "report", "init"])
def test_booleans_are_plain_flags(command, capsys):
    code, out, _ = _cli([command, "--help"], capsys)
    assert code == 0
    assert not re.search(r"<bool>|BOOLEAN", out), out
