"""The metric registry against what the code computes: the kernel's layout comes from the slots, each
spec's cutoff, undefined and summary rules match the rows the measure functions emit, labels and
directions reach the tables."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from measure_build import rankings_of, targets_of

from recsys_eval.compare.sampled import SAMPLED_METRICS
from recsys_eval.core.chunks import chunk_bounds
from recsys_eval.errors import ConfigError
from recsys_eval.measure import beyond_accuracy, measure, rating_metrics
from recsys_eval.measure import kernels
from recsys_eval.measure.api import kernel_arrays, ranking_values
from recsys_eval.measure.ties import scan_scores
from recsys_eval.measure.metrics import (
    ALL_METRICS,
    BEYOND_METRICS,
    FUSED_METRICS,
    KERNEL_CUTOFF_SLOTS,
    METRICS,
    RANKING_METRICS,
    RATING_METRICS,
    Direction,
    Family,
    MetricKey,
    Summary,
    display_label,
    kernel_column,
    kernel_width,
    lower_is_better,
)
from recsys_eval.report.tables import Block, Cell, to_latex, to_markdown

# Three units: a mixed ranking, a unit without relevant items, an empty ranking.
RANKINGS = rankings_of([[3, 0, 5, 1], [2, 4], []], [[4.0, 3.0, 3.0, 1.0], [2.0, 1.0], []])
TARGETS = targets_of([{0: 2.0, 1: 0.0, 3: 1.0, 5: 0.0}, {2: 0.0, 4: 0.0}, {1: 3.0, 6: 0.0}], 8)
GENRES = np.eye(8, 3, dtype=bool)
TRAIN = pl.DataFrame({"user": [0, 0, 1, 2], "item": [0, 1, 1, 7]})


def test_slots_are_contiguous_per_family_and_cover_the_kernel():
    for family in (Family.CUTOFF, Family.WHOLE):
        slots = sorted(s.slot for s in METRICS.values() if s.family is family and s.slot is not None)
        assert slots == list(range(len(slots))), family
    assert all(s.slot is None for s in METRICS.values() if s.family not in (Family.CUTOFF, Family.WHOLE))
    assert set(kernels.Slots._fields[:-1]) == set(FUSED_METRICS)
    assert all((METRICS[name].slot is None) != (METRICS[name].kernel is None) for name in RANKING_METRICS)
    assert all(METRICS[name].depth is not None for name in RANKING_METRICS)
    for n_cut in (1, 3):
        columns = sorted(kernel_column(name, c, n_cut) for name in FUSED_METRICS
                         for c in range(n_cut if METRICS[name].cutoff else 1))
        assert columns == list(range(kernel_width(n_cut)))


def test_the_kernel_writes_where_the_slots_say():
    """Slots permuted: every metric's column moves with its slot, values unchanged."""
    cutoffs = [1, 3]
    values = ranking_values(RANKINGS, TARGETS, cutoffs)
    order = np.roll(np.arange(KERNEL_CUTOFF_SLOTS), 3)  # every slot moves
    slots = kernels.SLOTS._replace(**{name: int(order[kernels.SLOTS._asdict()[name]])
                                      for name in FUSED_METRICS if METRICS[name].cutoff})
    options = kernels.Options(np.asarray(cutoffs, dtype=np.int64), 0, False, 5.0, 0.0, False, True, True)
    width = kernel_width(2)
    moved, _ = kernels.ranking_kernel(*kernel_arrays(RANKINGS, TARGETS, scan_scores(RANKINGS)[0]), options, slots, width,
                                      np.arange(width), TARGETS.n_items, chunk_bounds(3))
    moved = moved.T
    for name in FUSED_METRICS:
        for c in range(2 if METRICS[name].cutoff else 1):
            old = kernel_column(name, c, 2)
            new = getattr(slots, name) * 2 + c if METRICS[name].cutoff else old
            np.testing.assert_array_equal(moved[:, new], values[:, old])


def test_measure_rows_hold_their_metric_and_cutoff_column():
    """measure() keeps the asked metrics' kernel columns (metric-major, in the asked order): every
    (metric, k) row holds the value of that metric's column at that cutoff."""
    cutoffs = [1, 3]
    values = ranking_values(RANKINGS, TARGETS, cutoffs)
    asked = ["auc", "hit", "ndcg", "precision", "half_life", "rr"]
    rows = measure(RANKINGS, TARGETS, metrics=asked, k=cutoffs)
    assert list(dict.fromkeys(rows.get_column("metric"))) == asked
    for (name, k), part in rows.group_by("metric", "k", maintain_order=True):
        c = cutoffs.index(k) if k is not None else 0
        np.testing.assert_array_equal(part.get_column("value").to_numpy(),
                                      values[part.get_column("unit").to_numpy(), kernel_column(name, c, 2)])


def _all_rows() -> pl.DataFrame:
    ranking = measure(RANKINGS, TARGETS, metrics=list(RANKING_METRICS) + ["n_relevant"], k=[1, 3])
    beyond = beyond_accuracy(RANKINGS, k=[1, 3], n_items=8, train=TRAIN, genres=GENRES, targets=TARGETS)
    predictions = pl.DataFrame({"user": [0, 0, 0, 1, 1], "item": [0, 1, 2, 0, 3],
                                "rating": [4.0, 2.0, 5.0, 3.0, 3.0], "prediction": [3.5, 2.5, 4.0, 3.0, 2.0]})
    return pl.concat([ranking, beyond, rating_metrics(predictions)], how="vertical_relaxed")


