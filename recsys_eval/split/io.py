"""Save a split to a folder and load it back, exactly: same rows, same index, same info.

A split folder holds plain files any tool can read:

- ``train.parquet``, ``test.parquet``: one row per interaction, columns ``user`` and ``item`` (the
  raw ids), and ``rating``/``timestamp`` when the data has them;
- ``users.parquet``, ``items.parquet``: the index maps, column ``user_id``/``item_id``, row i being
  the raw id of index i (users and items without interactions in either side included);
- ``items_meta.parquet``: item metadata by item index, when the data has some;
- ``split.json``: the split's name, splitter, parameters, seed and ``info``.

Several splits saved together (k folds) go to one subfolder each, listed in order in ``splits.json``.

The folder is written beside its final place and renamed into it, so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.atomic import fsync_folder, output_error, scratch_path
from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError, DataError

FORMAT = "recsys_eval split"
VERSION = 1
_SIDES = ("train", "test")
LISTING = "splits.json"


def save_split(split: Split, folder: str | Path, *, overwrite: bool = False, rows=None) -> Path:
    """Write ``split`` to ``folder`` (created; an existing one only with ``overwrite``); ``rows``:
    what writes its row files (:func:`write_rows`'s arguments), by default :func:`write_rows`."""
    return save_splits([split], folder, overwrite=overwrite, subfolders=False, rows=rows)


def save_splits(
    splits: Split | list[Split],
    folder: str | Path,
    *,
    overwrite: bool = False,
    subfolders: bool = True,
    rows=None,
) -> Path:
    """Write several splits (e.g. k folds) to ``folder/<split name>`` in one atomic step; with
    ``subfolders=False`` the single split goes to ``folder`` itself."""
    splits = [splits] if isinstance(splits, Split) else list(splits)
    for split in splits:
        if not isinstance(split, Split):
            raise ConfigError(f"save_split: expected a Split, got {type(split).__name__}")
    if not subfolders and len(splits) != 1:
        raise ConfigError(f"{len(splits)} splits need one subfolder each")
    names = [s.name for s in splits]
    if len(set(names)) != len(names):
        raise ConfigError(f"split names must differ to be saved side by side, got {names}")
    folder = Path(folder)
    if folder.exists() and not overwrite:
        raise ConfigError(f"{folder} exists; choose another folder or overwrite it (--force)")
    staging = scratch_path(folder)
    try:
        staging.mkdir(parents=True)
        for split in splits:
            _write(split, staging / _safe_name(split.name) if subfolders else staging, rows or write_rows)
        if subfolders:
            listing = {"format": FORMAT, "version": VERSION,
                       "splits": [_safe_name(s.name) for s in splits]}
            atomic.write_json(staging / LISTING, listing)
        _replace(staging, folder, overwrite)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        error = output_error(exc, folder) if isinstance(exc, OSError) else None
        if error is not None:
            raise error from None
        raise
    fsync_folder(folder.parent)
    return folder


def _write(split: Split, folder: Path, rows) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows(split, folder)
    train = split.train
    atomic.write_parquet(pl.DataFrame({"item_id": train.item_ids}), folder / "items.parquet")
    if train.items_meta is not None:
        atomic.write_parquet(train.items_meta, folder / "items_meta.parquet")
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "name": split.name,
        "source": train.source,
        "splitter": split.info.get("splitter"),
        "params": split.info.get("params"),
        "seed": split.info.get("seed"),
        "rows": {"train": len(split.train), "test": len(split.test)},
        "info": split.info,
    }
    text = json.dumps(meta, indent=2, default=_jsonable)
    atomic.write_text(folder / "split.json", text + "\n")


def write_rows(split: Split, folder: Path) -> None:
    """The files of a split that grow with its rows and users: each side's raw rows
    (``train.parquet``, ``test.parquet``) and the user index (``users.parquet``)."""
    for side_name in _SIDES:
        atomic.write_parquet(getattr(split, side_name).to_raw(), folder / f"{side_name}.parquet")
    atomic.write_parquet(pl.DataFrame({"user_id": split.train.user_ids}), folder / "users.parquet")


def _safe_name(name: str) -> str:
    """A split name as a folder name ("u1/fold2" -> "u1_fold2")."""
    return name.replace("/", "_").replace("\\", "_") or "split"


