"""A slow, obvious pure-Python reference of the beyond-accuracy families of issue 30, written from
the papers' formulas (docs/CONVENTIONS.md#calibration, #popularity-bias, #discovery).

It shares no code with recsys_eval: one unit at a time, sets, dicts and sorted lists. A unit is
``(user, ranked list, relevant set)``; ``train`` is a list of (user, item) pairs (repeats allowed:
popularity counts users).
"""

from __future__ import annotations

import math

NAN = float("nan")


def holders(train, n_items):
    """phi(i): the number of distinct train users with item i."""
    users = [set() for _ in range(n_items)]
    for u, i in train:
        users[i].add(u)
    return [len(s) for s in users]


def n_train_users(train):
    return len({u for u, _ in train})


def profile(train, user):
    return {i for u, i in train if u == user}


def most_popular_order(phi):
    """Every item, the most popular first, ties by item index."""
    return sorted(range(len(phi)), key=lambda i: (-phi[i], i))


def head_items(phi, share):
    """The ceil(share x |C|) most popular of the catalogue C (items with phi > 0)."""
    catalogue = sum(1 for p in phi if p > 0)
    return set(most_popular_order(phi)[: math.ceil(share * catalogue)])


def _mean(xs):
    return sum(xs) / len(xs) if xs else NAN


def arp(top, phi):
    return _mean([phi[i] for i in top])


def aplt(top, head):
    return _mean([1.0 if i not in head else 0.0 for i in top])


def aclt(top, head):
    return float(sum(1 for i in top if i not in head))


def surprisal(top, phi, n_users):
    return _mean([-math.log2(max(phi[i], 1) / n_users) / math.log2(n_users) for i in top])


def _floor(p):
    smallest = min(x for x in p if x > 0)
    return [x if x > 0 else smallest for x in p]


def _expected(top, relevant, gain):
    """Vargas & Castells' C sum disc(r) rel(r) gain(i_r), C = 1 / sum disc(r) over the list."""
    if not relevant:
        return NAN
    disc = [1.0 / math.log2(r + 1) for r in range(1, len(top) + 1)]
    if not top:
        return 0.0
    return sum(d * (1.0 if i in relevant else 0.0) * gain[i] for d, i in zip(disc, top)) / sum(disc)


def epc(top, relevant, phi, n_users):
    return _expected(top, relevant, [1.0 - p / n_users for p in phi])


def efd(top, relevant, phi):
    total = sum(phi)
    return _expected(top, relevant, [-math.log2(p) for p in _floor([x / total for x in phi])])


def most_popular_top(phi, seen, k):
    """MostPop's top k for a user: the most popular items the user has not in train."""
    return set([i for i in most_popular_order(phi) if i not in seen][:k])


def unexpectedness(top, phi, seen, k):
    expected = most_popular_top(phi, seen, k)
    return _mean([1.0 if i not in expected else 0.0 for i in top])


def serendipity(top, relevant, phi, seen, k):
    expected = most_popular_top(phi, seen, k)
    return _mean([1.0 if i not in expected and i in relevant else 0.0 for i in top])


def genre_distribution(items, genres):
    """sum over items with genres of p(g|i) = 1/|G_i|, / the number of those items (None: none)."""
    with_genres = [i for i in items if genres.get(i)]
    if not with_genres:
        return None
    dist = {}
    for i in with_genres:
        for g in genres[i]:
            dist[g] = dist.get(g, 0.0) + 1.0 / len(genres[i])
    return {g: v / len(with_genres) for g, v in dist.items()}


def calibration(top, seen, genres, alpha):
    """Steck's C_KL(p, q~) = sum_g p(g|u) log(p(g|u) / ((1 - alpha) q(g|u) + alpha p(g|u)))."""
    p = genre_distribution(sorted(seen), genres)
    q = genre_distribution(top, genres)
    if p is None or q is None:
        return NAN
    return sum(pg * math.log(pg / ((1 - alpha) * q.get(g, 0.0) + alpha * pg)) for g, pg in p.items() if pg > 0)


def parity(units, k, head, n_items, train, *, equal_opportunity):
    """Zhu et al.'s std / mean over the head and tail groups of P(R@k | g) (statistical parity) or
    P(R@k | g, y = 1) (equal opportunity), numpy's population std."""
    groups = [set(head), set(range(n_items)) - set(head)]
    probabilities = []
    for group in groups:
        hits = pool = 0
        for user, ranked, relevant in units:
            top = ranked[:k]
            if equal_opportunity:
                hits += sum(1 for i in top if i in group and i in relevant)
                pool += sum(1 for i in relevant if i in group)
            else:
                hits += sum(1 for i in top if i in group)
                pool += len(group - profile(train, user))
        if pool == 0:
            return NAN
        probabilities.append(hits / pool)
    mean = sum(probabilities) / 2
    if mean == 0:
        return NAN
    std = math.sqrt(sum((x - mean) ** 2 for x in probabilities) / 2)
    return std / mean


def per_unit(name, unit, k, *, train, n_items, genres=None, alpha=0.01, share=0.2):
    """Metric ``name`` of one unit at cutoff k."""
    user, ranked, relevant = unit
    top = ranked[:k]
    phi = holders(train, n_items)
    seen = profile(train, user)
    return {
        "arp": lambda: arp(top, phi),
        "aplt": lambda: aplt(top, head_items(phi, share)),
        "aclt": lambda: aclt(top, head_items(phi, share)),
        "surprisal": lambda: surprisal(top, phi, n_train_users(train)),
        "epc": lambda: epc(top, relevant, phi, n_train_users(train)),
        "efd": lambda: efd(top, relevant, phi),
        "unexpectedness": lambda: unexpectedness(top, phi, seen, k),
        "serendipity": lambda: serendipity(top, relevant, phi, seen, k),
        "calibration": lambda: calibration(top, seen, genres, alpha),
    }[name]()
