"""Recommenders to benchmark, and the two ways of ranking them (listed targets, or top-k of all
candidate items)."""

from recsys_eval.recommend.base import (
    Recommender,
    SparseRecommender,
    rank_one_relevant,
    rank_targets,
    recommend_top_k,
)
from recsys_eval.recommend.baselines import PopularRecommender, RandomRecommender
from recsys_eval.recommend.external import ExternalRun, UnknownIdsWarning
from recsys_eval.recommend.implicit_models import FactorModel, ItemKNN
from recsys_eval.recommend.rating import BiasPredictor
from recsys_eval.recommend.registry import REGISTRY, check_recommender, make_recommender
from recsys_eval.recommend.user_knn import UserKNN, UserKNNRating

__all__ = [
    "REGISTRY", "BiasPredictor", "ExternalRun", "FactorModel", "ItemKNN", "PopularRecommender",
    "RandomRecommender", "Recommender", "SparseRecommender", "UnknownIdsWarning", "UserKNN",
    "UserKNNRating", "check_recommender", "make_recommender", "rank_one_relevant", "rank_targets", "recommend_top_k",
]
