"""Targets to and from Parquet, so that an external system can score exactly these items.

One row per listed (unit, item): ``unit`` (int64, 0..n-1 in order), ``user`` and ``item`` (int32
indices), ``gain`` (float32, 0 for non-relevant). A unit that lists no item (full ranking of a user
without relevant items) keeps one row with null ``item`` and ``gain``. Full-ranking targets add
``n_candidates`` (int64, per row of the unit). Given the Interactions, the raw ``user_id`` and
``item_id`` are added for external systems; loading ignores them. The protocol, the item-index size,
and the full-ranking candidate mask are stored in the file's key-value metadata.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.interactions import Interactions
from recsys_eval.core.units import Targets
from recsys_eval.errors import ConfigError, DataError

_META_KEY = "recsys_eval.targets"
_FORMAT = 1


def save_targets(targets: Targets, path: str | Path, *, ids: Interactions | None = None) -> Path:
    """Write ``targets`` to a Parquet file (atomically: a temporary file renamed into place)."""
    path = Path(path)
    if targets.one_relevant:
        raise ConfigError(
            f"{path}: one-relevant targets ({targets.protocol}) do not list their units' target sets; "
            "save the listed form (build_targets without one_relevant)"
        )
    lengths = np.diff(targets.offsets)
    rows_per_unit = np.maximum(lengths, 1)
    unit = np.repeat(np.arange(targets.n_units, dtype=np.int64), rows_per_unit)
    position = np.arange(len(unit), dtype=np.int64) - np.repeat(
        np.concatenate([[0], np.cumsum(rows_per_unit)[:-1]]).astype(np.int64), rows_per_unit
    )
    listed = position < lengths[unit]
    source = np.where(listed, targets.offsets[unit] + position, 0)
    frame = pl.DataFrame(
        {
            "unit": unit,
            "user": targets.unit_user[unit].astype(np.int32),
            "item": np.where(listed, targets.items[source] if len(targets.items) else 0, 0).astype(np.int32),
            "gain": np.where(listed, targets.gain[source] if len(targets.gain) else 0, 0).astype(np.float32),
            "_listed": listed,
        }
    )
    frame = frame.with_columns(
        pl.when(pl.col("_listed")).then(pl.col("item")).alias("item"),
        pl.when(pl.col("_listed")).then(pl.col("gain")).alias("gain"),
    ).drop("_listed")
    if targets.all_candidates:
        n_candidates = np.asarray(targets.n_candidates, np.int64)[unit]
        frame = frame.with_columns(pl.Series("n_candidates", n_candidates))
    if ids is not None:
        frame = frame.with_columns(
            pl.lit(ids.user_ids).gather(pl.col("user")).alias("user_id"),
            pl.lit(ids.item_ids).gather(pl.col("item")).alias("item_id"),
        )
    meta = {
        "format": _FORMAT,
        "protocol": targets.protocol,
        "n_items": targets.n_items,
        "n_units": targets.n_units,
        "all_candidates": targets.all_candidates,
        "candidates": _pack(targets.candidates),
    }
    return atomic.write_parquet(frame, path, metadata={_META_KEY: json.dumps(meta)})


def load_targets(path: str | Path) -> Targets:
    """Read Targets written by :func:`save_targets` (or any file with its columns and metadata)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such targets file")
    meta_text = pl.read_parquet_metadata(path).get(_META_KEY)
    if meta_text is None:
        raise DataError(f"{path}: not a targets file (no {_META_KEY!r} metadata); write it with save_targets")
    meta = json.loads(meta_text)
    if meta.get("format") != _FORMAT:
        raise DataError(f"{path}: targets format {meta.get('format')!r}, expected {_FORMAT}")
    frame = pl.read_parquet(path)
    missing = {"unit", "user", "item", "gain"} - set(frame.columns)
    if missing:
        raise DataError(f"{path}: missing columns {sorted(missing)}; columns are {frame.columns}")
    frame = frame.sort("unit", "item", nulls_last=True)
    n_units = int(meta["n_units"])
    unit = frame.get_column("unit").to_numpy()
    if len(unit) and (unit[0] < 0 or unit[-1] >= n_units):
        raise DataError(f"{path}: unit numbers must lie in 0..{n_units - 1}")
    first = np.searchsorted(unit, np.arange(n_units))
    if n_units and np.any(unit[np.minimum(first, len(unit) - 1)] != np.arange(n_units)):
        raise DataError(f"{path}: every unit 0..{n_units - 1} needs at least one row")
    unit_user = frame.get_column("user").to_numpy()[first].astype(np.int32)
    listed = frame.filter(pl.col("item").is_not_null())
    listed_unit = listed.get_column("unit").to_numpy()
    items = listed.get_column("item").to_numpy().astype(np.int32)
    if len(items) and (items.min() < 0 or items.max() >= meta["n_items"]):
        raise DataError(f"{path}: item indices must lie in 0..{meta['n_items'] - 1}")
    user_rows = frame.group_by("unit").agg(pl.col("user").n_unique().alias("n")).filter(pl.col("n") > 1)
    if user_rows.height:
        raise DataError(f"{path}: unit {user_rows[0, 'unit']} has rows of more than one user")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(listed_unit, minlength=n_units))]).astype(np.int64)
    n_candidates = None
    if meta["all_candidates"]:
        n_candidates = frame.get_column("n_candidates").to_numpy()[first].astype(np.int64)
    return Targets(
        unit_user,
        offsets,
        items,
        listed.get_column("gain").to_numpy().astype(np.float32),
        int(meta["n_items"]),
        protocol=meta["protocol"],
        all_candidates=bool(meta["all_candidates"]),
        candidates=_unpack(meta["candidates"], int(meta["n_items"])),
        n_candidates=n_candidates,
    )


def _pack(mask: np.ndarray | None) -> str | None:
    return None if mask is None else base64.b64encode(np.packbits(mask).tobytes()).decode("ascii")


def _unpack(text: str | None, n_items: int) -> np.ndarray | None:
    if text is None:
        return None
    bits = np.frombuffer(base64.b64decode(text), dtype=np.uint8)
    return np.unpackbits(bits, count=n_items).astype(bool)
