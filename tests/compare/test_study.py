"""The analysis of a run's folder: the paired tests' resamples are seeded by what a protocol is, not
by what it is called (docs/CONVENTIONS.md#seeds-and-reproducibility)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from config_text import config_text, ratings_file
from recsys_eval.cli import main
from recsys_eval.compare.study import analyse


def run_folder(tmp_path: Path, data: Path, protocol: dict) -> Path:
    """A run of popularity against two kNN systems under ``protocol``, its folder."""
    config = tmp_path / "study.toml"
    config.write_text(config_text(
        "relabel", seed=3, dataset=ratings_file(data), protocols=[protocol],
        recommenders=["popular", {"name": "item_knn", "params": {"k": 50}}, {"name": "user_knn", "params": {"k": 50}}],
        metrics={"names": ["precision", "recall", "ndcg"], "k": [5, 10], "relevance_threshold": 4}))
    out = tmp_path / protocol.get("label", protocol["name"])
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(out), "--quiet"])
    assert exit_info.value.code in (0, None)
    return next(p for p in (out / "relabel").iterdir() if p.name[0].isdigit())


def permutation_tests(folder: Path, **options) -> pl.DataFrame:
    """The paired permutation tests against popularity, in a fixed order."""
    return analyse(folder, baseline="popular", tests=["permutation"], **options)["paired_tests"].sort("system", "metric", "k")


def test_a_relabelled_protocol_keeps_its_permutation_p_values(tmp_path, synthetic_ratings):
    plain = run_folder(tmp_path, synthetic_ratings, {"name": "AI+AR+AN"})
    relabelled = run_folder(tmp_path, synthetic_ratings, {"name": "AI+AR+AN", "label": "all items"})
    before, after = permutation_tests(plain), permutation_tests(relabelled)
    assert set(after.get_column("protocol")) == {"all items"}
    values = ["system", "metric", "k", "p_value"]
    assert before.height == 2 * 3 * 2  # two systems against popularity, three metrics, two cutoffs
    assert_frame_equal(before.select(values), after.select(values), check_exact=True)
    # the p-values do depend on the resamples' seed, so the equality above is the seed's doing
    other_seed = tmp_path / "other-seed"
    other_seed.mkdir()
    assert not permutation_tests(plain, seed=99, out=other_seed).select(values).equals(before.select(values))
