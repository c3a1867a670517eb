"""The experiment runner end to end on a small synthetic dataset (built by the tests, so nothing
skips): results folder, determinism, resume after an interruption, bad configs, a user plugin, and
external runs."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import config_text, ratings_file, split_table
from latex_tables import compile_tables
from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder
from recsys_eval.errors import DataError
from recsys_eval.experiment import runner
from recsys_eval.pipeline.config import load_config
from recsys_eval.pipeline.inputs import prepare_splits
from recsys_eval.pipeline.local import LocalFold
from recsys_eval.pipeline.timings import WHOLE_RUN
from recsys_eval.recommend import Recommender, make_recommender

RECS = ["popular", "random", "bias"]
#: The runner tests' config but for its dataset; ``write_config`` overrides any of it.
SMALL = dict(seed=7, protocols=["AI+AR+AN", "AI+1R+NN50"], recommenders=RECS,
             metrics={"names": ["precision", "recall", "ndcg", "ap", "auc", "catalog_coverage", "rmse"],
                      "k": [5, 10], "relevance_threshold": 4})
KFOLD2 = split_table("kfold", k=2, per_user=True)


@pytest.fixture(autouse=True)
def _data(synthetic_ratings):
    global DATA
    DATA = synthetic_ratings


def write_config(tmp_path: Path, **overrides) -> Path:
    """small.toml: ``SMALL`` on the synthetic ratings, with ``overrides`` of config_text's arguments."""
    path = tmp_path / "small.toml"
    path.write_text(config_text("small", **{"dataset": ratings_file(DATA), **SMALL, **overrides}))
    return path


def per_unit_of(folder: Path) -> pl.DataFrame:
    return ResultsFolder.open(folder).scan_per_unit().collect()


def load_data():
    from recsys_eval.data import load_file

    return load_file(DATA, {"user": "userId", "item": "movieId", "rating": "rating", "timestamp": "timestamp"})


def run(config_path: Path, out: Path, *args: str) -> Path:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config_path), "--out", str(out), "--quiet", *args])
    assert exit_info.value.code in (0, None)
    folders = sorted(p for p in (out / "small").iterdir() if not p.name.startswith(".") and not p.is_symlink())
    return folders[-1]


def test_end_to_end_results_folder(tmp_path):
    folder = run(write_config(tmp_path), tmp_path / "results")
    for name in ("config.toml", "manifest.json", "summary.parquet", "summary.csv",
                 "timings.csv", "data_stats.parquet", "exposure_bins.parquet", "log.txt"):
        assert (folder / name).is_file(), name
    # per-unit files per (fold, system, protocol) (the users' values, then the run-level values
    # such as catalogue coverage), every one listed in the manifest
    files = sorted(str(p.relative_to(folder)) for p in (folder / "per_unit").rglob("*.parquet"))
    assert files == sorted(json.loads((folder / "manifest.json").read_text())["partitions"])
    assert len(files) == 3 * 2 * 2 + 1
    assert (folder / "splits" / "holdout").is_dir()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["systems"] == ["popular", "random", "bias"]
    assert manifest["protocols"] == ["AI+AR+AN", "AI+1R+NN50", "ratings"]  # config order
    assert manifest["versions"]["polars"] == pl.__version__
    assert manifest["seed"] == 7 and manifest["seeds"]["split"] > 0
    per_unit = per_unit_of(folder)
    assert pl.scan_parquet(folder / "per_unit" / "**" / "*.parquet").collect().height == per_unit.height
    assert per_unit.columns == ["system", "protocol", "fold", "user", "unit", "metric", "k", "value"]
    summary = pl.read_parquet(folder / "summary.parquet")
    row = summary.filter((pl.col("system") == "popular") & (pl.col("protocol") == "AI+AR+AN")
                         & (pl.col("metric") == "ndcg") & (pl.col("k") == 10))
    assert row.height == 1 and 0 < row["mean"][0] < 1 and row["lower"][0] < row["mean"][0] < row["upper"][0]
    # the summary mean is the mean over users of the per-unit values
    units = per_unit.filter((pl.col("system") == "popular") & (pl.col("protocol") == "AI+AR+AN")
                            & (pl.col("metric") == "ndcg") & (pl.col("k") == 10))
    assert row["mean"][0] == pytest.approx(units["value"].drop_nans().mean())
    # a random recommender under 1R+NN50 has E[hit@10] = 10/51, so E[recall@10] is that too
    rand = summary.filter((pl.col("system") == "random") & (pl.col("protocol") == "AI+1R+NN50")
                          & (pl.col("metric") == "recall") & (pl.col("k") == 10))
    assert rand["mean"][0] == pytest.approx(10 / 51, abs=0.05)
    # the sampled rank of every 1R unit is recorded as an exact integer in 1..51
    ranks = per_unit.filter((pl.col("protocol") == "AI+1R+NN50") & (pl.col("metric") == "sampled_rank"))
    assert ranks.height > 0 and ranks["value"].min() >= 1 and ranks["value"].max() <= 51
    assert (ranks["value"] == ranks["value"].round()).all()
    assert "sampled_rank" not in set(summary["metric"])
    # rating prediction only for the rating predictor
    assert set(per_unit.filter(pl.col("metric") == "rmse")["system"].unique()) == {"bias"}
    bias_rmse = summary.filter((pl.col("system") == "bias") & (pl.col("metric") == "rmse"))["mean"][0]
    ratings = load_data().ratings
    assert 0.5 * ratings.std() < bias_rmse < 1.2 * ratings.std()  # ratings here are uniform noise


