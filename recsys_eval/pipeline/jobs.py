"""The jobs of a fold: make a recommender, rank a target set, measure the rankings, and the side
outputs of a ranking (exposure per popularity bin, a sample of scored targets for pooled AUC, the
sampled rank of 1R units). Each takes the options it needs (recsys_eval.pipeline.options), never
the config, so that the local fold, the Spark fold, the tuner and the learning curve share them.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl

from recsys_eval.compare.study import FULL_CANDIDATES, SAMPLED_RANK
from recsys_eval.core import Interactions, Split, Targets
from recsys_eval.measure.metrics import RATINGS
from recsys_eval.pipeline.config import RecommenderConfig
from recsys_eval.pipeline.options import MeasureOptions, RankOptions
from recsys_eval.pipeline.targets import ProtocolTargets
from recsys_eval.recommend.external import ExternalRun, UnknownIdsWarning
from recsys_eval.recommend.one_relevant import OneRelevantRanking

#: Scored targets kept per system, protocol and fold for the pooled AUC: a seeded uniform sample
#: bounds memory; its standard error is about 0.5 / sqrt(folds x sample).
AUC_POOL_SAMPLE = 10_000


def make_model(rec: RecommenderConfig, data: Interactions, *, seed: int, threads: int | None):
    """A fresh, unfitted recommender (an external run reads its file)."""
    from recsys_eval.recommend import make_recommender

    if rec.path is not None:
        with warnings.catch_warnings():  # the runner logs unknown ids itself
            warnings.simplefilter("ignore", UnknownIdsWarning)
            return ExternalRun.from_file(rec.path, data, format=rec.format)
    return make_recommender(rec.name, rec.params, seed=seed, threads=threads)


def rank(options: RankOptions, model, target: ProtocolTargets):
    """Rankings of a protocol's units: top-k over all candidates, or the listed targets sorted;
    for one-relevant (1R) targets, a :class:`~recsys_eval.recommend.one_relevant.OneRelevantRanking`
    (every unit's place of its relevant item, lists read off its user's list on demand)."""
    from recsys_eval.recommend import rank_targets, recommend_top_k

    targets = target.targets
    if targets.one_relevant:
        from recsys_eval.recommend.one_relevant import rank_one_relevant_units

        return rank_one_relevant_units(model, target.train, targets, chunk_size=options.chunk_size)
    if targets.all_candidates:
        return recommend_top_k(
            model,
            target.train,
            targets.unit_user,
            options.depth,
            candidates=targets.candidates,
            chunk_size=options.chunk_size,
            targets=targets if options.exact_auc else None,
        )
    return rank_targets(model, targets, chunk_size=options.chunk_size)


def measure_ranking(options: MeasureOptions, data: Interactions, rankings, target: ProtocolTargets,
                    system: str, fold: str, *, run_level: bool = True, exposure=None) -> pl.DataFrame:
    """Per-unit values of one ranking: the ranking metrics of ``options``, and a 1R+NN unit's
    sampled rank.
    ``run_level=False`` leaves out the metrics of a whole run (coverage, Gini, entropy: rows
    without a user), for a caller that measures a chunk of users and computes those from the
    exposure counts of all its chunks; such a caller gives its ``exposure``
    (:class:`~recsys_eval.measure.beyond.RunExposure`), to which the ranking's lists are added
    (:func:`add_exposure`), from the same list pass as the per-unit metrics where it can.

    A one-relevant ranking gives its ranking metrics in closed form and its beyond-accuracy ones
    from every unit's top-k list (k the largest cutoff: all they read), the rows the ranking of
    each unit's listed targets gives."""
    from recsys_eval.measure import measure
    from recsys_eval.measure.beyond import RUN_METRICS
    from recsys_eval.measure.metrics import BEYOND_METRICS

    m = options
    names = [n for n in m.ranking if run_level or n not in RUN_METRICS]
    common = dict(k=list(m.k), gain=m.gain, ties=m.ties, system=system, protocol=target.label, fold=fold,
                  user_ids=data.user_ids, train=target.train, genres=data.items_meta, **m.params)
    if isinstance(rankings, OneRelevantRanking):
        beyond = [n for n in names if n in BEYOND_METRICS]
        frame = measure(rankings.ranks, target.targets, metrics=[n for n in names if n not in beyond], **common)
        if beyond:
            frame = pl.concat([frame, measure(rankings.lists(m.kmax), target.targets, metrics=beyond, **common)
                               .with_columns(_whole_list_values(rankings, beyond))], how="vertical_relaxed")
        if exposure is not None:
            add_exposure(options, exposure, rankings, target.targets)
    else:
        frame = measure(rankings, target.targets, metrics=names, exposure=exposure, **common)
    if is_sampled_1r(target.targets):
        labels = {"system": system, "protocol": target.label, "fold": fold}
        frame = pl.concat([frame, sampled_rank_rows(rankings, target, labels, data.user_ids)])
    return frame


