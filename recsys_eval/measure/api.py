"""measure(): rankings and targets in, the long per-unit results table out (docs/CONVENTIONS.md#metrics)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from recsys_eval.core.chunks import chunk_bounds
from recsys_eval.core.units import Rankings, RelevantRanks, Targets
from recsys_eval.errors import ConfigError, DataError, check_choice
from recsys_eval.measure import kernels
from recsys_eval.measure.frames import concat_per_unit, long_frame
from recsys_eval.measure.metrics import (
    AP_DENOMINATORS,
    BEYOND_METRICS,
    FUSED_METRICS,
    GAINS,
    METRICS,
    N_RELEVANT,
    RANKING_METRICS,
    RATING_METRICS,
    TIES,
    check_cutoffs,
    check_metrics,
    kernel_column,
    kernel_width,
    metric_params,
)
from recsys_eval.measure.single import check_one_relevant, closed_form_values, one_relevant_values
from recsys_eval.measure.ties import order_ties, scan_scores
from recsys_eval.measure.truncation import truncation_notes


def measure(
    rankings: Rankings | RelevantRanks,
    targets: Targets,
    *,
    metrics: str | Iterable[str] = ("precision", "recall", "ap", "ndcg", "rr", "hit", "auc"),
    k: int | Iterable[int] = (1, 5, 10),
    gain: str = "graded",
    ties: str = "first",
    ap_denominator: str = "relevant",
    half_life: float = 5.0,
    neutral: float = 0.0,
    system: str = "system",
    protocol: str | None = None,
    fold: str = "0",
    user_ids: pl.Series | Sequence | np.ndarray | None = None,
    train=None,
    genres=None,
    exposure=None,
    **params: float,
) -> pl.DataFrame:
    """Per-unit values of ranking metrics (and beyond-accuracy ones, see :func:`beyond_accuracy`).

    Args:
        rankings: ranked items per unit, best first; the same units, in the same order, as
            ``targets``. Scores, when given, must not increase along a ranking; they define ties.
            Under 1R, the RelevantRanks of ``rank_one_relevant`` instead: the metrics in closed
            form (:mod:`recsys_eval.measure.single`), equal to those of the ranked lists.
        targets: the items each unit is to rank, with gains (0 = non-relevant).
        metrics: names of ranking and beyond-accuracy metrics (``recsys-eval list metrics``).
            ``f1`` brings ``n_relevant`` rows (k null), the unit's relevant count, which the
            F-measure variants need.
        k: the cutoffs (positive integers) for every metric that has one.
        gain: nDCG gain of a relevant item: ``graded`` (its gain, e.g. the test rating), ``binary``
            (1) or ``exp`` (2^gain - 1).
        ties: ``first`` breaks tied scores by item index ascending; ``average`` gives the expected
            value over all orderings of tied items. AUC counts a tie one half either way.
        ap_denominator: AP divides by the unit's relevant count R (``relevant``, trec_eval) or by
            min(R, k) (``min_rk``).
        half_life: h of the half-life utility (> 1); ``neutral``: its neutral gain d (>= 0).
        system, protocol, fold: labels of the rows (``protocol`` defaults to targets.protocol).
        user_ids: raw id of every user index; without it ``user`` holds the index.
        train, genres: for the beyond-accuracy metrics (see :func:`beyond_accuracy`).
        exposure: a run's :class:`~recsys_eval.measure.beyond.RunExposure` (of the same ``train``
            and parameters) to add these lists to, for a caller measuring a run in chunks of users:
            its head/tail counts come from the beyond-accuracy metrics' list pass when there is one.
        params: the numbers metrics' formulas take, by name (``rbp_persistence``, RBP's p;
            ``calibration_alpha``, ``head_share``;
            :data:`~recsys_eval.measure.metrics.PARAMS`), their defaults where not given.

    Returns:
        The per-unit table ``system, protocol, fold, user, unit, metric, k, value``; undefined
        values (e.g. recall of a unit without relevant items) are NaN, never 0. A metric that reads
        deeper than some unit's list (AUC of top-k lists without their exact AUC, a cutoff beyond
        every list) is measured on the lists as they are, with a warning
        (:func:`~recsys_eval.measure.truncation.truncation_notes`).
    """
    if not isinstance(metrics, str) and not list(metrics):
        return concat_per_unit([])  # nothing asked (e.g. a config with rating metrics only)
    names = check_metrics(metrics, RANKING_METRICS + (N_RELEVANT,) + BEYOND_METRICS + RATING_METRICS)
    rating = [m for m in names if m in RATING_METRICS]
    if rating:
        raise ConfigError(
            f"{rating[0]!r} scores rating predictions, not rankings: use rating_metrics()"
        )
    cutoffs = check_cutoffs(k)
    check_choice("gain", gain, GAINS)
    check_choice("ties policy", ties, TIES)
    check_choice("AP denominator", ap_denominator, AP_DENOMINATORS)
    if not half_life > 1:
        raise ConfigError(f"half_life must be greater than 1 (rank of half utility), got {half_life}")
    if not neutral >= 0:
        raise ConfigError(f"neutral gain must be >= 0, got {neutral}")
    params = metric_params(params)
    one_relevant = isinstance(rankings, RelevantRanks)
    if one_relevant:
        check_one_relevant(rankings, targets, names, BEYOND_METRICS)
    else:
        check_units(rankings, targets)
        for note in truncation_notes(rankings, targets, names, cutoffs):
            warnings.warn(f"{system}: {note}", UserWarning, stacklevel=2)
    protocol = targets.protocol if protocol is None else protocol
    labels = {"system": system, "protocol": protocol, "fold": str(fold)}

    frames = []
    ranking_names = [m for m in names if m in RANKING_METRICS]
    if "f1" in ranking_names and N_RELEVANT not in names:
        names.append(N_RELEVANT)
    if ranking_names:
        options = dict(gain=gain, ties=ties, ap_denominator=ap_denominator, half_life=half_life, neutral=neutral)
        values = ranking_matrix(rankings, targets, ranking_names, cutoffs, options, params)
        at = [cutoffs if METRICS[name].cutoff else [None] for name in ranking_names]
        metric_names = [name for name, ks in zip(ranking_names, at, strict=True) for _ in ks]
        frames.append(long_frame(values, metric_names, [k for ks in at for k in ks], targets.unit_user, user_ids,
                                 labels))
    if N_RELEVANT in names:
        counts = targets.n_relevant.astype(np.float64)[:, None]
        frames.append(long_frame(counts, [N_RELEVANT], [None], targets.unit_user, user_ids, labels))
    beyond = [m for m in names if m in BEYOND_METRICS]
    if beyond:
        from recsys_eval.measure.beyond import beyond_accuracy  # scipy's import only when asked for

        frames.append(
            beyond_accuracy(
                rankings, k=cutoffs, n_items=targets.n_items, metrics=beyond, train=train,
                genres=genres, targets=targets, params=params, user_ids=user_ids, exposure=exposure, **labels,
            )
        )
    elif exposure is not None:
        exposure.add(rankings, targets)
    return concat_per_unit(frames)


def check_units(rankings: Rankings, targets: Targets) -> None:
    """Rankings and targets must hold the same units, in the same order, over the item index."""
    if rankings.n_units != targets.n_units:
        raise DataError(
            f"rankings have {rankings.n_units:,} units, targets {targets.n_units:,}: a Rankings must "
            "be made for its Targets (same units, same order)"
        )
    differ = np.flatnonzero(rankings.unit_user != targets.unit_user)
    if len(differ):
        u = int(differ[0])
        raise DataError(
            f"unit {u} is user {int(rankings.unit_user[u])} in the rankings but user "
            f"{int(targets.unit_user[u])} in the targets; expected the same units in the same order"
        )
    for what, items in (("rankings", rankings.items), ("targets", targets.items)):
        if len(items) and (items.min() < 0 or items.max() >= targets.n_items):
            bad = items[(items < 0) | (items >= targets.n_items)][0]
            raise DataError(
                f"{what}: item index {int(bad)} is outside the item index 0..{targets.n_items - 1}"
            )


def ranking_matrix(rankings: Rankings | RelevantRanks, targets: Targets, names: list[str], cutoffs: list[int],
                   options: dict, params: dict[str, float]) -> np.ndarray:
    """Per unit (row), the ranking metrics ``names`` at every cutoff (once without one), metric-major
    in the order of ``names``: those of the fused kernel from :func:`ranking_values` (in closed form
    for 1R units), the others from their own kernels (:func:`own_kernel_values`). ``options``: the
    fused kernel's keywords; ``params``: every metric parameter's value."""
    fused = [name for name in names if name in FUSED_METRICS]
    blocks: dict[str, np.ndarray] = {}
    if fused:
        columns, fused_names, _ = kernel_layout(fused, cutoffs)
        if isinstance(rankings, RelevantRanks):
            values = one_relevant_values(rankings, cutoffs, columns, **options)
        else:
            values = ranking_values(rankings, targets, cutoffs, columns=columns, **options,
                                    want_ndcg="ndcg" in names, want_half_life="half_life" in names)
        if len(fused) == len(names):
            return values
        first = {name: fused_names.index(name) for name in fused}
        blocks = {name: values[:, first[name]:first[name] + fused_names.count(name)] for name in fused}
    blocks.update(own_kernel_values(rankings, targets, [n for n in names if n not in blocks], cutoffs,
                                    options["ties"], params))
    return np.hstack([blocks[name] for name in names])


def own_kernel_values(rankings: Rankings | RelevantRanks, targets: Targets, names: list[str], cutoffs: list[int],
                      ties: str, params: dict[str, float]) -> dict[str, np.ndarray]:
    """Per metric of ``names`` (outside the fused kernel), its values per unit (row) at every cutoff
    (one column without one): its own kernel (:attr:`~recsys_eval.measure.metrics.MetricSpec.kernel`)
    run by :func:`~recsys_eval.measure.kernels.own_kernel` on every unit's listed relevance
    (:func:`listed_relevance`), or for 1R units its closed form
    (:func:`~recsys_eval.measure.single.closed_form_values`)."""
    out = {}
    if isinstance(rankings, RelevantRanks):
        for name in names:
            spec = METRICS[name]
            if spec.at_rank is None:
                raise ConfigError(f"metric {name!r} has no closed form for units with one relevant item (its "
                                  "spec's at_rank): measure it on ranked lists (rank_targets)")
            values = np.asarray(spec.param_values(params), dtype=np.float64)
            out[name] = closed_form_values(rankings, spec, cutoffs, ties, values)
        return out
    rel, n_rel, n_non = listed_relevance(rankings, targets, ties)
    offsets = rankings.offsets.astype(np.int64, copy=False)
    for name in names:
        spec = METRICS[name]
        ks = np.asarray(cutoffs if spec.cutoff else [0], dtype=np.int64)
        values = np.asarray(spec.param_values(params), dtype=np.float64)
        out[name] = kernels.own_kernel(spec.kernel, offsets, rel, n_rel, n_non, ks, values,
                                       chunk_bounds(targets.n_units)).T
    return out


def listed_relevance(rankings: Rankings, targets: Targets, ties: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per listed position its relevance, 1 for a relevant target and 0 for any other item, in the
    deterministic tie order; under ``ties="average"``, r/n at every position of a tied block of n
    items holding r relevant ones: the expected relevance over the block's orderings, which makes
    the expected value exact for a metric linear in the relevance of each position (as R-precision
    and RBP are). Per unit its relevant and non-relevant target counts R and N."""
    role, n_rel, n_non, tied = target_roles(rankings, targets)
    rel = (role == 1).astype(np.float64)
    if ties == "average" and len(rel):
        block = np.cumsum(~tied) - 1
        rel = (np.bincount(block, weights=rel) / np.bincount(block))[block]
    return rel, n_rel, n_non


