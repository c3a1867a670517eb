"""Agreement with ranx and pytrec_eval (trec_eval) on P, R, nDCG, AP, RR and hit, per user, to 1e-9;
with ranx and ir_measures (trec_eval's Rprec) on R-precision, and with ir_measures' RBP (the C/W/L
provider, rel=1: binary relevance, no cutoff) on RBP at a cutoff beyond every list, to 1e-12.

They share our conventions where compared: precision divides by k, recall by R, nDCG takes the
graded gain linearly (trec_eval ``ndcg_cut``, ranx ``ndcg``), AP divides by R (``map_cut``, ranx
``map``), RR is 1/rank of the first relevant item. Where they differ we compare only what they
define alike:
- a user without relevant items: both report 0 for recall, AP, nDCG, RR, where we report NaN
  (undefined, left to the averaging policy), so such users are left out of the comparison;
- tied scores: trec_eval breaks ties by document id as a string, descending; ranx by its own
  sort; we by item index ascending. The scores here are distinct;
- trec_eval's ``recip_rank`` has no cutoff: compared with our rr@k for k beyond the list length;
- R-precision of a user without relevant items: ranx and trec_eval (through ir_measures) give 0,
  we NaN (undefined); RBP is 0 there for everyone. ir_measures' RBP through the C/W/L provider needs
  ``rel`` (rel=1 counts every graded item as relevant, as we do) and has no cutoff.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from measure_build import rankings_of, targets_of

from recsys_eval.measure import measure

pytrec_eval = pytest.importorskip("pytrec_eval")
ranx = pytest.importorskip("ranx")

N_USERS, N_ITEMS, LIST = 60, 80, 25
CUTS = [1, 5, 10, 20]


def _data(seed: int = 7):
    rng = np.random.default_rng(seed)
    targets, lists, scores = [], [], []
    for u in range(N_USERS):
        n_rel = int(rng.integers(0, 8)) if u % 10 else 0  # every tenth user has no relevant item
        relevant = rng.choice(N_ITEMS, size=n_rel, replace=False)
        targets.append({int(i): float(rng.integers(1, 4)) for i in relevant})
        ranked = rng.choice(N_ITEMS, size=int(rng.integers(0, LIST + 1)), replace=False)
        lists.append([int(i) for i in ranked])
        scores.append(sorted(rng.random(len(ranked)).tolist(), reverse=True))  # distinct
    return targets, lists, scores


@pytest.fixture(scope="module")
def ours():
    targets, lists, scores = _data()
    frame = measure(
        rankings_of(lists, scores),
        targets_of(targets, N_ITEMS, n_candidates=[N_ITEMS] * N_USERS),
        metrics=["precision", "recall", "ndcg", "ap", "rr", "hit"], k=CUTS + [LIST + 5],
    )
    table = {(r["metric"], r["k"], r["user"]): r["value"] for r in frame.iter_rows(named=True)}
    return targets, lists, scores, table


def _dicts(targets, lists, scores):
    # every user gets a qrels entry (a user with no relevant item: one item judged non-relevant)
    qrels = {str(u): ({str(i): int(g) for i, g in t.items()} or {str(N_ITEMS + 1): 0})
             for u, t in enumerate(targets)}
    run = {str(u): {str(i): s for i, s in zip(items, sc)} for u, (items, sc) in enumerate(zip(lists, scores))}
    return qrels, run


def _defined_users(targets, lists):
    return [u for u, t in enumerate(targets) if t and lists[u]]


def test_pytrec_eval_agrees(ours):
    targets, lists, scores, table = ours
    qrels, run = _dicts(targets, lists, scores)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"P_1,5,10,20", "recall_1,5,10,20", "ndcg_cut_1,5,10,20", "map_cut_1,5,10,20",
                "recip_rank", "success_1,5,10"}
    )
    result = evaluator.evaluate({q: d for q, d in run.items() if d})
    compared = 0
    for u in _defined_users(targets, lists):
        r = result[str(u)]
        for k in CUTS:
            for ours_name, theirs in (("precision", "P"), ("recall", "recall"),
                                      ("ndcg", "ndcg_cut"), ("ap", "map_cut")):
                assert table[(ours_name, k, u)] == pytest.approx(r[f"{theirs}_{k}"], abs=1e-9), (ours_name, k, u)
                compared += 1
            if k in (1, 5, 10):
                assert table[("hit", k, u)] == pytest.approx(r[f"success_{k}"], abs=1e-9)
        assert table[("rr", LIST + 5, u)] == pytest.approx(r["recip_rank"], abs=1e-9)
    assert compared > 500


def test_ranx_agrees(ours):
    targets, lists, scores, table = ours
    qrels, run = _dicts(targets, lists, scores)
    users = _defined_users(targets, lists)
    names = [f"{m}@{k}" for m in ("precision", "recall", "ndcg", "map", "mrr", "hit_rate") for k in CUTS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_run = ranx.Run({str(u): run[str(u)] for u in users})
        ranx.evaluate(ranx.Qrels({str(u): qrels[str(u)] for u in users}), ranx_run, names)
    mapping = {"precision": "precision", "recall": "recall", "ndcg": "ndcg", "map": "ap",
               "mrr": "rr", "hit_rate": "hit"}
    for name in names:
        metric, k = name.split("@")
        for u in users:
            theirs = ranx_run.scores[name][str(u)]
            assert table[(mapping[metric], int(k), u)] == pytest.approx(theirs, abs=1e-9), (name, u)


@pytest.fixture(scope="module")
def added():
    """R-precision, and RBP at a cutoff beyond every list (the peers' RBP has none), p = 0.8 and 0.5."""
    targets, lists, scores = _data(11)
    rankings = rankings_of(lists, scores)
    listed = targets_of(targets, N_ITEMS, n_candidates=[N_ITEMS] * N_USERS)
    table = {}
    for p in (0.8, 0.5):
        frame = measure(rankings, listed, metrics=["rprecision", "rbp"], k=[LIST + 5], rbp_persistence=p)
        table.update({(r["metric"], p, r["user"]): r["value"] for r in frame.iter_rows(named=True)})
    return targets, lists, scores, table


def test_ranx_and_ir_measures_agree_on_r_precision(added):
    ir_measures = pytest.importorskip("ir_measures")
    targets, lists, scores, table = added
    qrels, run = _dicts(targets, lists, scores)
    users = _defined_users(targets, lists)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_run = ranx.Run({str(u): run[str(u)] for u in users})
        ranx.evaluate(ranx.Qrels({str(u): qrels[str(u)] for u in users}), ranx_run, ["r-precision"])
    trec = {m.query_id: m.value for m in ir_measures.iter_calc(
        [ir_measures.Rprec], qrels, {u: d for u, d in run.items() if d})}
    for u in users:
        assert table[("rprecision", 0.8, u)] == pytest.approx(ranx_run.scores["r-precision"][str(u)], abs=1e-12)
        assert table[("rprecision", 0.8, u)] == pytest.approx(trec[str(u)], abs=1e-12)
    # Without a relevant item ours is undefined; a user with relevant items and an empty list scores 0.
    assert all(math.isnan(table[("rprecision", 0.8, u)]) for u, t in enumerate(targets) if not t)
    assert all(table[("rprecision", 0.8, u)] == 0 for u, t in enumerate(targets) if t and not lists[u])


@pytest.mark.parametrize("p", [0.8, 0.5])
def test_ir_measures_agrees_on_rbp(added, p):
    """ir_measures' RBP (the C/W/L provider) with rel=1: binary relevance, as ours, uncut."""
    ir_measures = pytest.importorskip("ir_measures")
    pytest.importorskip("cwl")
    targets, lists, scores, table = added
    qrels, run = _dicts(targets, lists, scores)
    theirs = {m.query_id: float(m.value) for m in ir_measures.iter_calc(
        [ir_measures.RBP(p=p, rel=1)], qrels, {u: d for u, d in run.items() if d})}
    compared = 0
    for u in range(N_USERS):
        if lists[u]:
            assert table[("rbp", p, u)] == pytest.approx(theirs[str(u)], abs=1e-12), u
            compared += bool(theirs[str(u)])
        else:
            assert table[("rbp", p, u)] == 0
    assert compared > 20
