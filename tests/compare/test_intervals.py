import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from scipy import stats

from recsys_eval.compare import (
    confidence_intervals,
    fold_confidence_intervals,
    per_user,
)
from recsys_eval.compare.resampling import acceleration, bootstrap_interval, bootstrap_means
from recsys_eval.errors import ConfigError, DataError

from .conftest import user_frame


def test_per_user_averages_units_and_applies_the_undefined_policy():
    per_unit = pl.DataFrame(
        {
            "system": ["a"] * 5,
            "protocol": ["AI+1R+NN"] * 5,
            "fold": ["0"] * 5,
            "user": [1, 1, 1, 2, 2],
            "unit": [0, 1, 2, 3, 4],
            "metric": ["hit"] * 5,
            "k": pl.Series([10] * 5, dtype=pl.Int32),
            "value": [1.0, 0.0, float("nan"), float("nan"), float("nan")],
        }
    )
    skip = per_user(per_unit).sort("user")
    assert skip["value"][0] == pytest.approx(0.5)
    assert math.isnan(skip["value"][1])
    zero = per_user(per_unit, undefined="zero").sort("user")
    assert zero["value"].to_list() == pytest.approx([1 / 3, 0.0])
    with pytest.raises(ConfigError, match="did you mean 'skip'"):
        per_user(per_unit, undefined="skp")


def test_t_interval_matches_scipy_and_counts_undefined_users(rng):
    a = rng.random(40)
    a[[3, 7]] = np.nan
    result = confidence_intervals(user_frame({"a": a}), level=0.9).row(0, named=True)
    kept = a[~np.isnan(a)]
    low, high = stats.t.interval(0.9, kept.size - 1, loc=kept.mean(), scale=stats.sem(kept))
    assert (result["mean"], result["lower"], result["upper"]) == pytest.approx((kept.mean(), low, high))
    assert (result["n"], result["n_undefined"]) == (38, 2)


def test_t_interval_on_the_lecture_error_rate_example():
    # Mooney: error 0.20 on a test set of 100 -> 0.2 +- 1.96 sqrt(0.2 * 0.8 / 100) = 0.2 +- 0.0784 (z).
    errors = np.r_[np.ones(20), np.zeros(80)]
    row = confidence_intervals(user_frame({"h": errors})).row(0, named=True)
    half = (row["upper"] - row["lower"]) / 2
    hand_t = stats.t.ppf(0.975, 99) * math.sqrt(0.2 * 0.8 * 100 / 99) / math.sqrt(100)
    assert row["mean"] == pytest.approx(0.2)
    assert half == pytest.approx(hand_t)
    assert half == pytest.approx(0.0784, rel=0.03)  # t and z intervals nearly agree at n = 100


@pytest.mark.parametrize("method", ["bca", "percentile", "basic"])
def test_interval_from_a_bootstrap_distribution_equals_scipy(rng, method):
    data = rng.exponential(size=(60, 3))
    distribution = data[rng.integers(0, 60, (500, 60))].mean(axis=1)
    u = data - data.mean(axis=0)
    low, high = bootstrap_interval(
        distribution, data.mean(axis=0), level=0.9, method=method,
        acceleration=acceleration((u**2).sum(axis=0), (u**3).sum(axis=0))
    )
    for c in range(3):
        previous = SimpleNamespace(bootstrap_distribution=distribution[:, c])
        ref = stats.bootstrap(
            (data[:, c],), np.mean, n_resamples=0, bootstrap_result=previous, confidence_level=0.9, method=method
        ).confidence_interval
        assert (low[c], high[c]) == pytest.approx((ref.low, ref.high), rel=1e-10)


def test_bootstrap_interval_close_to_scipy_bootstrap(rng):
    a, b = rng.exponential(size=150), rng.random(150)
    b[:10] = np.nan
    result = confidence_intervals(user_frame({"a": a, "b": b}), method="bootstrap", n_resamples=4000, seed=3)
    for system, values in (("a", a), ("b", b[~np.isnan(b)])):
        row = result.filter(pl.col("system") == system).row(0, named=True)
        ref = stats.bootstrap((values,), np.mean, n_resamples=4000, rng=7).confidence_interval
        width = ref.high - ref.low
        assert row["lower"] == pytest.approx(ref.low, abs=0.08 * width)
        assert row["upper"] == pytest.approx(ref.high, abs=0.08 * width)
    assert result.filter(pl.col("system") == "b")["n_undefined"].item() == 10


