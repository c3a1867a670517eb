"""The jobs of a run, from a config: load and prepare the data, split it, build each protocol's
targets on a fold, make each recommender, rank, and the side outputs of a ranking (exposure per
popularity bin, a sample of scored targets for pooled AUC, the sampled rank of 1R units).

Every random choice takes a seed derived from the run's seed and the definition of what it
randomises (recsys_eval.core.rng; docs/CONVENTIONS.md#seeds-and-reproducibility).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from recsys_eval.core import Interactions, Split, Targets
from recsys_eval.core.rng import derive_seed
from recsys_eval.experiment.config import ExperimentConfig, ProtocolConfig, RecommenderConfig
from recsys_eval.recommend.external import ExternalRun, UnknownIdsWarning
from recsys_eval.recommend.one_relevant import OneRelevantRanking
from recsys_eval.targets.build import UnitPlan

#: The per-unit metric holding a 1R+NN unit's sampled rank: the relevant item's position among the
#: n + 1 ranked targets (0 when the ranking left it out), an exact integer stored as a float.
SAMPLED_RANK = "sampled_rank"
#: The per-unit metric holding a 1R+NN unit's full candidate count N: its relevant item and every
#: non-relevant candidate a full ranking would rank against it (|C(u)| - |Rel(u)| + 1).
FULL_CANDIDATES = "full_candidates"
#: Scored targets kept per system, protocol and fold for the pooled AUC: a seeded uniform sample
#: bounds memory; its standard error is about 0.5 / sqrt(folds x sample).
AUC_POOL_SAMPLE = 10_000


@dataclass
class ProtocolTargets:
    """One evaluated target set of a fold: a protocol, or one bin of a percentile design."""

    label: str
    targets: Targets
    train: Interactions
    info: dict = field(default_factory=dict)
    #: The protocol's definition (and bin): what seeds derived for this target set are keyed on.
    definition: dict = field(default_factory=dict)
    #: Per user index, the size of the candidate set C(u) (for a 1R unit's full candidate count).
    candidates: np.ndarray | None = None


def load_data(config: ExperimentConfig) -> Interactions:
    """The dataset of the config: a MovieLens name, or a file with a column mapping."""
    from recsys_eval.data import load_dataset, load_file

    ds = config.dataset
    if ds.name is not None:
        return load_dataset(ds.name, ds.data_home)
    return load_file(
        ds.path, ds.columns, timestamp_format=ds.timestamp_format, separator=ds.separator
    )


def prepare_data(config: ExperimentConfig, data: Interactions) -> tuple[Interactions, list[dict]]:
    """Apply the preparation steps in order; return the data and what each step removed."""
    from recsys_eval.data import prepare

    p = config.prepare
    steps: list[dict] = []
    if p.threshold is not None:
        data, removed = prepare.apply_threshold(data, p.threshold, binarize=p.binarize)
        steps.append({"step": f"threshold {p.threshold}", **_removed(removed)})
    if p.min_user_interactions or p.min_item_interactions:
        data, removed = prepare.min_counts(
            data, min_user=p.min_user_interactions, min_item=p.min_item_interactions
        )
        steps.append({"step": "minimum counts", **_removed(removed)})
    if p.k_core:
        data, removed = prepare.k_core(data, p.k_core)
        steps.append({"step": f"{p.k_core}-core", **_removed(removed)})
    return data, steps


def prepare_splits(config: ExperimentConfig, splits: list[Split]) -> tuple[list[Split], list[dict]]:
    """With ``prepare.on = "train"``: the steps applied to each fold's train side; test interactions
    of users or items no longer in train dropped. Returns the folds and what each step removed."""
    if config.prepare.on != "train":
        return splits, []
    out, steps = [], []
    for split in splits:
        train, removed = prepare_data(config, split.train)
        kept = (train.user_counts()[split.test.users] > 0) & (train.item_counts()[split.test.items] > 0)
        test = split.test.with_frame(split.test.frame.filter(pl.Series(kept)))
        info = {**split.info, "test_dropped_after_prepare": int((~kept).sum())}
        out.append(Split(train, test, name=split.name, info=info))
        steps += [{**step, "step": f"{split.name} train: {step['step']}"} for step in removed]
        steps.append({"step": f"{split.name} test: users or items not in the prepared train",
                      "users": 0, "items": 0, "interactions": int((~kept).sum())})
    return out, steps


def _removed(removed) -> dict:
    return {k: getattr(removed, k) for k in ("users", "items", "interactions")}


def split_seed(config: ExperimentConfig) -> int:
    return derive_seed(config.seed, "split")


def make_splits(config: ExperimentConfig, data: Interactions) -> list[Split]:
    """The folds of the config's splitter (one Split for a holdout)."""
    from recsys_eval.split import make_split

    params = dict(config.split.params)
    params.setdefault("seed", split_seed(config))
    if config.split.method == "official" and config.dataset.data_home:
        params.setdefault("data_home", config.dataset.data_home)
    made = make_split(data, config.split.method, **params)
    return made if isinstance(made, list) else [made]


