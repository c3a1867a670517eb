"""The experiment runner: load, prepare, split, fit, build targets, rank, measure, summarise, write.

For each fold every recommender is fitted once and evaluated under every protocol; the targets of
a (fold, protocol) are built once and shared by all recommenders. Per-unit results of a finished
fold are saved at once, so that ``resume`` skips it after an interruption.
"""

from __future__ import annotations

import platform
import time
import warnings
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console

from recsys_eval.core import Interactions, Split, Targets
from recsys_eval.core.results import check_per_unit
from recsys_eval.experiment.config import (
    ExperimentConfig,
    ProtocolConfig,
    RecommenderConfig,
)
from recsys_eval.experiment.folder import (
    WorkFolder,
    config_hash,
    derive_seed,
    sink_parquet_atomic,
    write_csv_atomic,
    write_parquet_atomic,
)
from recsys_eval.experiment.progress import Progress
from recsys_eval.recommend.external import ExternalRun, UnknownIdsWarning

_VERSIONED = ("recsys-eval", "polars", "numpy", "scipy", "numba", "implicit", "pydantic")


@dataclass
class ProtocolTargets:
    """One evaluated target set of a fold: a protocol, or one bin of a percentile design."""

    label: str
    targets: Targets
    train: Interactions
    info: dict = field(default_factory=dict)


@dataclass
class RunOutcome:
    folder: Path
    summary: pl.DataFrame


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


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


def _removed(removed) -> dict:
    return {k: getattr(removed, k) for k in ("users", "items", "interactions")}


def make_splits(config: ExperimentConfig, data: Interactions) -> list[Split]:
    """The folds of the config's splitter (one Split for a holdout)."""
    from recsys_eval.split import make_split

    params = dict(config.split.params)
    params.setdefault("seed", derive_seed(config.seed, "split"))
    if config.split.method == "official" and config.dataset.data_home:
        params.setdefault("data_home", config.dataset.data_home)
    made = make_split(data, config.split.method, **params)
    return made if isinstance(made, list) else [made]


def build_protocol_targets(
    config: ExperimentConfig, protocol: ProtocolConfig, split: Split
) -> list[ProtocolTargets]:
    """The target sets of one protocol entry on one fold (one per bin for a percentile design)."""
    from recsys_eval.targets import (
        Protocol,
        build_targets,
        popularity_bins,
        uniform_test,
    )

    seed = derive_seed(config.seed, "targets", split.name, protocol.display)
    threshold = config.metrics.relevance_threshold
    options = dict(
        threshold=threshold,
        seed=seed,
        fresh_negatives=protocol.fresh_negatives,
        sampling=protocol.sampling,
        chunk_size=config.run.chunk_size,
    )
    parsed = Protocol.parse(protocol.name)
    if protocol.design == "standard":
        targets = build_targets(split, parsed, **options)
        return [ProtocolTargets(protocol.display, targets, split.train)]
    if protocol.design == "uniform_test":
        moved_split, report = uniform_test(split, protocol.per_item, threshold=threshold, seed=seed)
        targets = build_targets(moved_split, parsed, **options)
        return [ProtocolTargets(protocol.display, targets, moved_split.train, {"uniform_test": report})]
    out = []
    for info, targets in popularity_bins(split, protocol.bins, parsed, **options):
        b = info["bin"]
        label = f"{protocol.name}+pct{protocol.bins}/bin{b}"
        out.append(ProtocolTargets(label, targets, split.train, {"bin": info}))
    return out


def make_model(config: ExperimentConfig, rec: RecommenderConfig, data: Interactions, fold: str):
    """A fresh, unfitted recommender for one fold (an external run reads its file)."""
    from recsys_eval.recommend import make_recommender

    if rec.path is not None:
        with warnings.catch_warnings():  # the runner logs unknown ids itself
            warnings.simplefilter("ignore", UnknownIdsWarning)
            return ExternalRun.from_file(rec.path, data)
    return make_recommender(
        rec.name,
        rec.params,
        seed=derive_seed(config.seed, "recommender", fold, rec.display),
        threads=config.run.threads,
    )