def test_bootstrap_is_reproducible_and_degenerate_data_gives_a_point_interval():
    frame = user_frame({"a": np.linspace(0, 1, 30), "b": np.full(30, 0.25)})
    first = confidence_intervals(frame, method="bootstrap", seed=11)
    assert first.equals(confidence_intervals(frame, method="bootstrap", seed=11))
    b = first.filter(pl.col("system") == "b").row(0, named=True)
    assert b["lower"] == b["upper"] == 0.25


def test_fold_confidence_interval_is_the_t_interval_over_fold_means(rng):
    frames, fold_means = [], []
    for fold in range(5):
        values = rng.random(20)
        values[fold] = np.nan
        frames.append(user_frame({"a": values}, fold=str(fold)))
        fold_means.append(np.nanmean(values))
    row = fold_confidence_intervals(pl.concat(frames)).row(0, named=True)
    low, high = stats.t.interval(0.95, 4, loc=np.mean(fold_means), scale=stats.sem(fold_means))
    assert row["fold"] == "all"
    assert (row["mean"], row["lower"], row["upper"], row["n_folds"]) == pytest.approx(
        (np.mean(fold_means), low, high, 5)
    )


def test_bad_input_is_named():
    frame = user_frame({"a": [0.1, 0.2]})
    with pytest.raises(ConfigError, match="did you mean 'bootstrap'"):
        confidence_intervals(frame, method="bootstap")
    with pytest.raises(ConfigError, match="confidence level"):
        confidence_intervals(frame, level=95)
    with pytest.raises(DataError, match="missing columns \\['value'\\]"):
        confidence_intervals(frame.drop("value"))
    with pytest.raises(DataError, match="more than one value"):
        confidence_intervals(pl.concat([frame, frame]))


def test_bootstrap_means_equal_gathering_the_drawn_users():
    data = np.random.default_rng(1).normal(size=(37, 4))
    got = bootstrap_means(data, 250, np.random.default_rng(9))
    indices = np.random.default_rng(9).integers(0, 37, (250, 37), dtype=np.int32)  # the same draws, one chunk
    assert got == pytest.approx(data[indices].mean(axis=1), rel=1e-12)


def test_a_kept_draw_is_the_draw_and_moves_the_generator_on_as_drawing_would():
    from recsys_eval.compare import resampling

    resampling._kept.clear()
    fresh = np.random.default_rng(5)
    drawn = resampling.resample_counts(fresh, 300, 41)  # drawn
    indices = np.random.default_rng(5).integers(0, 41, (300, 41), dtype=np.int32)
    assert np.array_equal(drawn, np.stack([np.bincount(row, minlength=41) for row in indices]))
    again = np.random.default_rng(5)
    assert resampling.resample_counts(again, 300, 41) is drawn  # kept
    assert again.bit_generator.state == fresh.bit_generator.state
    assert again.random() == fresh.random()
    assert not drawn.flags.writeable


def test_kept_sign_flips_are_the_generators_bits_and_move_it_on_as_drawing_would():
    from recsys_eval.compare import resampling

    resampling._kept.clear()
    fresh = np.random.default_rng(6)
    drawn = resampling.sign_flips(fresh, 200, 19)
    bits = np.unpackbits(np.random.default_rng(6).integers(0, 256, (200, 3), dtype=np.uint8), axis=1, count=19)
    assert np.array_equal(drawn, bits * 2.0 - 1.0)
    again = np.random.default_rng(6)
    assert resampling.sign_flips(again, 200, 19) is drawn
    assert again.random() == fresh.random()
    assert resampling.resample_counts(np.random.default_rng(6), 200, 19) is not drawn  # a draw of its own kind


def test_bootstrap_means_over_many_chunks_equal_one_chunk(monkeypatch):
    from recsys_eval.compare import resampling

    data = np.random.default_rng(2).random((300, 5))
    whole = bootstrap_means(data, 400, np.random.default_rng(4))
    monkeypatch.setattr(resampling, "CHUNK_ELEMENTS", 300 * 7)  # 7 resamples per chunk
    chunked = bootstrap_means(data, 400, np.random.default_rng(4))
    indices = np.random.default_rng(4).integers(0, 300, (400, 300), dtype=np.int32)
    assert chunked == pytest.approx(data[indices].mean(axis=1), rel=1e-12)
    assert chunked == pytest.approx(whole, rel=1e-12)
