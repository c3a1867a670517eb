"""Other frameworks' run files as recommenders of an experiment: the same scores written as our CSV,
as an Elliot TSV (detected, in a recs/ folder of one system per file) and as a RecBole atomic file
(``format`` given) are the same system."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from config_text import config_text, ratings_file

from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder

METRICS = {"names": ["precision", "ndcg", "ap", "auc"], "k": [5, 10], "relevance_threshold": 4}


def _scores(ratings: Path) -> pl.DataFrame:
    """Seeded scores of 40 items per user, raw ids (users and items of the ratings file)."""
    frame = pl.read_csv(ratings)
    users, items = frame["userId"].unique().sort(), frame["movieId"].unique().sort()
    rng = np.random.default_rng(3)
    pairs = [(u, i) for u in users for i in rng.choice(items.to_numpy(), 40, replace=False)]
    user, item = (np.array(c) for c in zip(*pairs, strict=True))
    return pl.DataFrame({"user": user, "item": item, "score": rng.random(len(user)).round(6)})


def test_elliot_and_recbole_runs_are_the_csv_system(tmp_path, synthetic_ratings):
    scores = _scores(synthetic_ratings)
    scores.write_csv(tmp_path / "run.csv")
    recs = tmp_path / "recs"  # Elliot's folder: one file per model
    recs.mkdir()
    scores.write_csv(recs / "BPRMF_factors=10.tsv", separator="\t", include_header=False)
    scores.with_columns((1 - pl.col("score")).alias("score")).write_csv(recs / "Reversed.tsv", separator="\t", include_header=False)
    lines = ["user_id:token\titem_id:token\tscore:float", *(f"{u}\t{i}\t{s}" for u, i, s in scores.iter_rows())]
    (tmp_path / "bpr.txt").write_text("\n".join(lines) + "\n")
    recommenders = [
        {"name": "external", "label": "csv", "path": str(tmp_path / "run.csv")},
        {"name": "external", "label": "elliot", "path": str(recs)},
        {"name": "external", "label": "recbole", "path": str(tmp_path / "bpr.txt"), "format": "recbole"},
    ]
    config = tmp_path / "c.toml"
    config.write_text(config_text("interop", dataset=ratings_file(synthetic_ratings), recommenders=recommenders,
                                  metrics=METRICS))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"])
    assert exit_info.value.code in (0, None)
    folder = next(p for p in (tmp_path / "out" / "interop").iterdir() if not p.name.startswith(".") and not p.is_symlink())
    per_unit = ResultsFolder.open(folder).scan_per_unit().collect()
    key = ["protocol", "fold", "user", "unit", "metric", "k"]
    csv = per_unit.filter(pl.col("system") == "csv").drop("system").sort(key, nulls_last=True)
    assert csv.height > 0
    assert set(per_unit["system"]) == {"csv", "elliot/BPRMF_factors=10", "elliot/Reversed", "recbole"}
    for system in ("elliot/BPRMF_factors=10", "recbole"):
        assert per_unit.filter(pl.col("system") == system).drop("system").sort(key, nulls_last=True).equals(csv)
    reversed_ = per_unit.filter(pl.col("system") == "elliot/Reversed").drop("system").sort(key, nulls_last=True)
    assert not reversed_.equals(csv)


def test_a_format_without_a_run_file_or_an_unknown_one_is_refused(tmp_path, synthetic_ratings, capsys):
    for rec, message in (({"name": "popular", "format": "elliot"}, "recommenders[0].format: applies to a run file"),
                         ({"name": "x", "path": str(synthetic_ratings), "format": "recbol"},
                          "recommenders[0].format: unknown run format 'recbol'")):
        config = tmp_path / "c.toml"
        config.write_text(config_text("bad", dataset=ratings_file(synthetic_ratings), recommenders=[rec]))
        with pytest.raises(SystemExit):
            main(["validate", str(config)])
        assert message in " ".join(capsys.readouterr().err.split())
