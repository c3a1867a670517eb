"""Reading a run of any system for ``recsys-eval evaluate``: TEST, RUN and TRAIN files to Targets and
Rankings, with every check a user needs to trust the numbers.

- TEST: ``user, item`` and optionally ``rating``; relevant rows are those with rating >= threshold
  (every row without a threshold); the others are known non-relevant targets (gain 0).
- RUN: ``user, item`` and ``score`` (higher is better) or ``rank`` (1 is best; with a score too, the
  order is the rank's and the score only tells ties). Duplicate (user, item) or (user, rank) rows,
  NaN or infinite scores and ranks that are not 1..L per user are errors.
- TRAIN (optional): ``user, item``; a user's train items leave its AUC candidates (unless tested or
  ranked for that user) and feed novelty and the catalogue of coverage.
The item catalogue is every item seen in TEST, RUN or TRAIN: the evaluation is full ranking over it.
Every TEST user is a unit (an empty list when RUN has none for it); RUN users absent from TEST are
reported and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core.columns import check_ranks, check_unique, numeric_column
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import ConfigError, DataError


@dataclass(frozen=True)
class RunInput:
    """What evaluate measures: units are the TEST users in sorted raw-id order."""

    rankings: Rankings
    targets: Targets
    user_ids: pl.Series
    item_ids: pl.Series
    train: pl.DataFrame | None  # user (train-user index), item (catalogue index)
    predictions: pl.DataFrame | None  # user, item, rating, prediction (raw ids) for rating metrics
    notes: list[str] = field(default_factory=list)


def read_table(path: str | Path, role: str) -> pl.DataFrame:
    """A CSV or Parquet file (chosen by suffix: .parquet/.pq, else CSV)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{role} file {str(path)!r} does not exist")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pl.read_parquet(path)
        separator = "\t" if path.suffix.lower() == ".tsv" else ","
        return pl.read_csv(path, separator=separator, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DataError(f"{role} file {str(path)!r} could not be read: {exc}") from exc


def load_run(
    test: str | Path,
    run: str | Path,
    train: str | Path | None = None,
    *,
    threshold: float | None = None,
    gain: str = "graded",
) -> RunInput:
    """Read and check the files, and build full-ranking Targets and the Rankings over one index."""
    test_name, run_name = f"TEST {str(test)!r}", f"RUN {str(run)!r}"
    test_df = _check_ids(read_table(test, "TEST"), test_name, ("user", "item"))
    run_df = _check_ids(read_table(run, "RUN"), run_name, ("user", "item"))
    train_name = f"TRAIN {str(train)!r}" if train is not None else ""
    train_df = (
        _check_ids(read_table(train, "TRAIN"), train_name, ("user", "item")).select("user", "item")
        if train is not None else None
    )
    test_df = _test_gains(test_df, test_name, threshold, gain)
    run_df = _run_order(run_df, run_name)
    frames = [test_df, run_df] + ([train_df] if train_df is not None else [])
    frames = _common_id_types(frames)
    test_df, run_df = frames[0], frames[1]
    train_df = frames[2] if train_df is not None else None

    notes: list[str] = []
    user_ids = test_df.get_column("user").unique().sort()
    run_users = run_df.get_column("user").unique()
    only_run = run_users.filter(~run_users.is_in(user_ids.implode()))
    if only_run.len() == run_users.len():
        raise DataError(
            f"{run_name} and {test_name} share no user: nothing to evaluate "
            f"(e.g. RUN user {run_users[0]!r}, TEST user {user_ids[0]!r})"
        )
    if only_run.len():
        notes.append(f"{only_run.len():,} RUN users are not in TEST and were ignored (e.g. {only_run.sort()[0]!r})")
    item_ids = pl.concat([f.get_column("item") for f in frames]).unique().sort()
    n_items, n_users = item_ids.len(), user_ids.len()

    def index(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(
            item_ids.search_sorted(frame.get_column("item")).alias("i"),
            user_ids.search_sorted(frame.get_column("user")).alias("u"),
            pl.col("user").is_in(user_ids.implode()).alias("known"),
        )

    test_ix = index(test_df).sort("u", "i")
    run_ix = index(run_df).filter(pl.col("known")).sort("u", "order")
    missing = n_users - run_ix.get_column("u").n_unique()
    if missing:
        notes.append(f"{missing:,} TEST users have no ranked list in RUN: they count as empty lists")
    t_offsets = _offsets(test_ix.get_column("u").to_numpy(), n_users)
    r_offsets = _offsets(run_ix.get_column("u").to_numpy(), n_users)

    # Candidates: every catalogue item but the user's train items not tested or ranked for it.
    removed = np.zeros(n_users, dtype=np.int64)
    train_out = None
    if train_df is not None:
        seen = pl.concat([test_ix.select("u", "i"), run_ix.select("u", "i")])
        train_ix = index(train_df).select("u", "i", "known", "user").unique()
        own = train_ix.filter(pl.col("known")).join(seen, on=["u", "i"], how="anti")
        removed = np.bincount(own.get_column("u").to_numpy(), minlength=n_users).astype(np.int64)
        ranked_train = run_ix.join(train_ix.filter(pl.col("known")), on=["u", "i"], how="semi").height
        if ranked_train:
            notes.append(
                f"RUN ranks {ranked_train:,} items that are in the same user's TRAIN: they count as "
                "non-relevant (and as candidates for AUC)"
            )
        train_out = train_ix.select(
            pl.col("user").rank("dense").cast(pl.Int64).alias("user") - 1,
            pl.col("i").cast(pl.Int64).alias("item"),
        )
    targets = Targets(
        unit_user=np.arange(n_users, dtype=np.int32),
        offsets=t_offsets,
        items=test_ix.get_column("i").to_numpy().astype(np.int32),
        gain=test_ix.get_column("gain").to_numpy().astype(np.float32),
        n_items=n_items,
        protocol="AI+AR+AN",
        all_candidates=True,
        n_candidates=n_items - removed,
    )
    scores = run_ix.get_column("score").to_numpy().astype(np.float64) if "score" in run_ix.columns else None
    rankings = Rankings(
        unit_user=np.arange(n_users, dtype=np.int32),
        offsets=r_offsets,
        items=run_ix.get_column("i").to_numpy().astype(np.int32),
        scores=scores,
    )
    predictions = None
    if "rating" in test_df.columns and scores is not None:
        predictions = test_ix.join(run_ix.select("u", "i", "score"), on=["u", "i"], how="inner").select(
            "user", "item", "rating", pl.col("score").alias("prediction")
        )
    return RunInput(rankings, targets, user_ids, item_ids, train_out, predictions, notes)


def _check_ids(frame: pl.DataFrame, name: str, required: tuple[str, ...]) -> pl.DataFrame:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataError(f"{name}: missing columns {missing}; the columns are {frame.columns}")
    for col in required:
        dtype = frame.schema[col]
        if not (dtype.is_integer() or dtype == pl.String):
            raise DataError(f"{name}: column {col!r} has type {dtype}; expected integer or string ids")
        nulls = frame.get_column(col).null_count()
        if nulls:
            raise DataError(f"{name}: column {col!r} has {nulls:,} empty values")
    return frame


def _test_gains(test: pl.DataFrame, name: str, threshold: float | None, gain: str) -> pl.DataFrame:
    check_unique(test, ["user", "item"], name, "expected one row per test interaction")
    has_rating = "rating" in test.columns
    if has_rating:
        test = test.with_columns(numeric_column(test, "rating", name).alias("rating"))
    if threshold is not None and not has_rating:
        raise ConfigError(f"a threshold needs ratings, but {name} has no 'rating' column")
    relevant = pl.col("rating") >= threshold if threshold is not None else pl.lit(True)
    value = pl.col("rating") if has_rating and gain != "binary" else pl.lit(1.0)
    test = test.with_columns(pl.when(relevant).then(value).otherwise(0.0).alias("gain"))
    bad = test.filter(relevant & (pl.col("gain") <= 0)) if has_rating else test.clear()
    if bad.height:
        raise DataError(
            f"{name}: {bad.height:,} relevant rows have a rating <= 0, which cannot be a graded gain "
            f"(e.g. user {bad[0, 'user']!r}, item {bad[0, 'item']!r}); use --gain binary or a threshold"
        )
    if test.get_column("gain").gt(0).sum() == 0:
        raise DataError(f"{name}: no relevant row (rating >= {threshold}): nothing to evaluate")
    return test.select("user", "item", *(["rating"] if has_rating else []), "gain")


def _run_order(run: pl.DataFrame, name: str) -> pl.DataFrame:
    has_score, has_rank = "score" in run.columns, "rank" in run.columns
    if not (has_score or has_rank):
        raise DataError(
            f"{name}: missing column 'score' or 'rank'; expected user, item and score (higher is "
            f"better) or rank (1 is best); the columns are {run.columns}"
        )
    check_unique(run, ["user", "item"], name, "a ranking lists each item once per user")
    columns = ["user", "item"]
    if has_score:
        run = run.with_columns(numeric_column(run, "score", name).alias("score"))
        columns.append("score")
    if has_rank:
        ranks = numeric_column(run, "rank", name)
        if (ranks != ranks.round()).any():
            raise DataError(f"{name}: column 'rank' holds non-integer values; expected ranks 1..L per user")
        run = run.with_columns(ranks.cast(pl.Int64).alias("rank"))
        check_ranks(run, name)
        order = pl.col("rank")
    else:
        order = pl.col("score").rank("ordinal", descending=True).over("user")
    return run.with_columns(order.cast(pl.Int64).alias("order")).select(*columns, "order")


def _common_id_types(frames: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """Ids must compare across files: when their types differ, compare them as strings."""
    for col in ("user", "item"):
        types = {f.schema[col] for f in frames}
        if len(types) > 1:
            target = pl.String if any(t == pl.String for t in types) else pl.Int64
            frames = [f.with_columns(pl.col(col).cast(target)) for f in frames]
    return frames


def _offsets(unit: np.ndarray, n_units: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(unit, minlength=n_units))]).astype(np.int64)
