import numpy as np
import pytest
from scipy import stats

from recsys_eval.compare import adjust_pvalues
from recsys_eval.errors import ConfigError

P = np.array([0.01, 0.04, 0.03, 0.005])


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert adjust_pvalues(P, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_bonferroni_and_bh_by_hand():
    assert adjust_pvalues(P, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    # BH: p_(i) m / i = 0.02, 0.02, 0.04, 0.04, then running min from the largest
    assert adjust_pvalues(P, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust_pvalues(P, "none") == pytest.approx(P)


def test_nan_stays_out_of_the_family_and_results_stay_in_range(rng):
    p = np.array([0.2, np.nan, 0.01])
    assert np.isnan(adjust_pvalues(p, "holm")[1])
    assert adjust_pvalues(p, "holm")[[0, 2]] == pytest.approx([0.2, 0.02])
    many = rng.random(50)
    for method in ("holm", "bonferroni", "bh"):
        adjusted = adjust_pvalues(many, method)
        assert np.all((adjusted >= many) & (adjusted <= 1))
    assert adjust_pvalues(many, "bh") == pytest.approx(stats.false_discovery_control(many))
    assert np.all(adjust_pvalues(many, "holm") <= adjust_pvalues(many, "bonferroni"))


def test_unknown_correction():
    with pytest.raises(ConfigError, match="did you mean 'bonferroni'"):
        adjust_pvalues(P, "bonferoni")
