"""``[run] save_negatives`` then ``negatives = "<file>"``: a run whose sampled protocols read the
negatives an earlier run wrote (in either layout, with another seed) gives the same per-unit values;
a negatives file that does not fit the split stops the run with the offender named."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from config_text import config_text, ratings_file, split_table
from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder

PROTOCOLS = ["AI+1R+NN50", "AI+AR+NN20"]
SPLIT = split_table("leave_last_n", n=1)
RECS = ["popular", "item_knn"]
METRICS = {"names": ["ndcg", "hit", "auc"], "k": [10]}


def run(folder: Path, name: str, data: Path, protocols, seed: int, **tables) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{name}.toml"
    config.write_text(config_text(name, seed=seed, dataset=ratings_file(data), split=SPLIT, protocols=protocols,
                                  recommenders=RECS, metrics=METRICS, **tables))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(folder / "results"), "--quiet"])
    assert exit_info.value.code in (0, None)
    return next(p for p in (folder / "results" / name).iterdir() if not p.name.startswith(".") and not p.is_symlink())


def values(folder: Path) -> pl.DataFrame:
    key = ["system", "protocol", "metric", "user", "unit"]
    return ResultsFolder.open(folder).scan_per_unit().collect().select(key + ["value"]).sort(key, nulls_last=True)


@pytest.mark.parametrize("suffix", [".negative", ".parquet"])
def test_saved_negatives_reproduce_the_sampled_evaluation(tmp_path, synthetic_ratings, suffix):
    first = run(tmp_path / "sampled", "sampled", synthetic_ratings, PROTOCOLS, seed=1, run={"save_negatives": True})
    saved = first / "negatives" / "leave_last_n"
    # the files travel beside the new config, named relative to it
    reuse = tmp_path / "reuse"
    reuse.mkdir()
    for label in PROTOCOLS:
        shutil.copy(saved / f"{label}{suffix}", reuse / f"{label.replace('+', '_')}{suffix}")
    protocols = [{"name": label, "negatives": f"{label.replace('+', '_')}{suffix}"} for label in PROTOCOLS]
    second = run(reuse, "fixed", synthetic_ratings, protocols, seed=2)
    assert values(second).equals(values(first))
    # without the file, the other seed draws other negatives: the equality above is the file's doing
    other = run(tmp_path / "other", "other", synthetic_ratings, PROTOCOLS, seed=2)
    assert not values(other).equals(values(first))


def test_a_negatives_file_of_another_split_is_refused(tmp_path, synthetic_ratings, capsys):
    (tmp_path / "bad.negative").write_text("(1,1001)\t1002\n")
    config = tmp_path / "bad.toml"
    config.write_text(config_text("bad", dataset=ratings_file(synthetic_ratings), split=SPLIT,
                                  protocols=[{"name": "AI+1R+NN50", "negatives": "bad.negative"}], recommenders=RECS))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet"])
    assert exit_info.value.code not in (0, None)
    said = capsys.readouterr()
    assert "bad.negative" in said.err + said.out and "first" in said.err + said.out


def test_validate_checks_the_negatives_entry(tmp_path, synthetic_ratings, capsys):
    for protocol, message in (({"name": "AI+1R+NN50", "negatives": "missing.negative"}, "is not a file"),
                              ({"name": "AI+AR+AN", "negatives": "x.negative"}, "+NN protocol")):
        config = tmp_path / "check.toml"
        config.write_text(config_text("check", dataset=ratings_file(synthetic_ratings), split=SPLIT,
                                      protocols=[protocol], recommenders=RECS))
        with pytest.raises(SystemExit) as exit_info:
            main(["validate", str(config)])
        assert exit_info.value.code not in (0, None)
        said = capsys.readouterr()
        assert message in said.err + said.out
