"""``recsys-eval audit``: the leakage audit of a config's splits, no recommender run (Ji et al.,
TOIS 2023): a random split leaks, a global time split does not, on synthetic data and on ML-100K."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from config_text import config_text, ratings_file, split_table
from recsys_eval.cli import main


def audit(config: Path, capsys, *extra: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["audit", str(config), *extra])
    out = capsys.readouterr()
    return exc.value.code or 0, out.out, out.err


@pytest.mark.parametrize(("split", "leaks"), [
    (split_table("holdout", fraction=0.2), True),
    (split_table("kfold", k=2, per_user=True), True),
    (split_table("time", at=0.8), False),
])
def test_a_random_split_leaks_and_a_time_split_does_not(tmp_path, synthetic_ratings, capsys, split, leaks):
    config = tmp_path / "audit.toml"
    config.write_text(config_text("audited", dataset=ratings_file(synthetic_ratings), split=split))
    users = tmp_path / "users.csv"
    code, out, _ = audit(config, capsys, "--users", str(users))
    assert code == 0
    assert ("leak above the threshold" in out) == leaks
    assert ("no leakage above the threshold" in out) != leaks
    table = pl.read_csv(users)
    assert table.get_column("leaking").any() == leaks


def test_data_without_timestamps_is_a_clear_error(tmp_path, synthetic_ratings, capsys):
    config = tmp_path / "audit.toml"
    config.write_text(config_text("audited", dataset=ratings_file(synthetic_ratings, timestamp=False)))
    code, _, err = audit(config, capsys)
    assert code == 1 and "no timestamps" in err and "Traceback" not in err


@pytest.mark.parametrize(("split", "leaks"), [
    (split_table("holdout", fraction=0.2, per_user=True), True),
    (split_table("time", at=0.8), False),
])
def test_ml100k_random_split_leaks_and_time_split_does_not(tmp_path, capsys, monkeypatch, split, leaks):
    home = os.environ.get("RECSYS_EVAL_DATA")
    if not home or not (Path(home) / "ml-100k" / "u.data").is_file():
        pytest.skip("no ml-100k under RECSYS_EVAL_DATA")
    monkeypatch.setenv("RECSYS_EVAL_CACHE", str(tmp_path / "derived"))
    config = tmp_path / "audit.toml"
    config.write_text(config_text("audited", dataset={"name": "ml-100k"}, split=split))
    users = tmp_path / "users.csv"
    code, out, _ = audit(config, capsys, "--users", str(users))
    assert code == 0 and ("leak above the threshold" in out) == leaks
    leaking = pl.read_csv(users).get_column("leaking").mean()
    assert (leaking > 0.5) if leaks else leaking == 0
