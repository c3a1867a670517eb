"""Recommenders by name (as configs name them), with their hyperparameters checked, and user
plugins by import path ``module:Class``.

A hyperparameter a config does not set keeps the library's default (implicit's for ALS, BPR,
logistic MF and item kNN). implicit's ``num_threads`` comes from the run's ``threads`` (default:
every core) and its ``random_state`` from the run's seed.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recsys_eval.errors import ConfigError, closest
from recsys_eval.recommend.base import Recommender, overrides
from recsys_eval.recommend.baselines import PopularRecommender, RandomRecommender
from recsys_eval.recommend.implicit_models import FactorModel, ItemKNN, default_threads
from recsys_eval.recommend.rating import BiasPredictor
from recsys_eval.recommend.user_knn import UserKNN, UserKNNRating

SIMILARITIES = ("cosine", "bm25", "tfidf")


@dataclass(frozen=True)
class Param:
    """A hyperparameter's type (int, float, bool or str) and its smallest value or allowed values."""

    kind: type
    minimum: float | None = None
    choices: tuple[str, ...] = ()

    def check(self, recommender: str, name: str, value: Any) -> None:
        kinds = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
        if self.kind is bool:
            ok = isinstance(value, bool)
        else:  # an int is a number too; a bool is neither
            ok = isinstance(value, int | float if self.kind is float else self.kind) and not isinstance(value, bool)
        where = f"recommender {recommender!r}: parameter {name!r}"
        if not ok:
            raise ConfigError(f"{where} must be {kinds[self.kind]}, got {value!r}", key=name)
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(f"{where} must be >= {self.minimum}, got {value!r}", key=name)
        if self.choices and value not in self.choices:
            raise ConfigError(f"{where}: unknown value {value!r}: {closest(value, self.choices)}", key=name)


COUNT = Param(int, minimum=1)
NON_NEGATIVE = Param(float, minimum=0.0)
POSITIVE = Param(float, minimum=1e-12)
FLAG = Param(bool)


@dataclass(frozen=True)
class Entry:
    """How to build one named recommender: its allowed hyperparameters and a factory taking
    (params, seed, threads)."""

    build: Callable[[dict, int, int], Recommender]
    description: str
    params: dict[str, Param] = field(default_factory=dict)
    check: Callable[[dict], None] | None = None  # rules across parameters


def _implicit_factor(kind: str) -> Callable[[dict, int, int], Recommender]:
    def build(params: dict, seed: int, threads: int) -> Recommender:
        from implicit.cpu.als import AlternatingLeastSquares
        from implicit.cpu.bpr import BayesianPersonalizedRanking
        from implicit.cpu.lmf import LogisticMatrixFactorization

        if kind == "bpr":
            # implicit's BPR threads update shared factors without locks (Hogwild), so with more than
            # one thread the result depends on timing: one thread keeps runs reproducible.
            threads = 1
        cls = {"als": AlternatingLeastSquares, "bpr": BayesianPersonalizedRanking,
               "lmf": LogisticMatrixFactorization}[kind]
        return FactorModel(cls, params, seed=seed, threads=threads, blas_in_fit=kind == "als")

    return build


def _item_knn(params: dict, seed: int, threads: int) -> Recommender:
    from implicit.nearest_neighbours import (
        BM25Recommender,
        CosineRecommender,
        TFIDFRecommender,
    )

    params = dict(params)
    similarity = params.pop("similarity", "cosine")
    if "k" in params:
        params["K"] = params.pop("k")
    cls = {"cosine": CosineRecommender, "bm25": BM25Recommender, "tfidf": TFIDFRecommender}[similarity]
    return ItemKNN(cls, params, threads=threads)


def _spark_als(params: dict, seed: int) -> Recommender:
    from recsys_eval.recommend.spark_als import SparkALS  # the Spark extra, imported when asked for

    return SparkALS(params, seed=seed)


def _check_item_knn(params: dict) -> None:
    similarity = params.get("similarity", "cosine")
    if similarity != "bm25" and {"K1", "B"} & params.keys():
        raise ConfigError(f"recommender 'item_knn': K1 and B apply to similarity 'bm25' only, not {similarity!r}")


_FACTORS = {"factors": COUNT, "regularization": NON_NEGATIVE, "iterations": COUNT}

