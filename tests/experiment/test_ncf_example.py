"""The shipped NCF example on ML-100K: the sampled run writes, byte for byte, the negatives file
shipped in experiments/negatives/, and the run that reads that file reproduces the sampled run's
per-unit values. Skips without ml-100k under RECSYS_EVAL_DATA; the same round trip on the synthetic
ratings never skips (test_fixed_negatives_run.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SHIPPED = EXPERIMENTS / "negatives" / "ml100k-leave-last-one.test.negative"


def run(config: Path, out: Path) -> Path:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(out), "--quiet"])
    assert exit_info.value.code in (0, None)
    return out / config.stem / "latest"  # the configs' names are their file names


def per_unit(folder: Path):
    key = ["system", "protocol", "metric", "user", "unit"]
    return ResultsFolder.open(folder).scan_per_unit().collect().select(key + ["value"]).sort(key)


def test_the_shipped_negatives_reproduce_the_sampled_run(tmp_path):
    home = os.environ.get("RECSYS_EVAL_DATA")
    if not home or not (Path(home) / "ml-100k" / "u.data").is_file():
        pytest.skip("no ml-100k under RECSYS_EVAL_DATA")
    sampled = run(EXPERIMENTS / "ml100k-ncf-sampled.toml", tmp_path)
    written = sampled / "negatives" / "leave_last_n" / "AI+1R+NN99.negative"
    assert written.read_bytes() == SHIPPED.read_bytes()
    fixed = run(EXPERIMENTS / "ml100k-ncf-fixed.toml", tmp_path)
    assert per_unit(fixed).equals(per_unit(sampled))
