"""Checks of every name in a config (dataset, splitter, protocols, recommenders, metrics, tests),
run before any work so that a misspelled name stops the run at once with the closest suggestion.

Each error names the config file and the full key path of the entry at fault, as the schema errors
of :mod:`recsys_eval.pipeline.config` do: ``quick.toml: recommenders[3].params.factorz: ...``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from recsys_eval.core.uris import is_uri
from recsys_eval.errors import ConfigError, check_choice
from recsys_eval.pipeline.config import ExperimentConfig


def _at(source: str, path: str, check: Callable[..., Any], *args: Any) -> None:
    """Run ``check(*args)``; a ConfigError it raises is raised again prefixed with the file and the
    key path (extended by the error's own ``key``, e.g. a hyperparameter's name)."""
    try:
        check(*args)
    except ConfigError as exc:
        where = f"{path}.{exc.key}" if exc.key else path
        raise ConfigError(f"{source}: {where}: {exc}") from None


def _is_file(path: str, what: str) -> None:
    if not Path(path).is_file():
        raise ConfigError(f"{what} {path!r} is not a file (a relative path is read from the config's folder)")


def _is_dataset_file(path: str, config: ExperimentConfig) -> None:
    """A local dataset file exists; one at a URI is read by Spark, so the config must run on the
    Spark engine and have Spark make its inputs (:func:`recsys_eval.engine.inputs.local_only`)."""
    if not is_uri(path):
        _is_file(path, "the dataset file")
    elif config.engine.name != "spark":
        raise ConfigError(f"the dataset file {path!r} is at a URI, which the Spark engine reads: set [engine] "
                          "name = \"spark\" (or --engine spark), or give a local file")
    else:
        from recsys_eval.engine.inputs import local_only

        reasons = local_only(config)
        if reasons:
            raise ConfigError(f"the dataset file {path!r} is at a URI, which Spark reads, but this config's inputs "
                              f"are loaded on the driver ({'; '.join(reasons)}): give a local file, or change what "
                              "is named")


def _average_ties_listed(config: ExperimentConfig) -> None:
    """``ties = "average"`` needs every tie group whole (docs/CONVENTIONS.md#ties). A full ranking
    over the catalogue or the test items (AR+AN) lists each user's top ``run.depth`` items, and a
    tie group that crosses that depth would be cut, its expectation then depending on the depth
    (nDCG@10 of one user: 0.319 at depth 10, 0.036 at depth 49); so the combination is refused.
    1R+AN is exact (its closed form places the relevant item in its whole tie group), and so are
    sampled protocols (every target ranked) and UT (a user's own test items)."""
    from recsys_eval.targets import Protocol

    if config.metrics.ties != "average":
        return
    for p in config.protocols:
        protocol = Protocol.parse(p.name)
        if protocol.relevant == "AR" and protocol.nonrelevant == "AN" and protocol.candidates != "UT":
            raise ConfigError(
                f"'average' with the full-ranking protocol {p.display!r}: its lists stop at run.depth = "
                f"{config.run.depth}, and a tie group crossing that depth would make the expected value over "
                "tie orderings depend on the depth; use ties = 'first', or a protocol whose targets are all "
                "ranked (1R+AN, a sampled NN protocol, UT)")


def _check_unseen_test_side(config: ExperimentConfig) -> None:
    """``prepare.on = "train"`` drops test rows whose user or item is not in the prepared train: every
    row of a cold-item split, and of a user-disjoint split without fold-in."""
    split = config.split
    cold = split.method == "cold_items" or (split.method == "user_disjoint" and split.params.get("fold_in") == 0)
    if config.prepare.on == "train" and cold:
        raise ConfigError(f"'train' would drop every test row of split {split.method!r} (its test users or items "
                          "are absent from train by design); prepare on 'data'")


def _popularity_slices_need_1r(config: ExperimentConfig) -> None:
    """A ``popularity:S`` slice groups the units of 1R protocols by their target item
    (docs/CONVENTIONS.md#slices); a run without one has nothing to slice."""
    from recsys_eval.targets import Protocol

    asked = [s for s in config.analysis.slices if s.startswith("popularity:")]
    one_relevant = [p for p in config.protocols if Protocol.parse(p.name).relevant == "1R" and p.design == "standard"]
    if asked and not one_relevant:
        raise ConfigError(
            f"{asked[0]!r} slices the units of 1R protocols (one relevant item each) by that item's popularity, "
            "and this run has none of the standard design; add one (e.g. AI+1R+NN100), or, for all of a user's "
            "relevant items in one ranking (AR), use a protocol with design = \"percentiles\" (bins = m), which "
            "evaluates each popularity bin's items as a target set of its own")


def check_names(config: ExperimentConfig) -> None:
    """Raise a ConfigError for the first unknown name in ``config``; return None when all are known."""
    from recsys_eval.compare import CORRECTIONS, TESTS
    from recsys_eval.data import get_descriptor
    from recsys_eval.data.runs import FORMATS
    from recsys_eval.measure.metrics import ALL_METRICS, check_metrics
    from recsys_eval.recommend import check_name_folds_in, check_recommender
    from recsys_eval.split import SPLITTERS, check_split
    from recsys_eval.targets import Protocol

    src = config.source
    for d, dataset in enumerate(config.datasets or [config.dataset]):
        where = f"datasets[{d}]" if config.datasets else "dataset"
        if dataset.name is not None:
            _at(src, f"{where}.name", get_descriptor, dataset.name)
        else:
            _at(src, f"{where}.path", _is_dataset_file, dataset.path, config)
    _at(src, "split.method", check_choice, "split method", config.split.method, SPLITTERS)
    _at(src, "split.params", check_split, config.split.method, config.split.params)
    _at(src, "prepare.on", _check_unseen_test_side, config)
    for i, protocol in enumerate(config.protocols):
        _at(src, f"protocols[{i}].name", Protocol.parse, protocol.name)
        if protocol.negatives is not None:
            negatives = Path(src).parent / protocol.negatives
            _at(src, f"protocols[{i}].negatives", _is_file, str(negatives), "the negatives file")
    for i, rec in enumerate(config.recommenders):
        if rec.path is not None:
            _at(src, f"recommenders[{i}].path", _is_file, rec.path, f"the run file of {rec.display!r}")
            if rec.format is not None:
                _at(src, f"recommenders[{i}].format", check_choice, "run format", rec.format, FORMATS)
        elif rec.format is not None:
            raise ConfigError(f"{src}: recommenders[{i}].format: applies to a run file ('path') only")
        else:
            _at(src, f"recommenders[{i}].name", check_recommender, rec.name)
            _at(src, f"recommenders[{i}].params", check_recommender, rec.name, rec.params)
            if config.split.method == "user_disjoint":
                _at(src, f"recommenders[{i}].name", check_name_folds_in, rec.name)
    _at(src, "metrics.names", check_metrics, config.metrics.names, ALL_METRICS)
    _at(src, "metrics.ties", _average_ties_listed, config)
    _at(src, "analysis.slices", _popularity_slices_need_1r, config)
    if config.engine.name == "spark":
        from recsys_eval.engine.fold import check_spark_config

        check_spark_config(config, lambda path, check, *args: _at(src, path, check, *args))
    for i, test in enumerate(config.compare.tests):
        _at(src, f"compare.tests[{i}]", check_choice, "test", test, TESTS)
    _at(src, "compare.correction", check_choice, "correction", config.compare.correction, CORRECTIONS)
    systems = [r.display for r in config.recommenders]
    if config.compare.baseline is not None:
        _at(src, "compare.baseline", check_choice, "baseline", config.compare.baseline, systems)
    if config.learning_curve is not None and config.learning_curve.protocols:
        labels = [p.display for p in config.protocols]
        for i, label in enumerate(config.learning_curve.protocols):
            _at(src, f"learning_curve.protocols[{i}]", check_choice, "protocol", label, labels)