def kernel_layout(names: Sequence[str], cutoffs: list[int]) -> tuple[np.ndarray, list[str], list[int | None]]:
    """The kernel columns of ranking metrics ``names`` in the per-unit table's order (metric-major:
    each metric at every cutoff, or once without one), with each column's metric and k."""
    columns, metrics, ks = [], [], []
    for name in names:
        at = cutoffs if METRICS[name].cutoff else [None]
        columns.extend(kernel_column(name, c, len(cutoffs)) for c in range(len(at)))
        metrics.extend([name] * len(at))
        ks.extend(at)
    return np.asarray(columns, dtype=np.int64), metrics, ks


def ranking_values(
    rankings: Rankings,
    targets: Targets,
    cutoffs: list[int],
    *,
    columns: np.ndarray | None = None,
    gain: str = "graded",
    ties: str = "first",
    ap_denominator: str = "relevant",
    half_life: float = 5.0,
    neutral: float = 0.0,
    want_ndcg: bool = True,
    want_half_life: bool = True,
) -> np.ndarray:
    """The ranking kernel's values: per unit (row), the kernel columns ``columns`` (by default all,
    column :func:`~recsys_eval.measure.metrics.kernel_column` for a metric at a cutoff). The matrix
    is the transpose of the kernel's metric-major array, so that each column is contiguous. AUC is
    the exact AUC the Rankings carry when they were made by scoring every candidate."""
    exact_auc = rankings.auc
    tied, in_item_order = scan_scores(rankings)
    if ties == "first" and not in_item_order:
        rankings = order_ties(rankings, tied)
    options = kernels.Options(
        np.asarray(cutoffs, dtype=np.int64), kernels.GAIN_CODES[gain], ap_denominator == "min_rk",
        float(half_life), float(neutral), ties == "average", want_ndcg, want_half_life,
    )
    width = kernel_width(len(cutoffs))
    columns = np.arange(width) if columns is None else np.asarray(columns, dtype=np.int64)
    values, status = kernels.ranking_kernel(
        *kernel_arrays(rankings, targets, tied), options, kernels.SLOTS, width, columns,
        int(targets.n_items), chunk_bounds(targets.n_units),
    )
    raise_on_status(status, rankings, targets)
    if exact_auc is not None:
        values[columns == kernel_column("auc", 0, len(cutoffs))] = exact_auc
    return values.T