REGISTRY: dict[str, Entry] = {
    "random": Entry(lambda p, seed, t: RandomRecommender(seed=seed), "uniform random scores (seeded)"),
    "popular": Entry(lambda p, seed, t: PopularRecommender(), "most interactions in train"),
    "als": Entry(_implicit_factor("als"), "implicit ALS (Hu, Koren & Volinsky 2008)",
                 {**_FACTORS, "alpha": NON_NEGATIVE, "use_cg": FLAG, "use_native": FLAG}),
    "bpr": Entry(_implicit_factor("bpr"), "implicit BPR (Rendle et al. 2009), fitted on one thread",
                 {**_FACTORS, "learning_rate": POSITIVE, "verify_negative_samples": FLAG}),
    "lmf": Entry(_implicit_factor("lmf"), "implicit logistic MF (Johnson 2014)",
                 {**_FACTORS, "learning_rate": POSITIVE, "neg_prop": COUNT}),
    "item_knn": Entry(_item_knn, "implicit item kNN, similarity cosine, bm25 or tfidf; k neighbours per item",
                      {"similarity": Param(str, choices=SIMILARITIES), "k": COUNT,
                       "K1": NON_NEGATIVE, "B": NON_NEGATIVE}, _check_item_knn),
    "user_knn": Entry(lambda p, seed, t: UserKNN(**p), "user kNN, cosine, k neighbours per user",
                      {"k": COUNT}),
    "bias": Entry(lambda p, seed, t: BiasPredictor(**p), "mean + user + item biases (rating prediction)",
                  {"reg_item": NON_NEGATIVE, "reg_user": NON_NEGATIVE, "iterations": COUNT}),
    "spark_als": Entry(lambda p, seed, t: _spark_als(p, seed),
                       "Spark ML ALS, implicit preferences, fitted on the Spark engine's session",
                       {**_FACTORS, "alpha": NON_NEGATIVE}),
    "user_knn_rating": Entry(lambda p, seed, t: UserKNNRating(**p),
                             "mean-centred user kNN (rating prediction)", {"k": COUNT}),
}


def _plugin_class(path: str) -> type:
    module_name, _, class_name = path.partition(":")
    where = f"recommender plugin {path!r}"
    if not module_name or not class_name:
        raise ConfigError(f"{where}: expected 'module:Class', e.g. 'my_package.models:MyRecommender'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a plugin's own import error (syntax, missing dependency...) is the user's
        raise ConfigError(f"{where}: cannot import module {module_name!r} ({type(exc).__name__}: {exc})") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ConfigError(f"{where}: module {module_name!r} has no {class_name!r}")
    if not inspect.isclass(cls):
        raise ConfigError(f"{where} is a {type(cls).__name__}, not a class")
    if issubclass(cls, Recommender):
        abstract = sorted(getattr(cls, "__abstractmethods__", ()))
        if abstract or not (overrides(cls, "score") or overrides(cls, "score_block")):
            missing = ", ".join(abstract) or "score or score_block"
            raise ConfigError(f"{where} does not implement the Recommender interface (missing {missing})")
    else:
        missing = [m for m in ("fit", "score", "score_block") if not callable(getattr(cls, m, None))]
        if missing:
            raise ConfigError(
                f"{where} does not implement the Recommender interface (missing {', '.join(missing)}); "
                "subclass recsys_eval.recommend.Recommender and implement fit and score or score_block"
            )
    return cls


def _plugin_params(path: str, cls: type, params: dict[str, Any]) -> set[str]:
    """Check ``params`` against the plugin's constructor; return the names it accepts (all of
    ``params`` when it takes ``**kwargs``)."""
    signature = inspect.signature(cls)
    accepted = {n for n, p in signature.parameters.items()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
        return accepted | params.keys()
    for key in params:
        if key not in accepted:
            hint = closest(key, accepted) if accepted else "its constructor takes no parameters"
            raise ConfigError(f"recommender plugin {path!r}: unknown parameter {key!r}: {hint}", key=key)
    return accepted


def check_recommender(name: str, params: dict[str, Any] | None = None) -> None:
    """Raise a ConfigError for an unknown recommender, hyperparameter or hyperparameter value."""
    params = params or {}
    if ":" in name:
        _plugin_params(name, _plugin_class(name), params)
        return
    if name not in REGISTRY:
        raise ConfigError(f"unknown recommender {name!r}: {closest(name, REGISTRY)} (or a plugin 'module:Class')")
    allowed = REGISTRY[name].params
    for key, value in params.items():
        if key not in allowed:
            hint = closest(key, allowed) if allowed else "it takes no parameters"
            raise ConfigError(f"recommender {name!r}: unknown parameter {key!r}: {hint}", key=key)
        allowed[key].check(name, key, value)
    if REGISTRY[name].check:
        REGISTRY[name].check(params)


def make_recommender(name: str, params: dict[str, Any] | None = None, *, seed: int = 0,
                     threads: int | None = None) -> Recommender:
    """A new, unfitted recommender by registry name, or a plugin ``module:Class`` built with
    ``**params`` (plus ``seed`` and ``threads`` when its constructor takes them).

    ``threads``: implicit's threads (None: every core of the machine)."""
    params = dict(params or {})
    check_recommender(name, params)
    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be a positive integer (or None for every core), got {threads}")
    threads = default_threads(threads)
    if ":" not in name:
        return REGISTRY[name].build(params, seed, threads)
    cls = _plugin_class(name)
    accepted = _plugin_params(name, cls, params)
    for key, value in (("seed", seed), ("threads", threads)):
        if key in accepted and key not in params:
            params[key] = value
    try:
        return cls(**params)
    except Exception as exc:  # the plugin's constructor rejected its parameters
        raise ConfigError(f"recommender plugin {name!r}: cannot be built with {params}: {type(exc).__name__}: {exc}") from None