def test_same_config_same_per_unit_rows(tmp_path):
    config = write_config(tmp_path)
    a = run(config, tmp_path / "a")
    b = run(config, tmp_path / "b")
    key = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
    frame_a = per_unit_of(a).sort(key, nulls_last=True)
    frame_b = per_unit_of(b).sort(key, nulls_last=True)
    assert frame_a.equals(frame_b)
    for name in ("summary.csv", "paired_tests.csv"):
        if (a / name).is_file():
            assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_second_run_never_overwrites_the_first(tmp_path):
    config = write_config(tmp_path)
    first = run(config, tmp_path / "r")
    stamp = (first / "summary.parquet").stat().st_mtime_ns
    second = run(config, tmp_path / "r")
    assert first != second and (first / "summary.parquet").stat().st_mtime_ns == stamp


def test_interrupted_run_leaves_no_complete_folder_and_resume_reuses_folds(tmp_path, monkeypatch):
    config_path = write_config(tmp_path, split=KFOLD2, recommenders=["popular"])
    out = tmp_path / "results"
    real = LocalFold.run
    calls = []

    def dies_on_second_fold(fold):
        calls.append(fold.plan.fold)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(fold)

    monkeypatch.setattr(LocalFold, "run", dies_on_second_fold)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config_path), "--out", str(out), "--quiet"])
    assert exit_info.value.code == 130
    visible = [p for p in (out / "small").iterdir() if not p.name.startswith(".")]
    assert visible == []  # nothing that looks complete
    partial = [p for p in (out / "small").iterdir() if p.name.startswith(".partial-")]
    assert len(partial) == 1 and not (partial[0] / "manifest.json").exists()

    calls.clear()
    monkeypatch.setattr(LocalFold, "run", lambda fold: calls.append(fold.plan.fold) or real(fold))
    folder = run(config_path, out, "--resume")
    assert len(calls) == 1  # the first fold was reused
    fresh = run(config_path, tmp_path / "fresh")
    key = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
    assert per_unit_of(folder).sort(key, nulls_last=True).equals(per_unit_of(fresh).sort(key, nulls_last=True))
    assert (folder / "summary.csv").read_bytes() == (fresh / "summary.csv").read_bytes()
    assert sorted(p.name for p in (folder / "splits").iterdir()) == sorted(p.name for p in (fresh / "splits").iterdir())


