"""The experiment runner: load, prepare, split, fit, build targets, rank, measure, summarise, write.

For each fold every recommender is fitted once and evaluated under every protocol; the targets of
a (fold, protocol) are built once and shared by all recommenders. Per-unit results of a finished
fold are saved at once, so that ``resume`` skips it after an interruption.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console

from recsys_eval.core import Interactions, Split, Targets
from recsys_eval.experiment.config import ExperimentConfig, ProtocolConfig, RecommenderConfig
from recsys_eval.experiment.folder import (
    WorkFolder,
    config_hash,
    derive_seed,
    write_csv_atomic,
    write_parquet_atomic,
)
from recsys_eval.experiment.progress import Progress

_VERSIONED = ("recsys-eval", "polars", "numpy", "scipy", "numba", "implicit", "pydantic")


@dataclass
class ProtocolTargets:
    """One evaluated target set of a fold: a protocol, or one bin of a percentile design."""

    label: str
    targets: Targets
    train: Interactions
    info: dict = field(default_factory=dict)


@dataclass
class RunOutcome:
    folder: Path
    summary: pl.DataFrame
    per_unit: pl.DataFrame


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def load_data(config: ExperimentConfig) -> Interactions:
    """The dataset of the config: a MovieLens name, or a file with a column mapping."""
    from recsys_eval.data import load_dataset, load_file

    ds = config.dataset
    if ds.name is not None:
        return load_dataset(ds.name, ds.data_home)
    return load_file(
        ds.path, ds.columns, timestamp_format=ds.timestamp_format, separator=ds.separator
    )


def prepare_data(config: ExperimentConfig, data: Interactions) -> tuple[Interactions, list[dict]]:
    """Apply the preparation steps in order; return the data and what each step removed."""
    from recsys_eval.data import prepare

    p = config.prepare
    steps: list[dict] = []
    if p.threshold is not None:
        data, removed = prepare.apply_threshold(data, p.threshold, binarize=p.binarize)
        steps.append({"step": f"threshold {p.threshold}", **_removed(removed)})
    if p.min_user_interactions or p.min_item_interactions:
        data, removed = prepare.min_counts(
            data, min_user=p.min_user_interactions, min_item=p.min_item_interactions
        )
        steps.append({"step": "minimum counts", **_removed(removed)})
    if p.k_core:
        data, removed = prepare.k_core(data, p.k_core)
        steps.append({"step": f"{p.k_core}-core", **_removed(removed)})
    return data, steps


def _removed(removed) -> dict:
    return {k: getattr(removed, k) for k in ("users", "items", "interactions")}
