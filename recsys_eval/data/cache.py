"""The Parquet cache of a parsed dataset: indexed interactions, id maps and item metadata.

A cache folder holds ``interactions.parquet``, ``users.parquet``, ``items.parquet`` and
``manifest.json``. The manifest records what the cache was built from (the source files' size,
modification time and SHA-256, the descriptor's digest, the cache format) and the size and SHA-256
of every cache file. A load trusts the cache only when all of it agrees: a source whose size changed,
or whose content changed under a new modification time, makes it stale; a cache file that is
missing, truncated or altered makes it corrupt. Either way the caller rebuilds it. Files are written
to temporary names and renamed into place, the manifest last.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from pathlib import Path

import polars as pl

from recsys_eval.core.atomic import write_bytes
from recsys_eval.core.interactions import Interactions
from recsys_eval.data.fetch import file_sha256
from recsys_eval.errors import OutputError

FORMAT = 1
_MANIFEST = "manifest.json"
_FILES = ("interactions.parquet", "users.parquet", "items.parquet")


def stamp(paths: list[Path]) -> list[dict]:
    """Name, size, modification time and SHA-256 of each source file."""
    out = []
    for path in paths:
        info = path.stat()
        out.append(
            {
                "name": path.name,
                "size": info.st_size,
                "mtime_ns": info.st_mtime_ns,
                "sha256": file_sha256(path),
            }
        )
    return out


def _unchanged(recorded: list[dict], paths: list[Path]) -> tuple[bool, bool]:
    """(sources unchanged, modification times moved) comparing the recorded stamps to ``paths``."""
    if [r.get("name") for r in recorded] != [p.name for p in paths]:
        return False, False
    moved = False
    for record, path in zip(recorded, paths, strict=True):
        try:
            info = path.stat()
        except OSError:
            return False, False
        if info.st_size != record["size"]:
            return False, False
        if info.st_mtime_ns != record["mtime_ns"]:
            if file_sha256(path) != record["sha256"]:
                return False, False
            moved = True
    return True, moved


class ParquetCache:
    """The cache folder of one dataset (created when first written)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def load(self, key: dict, sources: list[Path], source: str) -> Interactions | None:
        """The cached Interactions, or None when the cache is absent, stale or corrupt."""
        try:
            manifest = json.loads((self.folder / _MANIFEST).read_text())
            if manifest.get("format") != FORMAT or manifest.get("key") != key:
                return None
            fresh, moved = _unchanged(manifest["sources"], sources)
            if not fresh:
                return None
            tables = {}
            for name in _FILES:
                raw = (self.folder / name).read_bytes()
                expected = manifest["files"][name]
                if len(raw) != expected["size"] or hashlib.sha256(raw).hexdigest() != expected["sha256"]:
                    return None
                tables[name] = pl.read_parquet(io.BytesIO(raw))
        except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
            return None
        data = _assemble(tables, source)
        if data is not None and moved:
            manifest["sources"] = stamp(sources)
            try:
                write_bytes(self.folder / _MANIFEST, json.dumps(manifest, indent=1).encode())
            except OutputError as exc:  # the cache stays valid; its next load checks the hashes again
                warnings.warn(f"could not refresh the Parquet cache manifest: {exc}", stacklevel=3)
        return data

    def store(self, data: Interactions, key: dict, sources: list[Path]) -> None:
        """Write the cache; a folder that cannot be written only costs a warning."""
        items = pl.DataFrame({"item_id": data.item_ids})
        if data.items_meta is not None:
            items = items.with_columns(data.items_meta.drop("item"))
        tables = {
            "interactions.parquet": data.frame,
            "users.parquet": pl.DataFrame({"user_id": data.user_ids}),
            "items.parquet": items,
        }
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            files = {}
            for name, table in tables.items():
                buffer = io.BytesIO()
                table.write_parquet(buffer, statistics=False)
                raw = buffer.getvalue()
                write_bytes(self.folder / name, raw)
                files[name] = {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
            manifest = {"format": FORMAT, "key": key, "sources": stamp(sources), "files": files}
            write_bytes(self.folder / _MANIFEST, json.dumps(manifest, indent=1).encode())
        except (OSError, OutputError) as exc:
            warnings.warn(f"could not write the Parquet cache to {self.folder}: {exc}", stacklevel=3)


def _assemble(tables: dict[str, pl.DataFrame], source: str) -> Interactions | None:
    """Interactions from the cache tables, or None if they do not fit together."""
    frame = tables["interactions.parquet"]
    users = tables["users.parquet"]
    items = tables["items.parquet"]
    if "user_id" not in users.columns or "item_id" not in items.columns:
        return None
    if frame.schema.get("user") != pl.Int32 or frame.schema.get("item") != pl.Int32:
        return None
    if frame.height and not (
        0 <= frame["user"].min() <= frame["user"].max() < users.height
        and 0 <= frame["item"].min() <= frame["item"].max() < items.height
    ):
        return None
    meta = None
    if items.width > 1:
        meta = items.drop("item_id").select(pl.int_range(pl.len(), dtype=pl.Int32).alias("item"), pl.all())
    return Interactions(frame, users["user_id"], items["item_id"], meta, source)