@pytest.mark.parametrize("change,message", [
    (("seed = 7", "sead = 7"), "unknown key 'sead'.*did you mean 'seed'"),
    (('name = "AI+1R+NN50"', 'name = "AI+1R+NM50"'), "non-relevant|NM50"),
    (('name = "AI+1R+NN50"', 'name = "AI+1R+NN0"'), "n"),
    (('"precision"', '"precison"'), "did you mean 'precision'"),
    (('name = "popular"', 'name = "popularr"'), "did you mean 'popular'"),
    (('path = "', 'path = "missing-'), "missing-"),
    (("k = [5, 10]", "k = [0, 10]"), "k > 0"),
    (('method = "holdout"', 'method = "holdot"'), "holdout"),
    (('name = "popular"', 'name = "no_such_module_abc:Model"'), "cannot import"),
])
def test_bad_config_stops_before_any_work(tmp_path, capsys, change, message):
    path = write_config(tmp_path)
    path.write_text(path.read_text().replace(*change, 1))
    out = tmp_path / "results"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(path), "--out", str(out), "--quiet"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    import re
    assert re.search(message, err.replace("\n", " "), re.S), err
    assert not out.exists()  # nothing was written


def test_unwritable_output_folder_is_a_clear_error(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "small").write_text("a file where the experiment folder should be")
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(write_config(tmp_path)), "--out", str(locked), "--quiet"])
    assert exit_info.value.code == 1
    assert "cannot create results folder" in capsys.readouterr().err


def test_validate_and_init(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", str(write_config(tmp_path))])
    assert exit_info.value.code in (0, None)
    assert "valid" in capsys.readouterr().out
    starter = tmp_path / "starter.toml"
    with pytest.raises(SystemExit):
        main(["init", str(starter)])
    load_config(starter)  # the starter config is itself valid
    with pytest.raises(SystemExit) as exit_info:
        main(["init", str(starter)])
    assert exit_info.value.code == 1  # never overwritten without --force


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in (Path(__file__).parents[2] / "experiments").glob("*.toml"))
)
def test_shipped_configs_validate(name):
    from recsys_eval.experiment.checks import check_names

    check_names(load_config(Path(__file__).parents[2] / "experiments" / f"{name}.toml"))


class ReversePopular(Recommender):
    """A user's plugin: prefers the least popular items."""

    def fit(self, train):
        self.n_items = train.n_items
        self.counts = train.item_counts().astype(np.float32)
        return self

    def score_block(self, users):
        return np.broadcast_to(-self.counts, (len(users), self.n_items))


def test_plugin_recommender_by_import_path(tmp_path):
    recs = [{"name": f"{__name__}:ReversePopular", "label": "reverse"}, *RECS]
    folder = run(write_config(tmp_path, recommenders=recs), tmp_path / "r")
    summary = pl.read_parquet(folder / "summary.parquet")
    ndcg = {r["system"]: r["mean"] for r in summary.filter(
        (pl.col("protocol") == "AI+AR+AN") & (pl.col("metric") == "ndcg") & (pl.col("k") == 10)).iter_rows(named=True)}
    assert ndcg["reverse"] < ndcg["popular"]


def test_external_run_equals_the_internal_recommender(tmp_path):
    # The popular recommender fitted on the run's own train side (the same seed gives the same
    # split): its every score, written as a file of raw ids, evaluated as a run.
    data = load_data()
    train = runner.config_splits(load_config(write_config(tmp_path)), data)[0].train
    model = make_recommender("popular", {}).fit(train)
    users = np.repeat(np.arange(data.n_users), data.n_items)
    items = np.tile(np.arange(data.n_items), data.n_users)
    frame = data.to_raw(pl.DataFrame({"user": users, "item": items,
                                      "score": model.score(users, items)}))
    path = tmp_path / "popular_run.parquet"
    frame.write_parquet(path)
    recs = ["popular", {"name": "external", "label": "file", "path": str(path)}]
    folder = run(write_config(tmp_path, recommenders=recs), tmp_path / "r")
    per_unit = per_unit_of(folder).filter(pl.col("metric") != "rmse")
    key = ["protocol", "fold", "user", "unit", "metric", "k"]
    internal = per_unit.filter(pl.col("system") == "popular").drop("system").sort(key, nulls_last=True)
    external = per_unit.filter(pl.col("system") == "file").drop("system").sort(key, nulls_last=True)
    assert internal.height > 0 and internal.equals(external)


