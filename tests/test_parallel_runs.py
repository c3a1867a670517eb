"""Four ``recsys-eval run`` at once on one cold kernel cache, as a Slurm array or ``xargs -P`` of jobs
on a shared home folder starts them: the four compile and save the same kernels together (numba's
saves hold a lock, recsys_eval.core.kernel_cache.lock_cache_saves), write into one results root,
and give the same per-unit values; a fifth run then loads every kernel from the cache without
compiling one (it would say "compiling kernels") and gives the same values again.

The cache is the package's own (``<user cache>/recsys-eval/numba/...``, by the package's locator)
in a fresh ``XDG_CACHE_HOME``, so ``NUMBA_CACHE_DIR``, which CI sets, is removed for these runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config_text import config_text, ratings_file, split_table
from recsys_eval.core.atomic import is_scratch
from recsys_eval.core.results import ResultsFolder
from recsys_eval.data.synthetic import write_synthetic_ratings


def per_unit(folder: Path) -> list[dict]:
    frame = ResultsFolder.open(folder).scan_per_unit().collect()
    return frame.sort(frame.columns, nulls_last=True).to_dicts()


@pytest.mark.slow
def test_four_runs_at_once_on_a_cold_cache_then_a_fifth_compiles_nothing(tmp_path):
    data = write_synthetic_ratings(tmp_path / "ratings.csv", users=60, items=80, interactions=1500, seed=4)
    config = tmp_path / "parallel.toml"
    config.write_text(config_text("parallel", seed=2, dataset=ratings_file(data), split=split_table("kfold", k=2),
                                  recommenders=["popular", "random", "item_knn"],
                                  metrics={"names": ["ndcg", "recall", "auc"], "k": [5]}))
    env = {key: value for key, value in os.environ.items() if not key.startswith("NUMBA_CACHE")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cold-cache")
    run = [sys.executable, "-m", "recsys_eval.cli", "run", str(config), "--out", str(tmp_path / "out")]
    jobs = [subprocess.Popen([*run, "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)]
    for job in jobs:
        out, err = job.communicate(timeout=900)
        assert job.returncode == 0, err
    root = tmp_path / "out" / "parallel"
    folders = sorted(p for p in root.iterdir() if not p.name.startswith(".") and not p.is_symlink())
    assert len(folders) == 4
    first = per_unit(folders[0])
    assert all(per_unit(folder) == first for folder in folders[1:])

    fifth = subprocess.run(run, env=env, capture_output=True, text=True, timeout=900)
    assert fifth.returncode == 0, fifth.stderr
    assert "compiling kernels" not in fifth.stdout + fifth.stderr
    (newest,) = set(p for p in root.iterdir() if not p.name.startswith(".") and not p.is_symlink()) - set(folders)
    assert per_unit(newest) == first
    assert list((tmp_path / "cold-cache").rglob("*.nbi"))  # the runs did use that cache
    assert [p for p in tmp_path.rglob("*") if is_scratch(p) or p.name.startswith(".partial-")] == []