def rank(config: ExperimentConfig, model, target: ProtocolTargets):
    """Rankings of a protocol's units: top-k over all candidates, or the listed targets sorted."""
    from recsys_eval.recommend import rank_targets, recommend_top_k

    targets = target.targets
    if targets.all_candidates:
        return recommend_top_k(
            model,
            target.train,
            targets.unit_user,
            full_ranking_depth(config),
            candidates=targets.candidates,
            chunk_size=config.run.chunk_size,
        )
    return rank_targets(model, targets, chunk_size=config.run.chunk_size)


def full_ranking_depth(config: ExperimentConfig) -> int:
    """How many items a full ranking lists: the largest cutoff, at least ``run.depth``."""
    return max(max(config.metrics.k), config.run.depth)


def _ranking_metrics(config: ExperimentConfig) -> tuple[list[str], list[str]]:
    from recsys_eval.measure.metrics import RATING_METRICS

    names = config.metrics.names
    return [m for m in names if m not in RATING_METRICS], [m for m in names if m in RATING_METRICS]


def evaluate_fold(
    config: ExperimentConfig,
    data: Interactions,
    split: Split,
    progress: Progress,
    timings: list[dict],
    exposure: list[pl.DataFrame],
    scored: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Per-unit results of every recommender under every protocol on one fold; the popularity-bin
    exposure of every full ranking is appended to ``exposure``, and with ``scored`` a bounded
    sample of each ranking's scored targets (for AUC pooled across folds, :func:`pooled_auc_table`)."""
    from recsys_eval.measure import measure

    with progress.step(f"[{split.name}] targets", total=len(config.protocols)) as advance:
        protocol_targets: list[ProtocolTargets] = []
        for protocol in config.protocols:
            start = time.perf_counter()
            protocol_targets += build_protocol_targets(config, protocol, split)
            timings.append(_timing(split.name, "", f"targets {protocol.display}", start))
            advance()
    # Protocols that moved ratings into train (uniform test) need their own fitted model.
    trains: dict[int, Interactions] = {id(t.train): t.train for t in protocol_targets}
    ranking_names, rating_names = _ranking_metrics(config)
    m = config.metrics
    frames: list[pl.DataFrame] = []
    for rec in config.recommenders:
        steps = len(trains) + len(protocol_targets)
        with progress.step(f"[{split.name}] {rec.display}", total=steps) as advance:
            models = {}
            for key, train in trains.items():
                start = time.perf_counter()
                models[key] = make_model(config, rec, data, split.name).fit(train)
                if isinstance(models[key], ExternalRun):
                    models[key].check_overlap(np.unique(split.test.users))
                    if models[key].unknown["rows"]:
                        progress.log(f"[yellow]{rec.display}: {models[key].unknown_message()}[/]")
                timings.append(_timing(split.name, rec.display, "fit", start))
                advance()
            for target in protocol_targets:
                model = models[id(target.train)]
                start = time.perf_counter()
                rankings = rank(config, model, target)
                timings.append(_timing(split.name, rec.display, f"rank {target.label}", start))
                start = time.perf_counter()
                frame = measure(
                    rankings, target.targets, metrics=ranking_names, k=m.k, gain=m.gain, ties=m.ties,
                    system=rec.display, protocol=target.label, fold=split.name,
                    user_ids=data.user_ids, train=target.train, genres=data.items_meta,
                )
                if _is_sampled_1r(target.targets):
                    frame = pl.concat([frame, _sampled_rank_rows(rankings, target, frame)])
                frames.append(frame)
                if target.targets.all_candidates:
                    exposure.append(_exposure_rows(config, rankings, target, rec.display, split.name))
                if scored is not None and "auc" in ranking_names and rankings.scores is not None:
                    scored.append(_scored_rows(config, rankings, target, rec.display, split.name))
                timings.append(_timing(split.name, rec.display, f"measure {target.label}", start))
                advance()
            rating = _rating_rows(models[id(split.train)], split, rec.display, rating_names, data)
            if rating is not None:
                frames.append(rating)
    return pl.concat([check_per_unit(f) for f in frames], how="vertical_relaxed")


# Scored targets kept per label, system, protocol and fold for the pooled AUC: a seeded uniform
# sample bounds memory; its standard error is about 0.5 / sqrt(folds x sample).
AUC_POOL_SAMPLE = 10_000


def _scored_rows(config: ExperimentConfig, rankings, target: ProtocolTargets, system: str, fold: str) -> pl.DataFrame:
    from recsys_eval.measure.auc import scored_targets

    seed = derive_seed(config.seed, "auc-pool", fold, system, target.label)
    rows = scored_targets(rankings, target.targets, sample=AUC_POOL_SAMPLE, seed=seed)
    return rows.with_columns(system=pl.lit(system), protocol=pl.lit(target.label), fold=pl.lit(fold))


def pooled_auc_table(files: list[Path]) -> pl.DataFrame:
    """Per system and protocol, AUC of each fold's pooled scores averaged over folds (``auc_avg``)
    and AUC of every fold's scores pooled (``auc_merge``), Forman & Scholz's two cross-validation
    AUCs, from the folds' scored-target samples."""
    from recsys_eval.compare import auc_aggregation

    scored = pl.concat([pl.read_parquet(f) for f in files])
    return auc_aggregation(scored.select("system", "protocol", "fold", "score", "label", "weight"))


def _timing(fold: str, system: str, step: str, start: float) -> dict:
    return {"fold": fold, "system": system, "step": step, "seconds": time.perf_counter() - start}


def exposure_bins(config: ExperimentConfig) -> int:
    """Bins of the exposure analysis: those of the first percentile design, else 5."""
    return next((p.bins for p in config.protocols if p.design == "percentiles"), 5)


def _exposure_rows(config: ExperimentConfig, rankings, target: ProtocolTargets, system: str,
                   fold: str) -> pl.DataFrame:
    """Share of a system's top-k recommendations (k = the largest cutoff) in each item-popularity
    bin, bins by training ratings as in the percentile design."""
    from recsys_eval.targets import item_popularity_bins

    m = exposure_bins(config)
    k = max(config.metrics.k)
    bins = item_popularity_bins(target.train.item_counts(), m)
    position = np.arange(len(rankings.items)) - np.repeat(rankings.offsets[:-1], rankings.lengths)
    listed = rankings.items[position < k]
    counts = np.bincount(bins[listed], minlength=m + 1)[1:]
    share = counts / max(counts.sum(), 1)
    return pl.DataFrame({
        "system": system, "protocol": target.label, "fold": fold,
        "bin": np.arange(1, m + 1, dtype=np.int32), "share": share,
    })


def _is_sampled_1r(targets: Targets) -> bool:
    """True for a 1R+NN protocol, whose relevant item's sampled rank feeds the sampled-metric
    correction."""
    parts = targets.protocol.split("+")
    return not targets.all_candidates and "1R" in parts and any(p.startswith("NN") for p in parts)


def _sampled_rank_rows(rankings, target: ProtocolTargets, like: pl.DataFrame) -> pl.DataFrame:
    """``rr`` with null k over each unit's whole ranking: 1 / rank of its one relevant item among
    the n + 1 ranked targets (0 when the ranking left it out)."""
    targets = target.targets
    relevant = targets.items[targets.gain > 0]  # exactly one per unit under 1R, in unit order
    unit = np.repeat(np.arange(rankings.n_units), rankings.lengths)
    position = np.arange(len(rankings.items)) - rankings.offsets[unit] + 1
    hit = rankings.items == relevant[unit]
    rank = np.zeros(rankings.n_units)
    rank[unit[hit]] = position[hit]
    value = np.divide(1.0, rank, out=np.zeros_like(rank), where=rank > 0)
    units = (
        like.filter(pl.col("unit").is_not_null())
        .select("system", "protocol", "fold", "user", "unit")
        .unique("unit", keep="first")
        .sort("unit")
    )
    return units.with_columns(
        pl.lit("rr").alias("metric"),
        pl.lit(None, dtype=pl.Int32).alias("k"),
        pl.Series("value", value[units.get_column("unit").to_numpy()]),
    )


def _rating_rows(model, split: Split, system: str, names: list[str], data: Interactions) -> pl.DataFrame | None:
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
    rows = rating_metrics(frame, metrics=names, system=system, protocol="ratings", fold=split.name)
    return rows.with_columns(data.user_ids.gather(rows.get_column("user")).alias("user"))


_KEYS = ["system", "protocol", "fold", "metric", "k"]


def summarise_fold(config: ExperimentConfig, per_unit: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """One fold's summary: mean over users with its interval, users counted and left out, and the
    micro mean, per system x protocol x metric x k; and the fold's summed F-measure counts (TP, FP,
    FN per system x protocol x k) when ``f1`` is measured, for F_tp,fp over all folds."""
    from recsys_eval.compare import confidence_intervals, per_user
    from recsys_eval.measure import f_counts, summarize

    undefined = config.metrics.undefined
    base = summarize(per_unit, undefined=undefined)
    users = per_user(per_unit.filter(pl.col("user").is_not_null()), undefined=undefined)
    c = config.compare
    ci = confidence_intervals(
        users, method=c.interval, n_resamples=c.resamples, seed=derive_seed(config.seed, "intervals")
    ).select(*_KEYS, "lower", "upper")
    summary = base.join(ci, on=_KEYS, how="left", nulls_equal=True)
    sums = None
    if "f1" in config.metrics.names:
        sums = f_counts(per_unit).group_by("system", "protocol", "fold", "k").agg(
            pl.col("tp").sum(), pl.col("fp").sum(), pl.col("fn").sum()
        )
    return summary, sums


def combine_folds(folds: list[pl.DataFrame], f_sums: list[pl.DataFrame]) -> pl.DataFrame:
    """The fold summaries and, with two or more folds, the ``all`` rows: the mean of the fold means
    (F_tp,fp of the counts summed over folds for ``f1``) with the t-interval over fold means."""
    from recsys_eval.compare import fold_confidence_intervals

    summary = pl.concat(folds, how="vertical_relaxed")
    if len(folds) < 2:
        return summary
    group = ["system", "protocol", "metric", "k"]
    all_rows = summary.group_by(group, maintain_order=True).agg(
        pl.col("name").first(), pl.col("mean").mean(), pl.col("micro_mean").mean(),
        pl.col("users_counted").sum(), pl.col("users_left_out").sum(), pl.col("undefined").first(),
    ).with_columns(pl.lit("all").alias("fold"))
    if f_sums:
        pooled = pl.concat(f_sums).group_by("system", "protocol", "k").agg(
            pl.col("tp").sum(), pl.col("fp").sum(), pl.col("fn").sum()
        ).with_columns(
            (2 * pl.col("tp") / (2 * pl.col("tp") + pl.col("fp") + pl.col("fn"))).fill_nan(0.0).alias("f"),
            pl.lit("f1").alias("metric"),
        )
        all_rows = all_rows.join(pooled.select("system", "protocol", "k", "metric", "f"),
                                 on=["system", "protocol", "metric", "k"], how="left", nulls_equal=True)
        all_rows = all_rows.with_columns(
            pl.coalesce("f", "mean").alias("mean"),
            pl.when(pl.col("f").is_not_null()).then(None).otherwise(pl.col("micro_mean")).alias("micro_mean"),
        ).drop("f")
    # The t-interval over fold means: each fold enters as one value, its mean over users.
    fold_means = summary.filter(pl.col("users_counted").is_not_null()).select(
        "system", "protocol", "fold", pl.lit(0, pl.Int64).alias("user"), "metric", "k",
        pl.col("mean").alias("value"),
    )
    ci = fold_confidence_intervals(fold_means).select(*_KEYS, "lower", "upper")
    all_rows = all_rows.join(ci, on=_KEYS, how="left", nulls_equal=True)
    return pl.concat([summary, all_rows.select(summary.columns)], how="vertical_relaxed")


def run_experiment(
    config: ExperimentConfig,
    config_text: str,
    *,
    out_root: str | Path | None = None,
    resume: bool = False,
    quiet: bool = False,
    console: Console | None = None,
) -> RunOutcome:
    """Run an experiment end to end and return its complete results folder.

    ``config_text`` is the config as written (saved verbatim, and hashed to match ``resume``).
    """
    from recsys_eval.experiment.checks import check_names

    check_names(config)
    console = console or Console()
    cfg_hash = config_hash(config_text)
    work = WorkFolder.open(Path(out_root or config.output.folder), config.name, cfg_hash, resume=resume)
    work.write_text("config.toml", config_text)
    timings: list[dict] = []
    log: list[str] = []
    with Progress(console, quiet=quiet) as progress:
        start = time.perf_counter()
        data = load_data(config)
        data, prepared = prepare_data(config, data)
        timings.append(_timing("", "", "load and prepare", start))
        progress.log(f"data: {data!r}")
        start = time.perf_counter()
        splits = make_splits(config, data)
        timings.append(_timing("", "", "split", start))
        fold_summaries, f_sums = [], []
        pool_auc = "auc" in config.metrics.names and len(splits) >= 2
        for split in splits:
            if work.fold_done(split.name):
                progress.log(f"[{split.name}] done in an earlier attempt: reused")
                fold_frame = work.load_fold(split.name)
                summary, sums = summarise_fold(config, fold_frame)
                fold_summaries.append(summary)
                f_sums += [sums] if sums is not None else []
                continue
            fold_exposure: list[pl.DataFrame] = []
            fold_scored: list[pl.DataFrame] | None = [] if pool_auc else None
            fold_frame = evaluate_fold(config, data, split, progress, timings, fold_exposure, fold_scored)
            if fold_exposure:
                write_parquet_atomic(pl.concat(fold_exposure), work.path / "exposure" / f"{split.name}.parquet")
            if fold_scored:
                write_parquet_atomic(pl.concat(fold_scored), work.path / "auc_scores" / f"{split.name}.parquet")
            work.save_fold(split.name, fold_frame)
            if config.output.save_splits:
                from recsys_eval.split import save_split

                save_split(split, work.path / "splits" / split.name)
            start = time.perf_counter()
            summary, sums = summarise_fold(config, fold_frame)
            fold_summaries.append(summary)
            f_sums += [sums] if sums is not None else []
            timings.append(_timing(split.name, "", "summarise", start))
            log.append(f"fold {split.name}: {fold_frame.height:,} per-unit rows")
            del fold_frame
        if config.learning_curve is not None:
            curve = learning_curve_rows(config, data, splits[0], progress, timings)
            write_parquet_atomic(curve, work.path / "per_unit_learning_curve.parquet")
        summary = combine_folds(fold_summaries, f_sums)
    # Streamed from the fold files: the whole per-unit table is never held in memory.
    sink_parquet_atomic(pl.scan_parquet([work.fold_file(s.name) for s in splits]),
                        work.path / "per_unit.parquet")
    exposure_files = sorted((work.path / "exposure").glob("*.parquet"))
    if exposure_files:
        write_parquet_atomic(pl.concat([pl.read_parquet(f) for f in exposure_files]),
                             work.path / "exposure_bins.parquet")
    scored_files = sorted((work.path / "auc_scores").glob("*.parquet"))
    if len(scored_files) >= 2:
        write_parquet_atomic(pooled_auc_table(scored_files), work.path / "auc_pooling.parquet")
    write_parquet_atomic(summary, work.path / "summary.parquet")
    write_csv_atomic(summary, work.path / "summary.csv")
    write_csv_atomic(pl.DataFrame(timings), work.path / "timings.csv")
    write_parquet_atomic(data_statistics(data, prepared, splits), work.path / "data_stats.parquet")
    work.write_text("log.txt", "\n".join(log) + "\n")
    manifest = _manifest(config, cfg_hash, data, splits)
    work.write_json("manifest.json", {"format": 1, **manifest})
    if config.output.report:
        from recsys_eval.experiment.analysis import analyse
        from recsys_eval.report import write_report

        analyse(work.path)
        write_report(work.path)
    folder = work.finish(manifest)
    return RunOutcome(folder, summary)


def _manifest(config: ExperimentConfig, cfg_hash: str, data: Interactions, splits: list[Split]) -> dict:
    from datetime import datetime, timezone

    from recsys_eval.targets import Protocol

    protocols = {}
    for p in config.protocols:
        parsed = Protocol.parse(p.name)
        entry = {
            "name": p.name, "design": p.design, "candidates": parsed.candidates,
            "relevant": parsed.relevant, "nonrelevant": parsed.nonrelevant, "n": parsed.n,
        }
        if p.design == "percentiles":
            for b in range(1, p.bins + 1):
                protocols[f"{p.name}+pct{p.bins}/bin{b}"] = {**entry, "bin": b, "bins": p.bins}
        else:
            protocols[p.display] = {**entry, "bin": None, "bins": None}
    c = config.compare
    return {
        "experiment": config.name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config_hash": cfg_hash,
        "seed": config.seed,
        "seeds": {
            "split": derive_seed(config.seed, "split"),
            "intervals": derive_seed(config.seed, "intervals"),
            "targets": {f"{s.name}/{p.display}": derive_seed(config.seed, "targets", s.name, p.display)
                        for s in splits for p in config.protocols},
            "recommenders": {f"{s.name}/{r.display}": derive_seed(config.seed, "recommender", s.name, r.display)
                             for s in splits for r in config.recommenders},
        },
        "versions": _versions(),
        "dataset": config.dataset.name or config.dataset.path,
        "users": data.n_users,
        "items": data.n_items,
        "interactions": len(data),
        "folds": [s.name for s in splits],
        "systems": [r.display for r in config.recommenders],
        "protocols": protocols,
        "metrics": config.metrics.names,
        "k": config.metrics.k,
        "relevance_threshold": config.metrics.relevance_threshold,
        "baseline": c.baseline,
        "tests": c.tests,
        "correction": c.correction,
        "alpha": c.alpha,
        "undefined": config.metrics.undefined,
        "interval": c.interval,
        "resamples": c.resamples,
    }


def data_statistics(data: Interactions, prepared: list[dict], splits: list[Split]) -> pl.DataFrame:
    """Dataset, preparation and split statistics for the report, as (statistic, value) strings."""
    rows = [
        ("users", f"{data.n_users:,}"),
        ("items", f"{data.n_items:,}"),
        ("interactions", f"{len(data):,}"),
        ("density", f"{len(data) / max(data.n_users * data.n_items, 1):.4%}"),
    ]
    for step in prepared:
        rows.append((
            f"prepare: {step['step']}",
            f"removed {step['users']:,} users, {step['items']:,} items, {step['interactions']:,} interactions",
        ))
    for s in splits:
        test_users = int(np.count_nonzero(s.test.user_counts()))
        rows.append((
            f"split {s.name}",
            f"train {len(s.train):,}, test {len(s.test):,} interactions, {test_users:,} test users",
        ))
    return pl.DataFrame(rows, schema=["statistic", "value"], orient="row")


def learning_curve_rows(
    config: ExperimentConfig, data: Interactions, split: Split, progress: Progress, timings: list[dict]
) -> pl.DataFrame:
    """Per-unit results of every system at each training fraction of the first fold (test fixed)."""
    from recsys_eval.split import learning_curve

    lc = config.learning_curve
    wanted = set(lc.protocols or [p.display for p in config.protocols if p.design == "standard"])
    sub_config = config.model_copy(
        update={"protocols": [p for p in config.protocols if p.display in wanted],
                "learning_curve": None}
    )
    frames = []
    subsamples = learning_curve(
        split, lc.fractions, per_user=lc.per_user, seed=derive_seed(config.seed, "learning_curve")
    )
    for fraction, sub in zip(lc.fractions, subsamples, strict=True):
        named = Split(sub.train, sub.test, name=f"{split.name}@{fraction:g}", info=sub.info)
        frame = evaluate_fold(sub_config, data, named, progress, timings, [])
        frames.append(frame.with_columns(pl.lit(split.name).alias("fold"), pl.lit(fraction).alias("fraction")))
    return pl.concat(frames, how="vertical_relaxed")