def test_external_run_with_unknown_ids_is_reported(tmp_path):
    data = load_data()
    frame = pl.DataFrame({"user": [1, 1, 99999], "item": [1001, 424242, 1002], "score": [1.0, 2.0, 3.0]})
    from recsys_eval.recommend import ExternalRun

    with pytest.warns(UserWarning, match="2"):
        run_ = ExternalRun(frame, data, source="run.csv")
    assert run_.unknown["rows"] == 2
    assert "99999" in run_.unknown_message() and "424242" in run_.unknown_message()
    with pytest.raises(DataError, match="none of the run's"):
        ExternalRun(frame.filter(pl.col("user") == 99999), data)


def test_run_level_values_count_every_range_whatever_the_keeper_threads_timing(tmp_path, monkeypatch):
    # the keeper thread summarises a (set, system) after its last range; the main thread must have
    # counted that range's exposure (catalogue coverage) before: a slow count changes nothing
    from recsys_eval.pipeline import jobs

    config = write_config(tmp_path, run={"users_per_chunk": 40})
    coverage = pl.col("metric") == "catalog_coverage"
    reference = pl.read_parquet(run(config, tmp_path / "a") / "summary.parquet").filter(coverage)
    real = jobs.add_exposure

    def slow(*args, **kwargs):
        time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs, "add_exposure", slow)
    slowed = pl.read_parquet(run(config, tmp_path / "b") / "summary.parquet").filter(coverage)
    assert reference.height > 0 and slowed.equals(reference)


def test_run_intervals_are_those_of_confidence_intervals_on_its_per_user_values(tmp_path):
    # the runner reduces each partition's t-intervals from the users it keeps; the public function
    # computes them from the per-user table of the written per-unit rows: the same numbers
    from recsys_eval.compare import confidence_intervals
    from recsys_eval.measure.aggregate import per_user

    folder = run(write_config(tmp_path, split=KFOLD2), tmp_path / "r")
    per_unit = per_unit_of(folder).filter(pl.col("user").is_not_null()
                                          & ~pl.col("metric").is_in(["n_relevant", "sampled_rank", "full_candidates"]))
    expected = confidence_intervals(per_user(per_unit)).select("system", "protocol", "fold", "metric", "k",
                                                               "lower", "upper")
    summary = pl.read_parquet(folder / "summary.parquet").filter(pl.col("fold") != "all")
    both = expected.join(summary, on=["system", "protocol", "fold", "metric", "k"], nulls_equal=True, suffix="_run")
    assert both.height == expected.height > 50
    for side in ("lower", "upper"):
        assert both[side].to_numpy() == pytest.approx(both[f"{side}_run"].to_numpy(), rel=1e-12, abs=1e-15, nan_ok=True)


def test_cross_validated_summary_averages_fold_means(tmp_path):
    from scipy import stats

    config_path = write_config(tmp_path, split=split_table("kfold", k=3, per_user=True), recommenders=["popular"])
    summary = pl.read_parquet(run(config_path, tmp_path / "r") / "summary.parquet")
    rows = summary.filter((pl.col("protocol") == "AI+AR+AN") & (pl.col("metric") == "ndcg")
                          & (pl.col("k") == 10))
    folds = rows.filter(pl.col("fold") != "all")["mean"].to_numpy()
    assert len(folds) == 3
    everything = rows.filter(pl.col("fold") == "all")
    assert everything["mean"][0] == pytest.approx(folds.mean())
    low, high = stats.t.interval(0.95, 2, loc=folds.mean(), scale=stats.sem(folds))
    assert (everything["lower"][0], everything["upper"][0]) == pytest.approx((low, high))
    assert everything["users_counted"][0] == rows.filter(pl.col("fold") != "all")["users_counted"].sum()


def test_single_threaded_fits_side_by_side_give_the_bits_of_one_fit_alone(tmp_path):
    # two BPR systems (one thread each, by design) are fitted side by side; each gives the values
    # the same BPR gives when it is the run's only single-threaded fit
    b1, b2 = ({"name": "bpr", "label": label, "params": {"factors": 8, "iterations": 5}} for label in ("b1", "b2"))
    alone = run(write_config(tmp_path, recommenders=[b1]), tmp_path / "alone")
    pair = run(write_config(tmp_path, recommenders=[b1, b2]), tmp_path / "pair")
    timings = pl.read_csv(pair / "timings.csv").filter(pl.col("step").str.starts_with("fit"))
    assert timings.get_column("step").to_list() == ["fit side by side"] * 2
    key = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
    first = per_unit_of(alone).sort(key, nulls_last=True)
    for label in ("b1", "b2"):
        side = per_unit_of(pair).filter(pl.col("system") == label).with_columns(pl.lit("b1").alias("system"))
        assert side.sort(key, nulls_last=True).equals(first)


