"""The ROC and PR curves of 1R units from their places alone equal those drawn from the ranked
lists (ties grouped into one segment; PR with ties broken by item index)."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_eval.data.synthetic import synthetic_interactions
from recsys_eval.measure.curves import average_pr, average_pr_one_relevant, average_roc, average_roc_one_relevant
from recsys_eval.recommend import make_recommender, rank_one_relevant, rank_targets
from recsys_eval.split import make_split
from recsys_eval.targets import build_targets


@pytest.mark.parametrize("model_name", ["popular", "random", "item_knn"])
@pytest.mark.parametrize("protocol", ["AI+1R+NN20", "UT+1R+NN3", "TI+1R+NN50"])
def test_closed_form_curves_equal_the_listed_ones(model_name, protocol):
    data = synthetic_interactions(120, 60, 3000, seed=4)
    split = make_split(data, "holdout", fraction=0.3, per_user=True, seed=2)
    targets = build_targets(split, protocol, threshold=3, seed=9)
    model = make_recommender(model_name, seed=1).fit(split.train)
    listed = rank_targets(model, targets)  # every target ranked: the whole curve is known
    ranks = rank_one_relevant(model, split.train, targets)
    roc, closed_roc = average_roc(listed, targets, 201), average_roc_one_relevant(ranks, 201)
    assert closed_roc["units"][0] == roc["units"][0] > 0
    np.testing.assert_allclose(closed_roc["tpr"].to_numpy(), roc["tpr"].to_numpy(), rtol=0, atol=1e-12)
    pr, closed_pr = average_pr(listed, targets, 11), average_pr_one_relevant(ranks, 11)
    assert closed_pr["units"][0] == pr["units"][0]
    np.testing.assert_allclose(closed_pr["precision"].to_numpy(), pr["precision"].to_numpy(), rtol=0, atol=1e-12)
    if model_name == "popular":  # popularity ties many items: the tie segments are exercised
        assert (ranks.tied > 0).any()
