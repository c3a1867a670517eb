"""The inputs of a run, from its config: the dataset loaded and prepared, and its folds (each
fold's train side prepared when ``[prepare] on = "train"``)."""

from __future__ import annotations

import polars as pl

from recsys_eval.core import Interactions, Split
from recsys_eval.pipeline.config import DatasetConfig, PrepareConfig, SplitConfig


def load_data(dataset: DatasetConfig) -> Interactions:
    """The dataset of the config: a MovieLens name, or a file with a column mapping."""
    from recsys_eval.data import load_dataset, load_file

    if dataset.name is not None:
        data = load_dataset(dataset.name, dataset.data_home)
    else:
        data = load_file(dataset.path, dataset.columns, timestamp_format=dataset.timestamp_format,
                         separator=dataset.separator)
    if dataset.item_features is not None:
        data = data.with_items_meta(item_features(dataset.item_features, dataset.item_feature_column))
    return data


def item_features(path: str, column: str) -> pl.DataFrame:
    """The ``[dataset] item_features`` file as item metadata: ``item`` (raw ids) and ``genres``
    (a list of names) from its multi-valued ``column``."""
    from recsys_eval.data.runs import read_frame
    from recsys_eval.errors import DataError

    frame = read_frame(path, name=f"item_features {path}")
    missing = [c for c in ("item", column) if c not in frame.columns]
    if missing:
        raise DataError(f"item_features {path!r}: no column {missing[0]!r} (expected 'item' and the multi-valued "
                        f"'{column}', item_feature_column); columns are {frame.columns}")
    values = pl.col(column)
    if frame.schema[column] == pl.String:
        values = values.fill_null("").str.split("|").list.eval(pl.element().filter(pl.element() != ""))
    elif not isinstance(frame.schema[column], pl.List):
        raise DataError(f"item_features {path!r}: column {column!r} holds {frame.schema[column]}; expected a list "
                        "or names separated by '|'")
    return frame.select(pl.col("item"), values.cast(pl.List(pl.String)).alias("genres"))


def prepare_data(prepare: PrepareConfig, data: Interactions) -> tuple[Interactions, list[dict]]:
    """Apply the preparation steps in order; return the data and what each step removed."""
    from recsys_eval.data import prepare as steps_module

    p = prepare
    steps: list[dict] = []
    if p.threshold is not None:
        data, removed = steps_module.apply_threshold(data, p.threshold, binarize=p.binarize)
        steps.append({"step": f"threshold {p.threshold}", **_removed(removed)})
    if p.min_user_interactions or p.min_item_interactions:
        data, removed = steps_module.min_counts(data, min_user=p.min_user_interactions,
                                                min_item=p.min_item_interactions)
        steps.append({"step": "minimum counts", **_removed(removed)})
    if p.k_core:
        data, removed = steps_module.k_core(data, p.k_core)
        steps.append({"step": f"{p.k_core}-core", **_removed(removed)})
    return data, steps


def prepare_splits(prepare: PrepareConfig, splits: list[Split]) -> tuple[list[Split], list[dict]]:
    """With ``prepare.on = "train"``: the steps applied to each fold's train side; test interactions
    of users or items no longer in train dropped. Returns the folds and what each step removed."""
    if prepare.on != "train":
        return splits, []
    out, steps = [], []
    for split in splits:
        train, removed = prepare_data(prepare, split.train)
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


def make_splits(split: SplitConfig, data: Interactions, *, seed: int, data_home: str | None = None) -> list[Split]:
    """The folds of the config's splitter (one Split for a holdout); ``seed`` unless the params
    give one."""
    from recsys_eval.split import make_split

    params = dict(split.params)
    params.setdefault("seed", seed)
    if split.method == "official" and data_home:
        params.setdefault("data_home", data_home)
    made = make_split(data, split.method, **params)
    return made if isinstance(made, list) else [made]
