"""Estimating full-ranking metrics from sampled ranks (Krichene & Rendle, KDD 2020; CACM 2022).

Under 1R+NN(n) a unit's relevant item is ranked among n sampled non-relevant items: its sampled
rank r in 1..n+1. Among all N candidates its full rank R is unknown; given R, r - 1 counts the
sampled items ranked above it, Binomial(n, (R - 1)/(N - 1)) in the paper's model (sampling with
replacement) or Hypergeometric(N - 1, R - 1, n) (without, as the NN protocol samples). With
A[R, r] = P(r | R) (N x (n+1)) and f(R) the metric of a unit whose relevant item is at full rank R:

- ``sampled``: the raw sampled metric, f evaluated on the n+1 sampled candidates;
- ``rescale``: f at the rescaled rank 1 + (r - 1)(N - 1)/n, the rank whose expected sampled rank
  is r;
- ``minimal_bias``: the per-sampled-rank values g minimising sum_R (E[g(r) | R] - f(R))^2, i.e. the
  least-squares solution of A g = f (the paper's corrected metric with gamma = 0);
- ``bias_variance``: g minimising sum_R (E[g(r) | R] - f(R))^2 + gamma Var[g(r) | R], i.e.
  ((1 - gamma) A'A + gamma diag(A'1)) g = A'f; gamma = 1 gives the posterior mean of f(R) given r
  under a uniform prior on R, smaller gamma less bias and more variance.

The sums run over every full rank R = 1..N with equal weight, as in the paper. A is never built
whole: it is streamed in blocks of full ranks into a QR factorisation (stable for gamma = 0, where
the normal equations would square an already large condition number).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, stats

from recsys_eval.errors import ConfigError, DataError, check_choice

SAMPLED_METRICS = ("hit", "recall", "precision", "ndcg", "ap", "rr", "auc")
CORRECTION_METHODS = ("sampled", "rescale", "minimal_bias", "bias_variance")
RANK_MODELS = ("binomial", "hypergeometric")
BLOCK = 8192


def rank_metric(ranks: np.ndarray, metric: str, k: int | None, n_candidates: int) -> np.ndarray:
    """Metric of units whose single relevant item is at ``ranks`` (1-based) among ``n_candidates``.

    hit, recall: [R <= k]; precision: [R <= k]/k; ndcg: [R <= k]/log2(R + 1); ap, rr: [R <= k]/R;
    auc: (n_candidates - R)/(n_candidates - 1). k None means no cutoff (not for hit, precision).
    """
    check_choice("sampled metric", metric, SAMPLED_METRICS)
    if k is None and metric in ("hit", "precision"):
        raise ConfigError(f"metric {metric!r} needs a cutoff k")
    ranks = np.asarray(ranks, dtype=np.float64)
    within = np.ones(ranks.shape) if k is None else (ranks <= k).astype(np.float64)
    if metric in ("hit", "recall"):
        return within
    if metric == "precision":
        return within / k
    if metric == "ndcg":
        return within / np.log2(ranks + 1.0)
    if metric in ("ap", "rr"):
        return within / ranks
    return (n_candidates - ranks) / (n_candidates - 1.0)


def rank_distribution(full_ranks: np.ndarray, n_negatives: int, n_items: int, model: str = "binomial") -> np.ndarray:
    """P(sampled rank = r | full rank R) for each R in ``full_ranks``: shape (len, n_negatives + 1)."""
    check_choice("rank model", model, RANK_MODELS)
    above = np.arange(n_negatives + 1)[None, :]
    full_ranks = np.asarray(full_ranks, dtype=np.int64)[:, None]
    if model == "binomial":
        return stats.binom.pmf(above, n_negatives, (full_ranks - 1) / (n_items - 1.0))
    return stats.hypergeom.pmf(above, n_items - 1, full_ranks - 1, n_negatives)


def corrected_values(
    n_negatives: int,
    n_items: int,
    metric: str,
    k: int | None = None,
    *,
    method: str = "bias_variance",
    gamma: float = 0.01,
    model: str = "binomial",
) -> np.ndarray:
    """The corrected metric's value for each sampled rank 1..n_negatives+1 (minimal_bias or bias_variance)."""
    check_choice("correction method", method, ("minimal_bias", "bias_variance"))
    _check_sizes(n_negatives, n_items)
    if method == "bias_variance" and not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma {gamma!r}: expected a number in [0, 1]")
    width = n_negatives + 1
    r_factor = np.zeros((0, width))
    qtf = np.zeros(0)
    column_sums = np.zeros(width)
    for start in range(1, n_items + 1, BLOCK):
        full = np.arange(start, min(start + BLOCK, n_items + 1))
        block = rank_distribution(full, n_negatives, n_items, model)
        column_sums += block.sum(axis=0)
        q, r_factor = np.linalg.qr(np.vstack([r_factor, block]))
        qtf = q.T @ np.concatenate([qtf, rank_metric(full, metric, k, n_items)])
    if method == "minimal_bias" or gamma == 0.0:
        return linalg.lstsq(r_factor, qtf)[0]
    gram = (1.0 - gamma) * r_factor.T @ r_factor + gamma * np.diag(column_sums)
    return linalg.solve(gram, r_factor.T @ qtf, assume_a="pos")


def sampled_correction(
    sampled_ranks: np.ndarray,
    n_negatives: int,
    n_items: int,
    metric: str,
    k: int | None = None,
    *,
    method: str = "bias_variance",
    gamma: float = 0.01,
    model: str = "binomial",
) -> np.ndarray:
    """Per-unit estimates of the full-ranking metric from sampled ranks (1-based among n+1).

    ``n_items`` is N, the number of candidates a full ranking would rank (e.g. the mean candidate
    count of the units). Average the result over a user's units and then over users as for any
    metric. See the module docstring for the methods.
    """
    check_choice("correction method", method, CORRECTION_METHODS)
    _check_sizes(n_negatives, n_items)
    ranks = np.asarray(sampled_ranks)
    if ranks.size and (not np.issubdtype(ranks.dtype, np.integer) or ranks.min() < 1 or ranks.max() > n_negatives + 1):
        raise DataError(
            f"sampled ranks must be integers in 1..{n_negatives + 1} (n_negatives + 1); "
            f"got {ranks.dtype} values in [{ranks.min()}, {ranks.max()}]"
        )
    if method == "sampled":
        return rank_metric(ranks, metric, k, n_negatives + 1)
    if method == "rescale":
        return rank_metric(1.0 + (ranks - 1.0) * (n_items - 1.0) / n_negatives, metric, k, n_items)
    return corrected_values(n_negatives, n_items, metric, k, method=method, gamma=gamma, model=model)[ranks - 1]


def _check_sizes(n_negatives: int, n_items: int) -> None:
    if n_negatives < 1 or n_items <= n_negatives:
        raise ConfigError(
            f"n_negatives {n_negatives} and n_items {n_items}: expected 1 <= n_negatives < n_items"
        )