def test_a_single_threaded_fit_in_the_background_gives_the_bits_of_one_fit_alone(tmp_path):
    # with other systems to evaluate meanwhile, BPR is fitted in the background and evaluated last;
    # its values, and the others', are those of runs where each system is alone, and the results
    # keep the config's order of systems
    bpr = {"name": "bpr", "params": {"factors": 8, "iterations": 5}}
    knn = {"name": "item_knn", "params": {"k": 10}}
    both = run(write_config(tmp_path, recommenders=[bpr, knn]), tmp_path / "both")
    steps = pl.read_csv(both / "timings.csv").filter(pl.col("step").str.starts_with("fit"))
    assert sorted(steps.select("system", "step").iter_rows()) == [("bpr", "fit in background"), ("item_knn", "fit")]
    key = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
    values = per_unit_of(both).sort(key, nulls_last=True)
    for alone, system in ((bpr, "bpr"), (knn, "item_knn")):
        single = per_unit_of(run(write_config(tmp_path, recommenders=[alone]), tmp_path / system))
        assert values.filter(pl.col("system") == system).equals(single.sort(key, nulls_last=True))
    summary = pl.read_csv(both / "summary.csv")
    assert summary.get_column("system").unique(maintain_order=True).to_list()[:2] == ["bpr", "item_knn"]


def test_a_relabelled_protocol_or_system_keeps_its_samples(tmp_path):
    plain = per_unit_of(run(write_config(tmp_path), tmp_path / "a"))
    config = write_config(tmp_path, protocols=["AI+AR+AN", {"name": "AI+1R+NN50", "label": "sampled"}],
                          recommenders=["popular", {"name": "random", "label": "coin"}, "bias"])
    relabelled = per_unit_of(run(config, tmp_path / "b"))
    key = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
    renamed = relabelled.with_columns(
        pl.col("protocol").replace("sampled", "AI+1R+NN50"), pl.col("system").replace("coin", "random"))
    assert renamed.sort(key, nulls_last=True).equals(plain.sort(key, nulls_last=True))


def test_prepare_on_train_never_sees_the_test_side(tmp_path):
    from recsys_eval.data import prepare

    prepare_train = {"on": "train", "k_core": 8}
    config = load_config(write_config(tmp_path, prepare=prepare_train))
    data = load_data()
    raw = runner.config_splits(config, data)
    splits, steps = prepare_splits(config.prepare, raw)
    for before, after in zip(raw, splits, strict=True):
        expected, _ = prepare.k_core(before.train, 8)  # the k-core of the train side alone
        assert after.train.frame.equals(expected.frame)
        assert len(after.test) <= len(before.test)
        users = np.flatnonzero(after.train.user_counts())
        assert np.isin(after.test.users, users).all()
    assert any("8-core" in s["step"] for s in steps)
    assert sum(len(a.test) for a in splits) < sum(len(b.test) for b in raw)  # some test rows dropped
    folder = run(write_config(tmp_path, prepare=prepare_train), tmp_path / "r")
    stats = pl.read_parquet(folder / "data_stats.parquet")
    assert stats.filter(pl.col("statistic").str.contains("not in the prepared train")).height == 1


def test_chunked_evaluation_gives_the_same_bits(tmp_path):
    # 600 users in chunks of 97: every partition written in parts, summaries from merged users
    chunked = run(write_config(tmp_path, split=KFOLD2, run={"users_per_chunk": 97}), tmp_path / "chunked")
    whole = run(write_config(tmp_path, split=KFOLD2, run={"users_per_chunk": 100000}), tmp_path / "whole")
    assert len(list((chunked / "per_unit").rglob("*.parquet"))) > len(list((whole / "per_unit").rglob("*.parquet")))
    key = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
    assert per_unit_of(chunked).sort(key, nulls_last=True).equals(per_unit_of(whole).sort(key, nulls_last=True))
    for name in ("summary.csv", "exposure_bins.parquet"):
        assert (chunked / name).read_bytes() == (whole / name).read_bytes(), name


