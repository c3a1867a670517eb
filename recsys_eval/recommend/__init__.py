"""Recommenders to benchmark, and the two ways of ranking them (listed targets, or top-k of all
candidate items)."""

from recsys_eval._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "recsys_eval.recommend.base": ["Recommender", "SparseRecommender", "rank_one_relevant", "rank_targets", "recommend_top_k"],
    "recsys_eval.recommend.baselines": ["PopularRecommender", "RandomRecommender"],
    "recsys_eval.recommend.external": ["ExternalRun", "UnknownIdsWarning"],
    "recsys_eval.recommend.fold_in": ["check_name_folds_in", "fit_for_split"],
    "recsys_eval.recommend.implicit_models": ["FactorModel", "ItemKNN"],
    "recsys_eval.recommend.rating": ["BiasPredictor"],
    "recsys_eval.recommend.registry": ["REGISTRY", "check_recommender", "make_recommender"],
    "recsys_eval.recommend.user_knn": ["UserKNN", "UserKNNRating"],
})
