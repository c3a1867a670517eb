"""Tuning end to end on the synthetic dataset: config errors with key paths, the search space, no
test interaction reaching tuning, the same seed giving the same trials, resume after a killed run,
the refit equal to a plain run with the chosen hyperparameters, and trials in worker processes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import config_text, ratings_file
from recsys_eval.core import Split
from recsys_eval.core.results import TUNING, ResultsFolder
from recsys_eval.errors import ConfigError
from recsys_eval.experiment import runner
from recsys_eval.pipeline.inputs import load_data
from recsys_eval.pipeline.config import load_config, parse_config
from recsys_eval.recommend import Recommender
from recsys_eval.tune import TrialLog, parse_search, tune_fold, validation_of
from recsys_eval.tune.objective import Objective

KNN = {"name": "user_knn", "search": {"k": [3, 10, 40]}}
GRID = {"method": "grid", "metric": "ndcg@10"}


def small_config(data: Path, recommender=KNN, tuning=GRID) -> str:
    """The tuning tests' config: popularity and ``recommender``, tuned by ``tuning`` (None: no [tuning])."""
    return config_text("small", seed=7, dataset=ratings_file(data), protocols=["AI+AR+AN", "AI+1R+NN50"],
                       recommenders=["popular", recommender],
                       metrics={"names": ["precision", "ndcg"], "k": [5, 10], "relevance_threshold": 4},
                       tuning=tuning)


def parsed(data: Path, **kwargs):
    import tomllib

    return parse_config(tomllib.loads(small_config(data, **kwargs)), "t.toml")


def fold_of(config):
    data = load_data(config.dataset)
    return data, runner.config_splits(config, data)[0]


# -- recommenders that record what they see ---------------------------------------------------
class Recorder(Recommender):
    """Popularity scores; records every (user, item) it is fitted on and every user it scores."""

    fitted: list[np.ndarray] = []
    scored: list[np.ndarray] = []
    fail_after: int | None = None  # fits before a simulated crash

    def __init__(self, shrink: float = 0.0) -> None:
        self.shrink = shrink

    def fit(self, train):
        if Recorder.fail_after is not None:
            if Recorder.fail_after == 0:
                raise KeyboardInterrupt("killed")
            Recorder.fail_after -= 1
        Recorder.fitted.append(np.stack([train.users, train.items], axis=1))
        self.n_items = train.n_items
        self.counts = train.item_counts().astype(np.float32) / (1.0 + self.shrink)
        return self

    def score_block(self, users):
        Recorder.scored.append(np.asarray(users))
        return np.broadcast_to(self.counts, (len(users), self.n_items))


RECORDER = {"name": f"{__name__}:Recorder", "label": "rec", "search": {"shrink": [0.0, 1.0, 2.0, 3.0]}}


@pytest.fixture(autouse=True)
def _reset():
    Recorder.fitted, Recorder.scored, Recorder.fail_after = [], [], None


# -- config -----------------------------------------------------------------------------------
@pytest.mark.parametrize("recommender, tuning, message", [
    ({"name": "als", "search": {"factor": [8, 16]}}, GRID,
     "recommenders[1].search.factor: unknown hyperparameter 'factor' of recommender 'als'"),
    ({"name": "als", "search": {"factor": [8, 16]}}, GRID, "did you mean 'factors'"),
    ({"name": "als", "search": {"factors": [8, "many"]}}, GRID,
     "recommenders[1].search.factors: recommender 'als': parameter 'factors' must be an integer, got 'many'"),
    ({"name": "als", "search": {"factors": {"low": 4.5, "high": 9}}}, {"trials": 3},
     "recommenders[1].search.factors: range ends must be integers, got 4.5"),
    ({"name": "als", "search": {"regularization": {"low": 0, "high": 1, "log": True}}},
     {"trials": 3}, "a log range needs low > 0"),
    ({"name": "als", "search": {"regularization": {"low": 0.1, "high": 1}}}, GRID,
     "method 'grid' needs a list of values"),
    (KNN, {"trials": 0}, "trials = 0 allows no trial"),
    (KNN, {"seconds": 0}, "seconds = 0 allows no trial"),
    (KNN, {"method": "tpe"}, "method 'tpe' needs a budget"),
    (KNN, {"method": "grid", "metric": "map@10"}, "tuning.metric 'map@10'"),
    (KNN, {"method": "grid", "metric": "recall@10"}, "'recall' is not measured"),
    (KNN, {"method": "grid", "metric": "ndcg@20"}, "k = 20 is not measured"),
    (KNN, {"method": "grid", "protocol": "AI+AR+NN50"}, "tuning.protocol 'AI+AR+NN50': not a protocol of the run"),
    (KNN, {"method": "grid", "validation": {"method": "holdot"}}, "tuning.validation"),
    ("user_knn", GRID, "no recommender has a search"),
])
def test_bad_tuning_config_names_the_key(synthetic_ratings, recommender, tuning, message):
    with pytest.raises(ConfigError) as info:
        parsed(synthetic_ratings, recommender=recommender, tuning=tuning)
    assert message in str(info.value) and "t.toml" in str(info.value)


