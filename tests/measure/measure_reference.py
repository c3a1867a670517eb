"""A slow, obvious pure-Python reference of every ranking formula of DESIGN.md sections 5 and 11
(R-precision, RBP).

It shares no code with the kernels: one unit at a time, plain lists, the definitions as written.
``ties="average"`` is computed by brute force: the mean over every ordering of each group of tied
items. AUC enumerates every (relevant, non-relevant) pair of the target set.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

CUTOFF = ("precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "half_life")
NAN = float("nan")


def _gain(g: float, mode: str) -> float:
    if g <= 0:
        return 0.0
    return {"graded": g, "binary": 1.0, "exp": 2.0**g - 1.0}[mode]


def metrics_of_order(order, targets, k, *, gain="graded", ap_denominator="relevant",
                     half_life=5.0, neutral=0.0):
    """Every cutoff metric at k of one fixed ordering ``order`` (a list of items)."""
    rel_gains = [g for g in targets.values() if g > 0]
    n_rel = len(rel_gains)
    top = order[:k]
    gains = [targets.get(item, 0.0) for item in top]
    hits = sum(1 for g in gains if g > 0)
    out = {"precision": hits / k}
    if n_rel == 0:
        out.update(recall=NAN, f1=NAN, ap=NAN, ndcg=NAN, rr=NAN, hit=0.0)
    else:
        recall = hits / n_rel
        precision = hits / k
        out["recall"] = recall
        out["f1"] = 0.0 if hits == 0 else 2 * precision * recall / (precision + recall)
        ap = 0.0
        seen = 0
        for i, g in enumerate(gains, start=1):
            if g > 0:
                seen += 1
                ap += seen / i
        out["ap"] = ap / (min(n_rel, k) if ap_denominator == "min_rk" else n_rel)
        dcg = sum(_gain(g, gain) / math.log2(i + 1) for i, g in enumerate(gains, start=1))
        ideal = sorted((_gain(g, gain) for g in rel_gains), reverse=True)[:k]
        idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
        out["ndcg"] = dcg / idcg
        first = next((i for i, g in enumerate(gains, start=1) if g > 0), None)
        out["rr"] = 0.0 if first is None else 1.0 / first
        out["hit"] = 1.0 if hits > 0 else 0.0
    utility = sum(max(g - neutral, 0.0) / 2 ** ((i - 1) / (half_life - 1))
                  for i, g in enumerate(gains, start=1))
    best = sorted((max(g - neutral, 0.0) for g in targets.values()), reverse=True)[:k]
    best_utility = sum(g / 2 ** ((i - 1) / (half_life - 1)) for i, g in enumerate(best, start=1))
    out["half_life"] = utility / best_utility if best_utility > 0 else NAN
    return out


def tie_groups(items, scores):
    """Items grouped by equal score, groups best first; within a group by item index ascending."""
    pairs = sorted(zip(items, scores), key=lambda p: (-p[1], p[0]))
    groups = []
    for score, group in itertools.groupby(pairs, key=lambda p: p[1]):
        groups.append([item for item, _ in group])
    return groups


def orderings(items, scores, ties="first"):
    """The orderings a ranking stands for, equally likely: the deterministic one (``ties="first"``,
    or no scores), or every ordering of its groups of tied items (``ties="average"``)."""
    groups = tie_groups(items, scores) if scores is not None else [[i] for i in items]
    if ties == "first" or scores is None:
        return [[i for g in groups for i in g]]
    return [[i for g in perm for i in g] for perm in itertools.product(*(itertools.permutations(g) for g in groups))]


def unit_metrics(items, scores, targets, k, *, ties="first", **options):
    """Cutoff metrics at k of a unit: the deterministic order, or the mean over tie orderings."""
    values = [metrics_of_order(order, targets, k, **options) for order in orderings(items, scores, ties)]
    return {name: sum(v[name] for v in values) / len(values) for name in CUTOFF}


def expected(items, scores, ties, value_of_order):
    """The mean of ``value_of_order`` over the orderings of a ranking (:func:`orderings`)."""
    orders = orderings(items, scores, ties)
    return sum(value_of_order(order) for order in orders) / len(orders)


def rprecision_of_order(order, targets):
    """R-precision (Buckley & Voorhees 2000; TREC's R-Prec): the precision after R items, R the
    number of relevant items; undefined (NaN) without a relevant item."""
    n_rel = sum(1 for g in targets.values() if g > 0)
    if n_rel == 0:
        return NAN
    return sum(1 for item in order[:n_rel] if targets.get(item, 0.0) > 0) / n_rel


def rbp_of_order(order, targets, k, p):
    """Rank-biased precision (Moffat & Zobel 2008): (1 - p) sum_{i=1..k} r_i p^(i-1), r_i = 1 for a
    relevant item at rank i, else 0."""
    return (1 - p) * sum(p ** (i - 1) for i, item in enumerate(order[:k], start=1) if targets.get(item, 0.0) > 0)


def unit_auc(items, scores, targets, n_target):
    """Share of (relevant, non-relevant) target pairs ordered right, ties one half; unranked
    target items (and, under full ranking, unlisted candidates) score below every ranked one."""
    if scores is None:
        scores = [-float(i) for i in range(len(items))]
    score_of = dict(zip(items, scores))
    listed = set(targets)
    relevant = [i for i, g in targets.items() if g > 0]
    non = [i for i, g in targets.items() if g <= 0]
    if n_target is not None:  # full ranking: ranked items outside the list are candidates too
        non += [i for i in items if i not in listed]
        unlisted = n_target - len(listed) - len([i for i in items if i not in listed])
        non += [("unlisted", j) for j in range(unlisted)]
    if not relevant or not non:
        return NAN
    low = -math.inf
    correct = 0.0
    for r in relevant:
        for n in non:
            sr, sn = score_of.get(r, low), score_of.get(n, low)
            correct += 1.0 if sr > sn else 0.5 if sr == sn else 0.0
    return correct / (len(relevant) * len(non))


def close(a: float, b: float, tol: float = 1e-9) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def as_array(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)
