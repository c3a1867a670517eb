"""Estimating full-ranking metrics from sampled ranks (Krichene & Rendle, KDD 2020; CACM 2022).

Under 1R+NN(n) a unit's relevant item is ranked among n non-relevant items sampled from the N - 1
non-relevant candidates of its user: its sampled rank r in 1..n+1. Among all N candidates its full
rank R is unknown; given R, r - 1 counts the sampled items ranked above it:
Hypergeometric(N - 1, R - 1, n) as the NN protocol samples (without replacement, the default
model), or Binomial(n, (R - 1)/(N - 1)), the paper's model (with replacement). With
A[R, r] = P(r | R) and f(R) the metric of a unit whose relevant item is at full rank R:

- ``sampled``: the raw sampled metric, f evaluated on the n + 1 sampled candidates (biased: top-heavy
  metrics are overestimated, and systems can swap places even in expectation);
- ``rescale``: f at the rescaled rank 1 + (r - 1)(N - 1)/n, the full rank whose expected sampled
  rank is r;
- ``bias_variance``: the paper's corrected metric, the per-sampled-rank values g minimising
  sum_R [(E[g(r) | R] - f(R))^2 + gamma Var[g(r) | R]] over R = 1..N with equal weight, i.e.
  ((1 - gamma) A'A + gamma diag(A'1)) g = A'f. gamma = 1 gives the posterior mean of f(R) given r
  under a uniform prior on R (values within the metric's bounds); smaller gamma less bias, more
  variance, and values of either sign. See :data:`DEFAULT_GAMMA` for the default.

The paper's minimal-bias estimator (gamma = 0) is not offered: A'A is the Gram matrix of the
n + 1 degree-n rank polynomials P(r | R), whose condition number passes 1e16 at n = 100, so its
solution holds values of 1e5 to 1e10 of alternating sign. Its squared bias summed over R is only
about half that of gamma = 0.01 (hit@10: rms 0.016 against 0.027, N = 3000) while the standard
deviation of one unit's value is 1e5 or more: a mean over millions of units is still meaningless.
A small gamma (1e-3) comes as close to minimal bias as a usable estimator can.

Each unit may have its own N (under AI: the items outside its user's train), so a table of n + 1
values is solved per distinct N and cached. The sums over R = 1..N are exact without visiting all
N ranks: P(r | R) is a polynomial of degree n in R under both models, so the entries of A'A (degree
2n) and A'1 are summed exactly by the (n + 1)-node Gauss rule of the uniform measure on the
integers 1..N (Golub-Welsch on the discrete Chebyshev recurrence). f is the metric's closed form
(:attr:`~recsys_eval.measure.metrics.MetricSpec.at_rank`). A'f sums the ranks 1..k one by one where
f vanishes beyond the deepest rank the metric reads (the cutoff k; 1 for R-precision), and
otherwise (AUC; 1, 1/R or 1/log2(R + 1) without a cutoff) sums the head 1..max(4(n+1), N/64) one by
one and the smooth tail with a Gauss rule of n + 101 nodes, exact where f is a polynomial of degree
1 or less. Tests compare every case with the full sums (agreement to 1e-9). One N costs milliseconds instead of O(N n^2): measured by
benchmarks/bench_sampled.py on ML-25M-sized inputs (thousands of distinct N).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property, lru_cache

import numpy as np
from scipy import linalg, special, stats
from threadpoolctl import threadpool_limits

from recsys_eval.errors import ConfigError, DataError, check_choice
from recsys_eval.measure.metrics import METRICS

#: The metrics whose spec has a closed form of a one-relevant unit's rank.
SAMPLED_METRICS = tuple(name for name, spec in METRICS.items() if spec.at_rank is not None)
CORRECTION_METHODS = ("sampled", "rescale", "bias_variance")
RANK_MODELS = ("hypergeometric", "binomial")
#: The bias-variance trade-off's default. Over power-law and uniform full-rank distributions
#: (tests/compare/test_sampled.py), gamma = 0.01 keeps the absolute bias of hit@10, ndcg@10 and
#: MRR at n = 100 within a quarter to a half of the sampled metric's while one unit's values stay
#: within about +-1; smaller gammas gain little bias for much variance, larger ones lose bias fast.
DEFAULT_GAMMA = 0.01
#: Rows of P(r | R) for the head ranks R = 1, 2, ... computed at once (the deepest usual cutoff is 50).
HEAD_ROWS = 64


def rank_metric(ranks: np.ndarray, metric: str, k: int | None, n_candidates: int | np.ndarray,
                params: Mapping[str, float] | None = None) -> np.ndarray:
    """Metric of units whose single relevant item is at ``ranks`` (1-based) among ``n_candidates``:
    its spec's closed form (:attr:`~recsys_eval.measure.metrics.MetricSpec.at_rank`), e.g. hit:
    [R <= k]; ndcg: [R <= k]/log2(R + 1); auc: (n_candidates - R)/(n_candidates - 1). k None means
    no cutoff (hit and precision need one). ``n_candidates`` is one count or one per unit;
    ``params`` the metric's parameters (e.g. ``rbp_persistence``), its defaults where absent.
    """
    check_choice("sampled metric", metric, SAMPLED_METRICS)
    spec = METRICS[metric]
    values = np.asarray(spec.param_values(params), dtype=np.float64)
    return spec.at_rank(np.asarray(ranks, dtype=np.float64), k, n_candidates, values)


def rank_distribution(
    full_ranks: np.ndarray, n_negatives: int, n_candidates: int, model: str = "hypergeometric"
) -> np.ndarray:
    """P(sampled rank = r | full rank R) for each R in ``full_ranks``: shape (len, n_negatives + 1).

    Both models are polynomials of degree n in R; real R (quadrature nodes) evaluate them there.
    """
    check_choice("rank model", model, RANK_MODELS)
    full_ranks = np.asarray(full_ranks, dtype=np.float64)[:, None]
    above = np.arange(n_negatives + 1)
    if model == "binomial":
        # clipped: the outermost quadrature nodes can pass 1..N by a rounding error
        return stats.binom.pmf(above[None, :], n_negatives, np.clip((full_ranks - 1.0) / (n_candidates - 1.0), 0.0, 1.0))
    # C(R - 1, j) C(N - R, n - j) / C(N - 1, n), with C(x, j) = x (x - 1) ... (x - j + 1) / j!
    log_above, sign_above = _log_binomials(full_ranks - 1.0, n_negatives)
    log_below, sign_below = _log_binomials(n_candidates - full_ranks, n_negatives)
    log_total = special.gammaln(n_candidates) - special.gammaln(n_negatives + 1) - special.gammaln(n_candidates - n_negatives)
    with np.errstate(invalid="ignore"):
        return sign_above * sign_below[:, ::-1] * np.exp(log_above + log_below[:, ::-1] - log_total)


def corrected_values(
    n_negatives: int,
    n_candidates: int,
    metric: str,
    k: int | None = None,
    *,
    gamma: float = DEFAULT_GAMMA,
    model: str = "hypergeometric",
    params: Mapping[str, float] | None = None,
) -> np.ndarray:
    """The bias-variance corrected metric for each sampled rank 1..n_negatives+1 (read-only array);
    ``params`` as for :func:`rank_metric`."""
    check_choice("sampled metric", metric, SAMPLED_METRICS)
    check_choice("rank model", model, RANK_MODELS)
    _check_sizes(n_negatives, n_candidates)
    if not 0.0 < gamma <= 1.0:
        raise ConfigError(
            f"gamma {gamma!r}: expected a number in (0, 1] (gamma = 0, the minimal-bias estimator, "
            "is ill-posed; see recsys_eval.compare.sampled)"
        )
    rank_metric(np.ones(1), metric, k, n_candidates, params)  # checks the cutoff and params before the cached solve
    with threadpool_limits(1, "blas"):  # BLAS threads only slow products of 100 x 100 matrices down
        return _corrected(int(n_negatives), int(n_candidates), metric, k, float(gamma), model, _key(params))


def sampled_correction(
    sampled_ranks: np.ndarray,
    n_negatives: int,
    n_candidates: int | np.ndarray,
    metric: str,
    k: int | None = None,
    *,
    method: str = "bias_variance",
    gamma: float = DEFAULT_GAMMA,
    model: str = "hypergeometric",
    params: Mapping[str, float] | None = None,
) -> np.ndarray:
    """Per-unit estimates of the full-ranking metric from sampled ranks (1-based among n+1).

    ``n_candidates`` is N, one count for all units or one per unit: 1 + the number of non-relevant
    items the unit's negatives were sampled from (what a full ranking of the unit would rank).
    Average the result over a user's units and then over users as for any metric. See the module
    docstring for the methods; ``params`` as for :func:`rank_metric`.
    """
    return next(sampled_corrections(sampled_ranks, n_negatives, n_candidates, [(metric, k)], method=method,
                                    gamma=gamma, model=model, params=params))


def sampled_corrections(
    sampled_ranks: np.ndarray,
    n_negatives: int,
    n_candidates: int | np.ndarray,
    metrics: Sequence[tuple[str, int | None]],
    *,
    method: str = "bias_variance",
    gamma: float = DEFAULT_GAMMA,
    model: str = "hypergeometric",
    params: Mapping[str, float] | None = None,
) -> Iterator[np.ndarray]:
    """:func:`sampled_correction` of every (metric, k) of ``metrics``, one after another: the same
    values, but each distinct N's rank distributions and Gram matrix are computed once for all the
    metrics (they depend on n and N alone), not once per metric, and only one metric's per-unit
    values are held at a time (a fold's 1R+NN units x 35 metrics is 400 MB at ML-1M size)."""
    check_choice("correction method", method, CORRECTION_METHODS)
    ranks = np.asarray(sampled_ranks)
    if ranks.size and (not np.issubdtype(ranks.dtype, np.integer) or ranks.min() < 1 or ranks.max() > n_negatives + 1):
        raise DataError(
            f"sampled ranks must be integers in 1..{n_negatives + 1} (n_negatives + 1); "
            f"got {ranks.dtype} values in [{ranks.min()}, {ranks.max()}]"
        )
    counts = _check_counts(n_candidates, n_negatives, ranks.shape)
    if method == "sampled":
        yield from (rank_metric(ranks, metric, k, n_negatives + 1, params) for metric, k in metrics)
        return
    if method == "rescale":
        rescaled = 1.0 + (ranks - 1.0) * (counts - 1.0) / n_negatives
        yield from (rank_metric(rescaled, metric, k, counts, params) for metric, k in metrics)
        return
    distinct, inverse = np.unique(np.broadcast_to(counts, ranks.shape), return_inverse=True)
    if not distinct.size:
        yield from (np.empty(ranks.shape) for _ in metrics)
        return
    for metric, k in metrics:  # checks the arguments
        corrected_values(n_negatives, int(distinct.flat[0]), metric, k, gamma=gamma, model=model, params=params)
    tables = np.empty((len(metrics), distinct.size, n_negatives + 1))
    with threadpool_limits(1, "blas"):
        for j, n in enumerate(distinct.tolist()):  # each N's system once, for every metric
            for i, (metric, k) in enumerate(metrics):
                tables[i, j] = _corrected(n_negatives, n, metric, k, float(gamma), model, _key(params))
    inverse = inverse.reshape(ranks.shape)
    yield from (table[inverse, ranks - 1] for table in tables)


def _key(params: Mapping[str, float] | None) -> tuple:
    """Metric parameters as a key of the cache of :func:`_corrected`."""
    return tuple(sorted((params or {}).items()))


@lru_cache(maxsize=32768)
def _corrected(n_negatives: int, n_candidates: int, metric: str, k: int | None, gamma: float, model: str,
               params: tuple) -> np.ndarray:
    system = _system(n_negatives, n_candidates, gamma, model)
    reach = METRICS[metric].depth.reach(k, 1)
    if reach is not None:  # f vanishes beyond the deepest rank the metric reads
        depth = min(reach, n_candidates)
        ranks, weights, rows = np.arange(1.0, depth + 1.0), np.ones(depth), system.head(depth)
    else:  # 1/R, 1/log2(R + 1) (not polynomials) or a polynomial of degree <= 1 (AUC, uncut recall)
        ranks, weights, rows = system.smooth
    f = rank_metric(ranks, metric, k, n_candidates, dict(params)) * weights
    values = system.solve(rows.T @ f)
    values.setflags(write=False)
    return values


class _RankSystem:
    """What the bias-variance solve of one (n, N, gamma, model) shares between metrics: the
    regularised Gram matrix ((1 - gamma) A'A + gamma diag(A'1), A = P(r | R) on the Gauss rule's
    nodes), the rows P(r | R) of the head ranks R = 1..depth, and the smooth rule's points, weights
    and rows (:func:`_smooth_rule`). Each row of P(r | R) is computed on its own, so the rows of a
    shallower cutoff are the first rows of a deeper one, the same bits."""

    def __init__(self, n_negatives: int, n_candidates: int, gamma: float, model: str) -> None:
        self.n_negatives, self.n_candidates, self.model = n_negatives, n_candidates, model
        nodes, weights = _gauss_rule(n_candidates, n_negatives + 1)  # exact to degree 2n + 1
        a = rank_distribution(nodes, n_negatives, n_candidates, model)
        weighted = a * weights[:, None]
        self.gram = (1.0 - gamma) * (a.T @ weighted) + gamma * np.diag(weighted.sum(axis=0))
        self._head = np.empty((0, n_negatives + 1))

    def head(self, depth: int) -> np.ndarray:
        """P(r | R) for R = 1..depth (rows); at least the first :data:`HEAD_ROWS` are computed at
        once, which serve every usual cutoff (the rows of a shallower cutoff are the first rows of a
        deeper one, the same bits)."""
        if depth > self._head.shape[0]:
            rows = min(self.n_candidates, max(depth, HEAD_ROWS, 2 * self._head.shape[0]))
            self._head = rank_distribution(np.arange(1.0, rows + 1.0), self.n_negatives, self.n_candidates, self.model)
        return self._head[:depth]

    def solve(self, b: np.ndarray) -> np.ndarray:
        """x with gram @ x = b. The Cholesky factor is computed once for every metric's b, and each
        b is solved on its own: LAPACK's potrf then potrs, what ``linalg.solve(gram, b,
        assume_a="pos")`` runs, so the same bits (several b at once would round differently)."""
        factor, potrs = self._factor
        x, info = potrs(factor, b)
        if info:
            raise linalg.LinAlgError(f"the bias-variance system of n {self.n_negatives}, N {self.n_candidates} "
                                     f"could not be solved (LAPACK potrs info {info})")
        return x

    @cached_property
    def _factor(self) -> tuple[np.ndarray, Callable]:
        """The upper Cholesky factor of the Gram matrix (scipy's ``cho_factor``) and LAPACK's potrs."""
        factor, _ = linalg.cho_factor(self.gram)
        return factor, linalg.get_lapack_funcs("potrs", (factor,))

    @cached_property
    def smooth(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ranks, weights = _smooth_rule(self.n_candidates, self.n_negatives + 1)
        return ranks, weights, rank_distribution(ranks, self.n_negatives, self.n_candidates, self.model)


@lru_cache(maxsize=4)
def _system(n_negatives: int, n_candidates: int, gamma: float, model: str) -> _RankSystem:
    return _RankSystem(n_negatives, n_candidates, gamma, model)


@lru_cache(maxsize=8192)
def _gauss_rule(n_points: int, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss rule of the uniform measure on 1..M: sums over 1..M of polynomials of degree below
    2 ``n_nodes``, exactly (Golub-Welsch on the monic discrete Chebyshev recurrence on 0..M-1:
    alpha_j = (M - 1)/2, beta_j = j^2 (M^2 - j^2) / (4 (4 j^2 - 1))). All M points when M is small."""
    if n_points <= 2 * n_nodes:
        return np.arange(1.0, n_points + 1.0), np.ones(n_points)
    j = np.arange(1.0, n_nodes)
    beta = j**2 * (float(n_points) ** 2 - j**2) / (4.0 * (4.0 * j**2 - 1.0))
    x, vectors = linalg.eigh_tridiagonal(np.full(n_nodes, (n_points - 1) / 2.0), np.sqrt(beta))
    return x + 1.0, n_points * vectors[0] ** 2


def _smooth_rule(n_candidates: int, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Points and weights for sums over 1..N of P(r | R) f(R), f smooth away from R = 0.

    Ranks 1..H (H = max(4 ``n_nodes``, N/64)) one by one, then the Gauss rule of ``n_nodes`` + 100
    nodes on H+1..N: exact for P(r | R) times a polynomial of degree 200, which approximates
    1/R or 1/log2(R + 1) on the tail to rounding (their singularity is H/N of the tail's length away).
    """
    head = min(n_candidates, max(4 * n_nodes, n_candidates // 64))
    tail, weights = _gauss_rule(n_candidates - head, n_nodes + 100)
    return np.concatenate([np.arange(1.0, head + 1.0), head + tail]), np.concatenate([np.ones(head), weights])


def _log_binomials(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """log |C(x, j)| and its sign for j = 0..n (columns), C(x, j) = prod_{i<j} (x - i) / (i + 1)."""
    factors = (x - np.arange(n)) / np.arange(1.0, n + 1.0)
    with np.errstate(divide="ignore"):
        logs = np.cumsum(np.log(np.abs(factors)), axis=1)
    signs = np.cumprod(np.sign(factors), axis=1)
    ones = np.ones((x.shape[0], 1))
    return np.hstack([0.0 * ones, logs]), np.hstack([ones, signs])


def _check_counts(n_candidates: int | np.ndarray, n_negatives: int, shape: tuple[int, ...]) -> np.ndarray:
    counts = np.asarray(n_candidates)
    if counts.ndim == 0:
        _check_sizes(n_negatives, int(counts))
        return counts
    if counts.shape != shape or not np.issubdtype(counts.dtype, np.integer):
        raise DataError(
            f"n_candidates: expected one integer per sampled rank, shape {shape}; got {counts.dtype} of shape {counts.shape}"
        )
    if counts.size and counts.min() <= n_negatives:
        unit = int(np.argmin(counts))
        raise DataError(
            f"n_candidates: unit {unit} has {counts.flat[unit]} candidates; expected more than "
            f"n_negatives {n_negatives} (the relevant item and the items its negatives are sampled from)"
        )
    return counts


def _check_sizes(n_negatives: int, n_candidates: int) -> None:
    if n_negatives < 1 or n_candidates <= n_negatives:
        raise ConfigError(
            f"n_negatives {n_negatives} and n_candidates {n_candidates}: expected 1 <= n_negatives < n_candidates"
        )