def target_roles(rankings: Rankings, targets: Targets):
    """Per ranked position its role (1 relevant, 0 non-relevant target, -1 not a target), per unit
    its relevant and non-relevant target counts, and the tie flags, in the deterministic order."""
    check_units(rankings, targets)
    tied, in_item_order = scan_scores(rankings)
    ranked, listed = kernel_arrays(rankings if in_item_order else order_ties(rankings, tied), targets, tied)
    _, role, n_rel, n_non = kernels.label_kernel(
        ranked, listed, int(targets.n_items), chunk_bounds(targets.n_units)
    )
    return role, n_rel, n_non, ranked.tied


def kernel_arrays(rankings: Rankings, targets: Targets,
                  tied: np.ndarray) -> tuple[kernels.RankingArrays, kernels.TargetArrays]:
    """The CSR arrays the kernels take, in the dtypes they are compiled for; ``tied``: the rankings'
    tie flags (:func:`~recsys_eval.measure.ties.scan_scores`)."""
    n_candidates = (
        np.asarray(targets.n_candidates, dtype=np.int64) if targets.all_candidates
        else np.zeros(0, dtype=np.int64)
    )
    return (
        kernels.RankingArrays(rankings.offsets.astype(np.int64, copy=False),
                              rankings.items.astype(np.int32, copy=False), tied),
        kernels.TargetArrays(targets.offsets.astype(np.int64, copy=False),
                             targets.items.astype(np.int32, copy=False),
                             targets.gain.astype(np.float32, copy=False), n_candidates,
                             bool(targets.all_candidates)),
    )


def raise_on_status(status: np.ndarray, rankings: Rankings, targets: Targets) -> None:
    """Turn a kernel's per-unit status codes into a clear error about the first bad unit."""
    bad = np.flatnonzero(status)
    if not len(bad):
        return
    u = int(bad[0])
    user = int(targets.unit_user[u])
    if status[u] == kernels.DUPLICATE_ITEM:
        raise DataError(
            f"rankings: unit {u} (user {user}) lists an item more than once "
            f"({len(bad):,} units affected); a ranking lists each item once"
        )
    raise DataError(
        f"rankings: unit {u} (user {user}) ranks more non-relevant items than its target set holds "
        f"({int(targets.sizes[u]):,} items); rank only the unit's candidates"
    )
