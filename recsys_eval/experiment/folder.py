"""Results folders: written in a hidden work folder and renamed into place only when complete.

``results/<experiment>/<timestamp>/`` appears only once every file is written, so an interrupted
run never leaves a folder that looks complete; its work folder ``.partial-<config hash>-<timestamp>``
keeps the folds already done, and ``--resume`` picks the newest one with the same config hash.
An existing results folder is never overwritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.atomic import is_scratch
from recsys_eval.core.lock import FolderLock
from recsys_eval.errors import ConfigError

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def config_hash(config_text: str) -> str:
    """A short hash of the config as run, to match a resumable work folder to its config."""
    return hashlib.sha256(config_text.encode()).hexdigest()[:12]


def derive_seed(base: int, *names: object) -> int:
    """A 32-bit seed for one named random choice (e.g. ``("targets", fold, protocol)``).

    Derived by hashing, so that adding or reordering components never changes another one's stream.
    """
    key = "/".join([str(base), *map(str, names)]).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "little")


class WorkFolder:
    """The folder a run writes into until it is complete."""

    def __init__(self, experiment_root: Path, path: Path) -> None:
        self.root = experiment_root
        self.path = path
        self.lock = FolderLock(path)

    @classmethod
    def open(cls, out_root: Path, experiment: str, cfg_hash: str, *, resume: bool) -> WorkFolder:
        """A new work folder, or with ``resume`` the newest one of the same config, locked against
        any other process until :meth:`finish`; a resumed folder loses the scratch files that an
        interrupted write left."""
        root = out_root / experiment
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create results folder {root}: {exc.strerror}") from None
        if not os.access(root, os.W_OK):
            raise ConfigError(f"results folder {root} is not writable")
        if resume:
            previous = sorted(root.glob(f".partial-{cfg_hash}-*"))
            if previous:
                work = cls(root, previous[-1])
                work.lock.acquire()
                for scratch in [p for p in work.path.rglob(".*") if is_scratch(p)]:
                    if scratch.is_dir():
                        shutil.rmtree(scratch, ignore_errors=True)
                    else:
                        scratch.unlink(missing_ok=True)
                return work
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = Path(tempfile.mkdtemp(prefix=f".partial-{cfg_hash}-{stamp}-", dir=root))
        work = cls(root, path)
        work.lock.acquire()
        return work

    # -- folds ------------------------------------------------------------------------------
    def fold_file(self, fold: str) -> Path:
        return self.path / "folds" / f"{fold}.parquet"

    def fold_done(self, fold: str) -> bool:
        return self.fold_file(fold).exists()

    def save_fold(self, fold: str, per_unit: pl.DataFrame) -> None:
        write_parquet_atomic(per_unit, self.fold_file(fold))

    def load_fold(self, fold: str) -> pl.DataFrame:
        return pl.read_parquet(self.fold_file(fold))

    # -- files ------------------------------------------------------------------------------
    def write_text(self, name: str, text: str) -> Path:
        return atomic.write_text(self.path / name, text)

    def write_json(self, name: str, data: Any) -> Path:
        return self.write_text(name, json.dumps(data, indent=2, default=str) + "\n")

    def finish(self, manifest: dict[str, Any]) -> Path:
        """Write the manifest and rename the work folder to its final, timestamped name."""
        for scratch in ("folds", "exposure", "auc_scores"):
            if (self.path / scratch).exists():
                shutil.rmtree(self.path / scratch)
        self.write_json(MANIFEST, {"format": FORMAT_VERSION, **manifest})
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        for attempt in range(1000):
            final = self.root / (stamp if attempt == 0 else f"{stamp}-{attempt + 1}")
            try:
                os.rename(self.path, final)  # fails if `final` exists and is not empty
            except OSError:
                if final.exists():
                    continue
                raise
            self.lock.release()  # after the rename, so that no --resume can pick the folder up
            return final
        raise ConfigError(f"could not find a free results folder name under {self.root}")


def write_parquet_atomic(frame: pl.DataFrame, target: Path) -> None:
    """Write a Parquet file atomically (``recsys_eval.core.atomic``), so no reader sees half a file."""
    atomic.write_parquet(frame, target)


def sink_parquet_atomic(frame: pl.LazyFrame, target: Path) -> None:
    """Stream a lazy frame into a Parquet file atomically."""
    atomic.sink_parquet(frame, target)


def write_csv_atomic(frame: pl.DataFrame, target: Path) -> None:
    atomic.write_csv(frame, target)


def is_complete(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()