def is_sampled_1r(targets: Targets) -> bool:
    """True for a 1R+NN protocol, whose relevant item's sampled rank feeds the sampled-metric
    correction."""
    parts = targets.protocol.split("+")
    return not targets.all_candidates and "1R" in parts and any(p.startswith("NN") for p in parts)


def _whole_list_values(rankings: OneRelevantRanking, beyond: list[str]) -> pl.Expr:
    """The value of a metric of whole lists (prediction coverage, a run row) that a one-relevant
    ranking's top-k lists cannot give: the share of items ranked in some unit's whole list."""
    value = pl.col("value")
    if "prediction_coverage" not in beyond:
        return value
    share = float(rankings.ranked_items().mean())
    return pl.when(pl.col("metric") == "prediction_coverage").then(pl.lit(share)).otherwise(value).alias("value")


def sampled_rank_rows(rankings, target: ProtocolTargets, labels: dict[str, str], user_ids) -> pl.DataFrame:
    """``sampled_rank`` rows (k null): the position of each unit's one relevant item among its
    n + 1 ranked targets, 0 when the ranking left it out; and, where the candidate counts are known,
    ``full_candidates`` rows: N = |C(u)| - |Rel(u)| + 1, what the sampled-metric correction needs."""
    from recsys_eval.measure.frames import long_frame

    targets = target.targets
    if isinstance(rankings, OneRelevantRanking):
        rank = rankings.ranks.sampled_rank.astype(np.float64)
    else:
        relevant = targets.items[targets.gain > 0]  # exactly one per unit under 1R, in unit order
        unit = np.repeat(np.arange(rankings.n_units), rankings.lengths)
        position = np.arange(len(rankings.items)) - rankings.offsets[unit] + 1
        hit = rankings.items == relevant[unit]
        rank = np.zeros(rankings.n_units)
        rank[unit[hit]] = position[hit]
    columns, names = [rank], [SAMPLED_RANK]
    if target.candidates is not None:
        unit_user = targets.unit_user
        n_rel = np.bincount(unit_user, minlength=len(target.candidates))  # one unit per relevant item
        columns.append((target.candidates[unit_user] - n_rel[unit_user] + 1).astype(np.float64))
        names.append(FULL_CANDIDATES)
    return long_frame(np.column_stack(columns), names, [None] * len(names), targets.unit_user, user_ids, labels)


def first_user(target: ProtocolTargets) -> int:
    """The user index of a chunk's first unit (0 for an empty chunk): what keys its AUC sample."""
    return int(target.targets.unit_user[0]) if target.targets.n_units else 0


