"""What tuning spent on each system, and a check that it read only the validation split
(docs/CONVENTIONS.md#tuning-hygiene).

Rendle, Zhang & Koren ("On the Difficulty of Evaluating Baselines", 2019), Ferrari Dacrema et al.
("Are We Really Making Much Progress?", RecSys 2019) and Shehzad & Jannach ("Everyone's a Winner!
On Hyperparameter Tuning of Recommendation Models", RecSys 2023) show that comparisons are decided
by unequal tuning: a proposed model tuned hard beside baselines left at their defaults. The
``tuning_budget`` table puts every system's tuning side by side, one row per (fold, system).
"""

from __future__ import annotations

import json

import polars as pl

from recsys_eval.core import Split
from recsys_eval.pipeline.config import ExperimentConfig
from recsys_eval.tune.tuner import validation_of


def tuning_budget(config: ExperimentConfig, splits: list[Split], trials: pl.DataFrame | None) -> pl.DataFrame:
    """One row per (fold, system): tunable (it has hyperparameters: a registry entry with parameters,
    or a plugin class; not an external run file), tuned (it had a search and the run a [tuning]),
    budget ("trials", or "seconds" when [tuning] gives only seconds), method, trials,
    trial_seconds (the trials' fit and evaluation time summed), best_value (validation), the search
    space and the validation splitter (JSON), and validation_rows_in_test: the interactions of the
    validation split (either side) that are also in the fold's test side, 0 when tuning read
    nothing of the test side."""
    t = config.tuning
    trials = trials if trials is not None else pl.DataFrame(schema={"fold": pl.String, "system": pl.String})
    rows = []
    for split in splits:
        leaked = _validation_rows_in_test(config, split) if t is not None and any(
            r.search is not None for r in config.recommenders) else 0
        for rec in config.recommenders:
            tuned = t is not None and rec.search is not None
            mine = trials.filter((pl.col("fold") == split.name) & (pl.col("system") == rec.display))
            seconds = float(mine.select(pl.col("fit_seconds") + pl.col("eval_seconds")).sum().item()) if mine.height else 0.0
            rows.append({
                "fold": split.name, "system": rec.display, "tunable": _tunable(rec.name, rec.path), "tuned": tuned,
                "budget": ("seconds" if t.trials is None and t.seconds is not None else "trials") if tuned else None,
                "method": t.method if tuned else None, "trials": mine.height, "trial_seconds": seconds,
                "best_value": float(mine.get_column("value").fill_nan(None).max()) if mine.height else None,
                "search_space": json.dumps(rec.search, sort_keys=True) if tuned else None,
                "validation": json.dumps(t.validation.model_dump(), sort_keys=True) if tuned else None,
                "validation_rows_in_test": leaked if tuned else 0,
            })
    return pl.DataFrame(rows, schema_overrides={"budget": pl.String, "method": pl.String, "best_value": pl.Float64,
                                                "search_space": pl.String, "validation": pl.String})


def _validation_rows_in_test(config: ExperimentConfig, split: Split) -> int:
    """Rows of the fold's validation split (recomputed: it is seeded by its definition) whose
    (user, item) pair is in the fold's test side."""
    validation = validation_of(config, split)
    seen = pl.concat([validation.train.frame.select("user", "item"), validation.test.frame.select("user", "item")])
    return seen.join(split.test.frame.select("user", "item").unique(), on=["user", "item"], how="semi").height


def _tunable(name: str, path: str | None) -> bool:
    from recsys_eval.recommend.registry import REGISTRY

    if path is not None:  # an external run file: nothing to tune here
        return False
    entry = REGISTRY.get(name)
    return bool(entry.params) if entry is not None else True
