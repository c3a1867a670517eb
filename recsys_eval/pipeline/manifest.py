"""What a results folder records about its run: the manifest (config hash, seeds, versions, data,
folds, systems, protocols, partitions, comparison options) and the data statistics of the report."""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version

import polars as pl

from recsys_eval.core import Interactions, Split
from recsys_eval.core.results import Manifest
from recsys_eval.pipeline.config import ExperimentConfig
from recsys_eval.pipeline.plan import RunOptions
from recsys_eval.pipeline.targets import protocol_labels

_VERSIONED = ("recsys-eval", "polars", "numpy", "scipy", "numba", "implicit", "pydantic")


def versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Python's and the libraries' versions that can change a number (and those of ``extra``)."""
    found = {"python": platform.python_version()}
    for name in _VERSIONED + extra:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def protocol_entries(protocols) -> dict[str, dict]:
    """Every result label with its definition: axes, n, design, and the bin of a percentile design."""
    from recsys_eval.targets import Protocol

    entries = {}
    for p in protocols:
        parsed = Protocol.parse(p.name)
        entry = {
            "name": p.name, "design": p.design, "candidates": parsed.candidates,
            "relevant": parsed.relevant, "nonrelevant": parsed.nonrelevant, "n": parsed.n,
        }
        for b, label in enumerate(protocol_labels(p), start=1):
            binned = p.design == "percentiles"
            entries[label] = {**entry, "bin": b if binned else None, "bins": p.bins if binned else None}
    return entries


def make_manifest(config: ExperimentConfig, cfg_hash: str, data: Interactions, splits: list[Split],
                  partitions: list[str]) -> Manifest:
    """The manifest of a run: what it ran, with which seeds and versions, and where its files are."""
    c, options = config.compare, RunOptions.from_config(config)
    seeds, labels = options.seeds, options.labels
    return Manifest(
        experiment=config.name,
        description=config.description,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        config_hash=cfg_hash,
        seed=config.seed,
        seeds={
            "split": seeds.split(),
            "targets": {f"{s.name}/{p.display}": seeds.targets(s.name, p.definition)
                        for s in splits for p in config.protocols},
            "recommenders": {f"{s.name}/{r.display}": seeds.recommender(s.name, r.definition)
                             for s in splits for r in config.recommenders},
            "intervals": {f"{s.name}/{label}": options.interval_seed(s.name, label)
                          for s in splits for label in labels},
        },
        versions=versions(("pyspark",) if config.engine.name == "spark" else ()),
        # where the folds were ranked and measured (the values do not depend on it)
        engine=config.engine.model_dump(),
        dataset=config.dataset.name or config.dataset.path,
        users=data.n_users,
        items=data.n_items,
        interactions=len(data),
        folds=[s.name for s in splits],
        systems=options.systems,
        protocols=labels,
        protocol_definitions=protocol_entries(config.protocols),
        partitions=partitions,
        metrics=config.metrics.names,
        k=config.metrics.k,
        metric_params=options.measure.params,
        relevance_threshold=config.metrics.relevance_threshold,
        baseline=c.baseline,
        tests=c.tests,
        correction=c.correction,
        alpha=c.alpha,
        undefined=config.metrics.undefined,
        interval=c.interval,
        resamples=c.resamples,
        distributions=config.analysis.distributions,
    )


def data_statistics(data: Interactions, prepared: list[dict], splits: list[Split]) -> pl.DataFrame:
    """Dataset, preparation and split statistics for the report, as (statistic, value) strings."""
    rows = [
        ("users", f"{data.n_users:,}"),
        ("items", f"{data.n_items:,}"),
        ("interactions", f"{len(data):,}"),
        ("density", f"{len(data) / max(data.n_users * data.n_items, 1):.4%}"),
    ]
    for step in prepared:
        rows.append((
            f"prepare: {step['step']}",
            f"removed {step['users']:,} users, {step['items']:,} items, {step['interactions']:,} interactions",
        ))
    for s in splits:
        rows.append((
            f"split {s.name}",
            f"train {len(s.train):,}, test {len(s.test):,} interactions, {s.n_test_users():,} test users",
        ))
    return pl.DataFrame(rows, schema=["statistic", "value"], orient="row")