def targets_seed(config: ExperimentConfig, fold: str, protocol: ProtocolConfig) -> int:
    return derive_seed(config.seed, "targets", fold, protocol.definition)


def recommender_seed(config: ExperimentConfig, fold: str, rec: RecommenderConfig) -> int:
    return derive_seed(config.seed, "recommender", fold, rec.definition)


def interval_seed(config: ExperimentConfig, fold: str, label: str) -> int:
    """The bootstrap seed of a (fold, protocol): keyed on the protocol's definition, so every system
    of that protocol and fold shares its resamples and a relabelled protocol keeps them."""
    definitions = {lab: {**p.definition, "bin": b if p.design == "percentiles" else None}
                   for p in config.protocols for b, lab in enumerate(protocol_labels(p), start=1)}
    return derive_seed(config.seed, "intervals", fold, definitions.get(label, label))


def protocol_labels(protocol: ProtocolConfig) -> list[str]:
    """The labels a protocol entry's results carry: its display name, or one per popularity bin."""
    if protocol.design == "percentiles":
        return [f"{protocol.name}+pct{protocol.bins}/bin{b}" for b in range(1, protocol.bins + 1)]
    return [protocol.display]


@dataclass
class TargetSet:
    """One evaluated target set of a fold (a protocol, or one bin of a percentile design), whose
    units are filled a chunk of users at a time from its plan (bounded memory; the same units in
    any chunking). ``units_per_user`` and ``listed_per_unit`` are the means the memory budget
    plans with."""

    label: str
    train: Interactions
    definition: dict
    plan: UnitPlan
    units_per_user: float
    listed_per_unit: float
    info: dict = field(default_factory=dict)
    candidates: np.ndarray | None = None

    @property
    def users(self) -> int:
        """How many users have units."""
        return len(self.plan.users)

    def chunks(self, users_per_chunk: int) -> Iterator[ProtocolTargets]:
        """The units, ``users_per_chunk`` of the set's users at a time."""
        for lo in range(0, max(self.users, 1), users_per_chunk):
            yield self._of(self.plan.targets(lo, min(lo + users_per_chunk, self.users)))

    def of_users(self, first: int, stop: int) -> ProtocolTargets:
        """The units of the users whose index is in ``first:stop`` (a range every target set of a
        fold can be cut by)."""
        lo, hi = np.searchsorted(self.plan.users, [first, stop])
        return self._of(self.plan.targets(int(lo), int(hi)))

    def _of(self, targets: Targets) -> ProtocolTargets:
        return ProtocolTargets(self.label, targets, self.train, self.info, self.definition, self.candidates)


def candidate_counts(split: Split, candidates: str) -> np.ndarray:
    """|C(u)| per user index: AI, every item not in the user's train; TI, the items with a test
    interaction not in the user's train; UT, the user's own test items."""
    train, test = split.train, split.test
    if candidates == "UT":
        return test.user_counts().astype(np.int64)
    pool = np.ones(train.n_items, dtype=bool)
    if candidates == "TI":
        pool = np.zeros(train.n_items, dtype=bool)
        pool[test.items] = True
    in_pool = np.bincount(train.users, weights=pool[train.items], minlength=train.n_users)
    return (int(pool.sum()) - in_pool).astype(np.int64)


