"""long_frame's runs of metric names and cutoffs (numpy runs gathered whole) equal the per-unit table
built one row at a time."""

from __future__ import annotations

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from recsys_eval.core.results import PER_UNIT_SCHEMA
from recsys_eval.measure.frames import long_frame


def test_long_frame_equals_the_rows_built_one_by_one():
    rng = np.random.default_rng(5)
    metrics, ks = ["auc", "ndcg", "ndcg", "ild", "auc"], [None, 5, 10, 5, None]
    unit_user = np.array([3, 1, 3, 0], dtype=np.int32)
    values = rng.random((len(unit_user), len(metrics)))
    labels = {"system": "s", "protocol": "p", "fold": "0"}
    got = long_frame(values, metrics, ks, unit_user, None, labels)
    rows = [{**labels, "user": int(unit_user[u]), "unit": u, "metric": m, "k": k, "value": values[u, j]}
            for j, (m, k) in enumerate(zip(metrics, ks, strict=True)) for u in range(len(unit_user))]
    assert_frame_equal(got, pl.DataFrame(rows, schema=PER_UNIT_SCHEMA))


def test_long_frame_of_cutoff_metrics_only_and_of_no_unit():
    labels = {"system": "s", "protocol": "p", "fold": "0"}
    got = long_frame(np.ones((2, 2)), ["hit", "hit"], [1, 3], np.array([0, 1]), None, labels)
    assert got.get_column("k").to_list() == [1, 1, 3, 3] and got.schema == pl.Schema(PER_UNIT_SCHEMA)
    assert long_frame(np.ones((0, 2)), ["hit", "auc"], [1, None], np.zeros(0, dtype=np.int32), None,
                      labels).height == 0


def test_long_frame_names_longer_than_a_view_holds_and_string_user_ids():
    """Names past the 12 bytes an Arrow view holds inline (kept in its data buffer) and raw user ids
    of either type come out as built one row at a time."""
    rng = np.random.default_rng(6)
    metrics, ks = ["unexpectedness", "calibration", "unexpectedness", "nDCG±é_long_name"], [1, 1, 10, None]
    unit_user = np.array([2, 0, 2], dtype=np.int32)
    values = rng.random((len(unit_user), len(metrics)))
    labels = {"system": "s", "protocol": "p", "fold": "0"}
    for ids in (["a", "b", "c"], np.array([10, 20, 30])):
        got = long_frame(values, metrics, ks, unit_user, ids, labels)
        rows = [{**labels, "user": ids[unit_user[u]].item() if isinstance(ids, np.ndarray) else ids[unit_user[u]],
                 "unit": u, "metric": m, "k": k, "value": values[u, j]}
                for j, (m, k) in enumerate(zip(metrics, ks, strict=True)) for u in range(len(unit_user))]
        schema = PER_UNIT_SCHEMA | {"user": pl.String if isinstance(ids, list) else pl.Int64}
        assert_frame_equal(got, pl.DataFrame(rows, schema=schema))
        assert got.filter(pl.col("metric") == "unexpectedness").height == 2 * len(unit_user)