def test_every_metric_is_computed_as_its_spec_says():
    rows = _all_rows()
    runner_rows = {"sampled_rank", "full_candidates"}  # the runner's 1R+NN rows, not measure()'s
    assert set(rows.get_column("metric")) == set(METRICS) - runner_rows
    for name, spec in METRICS.items():
        if name in runner_rows:
            continue
        part = rows.filter(pl.col("metric") == name)
        assert part.get_column("k").is_null().all() != spec.cutoff, name
        per_user = part.filter(pl.col("user").is_not_null())
        assert per_user.is_empty() == (spec.summary is Summary.RUN_VALUE), name
        if spec.undefined == "never":
            assert not part.get_column("value").is_nan().any(), name


def test_undefined_rules_show_up_where_they_say():
    """Unit 1 has no relevant item, unit 2 an empty ranking."""
    rows = measure(RANKINGS, TARGETS, metrics=list(RANKING_METRICS), k=[3])
    nan_units = {m: set(rows.filter((pl.col("metric") == m) & pl.col("value").is_nan())["unit"])
                 for m in RANKING_METRICS}
    for name in ("recall", "f1", "ap", "ndcg", "rr", "auc"):
        assert 1 in nan_units[name] and 0 not in nan_units[name], name
    for name in ("precision", "hit"):
        assert nan_units[name] == set(), name


def test_lists_derived_from_the_registry():
    assert ALL_METRICS == RANKING_METRICS + RATING_METRICS + BEYOND_METRICS
    assert "n_relevant" not in ALL_METRICS
    assert len(ALL_METRICS) >= 15
    assert {n for n, s in METRICS.items() if s.sampled_correction} == set(SAMPLED_METRICS)
    lower = {"mae", "rmse", "ndpm", "gini", "calibration", "arp", "pop_rsp", "pop_reo"}
    assert {n for n, s in METRICS.items() if s.direction is Direction.LOWER} == lower
    assert all(s.convention and s.undefined and s.symbol for s in METRICS.values())


@pytest.mark.parametrize(("name", "label"), [
    ("ndcg@10", "nDCG@10"), ("ap@5", "MAP@5"), ("rr@1", "MRR@1"), ("precision@10", "P@10"),
    ("hit@20", "HR@20"), ("auc", "AUC"), ("rmse", "RMSE"), ("catalog_coverage@10", "Cov@10"),
    ("mystery@3", "mystery@3"),
])
def test_display_labels(name, label):
    assert display_label(name) == label


def test_tables_take_labels_and_direction_from_the_registry():
    cells = {"a": {"ndcg@10": Cell(0.3, None, None, True, False), "rmse": Cell(0.9, None, None, True, False)}}
    blocks = [Block("AI+AR+AN", ["ndcg@10", "rmse"], cells)]
    assert "| system | nDCG@10 | RMSE |" in to_markdown(blocks)
    assert "System & nDCG@10 & RMSE" in to_latex(blocks)
    assert lower_is_better("rmse") and not lower_is_better("ndcg") and not lower_is_better("unknown")


def test_spec_label_and_record():
    spec = METRICS["ap"]
    assert spec.label(10) == "MAP@10" and METRICS["auc"].label(10) == "AUC"
    record = spec.as_dict()
    assert record["family"] == "ranking@k" and record["direction"] == "higher" and record["slot"] == 3


@pytest.mark.parametrize(("label", "name", "k", "display"), [
    ("ndcg@10", "ndcg", 10, "nDCG@10"), ("auc", "auc", None, "AUC"), ("f1_pooled@5", "f1_pooled", 5, "F1pool@5"),
    ("f1_pooled", "f1_pooled", None, "F1pool"), ("mystery@3", "mystery", 3, "mystery@3"),
])
def test_metric_key_parses_labels_and_prints_them(label, name, k, display):
    key = MetricKey.parse(label)
    assert key == MetricKey(name, k) and key.label == label and key.display == display
    assert display_label(label) == display


@pytest.mark.parametrize("label", ["ndcg@", "ndcg@0", "ndcg@-1", "ndcg@1.5", "ndcg@k", "@10", "", None])
def test_metric_key_refuses_malformed_labels(label):
    with pytest.raises(ConfigError, match="tuning.metric: expected 'metric@k' with a positive integer k"):
        MetricKey.parse(label, where="tuning.metric")


def test_metric_key_names_an_unknown_metric_with_the_closest_one():
    with pytest.raises(ConfigError, match="unknown metric 'ndgc'.*did you mean 'ndcg'"):
        MetricKey.parse("ndgc@10", known=ALL_METRICS)
    assert MetricKey.parse("rmse", known=ALL_METRICS) == MetricKey("rmse")


def test_metric_key_selects_and_labels_rows():
    rows = pl.DataFrame({"metric": ["ndcg", "ndcg", "auc"], "k": [5, 10, None]}, schema_overrides={"k": pl.Int32})
    assert rows.select(MetricKey.label_column()).to_series().to_list() == ["ndcg@5", "ndcg@10", "auc"]
    assert rows.filter(MetricKey("ndcg", 10).rows()).rows() == [("ndcg", 10)]
    assert rows.filter(MetricKey("auc").rows()).rows() == [("auc", None)]