def test_search_without_tuning_table(synthetic_ratings):
    text = small_config(synthetic_ratings, tuning=None)
    import tomllib

    with pytest.raises(ConfigError, match=r"recommenders\[1\].search \('user_knn'\): a search needs a \[tuning\]"):
        parse_config(tomllib.loads(text))


def test_search_space_types_from_the_registry(synthetic_ratings):
    als = {"name": "als", "search": {"factors": {"low": 4, "high": 64, "log": True},
                                     "regularization": {"low": 0.001, "high": 1}, "use_cg": {"choices": [True, False]}}}
    config = parsed(synthetic_ratings, recommender=als, tuning={"trials": 2})
    space = parse_search(config.recommenders[1], "x")
    d = space.distributions()
    assert type(d["factors"]).__name__ == "IntDistribution" and d["factors"].log
    assert type(d["regularization"]).__name__ == "FloatDistribution" and not d["regularization"].log
    assert d["use_cg"].choices == (True, False)
    grid = parse_search(parsed(synthetic_ratings, recommender=(
        {"name": "item_knn", "search": {"similarity": ["cosine", "bm25"], "k": [5, 50, 20]}}
    )).recommenders[1], "x").grid()
    assert grid == [{"similarity": s, "k": k} for s in ("cosine", "bm25") for k in (5, 50, 20)]


# -- the test side never reaches tuning --------------------------------------------------------
def test_no_test_interaction_reaches_tuning(synthetic_ratings, tmp_path):
    config = parsed(synthetic_ratings, recommender=RECORDER)
    data, split = fold_of(config)
    tuned = tune_fold(config, data, split, tmp_path / TUNING)
    assert len(Recorder.fitted) == 4  # one fit per grid point
    test_pairs = set(zip(split.test.users.tolist(), split.test.items.tolist(), strict=True))
    train_pairs = set(zip(split.train.users.tolist(), split.train.items.tolist(), strict=True))
    for pairs in Recorder.fitted:
        fitted = set(map(tuple, pairs.tolist()))
        assert not fitted & test_pairs and fitted < train_pairs
    validation = validation_of(config, split)
    scored = np.unique(np.concatenate(Recorder.scored))
    assert set(scored.tolist()) <= set(validation.test.users.tolist())
    # and the trials do not change when the fold's test side does: tuning never reads it
    other = Split(split.train, split.test.with_frame(split.test.frame.head(10)), name=split.name)
    tune_fold(config, data, other, tmp_path / "again.parquet")
    first, again = (pl.read_parquet(p).drop("fit_seconds", "eval_seconds") for p in (tmp_path / TUNING, tmp_path / "again.parquet"))
    assert first.equals(again) and tuned["rec"].params["shrink"] in (0.0, 1.0, 2.0, 3.0)


def test_a_user_disjoint_splits_test_users_never_reach_tuning(synthetic_ratings):
    import tomllib

    text = small_config(synthetic_ratings).replace('method = "holdout"', 'method = "user_disjoint"')
    text = text.replace("params = { fraction = 0.2, per_user = true }", "params = { fraction = 0.2 }")
    config = parse_config(tomllib.loads(text), "t.toml")
    data, split = fold_of(config)
    assert split.fold_in
    validation = validation_of(config, split)
    tested = split.test_users()
    assert not tested[validation.train.users].any() and not tested[validation.test.users].any()
    assert len(validation.train) + len(validation.test) == len(split.fit_side())


# -- the same seed, the same trials ------------------------------------------------------------
@pytest.mark.parametrize("method", ["random", "tpe"])
def test_same_seed_same_trials(synthetic_ratings, tmp_path, method):
    knn = {"name": "user_knn", "search": {"k": {"low": 2, "high": 60}}}
    config = parsed(synthetic_ratings, recommender=knn, tuning={"method": method, "trials": 12, "metric": "ndcg@10"})
    data, split = fold_of(config)
    logs = []
    for name, seed in (("a", None), ("b", None), ("c", 99)):
        c = config if seed is None else config.model_copy(update={"tuning": config.tuning.model_copy(update={"seed": seed})})
        tune_fold(c, data, split, tmp_path / f"{name}.parquet")
        logs.append(pl.read_parquet(tmp_path / f"{name}.parquet").drop("fit_seconds", "eval_seconds"))
    assert logs[0].height == 12 and logs[0].equals(logs[1])
    assert logs[0].get_column("params").to_list() != logs[2].get_column("params").to_list()


