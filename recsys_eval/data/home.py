"""Where datasets live: the data home, and where derived files go when it cannot be written.

The data home holds the MovieLens archives and their extracted folders. It is, in order: an explicit
argument, the environment variable ``RECSYS_EVAL_DATA``, or the per-user cache folder of
platformdirs. Files derived from a dataset (the Parquet cache, an extraction of an archive) go beside
the data, in ``<data home>/.recsys-eval/<dataset>/``; when the data home cannot be written (a shared,
read-only copy) they go to ``<derived root>/<dataset>-<digest of the data home path>/`` instead, where
the derived root is ``RECSYS_EVAL_CACHE`` or ``<per-user cache folder>/derived``.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import platformdirs

from recsys_eval.errors import DataError

DATA_ENV = "RECSYS_EVAL_DATA"
CACHE_ENV = "RECSYS_EVAL_CACHE"
APP_NAME = "recsys-eval"
DERIVED_FOLDER = ".recsys-eval"


def data_home(explicit: str | Path | None = None) -> Path:
    """The data home: ``explicit``, else ``$RECSYS_EVAL_DATA``, else the per-user cache folder.

    The folder need not exist: it is created when something has to be written to it.
    """
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser()
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir(APP_NAME))


def derived_root() -> Path:
    """Root of the derived files of data homes that cannot be written."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir(APP_NAME)) / "derived"


def is_writable(folder: Path) -> bool:
    """Whether files can be created in ``folder`` (or in its nearest existing ancestor).

    A folder whose permission bits grant nobody write access counts as read-only even for root,
    who could write it anyway: a shared read-only copy of the data must stay untouched.
    """
    probe = Path(folder).absolute()
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    if not probe.is_dir():
        return False
    mode = stat.S_IMODE(probe.stat().st_mode)
    return os.access(probe, os.W_OK | os.X_OK) and bool(mode & 0o222)


def writable_folder(folder: Path, purpose: str) -> Path:
    """Create ``folder`` if needed and return it; a DataError if it cannot be written."""
    folder = Path(folder)
    if not is_writable(folder):
        raise DataError(
            f"cannot write {purpose} to {folder}: the folder is not writable; choose a writable "
            f"data home with --data-home, data_home=..., or the {DATA_ENV} environment variable"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot create {folder} for {purpose}: {exc.strerror or exc}") from exc
    return folder


def derived_folder(home: Path, name: str) -> Path:
    """Folder of the files derived from dataset ``name`` of data home ``home`` (not created).

    Beside the data when the home is writable, else under :func:`derived_root`, keyed by the
    home's absolute path so that two data homes never share derived files.
    """
    home = Path(home)
    if is_writable(home):
        return home / DERIVED_FOLDER / name
    digest = hashlib.sha256(str(home.absolute()).encode()).hexdigest()[:12]
    return derived_root() / f"{name}-{digest}"