def test_a_memory_budget_too_small_names_the_smallest_that_works(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(write_config(tmp_path)), "--out", str(tmp_path / "r"), "--quiet", "--memory", "10MB"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "memory budget 10 MB is too small" in err and "at least" in err and "Traceback" not in err


def test_timings_record_each_steps_peak_memory(tmp_path):
    timings = pl.read_csv(run(write_config(tmp_path), tmp_path / "r") / "timings.csv")
    assert {"step", "seconds", "peak_rss_mb"} <= set(timings.columns)
    assert (timings["peak_rss_mb"] > 0).all()


def test_the_analysis_and_report_are_steps_and_the_whole_runs_peak_is_recorded(tmp_path):
    """The end-of-run analysis and the report are timed steps with their own (sampled) peaks; the
    last row is the whole run, whose peak is the process's high-water mark, at least every step's,
    and the manifest's."""
    folder = run(write_config(tmp_path, output=None), tmp_path / "r")
    timings = pl.read_csv(folder / "timings.csv")
    assert timings["step"][-3:].to_list() == ["analyse", "report", WHOLE_RUN]
    whole = timings.row(-1, named=True)
    assert whole["peak_rss_mb"] >= timings["peak_rss_mb"].max() - 4 > 0  # the kernel's mark lags by pages
    assert ResultsFolder.open(folder).manifest.peak_rss_mb == whole["peak_rss_mb"]
    assert whole["seconds"] >= timings.filter(pl.col("step") == "report")["seconds"].item()


def test_timings_count_each_moment_of_the_main_thread_once(tmp_path, monkeypatch):
    """The main thread's steps never overlap, so their times add up to at most the run's wall time
    (the background fit, writes and per-system summaries run on other threads). Slow writes make
    the main thread wait for the keeper: that wait belongs to "wait for writes", not to "measure" too."""
    write = ResultsFolder.write_partition

    def slow_write(self, per_unit, *, part=0):
        time.sleep(0.2)
        return write(self, per_unit, part=part)

    monkeypatch.setattr(ResultsFolder, "write_partition", slow_write)
    start = time.perf_counter()
    folder = run(write_config(tmp_path), tmp_path / "r")
    wall = time.perf_counter() - start
    timings = pl.read_csv(folder / "timings.csv")
    on_keeper = pl.col("step").str.contains(r"^(write|summarise) ") & (pl.col("system") != "")
    main_thread = timings.filter(~on_keeper & ~pl.col("step").is_in(["fit in background", WHOLE_RUN]))
    waits = main_thread.filter(pl.col("step") == "wait for writes")["seconds"].sum()
    assert waits >= 0.2  # the main thread did wait for the slow writes
    assert main_thread["seconds"].sum() <= wall


def test_1r_units_record_their_full_candidate_count(tmp_path):
    folder = run(write_config(tmp_path), tmp_path / "r")
    per_unit = per_unit_of(folder).filter(pl.col("protocol") == "AI+1R+NN50")
    full = per_unit.filter(pl.col("metric") == "full_candidates")
    config = load_config(write_config(tmp_path))
    data = load_data()
    split = runner.config_splits(config, data)[0]
    # N = items not in the user's train, less the user's other relevant items
    relevant = split.test.frame.filter(pl.col("rating") >= 4).group_by("user").len()
    index = relevant["user"].to_numpy()
    expected = pl.DataFrame({
        "user": data.user_ids.gather(index).cast(pl.Int64),
        "n": data.n_items - split.train.user_counts()[index] - relevant["len"].to_numpy() + 1,
    })
    joined = full.join(expected, on="user", how="left")
    assert joined.height == per_unit.filter(pl.col("metric") == "sampled_rank").height > 0
    assert (joined["value"] == joined["n"].cast(pl.Float64)).all()


def test_full_ranking_auc_does_not_depend_on_the_listed_depth(tmp_path):
    shallow = pl.read_parquet(run(write_config(tmp_path, run={"depth": 10}), tmp_path / "a")
                              / "summary.parquet")
    deep = pl.read_parquet(run(write_config(tmp_path, run={"depth": 400}), tmp_path / "b")
                           / "summary.parquet")
    auc = (pl.col("metric") == "auc") & (pl.col("protocol") == "AI+AR+AN")
    assert shallow.filter(auc).height == 3
    assert shallow.filter(auc)["mean"].to_list() == deep.filter(auc)["mean"].to_list()


def test_r_precision_lists_as_deep_as_the_most_relevant_user_needs(tmp_path):
    """A full ranking lists max(k, run.depth) items, and R where R-precision reads the top R: with
    run.depth = 2 the values equal those of rankings listed 1000 deep (users here hold up to ~30
    relevant test items), and equal precision@R computed from the same rankings' recall@R."""
    metrics = {"names": ["rprecision", "rbp"], "k": [1], "relevance_threshold": 3}
    shallow = per_unit_of(run(write_config(tmp_path, metrics=metrics, protocols=["AI+AR+AN"], run={"depth": 2}),
                              tmp_path / "a"))
    deep = per_unit_of(run(write_config(tmp_path, metrics=metrics, protocols=["AI+AR+AN"], run={"depth": 1000}),
                           tmp_path / "b"))
    key = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
    rprec = pl.col("metric") == "rprecision"
    assert shallow.filter(rprec).sort(key).equals(deep.filter(rprec).sort(key))
    assert shallow.filter(rprec)["value"].drop_nans().max() > 0


def test_a_metric_parameter_is_a_key_of_metrics_and_reaches_the_values(tmp_path):
    """[metrics] rbp_persistence = p: RBP@1 of a unit whose first item is relevant is 1 - p."""
    values = {}
    for p in (0.5, 0.9):
        metrics = {"names": ["rbp", "hit"], "k": [1], "relevance_threshold": 3, "rbp_persistence": p}
        folder = run(write_config(tmp_path, metrics=metrics, protocols=["AI+AR+AN"]), tmp_path / f"p{p}")
        rows = per_unit_of(folder).pivot(on="metric", index=["system", "user", "unit"], values="value")
        hits = rows.filter(pl.col("hit") == 1)
        assert hits.height > 0 and (hits["rbp"] - (1 - p)).abs().max() < 1e-12
        values[p] = ResultsFolder.open(folder).manifest.metric_params["rbp_persistence"]
    assert values == {0.5: 0.5, 0.9: 0.9}


@pytest.mark.parametrize("key, message", [
    ("rbp_persistence = 1.5", "rbp_persistence (.*) must be a number with 0 < rbp_persistence < 1"),
    ("rbp_persistance = 0.5", "unknown key 'metrics.rbp_persistance'.*rbp_persistence"),
])
def test_a_bad_metric_parameter_is_a_config_error_naming_it(tmp_path, capsys, key, message):
    path = write_config(tmp_path)
    path.write_text(path.read_text().replace("[metrics]\n", f"[metrics]\n{key}\n"))
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", str(path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and re.search(message, err) and "Traceback" not in err


def test_r_precision_and_rbp_reach_every_output_from_their_specs(tmp_path, capsys):
    """Two metrics added by their specs alone: in the summary, the report, the LaTeX tables, the
    terminal's table and `recsys-eval list metrics`."""
    metrics = {"names": ["ndcg", "rprecision", "rbp"], "k": [5, 10], "relevance_threshold": 4}
    config = write_config(tmp_path, metrics=metrics, output=None,
                          report={"metrics": ["ndcg@10", "rprecision", "rbp@10"]})
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "r")])
    assert exit_info.value.code in (0, None)
    terminal = capsys.readouterr().out
    folder = sorted(p for p in (tmp_path / "r" / "small").iterdir() if not p.name.startswith(".") and not p.is_symlink())[-1]
    names = set(pl.read_csv(folder / "summary.csv")["name"])
    assert {"rprecision", "rbp@5", "rbp@10"} <= names
    for text in (terminal, (folder / "report.md").read_text(), (folder / "tables.tex").read_text()):
        assert "R-Prec" in text and "RBP@10" in text
    with pytest.raises(SystemExit):
        main(["list", "metrics"])
    listed = capsys.readouterr().out
    assert "rprecision" in listed and "rbp" in listed


