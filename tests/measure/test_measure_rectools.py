"""Agreement with RecTools where it computes the same definition, per user, to 1e-12:
``AvgRecPopularity`` is our ARP (phi(i) = the item's previous interactions, which are users when each
pair is held once; the mean over the listed top k) and ``MeanInvUserFreq`` our novelty (-log2 of the
share of train users with the item, averaged over the top k). RecTools' ``Serendipity`` is another
definition (rank-probability gaps, divided by k; docs/CONVENTIONS.md#discovery) and its
``IntraListDiversity`` takes a distance of its own: neither is compared. Skips cleanly without
rectools (``uv run --with rectools pytest tests/measure/test_measure_rectools.py``)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from measure_build import rankings_of, targets_of

from recsys_eval.measure import measure

rectools = pytest.importorskip("rectools")


def test_arp_and_novelty_equal_rectools():
    import pandas as pd
    from rectools import Columns
    from rectools.metrics import AvgRecPopularity, MeanInvUserFreq

    rng = np.random.default_rng(11)
    n_users, n_items = 50, 60
    train = pl.DataFrame({"user": rng.integers(0, n_users, 900), "item": rng.integers(0, n_items, 900)}).unique()
    held = np.unique(train["item"].to_numpy())  # RecTools' popularity knows only items with interactions
    lists = [[int(i) for i in rng.choice(held, size=int(rng.integers(1, 15)), replace=False)] for _ in range(n_users)]
    targets = targets_of([{int(held[0]): 1.0}] * n_users, n_items)
    ours = measure(rankings_of(lists), targets, metrics=["arp", "novelty"], k=[1, 5, 10], train=train)
    reco = pd.DataFrame({Columns.User: [u for u, x in enumerate(lists) for _ in x],
                         Columns.Item: [i for x in lists for i in x],
                         Columns.Rank: [r + 1 for x in lists for r in range(len(x))]})
    prev = pd.DataFrame({Columns.User: train["user"].to_numpy(), Columns.Item: train["item"].to_numpy()})
    for k in (1, 5, 10):
        for name, theirs in (("arp", AvgRecPopularity(k=k)), ("novelty", MeanInvUserFreq(k=k))):
            expected = theirs.calc_per_user(reco, prev).sort_index().to_numpy()
            got = ours.filter((pl.col("metric") == name) & (pl.col("k") == k)).sort("unit")["value"].to_numpy()
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0, err_msg=f"{name}@{k}")
