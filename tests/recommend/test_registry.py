"""Recommenders by name: hyperparameters, library defaults, threads and seeds; plugins by import
path, including ones that do not implement the interface."""

from __future__ import annotations

import sys

import numpy as np
import polars as pl
import pytest
from recommend_data import per_unit, random_data
from spark_support import spark_missing

from recsys_eval.errors import ConfigError
from recsys_eval.recommend import (
    REGISTRY,
    Recommender,
    check_recommender,
    make_recommender,
    recommend_top_k,
)


#: Fitted on a Spark session: they need the spark extra and Java, which a plain install lacks.
SPARK_BACKED = ("spark_als",)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_registered_name_builds_and_fits(name):
    reason = spark_missing() if name in SPARK_BACKED else None
    if reason:
        pytest.skip(f"{name} fits on Spark: {reason}")
    data = random_data(0)
    model = make_recommender(name, {"iterations": 2} if name in ("als", "bpr", "lmf") else {}, threads=1)
    assert isinstance(model.fit(data), Recommender) and model.n_items == data.n_items


def test_library_defaults_threads_and_seed_reach_implicit():
    als = make_recommender("als", {}, seed=17, threads=3)
    assert (als.model.factors, als.model.regularization, als.model.iterations) == (100, 0.01, 15)
    assert (als.model.num_threads, als.model.random_state) == (3, 17)
    lmf = make_recommender("lmf", {"factors": 12, "neg_prop": 5}, seed=2)
    assert (lmf.model.factors, lmf.model.neg_prop, lmf.model.learning_rate) == (12, 5, 1.0)
    assert lmf.model.num_threads >= 1  # every core by default
    assert make_recommender("bpr", {}, threads=2).model.num_threads == 1  # reproducible (see registry)
    knn = make_recommender("item_knn", {"similarity": "bm25", "k": 7, "K1": 2.0}, threads=2)
    assert (type(knn.model).__name__, knn.model.K, knn.model.K1, knn.model.B) == ("BM25Recommender", 7, 2.0, 0.75)
    assert type(make_recommender("item_knn", {}).model).__name__ == "CosineRecommender"


@pytest.mark.parametrize("name,params,message", [
    ("alss", {}, "unknown recommender 'alss'.*did you mean 'als'"),
    ("als", {"factor": 3}, "unknown parameter 'factor'.*did you mean 'factors'"),
    ("popular", {"k": 3}, "takes no parameters"),
    ("item_knn", {"similarity": "cosin"}, "unknown value 'cosin'.*did you mean 'cosine'"),
    ("item_knn", {"similarity": "cosine", "K1": 1.0}, "bm25' only"),
    ("als", {"factors": "ten"}, "'factors' must be an integer, got 'ten'"),
    ("als", {"factors": 0}, "'factors' must be >= 1"),
    ("als", {"factors": True}, "'factors' must be an integer"),
    ("bpr", {"learning_rate": -0.1}, "'learning_rate' must be >= "),
    ("als", {"use_cg": "yes"}, "'use_cg' must be true or false"),
    ("user_knn", {"k": 2.5}, "'k' must be an integer"),
    ("bias", {"reg_user": -1}, "'reg_user' must be >= 0"),
])
def test_bad_names_and_hyperparameters(name, params, message):
    with pytest.raises(ConfigError, match=message):
        check_recommender(name, params)
    with pytest.raises(ConfigError, match=message):
        make_recommender(name, params)


def test_bad_threads():
    with pytest.raises(ConfigError, match="threads"):
        make_recommender("als", {}, threads=-1)


class Reversed(Recommender):
    """A user's own recommender: prefers high item indices."""

    def __init__(self, scale: float = 1.0, seed: int = 0, threads: int = 1) -> None:
        self.scale, self.seed, self.threads = scale, seed, threads

    def fit(self, train):
        self.n_items = train.n_items
        return self

    def score(self, users, items):
        return np.asarray(items, np.float32) * self.scale


class DuckTyped:
    """Not a subclass, but has every method of the interface."""

    predicts_ratings = False

    def __init__(self, **options) -> None:
        self.options = options

    def fit(self, train):
        self.n_items = train.n_items
        return self

    def score(self, users, items):
        return -np.asarray(items, np.float32)

    def score_block(self, users):
        return np.tile(-np.arange(self.n_items, dtype=np.float32), (len(users), 1))


class NotARecommender:
    def fit(self, train):
        return self


class Abstract(Recommender):
    """Subclasses the interface but implements no scorer."""

    def fit(self, train):
        return self


class Failing(Reversed):
    def __init__(self, scale: float = 1.0) -> None:
        raise ValueError("scale must be a power of two")


not_a_class = Reversed()


def test_plugin_by_import_path_gets_its_parameters_seed_and_threads():
    data = random_data(1)
    model = make_recommender(f"{__name__}:Reversed", {"scale": 2.0}, seed=9, threads=2).fit(data)
    assert (model.scale, model.seed, model.threads) == (2.0, 9, 2)
    top = per_unit(recommend_top_k(model, data, np.array([0]), 3))[0]
    seen = set(data.frame.filter(pl.col("user") == 0)["item"].to_list())
    assert top == [i for i in range(data.n_items - 1, -1, -1) if i not in seen][:3]


def test_duck_typed_plugin_takes_any_parameters():
    data = random_data(1)
    model = make_recommender(f"{__name__}:DuckTyped", {"anything": 1}, seed=3).fit(data)
    assert model.options == {"anything": 1}
    assert per_unit(recommend_top_k(model, data, np.array([0]), 2))[0] == \
        sorted(set(range(data.n_items)) - set(data.frame.filter(pl.col("user") == 0)["item"].to_list()))[:2]


def test_plugin_from_a_module_on_the_path(tmp_path, monkeypatch):
    (tmp_path / "my_models.py").write_text(
        "import numpy as np\nfrom recsys_eval.recommend import Recommender\n"
        "class Mine(Recommender):\n"
        "    def fit(self, train):\n        self.n_items = train.n_items\n        return self\n"
        "    def score(self, users, items):\n        return np.zeros(len(users), np.float32)\n"
    )
    (tmp_path / "broken_models.py").write_text("import numpy as np\nraise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert type(make_recommender("my_models:Mine", {})).__name__ == "Mine"
    with pytest.raises(ConfigError, match="cannot import module 'broken_models' \\(RuntimeError: no GPU here\\)"):
        make_recommender("broken_models:Mine", {})
    sys.modules.pop("my_models", None)


@pytest.mark.parametrize("name,params,message", [
    (f"{__name__}:NotARecommender", {}, "does not implement the Recommender interface \\(missing score, score_block\\)"),
    (f"{__name__}:Abstract", {}, "does not implement the Recommender interface \\(missing score or score_block\\)"),
    (f"{__name__}:not_a_class", {}, "is a Reversed, not a class"),
    (f"{__name__}:Missing", {}, "has no 'Missing'"),
    ("no_such_module_xyz:Thing", {}, "cannot import module 'no_such_module_xyz'"),
    ("no_class_given:", {}, "expected 'module:Class'"),
    (f"{__name__}:Reversed", {"scal": 2.0}, "unknown parameter 'scal'.*did you mean 'scale'"),
    (f"{__name__}:Failing", {}, "cannot be built.*scale must be a power of two"),
])
def test_bad_plugins(name, params, message):
    with pytest.raises(ConfigError, match=message):
        make_recommender(name, params)