def target_sets(config: ExperimentConfig, protocol: ProtocolConfig, split: Split) -> list[TargetSet]:
    """The target sets of one protocol entry on one fold (one per bin for a percentile design)."""
    import recsys_eval.targets as targets_module
    from recsys_eval.targets import Protocol, uniform_test

    seed = targets_seed(config, split.name, protocol)
    threshold = config.metrics.relevance_threshold
    parsed = Protocol.parse(protocol.name)
    # 1R units in their one-relevant form: a unit differs from its user's others by one item, so
    # its non-relevant targets are held once per user and no unit is ranked on its own
    options = dict(threshold=threshold, seed=seed, fresh_negatives=protocol.fresh_negatives,
                   sampling=protocol.sampling, one_relevant=parsed.relevant == "1R",
                   chunk_size=config.run.chunk_size)
    definition = protocol.definition

    def target_set(source: Split, plan: UnitPlan, label: str, info: dict, definition: dict) -> TargetSet:
        judged = plan.judged  # a bin's: restricted to the bin's items
        users = max(len(plan.users), 1)
        relevant = int((judged.gain > 0).sum())
        units = relevant / users if parsed.relevant == "1R" else 1.0
        per_user_relevant = relevant / users
        n = parsed.n or 0
        if parsed.full_ranking:
            listed = per_user_relevant
        elif parsed.relevant == "1R":  # its relevant item, and its share of its user's sample
            sample = n if parsed.nonrelevant == "NN" else 0
            listed = 1.0 + (sample if protocol.fresh_negatives else sample / max(units, 1.0))
        elif parsed.nonrelevant == "NN":
            listed = n + per_user_relevant
        else:  # AR+AN listed in full (UT candidates)
            listed = float(source.train.n_items)
        return TargetSet(label, source.train, definition, plan, units, listed, info,
                         candidate_counts(source, parsed.candidates))

    if protocol.design == "standard":
        return [target_set(split, targets_module.plan_targets(split, parsed, **options), protocol.display, {},
                           definition)]
    if protocol.design == "uniform_test":
        moved_split, report = uniform_test(split, protocol.per_item, threshold=threshold, seed=seed)
        return [target_set(moved_split, targets_module.plan_targets(moved_split, parsed, **options), protocol.display,
                           {"uniform_test": report}, definition)]
    labels = protocol_labels(protocol)
    return [target_set(split, plan, labels[info["bin"] - 1], {"bin": info}, {**definition, "bin": info["bin"]})
            for info, plan in targets_module.popularity_bin_plans(split, protocol.bins, parsed, **options)]


def build_protocol_targets(
    config: ExperimentConfig, protocol: ProtocolConfig, split: Split
) -> list[ProtocolTargets]:
    """The whole target sets of one protocol entry on one fold (every user in one chunk)."""
    return [next(iter(s.chunks(max(s.users, 1)))) for s in target_sets(config, protocol, split)]


def make_model(config: ExperimentConfig, rec: RecommenderConfig, data: Interactions, fold: str):
    """A fresh, unfitted recommender for one fold (an external run reads its file)."""
    from recsys_eval.recommend import make_recommender

    if rec.path is not None:
        with warnings.catch_warnings():  # the runner logs unknown ids itself
            warnings.simplefilter("ignore", UnknownIdsWarning)
            return ExternalRun.from_file(rec.path, data)
    return make_recommender(
        rec.name, rec.params, seed=recommender_seed(config, fold, rec), threads=config.run.threads
    )


def rank(config: ExperimentConfig, model, target: ProtocolTargets):
    """Rankings of a protocol's units: top-k over all candidates, or the listed targets sorted;
    for one-relevant (1R) targets, a :class:`~recsys_eval.recommend.one_relevant.OneRelevantRanking`
    (every unit's place of its relevant item, lists read off its user's list on demand)."""
    from recsys_eval.recommend import rank_targets, recommend_top_k

    targets = target.targets
    if targets.one_relevant:
        from recsys_eval.recommend.one_relevant import rank_one_relevant_units

        return rank_one_relevant_units(model, target.train, targets, chunk_size=config.run.chunk_size)
    if targets.all_candidates:
        return recommend_top_k(
            model,
            target.train,
            targets.unit_user,
            full_ranking_depth(config),
            candidates=targets.candidates,
            chunk_size=config.run.chunk_size,
            # exact AUC places each relevant item among all the user's candidates: a second pass
            # over every score, paid only when AUC is asked for
            targets=targets if "auc" in config.metrics.names else None,
        )
    return rank_targets(model, targets, chunk_size=config.run.chunk_size)


def full_ranking_depth(config: ExperimentConfig) -> int:
    """How many items a full ranking lists: the largest cutoff, at least ``run.depth``."""
    return max(max(config.metrics.k), config.run.depth)


def metric_names(config: ExperimentConfig) -> tuple[list[str], list[str]]:
    """The config's ranking metrics and its rating-prediction metrics."""
    from recsys_eval.measure.metrics import RATING_METRICS

    names = config.metrics.names
    return [m for m in names if m not in RATING_METRICS], [m for m in names if m in RATING_METRICS]


