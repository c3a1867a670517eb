"""Recommenders by name (as configs name them), with their hyperparameters checked, and user
plugins by import path ``module:Class``."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recsys_eval.errors import ConfigError, closest
from recsys_eval.recommend.base import Recommender
from recsys_eval.recommend.baselines import PopularRecommender, RandomRecommender
from recsys_eval.recommend.implicit_models import FactorModel, ItemKNN
from recsys_eval.recommend.rating import BiasPredictor
from recsys_eval.recommend.user_knn import UserKNN, UserKNNRating


@dataclass(frozen=True)
class Entry:
    """How to build one named recommender: its allowed hyperparameters and a factory."""

    params: tuple[str, ...]
    build: Callable[[dict, int, int | None], Recommender]
    description: str


def _implicit(kind: str) -> Callable[[dict, int, int | None], Recommender]:
    def build(params: dict, seed: int, threads: int | None) -> Recommender:
        from implicit.cpu.als import AlternatingLeastSquares
        from implicit.cpu.bpr import BayesianPersonalizedRanking
        from implicit.cpu.lmf import LogisticMatrixFactorization

        cls = {"als": AlternatingLeastSquares, "bpr": BayesianPersonalizedRanking,
               "lmf": LogisticMatrixFactorization}[kind]
        return FactorModel(cls, params, seed=seed, threads=threads)

    return build


def _item_knn(params: dict, seed: int, threads: int | None) -> Recommender:
    from implicit.nearest_neighbours import BM25Recommender, CosineRecommender, TFIDFRecommender

    params = dict(params)
    similarity = params.pop("similarity", "cosine")
    classes = {"cosine": CosineRecommender, "bm25": BM25Recommender, "tfidf": TFIDFRecommender}
    if similarity not in classes:
        raise ConfigError(f"item_knn: unknown similarity {similarity!r}: {closest(similarity, classes)}")
    if "k" in params:
        params["K"] = params.pop("k")
    if similarity != "bm25" and ({"K1", "B"} & params.keys()):
        raise ConfigError(f"item_knn: K1 and B apply to similarity 'bm25' only, not {similarity!r}")
    return ItemKNN(classes[similarity], params, threads=threads)


REGISTRY: dict[str, Entry] = {
    "random": Entry((), lambda p, seed, t: RandomRecommender(seed=seed), "uniform random scores"),
    "popular": Entry((), lambda p, seed, t: PopularRecommender(), "most popular in train"),
    "als": Entry(("factors", "regularization", "alpha", "iterations", "use_cg", "calculate_training_loss"),
                 _implicit("als"), "implicit ALS (Hu, Koren & Volinsky)"),
    "bpr": Entry(("factors", "learning_rate", "regularization", "iterations", "verify_negative_samples"),
                 _implicit("bpr"), "implicit BPR (Rendle et al.)"),
    "lmf": Entry(("factors", "learning_rate", "regularization", "iterations", "neg_prop"),
                 _implicit("lmf"), "implicit logistic MF (Johnson)"),
    "item_knn": Entry(("similarity", "k", "K1", "B"), _item_knn, "implicit item kNN: cosine, bm25, tfidf"),
    "user_knn": Entry(("k",), lambda p, seed, t: UserKNN(**p), "user kNN, cosine"),
    "bias": Entry(("reg_item", "reg_user"), lambda p, seed, t: BiasPredictor(**p),
                  "global + user + item biases (rating prediction)"),
    "user_knn_rating": Entry(("k",), lambda p, seed, t: UserKNNRating(**p),
                             "mean-centred user kNN (rating prediction)"),
}


def _plugin(path: str) -> type:
    module_name, _, class_name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"recommender plugin {path!r}: cannot import module {module_name!r} ({exc})") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ConfigError(f"recommender plugin {path!r}: module {module_name!r} has no {class_name!r}")
    missing = [m for m in ("fit", "score_block") if not callable(getattr(cls, m, None))]
    if not inspect.isclass(cls) or missing:
        raise ConfigError(
            f"recommender plugin {path!r} does not implement the Recommender interface "
            f"(missing {', '.join(missing) or 'a class'}); subclass recsys_eval.recommend.Recommender"
        )
    return cls


def check_recommender(name: str, params: dict[str, Any]) -> None:
    """Raise a ConfigError for an unknown recommender name or hyperparameter."""
    if ":" in name:
        _plugin(name)
        return
    if name not in REGISTRY:
        raise ConfigError(f"unknown recommender {name!r}: {closest(name, REGISTRY)} (or module:Class)")
    allowed = REGISTRY[name].params
    for key in params:
        if key not in allowed:
            raise ConfigError(
                f"recommender {name!r}: unknown parameter {key!r}: "
                + (closest(key, allowed) if allowed else "it takes no parameters")
            )


def make_recommender(name: str, params: dict[str, Any] | None = None, *, seed: int = 0,
                     threads: int | None = None) -> Recommender:
    """A new, unfitted recommender; ``module:Class`` builds a plugin with ``**params`` (and
    ``seed`` when its constructor takes one)."""
    params = dict(params or {})
    check_recommender(name, params)
    if ":" in name:
        cls = _plugin(name)
        if "seed" in inspect.signature(cls).parameters:
            params["seed"] = seed
        try:
            return cls(**params)
        except TypeError as exc:
            raise ConfigError(f"recommender plugin {name!r}: {exc}") from None
    return REGISTRY[name].build(params, seed, threads)