RATED = ["mae", "rmse", "kendall", "spearman", "ndpm"]


def test_rating_metrics_have_their_own_table_in_every_output(tmp_path, capsys):
    """The ``ratings`` protocol once got the ranking metrics' columns, none of which it has: an empty
    table in report.md and the terminal, a tables.tex pdflatex refused, MAE and RMSE nowhere."""
    metrics = {"names": ["precision", "recall", "ndcg", "ap", "auc", *RATED], "k": [5, 10], "relevance_threshold": 4}
    recs = ["popular", "bias", {"name": "user_knn_rating", "params": {"k": 20}}]
    config = write_config(tmp_path, metrics=metrics, recommenders=recs, output=None)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "r")])
    assert exit_info.value.code in (0, None)
    terminal = capsys.readouterr().out
    folder = (tmp_path / "r" / "small" / "latest").resolve()
    summary = pl.read_parquet(folder / "summary.parquet")  # one holdout fold
    markdown, latex = (folder / "report.md").read_text(), (folder / "tables.tex").read_text()
    mae = dict(summary.filter(pl.col("metric") == "mae").select("system", "mean").iter_rows())
    assert set(mae) == {"bias", "user_knn_rating"}
    best = min(mae, key=mae.get)
    assert f"| {best} | **{mae[best]:.4f}**" in markdown  # lower is better
    for text, digits in ((terminal, 4), (markdown, 4), (latex, 3)):
        assert "MAE" in text and "RMSE" in text and "NDPM" in text
        assert all(f"{value:.{digits}f}" in text for value in mae.values())
    assert "| system |  |" not in markdown and "\n|---|\n" not in markdown
    assert r"{@{}l@{}}" not in latex
    if shutil.which("pdflatex"):
        compile_tables(tmp_path, latex)
        compile_tables(tmp_path, (folder / "tables-twocolumn.tex").read_text(), wide=True)
    ratings = terminal[terminal.index("ratings (fold"):]
    assert next(line for line in ratings.splitlines() if "system" in line).split()[1:3] == ["MAE", "RMSE"]