def scored_rows(rankings, target: ProtocolTargets, system: str, fold: str, *, seed: int,
                n_chunks: int = 1) -> pl.DataFrame:
    """A bounded, seeded, weighted sample of a ranking's scored targets (the ranking of one chunk
    of ``n_chunks``), for AUC pooled across folds."""
    from recsys_eval.measure.auc import scored_targets

    sample = -(-AUC_POOL_SAMPLE // n_chunks)
    if isinstance(rankings, OneRelevantRanking):
        rows = rankings.scored_targets(sample, seed)
    else:
        rows = scored_targets(rankings, target.targets, sample=sample, seed=seed)
    return rows.with_columns(system=pl.lit(system), protocol=pl.lit(target.label), fold=pl.lit(fold))


def add_exposure(options: MeasureOptions, exposure, rankings, targets: Targets) -> None:
    """Add a ranking's lists to a run's exposure counts (:class:`~recsys_eval.measure.beyond.RunExposure`;
    ``targets``: the ranking's own, for PopREO's relevant counts); a one-relevant ranking adds every
    unit's top-k lists (k the largest cutoff) and, for prediction coverage, the items ranked
    anywhere in its whole lists."""
    if not isinstance(rankings, OneRelevantRanking):
        exposure.add(rankings, targets)
        return
    exposure.add(rankings.lists(options.kmax), targets)
    if "prediction_coverage" in options.run_level:
        exposure.ranked |= rankings.ranked_items()


def exposure_rows(rankings, target: ProtocolTargets, system: str, fold: str, *, bins: int, k: int,
                  item_counts: np.ndarray | None = None) -> pl.DataFrame:
    """How many of a system's top-k recommendations (k = the largest cutoff) fall in each
    item-popularity bin, bins by training ratings as in the percentile design (counts, so that
    chunks of users add up; :func:`exposure_shares` turns them into shares). ``item_counts``: the
    train counts per item when ``target.train`` holds only some users' rows."""
    from recsys_eval.targets import item_popularity_bins

    counts = target.train.item_counts() if item_counts is None else item_counts
    bin_of = item_popularity_bins(counts, bins)
    position = np.arange(len(rankings.items)) - np.repeat(rankings.offsets[:-1], rankings.lengths)
    listed = rankings.items[position < k]
    counts = np.bincount(bin_of[listed], minlength=bins + 1)[1:]
    return pl.DataFrame({
        "system": system, "protocol": target.label, "fold": fold,
        "bin": np.arange(1, bins + 1, dtype=np.int32), "count": counts.astype(np.int64),
    })


def exposure_shares(counts: pl.DataFrame) -> pl.DataFrame:
    """Per system, protocol, fold and bin: the share of the top-k recommendations in the bin."""
    keys = ["system", "protocol", "fold"]
    totals = counts.group_by([*keys, "bin"], maintain_order=True).agg(pl.col("count").sum())
    return totals.with_columns(
        (pl.col("count") / pl.col("count").sum().over(keys).clip(lower_bound=1)).alias("share")
    ).drop("count")


def rating_rows(model, split: Split, system: str, names: list[str], data: Interactions) -> pl.DataFrame | None:
    """Rating-prediction metrics on the fold's test ratings (rating predictors only for MAE/RMSE;
    rank correlations use any recommender's scores)."""
    from recsys_eval.measure import rating_metrics

    predicted = rating_predictions(model, split.test, names)
    if predicted is None:
        return None
    names, frame = predicted
    rows = rating_metrics(frame, metrics=names, system=system, protocol=RATINGS, fold=split.name)
    return rows.with_columns(data.user_ids.gather(rows.get_column("user")).alias("user"))


def rating_predictions(model, test: Interactions, names: list[str]) -> tuple[list[str], pl.DataFrame] | None:
    """The rating metrics of ``names`` that ``model`` has (MAE and RMSE for a rating predictor only)
    and its predictions of the ``test`` ratings (``user, item, rating, prediction``, user and item
    indices: a rating predictor's ratings, else its scores); None when there is none to measure."""
    if not getattr(model, "predicts_ratings", False):
        names = [n for n in names if n not in ("mae", "rmse")]
    if not names or not test.has_rating or not len(test):
        return None
    if not getattr(model, "predicts_ratings", False):
        prediction = model.score(test.users, test.items)
    else:
        prediction = model.predict(test.users, test.items)
    return names, pl.DataFrame({
        "user": test.users, "item": test.items, "rating": test.ratings,
        "prediction": np.asarray(prediction, dtype=np.float64),
    })