# -- resume ------------------------------------------------------------------------------------
def test_killed_run_resumes_without_rerunning_finished_trials(synthetic_ratings, tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(small_config(synthetic_ratings, recommender=RECORDER))
    config = load_config(path)
    Recorder.fail_after = 3  # three trials finish, the fourth fit is killed
    with pytest.raises(KeyboardInterrupt):
        runner.run_experiment(config, path.read_text(), out_root=tmp_path / "out", quiet=True)
    partial = next((tmp_path / "out" / "small").glob(".partial-*"))
    assert pl.read_parquet(partial / TUNING).get_column("trial").to_list() == [0, 1, 2]
    Recorder.fail_after, Recorder.fitted = None, []
    outcome = runner.run_experiment(config, path.read_text(), out_root=tmp_path / "out", quiet=True, resume=True)
    assert len(Recorder.fitted) == 1 + 1  # the fourth trial, then the refit on the whole train side
    resumed = pl.read_parquet(outcome.folder / TUNING)
    assert resumed.get_column("trial").to_list() == [0, 1, 2, 3]
    Recorder.fitted = []
    fresh = runner.run_experiment(config, path.read_text(), out_root=tmp_path / "fresh", quiet=True)
    assert pl.read_parquet(fresh.folder / TUNING).drop("fit_seconds", "eval_seconds").equals(
        resumed.drop("fit_seconds", "eval_seconds"))


# -- the refit ---------------------------------------------------------------------------------
def test_chosen_parameters_refitted_on_the_whole_train_side(synthetic_ratings, tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(small_config(synthetic_ratings))
    config = load_config(path)
    outcome = runner.run_experiment(config, path.read_text(), out_root=tmp_path / "tuned", quiet=True)
    trials = pl.read_parquet(outcome.folder / TUNING)
    assert trials.get_column("param_k").to_list() == [3, 10, 40]
    best = trials.sort("value", descending=True).row(0, named=True)
    # a plain run with the best k: the same per-unit values on test
    plain = small_config(synthetic_ratings, {"name": "user_knn", "params": {"k": best["param_k"]}}, tuning=None)
    path.write_text(plain)
    other = runner.run_experiment(load_config(path), plain, out_root=tmp_path / "plain", quiet=True)
    key = ["protocol", "fold", "user", "unit", "metric", "k"]
    a, b = (ResultsFolder.open(o.folder).scan_per_unit().filter(pl.col("system") == "user_knn").collect().sort(key, nulls_last=True)
            for o in (outcome, other))
    assert a.height > 0 and a.equals(b)
    assert json.loads(best["params"]) == {"k": best["param_k"]}


# -- trials in worker processes -----------------------------------------------------------------
def test_trials_in_two_worker_processes_match_in_process_values(synthetic_ratings, tmp_path):
    knn = {"name": "user_knn", "search": {"k": [3, 10, 40, 80]}}
    config = parsed(synthetic_ratings, recommender=knn, tuning={**GRID, "workers": 2})
    data, split = fold_of(config)
    tune_fold(config, data, split, tmp_path / TUNING)
    log = pl.read_parquet(tmp_path / TUNING)
    objective = Objective(config, data, validation_of(config, split), threads=1)
    expected = [objective(config.recommenders[1], {"k": k})[0] for k in (3, 10, 40, 80)]
    assert log.get_column("trial").to_list() == [0, 1, 2, 3]
    np.testing.assert_array_equal(log.get_column("value").to_numpy(), expected)


def test_objective_value_is_the_mean_over_validation_users(synthetic_ratings):
    # the objective's value recomputed by hand: per-user nDCG@10 of the validation ranking, averaged
    from recsys_eval.measure import measure
    from recsys_eval.recommend import make_recommender, recommend_top_k
    from recsys_eval.targets import Protocol, build_targets

    config = parsed(synthetic_ratings, recommender={"name": "user_knn", "search": {"k": [10]}})
    data, split = fold_of(config)
    validation = validation_of(config, split)
    value, _, _ = Objective(config, data, validation, threads=1)(config.recommenders[1], {"k": 10})
    model = make_recommender("user_knn", {"k": 10}).fit(validation.train)
    targets = build_targets(validation, Protocol.parse("AI+AR+AN"), threshold=4)
    rankings = recommend_top_k(model, validation.train, targets.unit_user, 100)
    frame = measure(rankings, targets, metrics=["ndcg"], k=[10], train=validation.train)
    per_user = frame.filter(pl.col("metric") == "ndcg").get_column("value").to_numpy()
    assert value == pytest.approx(np.nanmean(per_user), rel=1e-12)


def test_trial_log_best_and_rows(tmp_path):
    log = TrialLog(tmp_path / TUNING)
    log.add("u1", "als", 0, {"factors": 8}, 0.2, 1.0, 0.5)
    log.add("u1", "als", 1, {"factors": 16}, float("nan"), 1.0, 0.5)
    log.add("u1", "als", 2, {"factors": 32}, 0.2, 1.0, 0.5)
    again = TrialLog(tmp_path / TUNING)
    from recsys_eval.tune import best_trial

    assert best_trial(again.finished("u1", "als"))["trial"] == 0  # ties: the earliest; NaN never wins
    assert again.frame.get_column("param_factors").to_list() == [8, 16, 32]
    assert again.finished("u2", "als") == {}