def load_split(folder: str | Path) -> Split:
    """The Split saved in ``folder`` by :func:`save_split`."""
    folder = Path(folder)
    meta_path = folder / "split.json"
    if not meta_path.is_file():
        raise DataError(f"{folder}: not a saved split (no split.json)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{meta_path}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DataError(f"{meta_path}: not a recsys_eval split description (no format {FORMAT!r})")
    if meta.get("version") != VERSION:
        raise DataError(f"{meta_path}: split format version {meta.get('version')!r}; expected {VERSION}")
    user_ids = _read(folder / "users.parquet", ["user_id"]).get_column("user_id")
    item_ids = _read(folder / "items.parquet", ["item_id"]).get_column("item_id")
    items_meta_path = folder / "items_meta.parquet"
    items_meta = _read(items_meta_path, ["item"]) if items_meta_path.exists() else None
    source = str(meta.get("source") or folder)
    sides = []
    for side_name in _SIDES:
        path = folder / f"{side_name}.parquet"
        raw = _read(path, ["user", "item"])
        frame = raw.with_columns(
            _to_index(raw.get_column("user"), user_ids, path, "user", "users.parquet"),
            _to_index(raw.get_column("item"), item_ids, path, "item", "items.parquet"),
        )
        sides.append(Interactions(frame, user_ids, item_ids, items_meta, source).with_frame(frame))
    return Split(sides[0], sides[1], name=str(meta.get("name", folder.name)), info=meta.get("info", {}))


def load_splits(folder: str | Path) -> list[Split]:
    """The splits saved together in ``folder`` by :func:`save_splits`, in their saved order."""
    folder = Path(folder)
    path = folder / LISTING
    if not path.is_file():
        if (folder / "split.json").is_file():
            return [load_split(folder)]
        raise DataError(f"{folder}: no saved splits (neither {LISTING} nor split.json)")
    try:
        listing = json.loads(path.read_text(encoding="utf-8"))
        names = listing["splits"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a list of saved splits ({exc})") from None
    return [load_split(folder / name) for name in names]


def _replace(staging: Path, folder: Path, overwrite: bool) -> None:
    if not folder.exists():
        os.replace(staging, folder)
        return
    if not overwrite:
        raise ConfigError(f"{folder} exists; choose another folder or overwrite it (--force)")
    old = scratch_path(folder)
    os.replace(folder, old)
    os.replace(staging, folder)
    if old.is_dir():
        shutil.rmtree(old)
    else:
        old.unlink()


def _read(path: Path, required: list[str]) -> pl.DataFrame:
    if not path.is_file():
        raise DataError(f"{path}: missing from the saved split")
    try:
        frame = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable Parquet file ({first})") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}; columns are {frame.columns}")
    return frame


def _to_index(raw: pl.Series, ids: pl.Series, path: Path, role: str, maps: str) -> pl.Series:
    """Index of every raw id in ``ids`` (row position), or a DataError naming the first unknown id.

    Integer ids spanning a modest range go through a lookup table (one numpy gather); others
    through a hash join."""
    if ids.dtype.is_integer() and raw.dtype.is_integer() and ids.len():
        ids_np, raw_np = ids.to_numpy().astype(np.int64), raw.to_numpy().astype(np.int64)
        low, high = int(ids_np.min()), int(ids_np.max())
        if high - low < max(4 * len(raw_np), 1 << 20):
            table = np.full(high - low + 1, -1, dtype=np.int32)
            table[ids_np - low] = np.arange(len(ids_np), dtype=np.int32)
            inside = (raw_np >= low) & (raw_np <= high)
            index = np.where(inside, table[np.where(inside, raw_np - low, 0)], -1)
            if (index < 0).any():
                raise DataError(f"{path}: {role} {int(raw_np[np.argmax(index < 0)])} is not in {maps}")
            return pl.Series(role, index, dtype=pl.Int32)
    lookup = pl.DataFrame({"id": ids, "index": pl.int_range(ids.len(), dtype=pl.Int32, eager=True)})
    try:
        joined = pl.DataFrame({"id": raw}).join(lookup, on="id", how="left", maintain_order="left")
    except pl.exceptions.PolarsError:
        raise DataError(f"{path}: column {role!r} has type {raw.dtype}, {maps} has {ids.dtype}") from None
    index = joined.get_column("index")
    if index.null_count():
        first = raw.filter(index.is_null())[0]
        raise DataError(f"{path}: {role} {first!r} is not in {maps}")
    return index.rename(role)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)
