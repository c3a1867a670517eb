"""Checks of every name in a config (dataset, splitter, protocols, recommenders, metrics, tests),
run before any work so that a misspelled name stops the run at once with the closest suggestion."""

from __future__ import annotations

from pathlib import Path

from recsys_eval.errors import ConfigError, check_choice
from recsys_eval.experiment.config import ExperimentConfig


def check_names(config: ExperimentConfig) -> None:
    """Raise a ConfigError for the first unknown name in ``config``; return None when all are known."""
    from recsys_eval.compare import CORRECTIONS, TESTS
    from recsys_eval.data import get_descriptor
    from recsys_eval.measure.names import ALL_METRICS, check_metrics
    from recsys_eval.recommend import check_recommender
    from recsys_eval.split import check_split
    from recsys_eval.targets import Protocol

    where = f"experiment {config.name!r}"
    for dataset in config.datasets or [config.dataset]:
        if dataset.name is not None:
            get_descriptor(dataset.name)
        elif not Path(dataset.path).is_file():
            raise ConfigError(f"{where}: dataset.path {dataset.path!r} is not a file")
    check_split(config.split.method, config.split.params)
    for protocol in config.protocols:
        Protocol.parse(protocol.name)
    for rec in config.recommenders:
        if rec.path is not None:
            if not Path(rec.path).is_file():
                raise ConfigError(f"{where}: recommender {rec.display!r}: run file {rec.path!r} not found")
        else:
            check_recommender(rec.name, rec.params)
    check_metrics(config.metrics.names, ALL_METRICS)
    for test in config.compare.tests:
        check_choice("test (compare.tests)", test, TESTS)
    check_choice("correction (compare.correction)", config.compare.correction, CORRECTIONS)
    systems = [r.display for r in config.recommenders]
    if config.compare.baseline is not None:
        check_choice("baseline (compare.baseline)", config.compare.baseline, systems)
    if config.learning_curve is not None and config.learning_curve.protocols:
        labels = [p.display for p in config.protocols]
        for label in config.learning_curve.protocols:
            check_choice("protocol (learning_curve.protocols)", label, labels)