def test_an_external_run_is_measured_by_the_rank_agreement_metrics(tmp_path):
    """Kendall, Spearman and NDPM score an external run's test pairs in a config run: values, not
    the traceback of a run on ML-100K (its cached columns come in chunks, which the run's scoring
    could not index: tests/recommend/test_external.py has that case)."""
    data = load_data()
    users = np.repeat(np.arange(data.n_users), data.n_items)
    items = np.tile(np.arange(data.n_items), data.n_users)
    frame = data.to_raw(pl.DataFrame({"user": users, "item": items, "score": (items % 7).astype(np.float64)}))
    frame.write_parquet(tmp_path / "run.parquet")
    metrics = {"names": ["ndcg", "kendall", "spearman", "ndpm"], "k": [10], "relevance_threshold": 4}
    recs = [{"name": "external", "label": "file", "path": str(tmp_path / "run.parquet")}]
    folder = run(write_config(tmp_path, recommenders=recs, metrics=metrics), tmp_path / "r")
    summary = pl.read_parquet(folder / "summary.parquet").filter(pl.col("protocol") == "ratings")
    assert sorted(summary["metric"]) == ["kendall", "ndpm", "spearman"]
    assert summary["mean"].is_finite().all()


def test_experiments_tables_script_prints_the_readme_tables_of_a_run(tmp_path):
    """experiments/tables.py, which makes experiments/README.md's tables, reads a results folder
    of this version (its typed manifest) and prints each table with the command that made it."""
    import subprocess
    import sys

    folder = run(write_config(tmp_path), tmp_path / "results")
    script = Path(__file__).resolve().parents[2] / "experiments" / "tables.py"
    done = subprocess.run([sys.executable, str(script), str(folder), "--sampled", "AI+1R+NN50"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "(seed 7," in done.stdout and "folds holdout." in done.stdout
    for title in ("ndcg@10 by protocol", "sampled-metric correction", "protocol agreement", "exposure"):
        assert f"#### {title}" in done.stdout
    ndcg = pl.read_parquet(folder / "summary.parquet").filter(
        (pl.col("system") == "popular") & (pl.col("protocol") == "AI+AR+AN") & (pl.col("metric") == "ndcg")
        & (pl.col("k") == 10))
    assert f"{ndcg['mean'][0]:.3f}" in done.stdout