def measure_ranking(config: ExperimentConfig, data: Interactions, rankings, target: ProtocolTargets,
                    system: str, fold: str, *, run_level: bool = True) -> pl.DataFrame:
    """Per-unit values of one ranking: the config's metrics, and a 1R+NN unit's sampled rank.
    ``run_level=False`` leaves out the metrics of a whole run (coverage, Gini, entropy: rows
    without a user), for a caller that measures a chunk of users and computes those from the
    exposure counts of all its chunks.

    A one-relevant ranking gives its ranking metrics in closed form and its beyond-accuracy ones
    from every unit's top-k list (k the largest cutoff: all they read), the rows the ranking of
    each unit's listed targets gives."""
    from recsys_eval.measure import measure
    from recsys_eval.measure.beyond import RUN_METRICS
    from recsys_eval.measure.metrics import BEYOND_METRICS

    m = config.metrics
    names = [n for n in metric_names(config)[0] if run_level or n not in RUN_METRICS]
    common = dict(k=m.k, gain=m.gain, ties=m.ties, system=system, protocol=target.label, fold=fold,
                  user_ids=data.user_ids, train=target.train, genres=data.items_meta)
    if isinstance(rankings, OneRelevantRanking):
        beyond = [n for n in names if n in BEYOND_METRICS]
        frame = measure(rankings.ranks, target.targets, metrics=[n for n in names if n not in beyond], **common)
        if beyond:
            frame = pl.concat([frame, measure(rankings.lists(max(m.k)), target.targets, metrics=beyond, **common)
                               .with_columns(_whole_list_values(rankings, beyond))], how="vertical_relaxed")
    else:
        frame = measure(rankings, target.targets, metrics=names, **common)
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


def scored_rows(config: ExperimentConfig, rankings, target: ProtocolTargets, rec: RecommenderConfig,
                fold: str, n_chunks: int = 1) -> pl.DataFrame:
    """A bounded, seeded, weighted sample of a ranking's scored targets (the ranking of one chunk
    of ``n_chunks``), for AUC pooled across folds."""
    from recsys_eval.measure.auc import scored_targets

    first_user = int(target.targets.unit_user[0]) if target.targets.n_units else 0
    seed = derive_seed(config.seed, "auc-pool", fold, rec.definition, target.definition, first_user)
    system = rec.display
    sample = -(-AUC_POOL_SAMPLE // n_chunks)
    if isinstance(rankings, OneRelevantRanking):
        rows = rankings.scored_targets(sample, seed)
    else:
        rows = scored_targets(rankings, target.targets, sample=sample, seed=seed)
    return rows.with_columns(system=pl.lit(system), protocol=pl.lit(target.label), fold=pl.lit(fold))


def add_exposure(config: ExperimentConfig, exposure, rankings, run_names: list[str]) -> None:
    """Add a ranking's lists to a run's exposure counts (:class:`~recsys_eval.measure.beyond.RunExposure`);
    a one-relevant ranking adds every unit's top-k lists (k the largest cutoff) and, for prediction
    coverage, the items ranked anywhere in its whole lists."""
    if not isinstance(rankings, OneRelevantRanking):
        exposure.add(rankings)
        return
    exposure.add(rankings.lists(max(config.metrics.k)))
    if "prediction_coverage" in run_names:
        exposure.ranked |= rankings.ranked_items()


def exposure_bins(config: ExperimentConfig) -> int:
    """Bins of the exposure analysis: those of the first percentile design, else 5."""
    return next((p.bins for p in config.protocols if p.design == "percentiles"), 5)


def exposure_rows(config: ExperimentConfig, rankings, target: ProtocolTargets, system: str,
                  fold: str, item_counts: np.ndarray | None = None) -> pl.DataFrame:
    """How many of a system's top-k recommendations (k = the largest cutoff) fall in each
    item-popularity bin, bins by training ratings as in the percentile design (counts, so that
    chunks of users add up; :func:`exposure_shares` turns them into shares). ``item_counts``: the
    train counts per item when ``target.train`` holds only some users' rows."""
    from recsys_eval.targets import item_popularity_bins

    m = exposure_bins(config)
    k = max(config.metrics.k)
    counts = target.train.item_counts() if item_counts is None else item_counts
    bins = item_popularity_bins(counts, m)
    position = np.arange(len(rankings.items)) - np.repeat(rankings.offsets[:-1], rankings.lengths)
    listed = rankings.items[position < k]
    counts = np.bincount(bins[listed], minlength=m + 1)[1:]
    return pl.DataFrame({
        "system": system, "protocol": target.label, "fold": fold,
        "bin": np.arange(1, m + 1, dtype=np.int32), "count": counts.astype(np.int64),
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

    test = split.test
    if not getattr(model, "predicts_ratings", False):
        names = [n for n in names if n not in ("mae", "rmse")]
    if not names or not test.has_rating:
        return None
    if not getattr(model, "predicts_ratings", False):
        prediction = model.score(test.users, test.items)
    else:
        prediction = model.predict(test.users, test.items)
    frame = pl.DataFrame({
        "user": test.users, "item": test.items, "rating": test.ratings,
        "prediction": np.asarray(prediction, dtype=np.float64),
    })
    rows = rating_metrics(frame, metrics=names, system=system, protocol=RATINGS, fold=split.name)
    return rows.with_columns(data.user_ids.gather(rows.get_column("user")).alias("user"))


#: The protocol label of rating-prediction rows.
RATINGS = "ratings"
