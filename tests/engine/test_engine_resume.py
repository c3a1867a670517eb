"""A run started on the local engine and resumed on Spark (``--resume --engine spark``: [engine]
is not part of what a resume matches) redoes its unfinished fold whole, as the Spark engine does:
the chunks and partitions the local attempt had finished are deleted, not left beside Spark's files
as per-unit files that no manifest lists (``pl.scan_parquet("per_unit/**")`` would count them twice)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from config_text import config_text, ratings_file
from recsys_eval.cli import main
from recsys_eval.core.atomic import STOP_AFTER_WRITES


@pytest.mark.spark
def test_a_spark_resume_of_a_local_attempt_redoes_the_fold_and_leaves_no_stray_file(spark, tmp_path,
                                                                                     synthetic_ratings):
    config = tmp_path / "mixed.toml"
    config.write_text(config_text("mixed", seed=3, dataset=ratings_file(synthetic_ratings),
                                  recommenders=["popular"], run={"users_per_chunk": 20},
                                  metrics={"names": ["ndcg"], "k": [5]}, engine={"partitions": 2}))
    out = tmp_path / "out"
    run = [sys.executable, "-m", "recsys_eval.cli", "run", str(config), "--out", str(out), "--quiet"]
    killed = subprocess.run(run, env={**os.environ, STOP_AFTER_WRITES: "30"}, capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (work,) = (out / "mixed").glob(".partial-*")
    assert len(list(work.glob("partitions/f0/s0-p0-c*.json"))) >= 4, "the local attempt finished chunks"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(out), "--quiet", "--resume", "--engine", "spark"])
    assert exit_info.value.code in (0, None)
    (folder,) = [p for p in (out / "mixed").iterdir() if not p.name.startswith(".") and not p.is_symlink()]
    listed = json.loads((folder / "manifest.json").read_text())["partitions"]
    assert sorted(str(p.relative_to(folder)) for p in (folder / "per_unit").rglob("*.parquet")) == sorted(listed)
