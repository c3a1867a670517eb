"""Where numba keeps the compiled kernels, and telling the user when it compiles them.

numba compiles every ``@njit(cache=True)`` kernel on its first call and keeps the machine code in a
cache folder; a cold cache costs tens of seconds on the first run. recsys_eval's kernels are cached
in ``<user cache>/recsys-eval/numba/<recsys-eval version>-<source digest>-<numba version>-<python>``
(platformdirs' per-user cache folder), by their place in the package, so that every clone and
environment of the same sources on a machine shares one cache (:mod:`recsys_eval.core.kernel_locator`).
The digest is part of the key because numba checks a cached kernel against its own bytecode only: a
kernel keeps the machine code of the functions it calls from other modules, so after such a function
changed (a commit between two clones of one version) the stale kernel would be loaded, and can crash. Setting
``NUMBA_CACHE_DIR`` (or ``NUMBA_CACHE_LOCATOR_CLASSES``) keeps numba's own behaviour instead.

numba reads both variables once, when it is imported, which is why :func:`configure` runs in the
package's ``__init__`` and reads versions from package metadata instead of importing numba.

numba saves a cache entry without a lock (``IndexDataCacheFile.save`` in numba/core/caching.py reads
the kernel's index, takes the first data file number the index does not use, writes both): two
processes saving different signatures of one kernel at once (a Slurm array or ``xargs -P`` of runs
on a cold cache) can both take ``<kernel>.1.nbc``, and the index then points one signature at the
other's machine code. :func:`lock_cache_saves` makes every save hold an exclusive ``flock`` on
``<index>.lock`` beside the index, whichever locator chose the folder (``NUMBA_CACHE_DIR``
included); loads need no lock, as numba replaces index and data files by atomic renames.

Every new version or source digest starts a new folder (~6 MB for the quickstart's kernels): a
process that starts a folder removes the sibling folders no process used in ``STALE_DAYS`` days
(:func:`use_cache_folder`), so that upgrades and edits do not pile up caches nobody reads.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import Any

LOCATOR = "recsys_eval.core.kernel_locator.PackageCacheLocator"


def cache_folder(package_version: str) -> Path:
    """The kernel cache folder of this recsys-eval, numba and Python."""
    from platformdirs import user_cache_dir

    try:
        numba_version = version("numba")
    except PackageNotFoundError:
        numba_version = "unknown"
    key = f"{package_version}-{source_digest()}-{numba_version}-{sys.implementation.cache_tag}"
    return Path(user_cache_dir("recsys-eval")) / "numba" / key


#: A kernel cache folder of another version or source that no process used for this many days is
#: removed when a process starts a new folder.
STALE_DAYS = 30
#: The file in a kernel cache folder whose modification time is its last use.
USED_STAMP = "last-used"


@functools.cache
def use_cache_folder(folder: Path) -> None:
    """Record that this process uses the kernel cache ``folder`` (the modification time of its
    ``last-used`` file); when the folder is new, remove its stale siblings (:func:`remove_stale`).
    Once per process and folder (numba's locator calls it for every kernel)."""
    stamp = folder / USED_STAMP
    new = not stamp.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    except OSError:  # a read-only cache: numba itself falls back to compiling without caching
        return
    if new:
        remove_stale(folder)


def remove_stale(folder: Path, now: float | None = None) -> list[Path]:
    """Remove the sibling folders of ``folder`` (other versions' and sources' kernel caches) last
    used more than :data:`STALE_DAYS` days before ``now``: by their ``last-used`` file, or by the
    folder's own modification time when it has none. Returns the folders removed. A folder in
    use by a running process of another version was stamped when that process started it, so is
    kept; a removal that fails (a file held open elsewhere) leaves the folder for a later run."""
    now = time.time() if now is None else now
    removed = []
    for sibling in folder.parent.iterdir():
        if sibling == folder or not sibling.is_dir():
            continue
        stamp = sibling / USED_STAMP
        try:
            last_used = (stamp if stamp.exists() else sibling).stat().st_mtime
        except OSError:
            continue
        if now - last_used > STALE_DAYS * 86400:
            shutil.rmtree(sibling, ignore_errors=True)
            if not sibling.exists():
                removed.append(sibling)
    return removed


#: The package folder (``recsys_eval/``), whatever the path it is installed at.
PACKAGE = Path(__file__).resolve().parents[1]


def package_version() -> str:
    """The installed recsys-eval version (``0+unknown`` in a source tree that is not installed)."""
    try:
        return version("recsys-eval")
    except PackageNotFoundError:
        return "0+unknown"


@functools.cache
def source_digest() -> str:
    """The first 12 hex digits of the SHA-256 of every module of the package (path and bytes, in
    path order): the same in every copy of the same sources (~2 ms)."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def configure() -> None:
    """Make numba's cache saves hold a lock (:func:`lock_cache_saves`), and have numba locate
    recsys_eval's kernel caches in :func:`cache_folder` unless the user set ``NUMBA_CACHE_DIR`` or
    ``NUMBA_CACHE_LOCATOR_CLASSES``; other packages' kernels keep their folders.

    Both act when numba imports the module concerned (an import hook), so that importing
    recsys_eval does not import numba; the locator is set in numba's ``config`` rather than the
    environment, which child processes would inherit even when they run another environment
    without recsys_eval."""
    _after_import("numba.core.caching", lock_cache_saves)
    if not (os.environ.get("NUMBA_CACHE_DIR") or os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES")):
        _after_import("numba.core.config", _use_locator)


def _use_locator(config: ModuleType) -> None:
    if not config.CACHE_DIR and not config.CACHE_LOCATOR_CLASSES:
        config.CACHE_LOCATOR_CLASSES = LOCATOR


def lock_cache_saves(caching: ModuleType) -> None:
    """Make numba's ``IndexDataCacheFile.save`` (read the index, choose a data file, write both)
    hold an exclusive ``flock`` on ``<index>.lock`` for its whole length, waiting for another
    process's save to end. A folder where the lock file cannot be created (read-only) saves as
    numba does, which then fails and compiles without caching, as before. Once per process."""
    index_file = caching.IndexDataCacheFile
    unlocked = index_file.save
    if getattr(unlocked, "locked", False):
        return

    @functools.wraps(unlocked)
    def save(self: Any, key: Any, data: Any) -> None:
        try:
            fd = os.open(f"{self._index_path}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            return unlocked(self, key, data)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            unlocked(self, key, data)
        finally:
            os.close(fd)  # releases the flock

    save.locked = True  # type: ignore[attr-defined]
    index_file.save = save


def _after_import(name: str, action: Callable[[ModuleType], None]) -> None:
    """Call ``action(module)`` once module ``name`` is imported: now if it is, else by an import hook."""
    module = sys.modules.get(name)
    if module is not None:
        action(module)
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, action))


class _AfterImport:
    """A meta path finder that lets module ``name`` load as usual, then calls ``action`` on it."""

    def __init__(self, name: str, action: Callable[[ModuleType], None]) -> None:
        self.name, self.action = name, action

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != self.name:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            load, action = spec.loader.exec_module, self.action

            def exec_module(module: ModuleType) -> None:
                load(module)
                action(module)

            spec.loader.exec_module = exec_module
        return spec


_listening = False


def announce_compilation(write: Callable[[str], None]) -> None:
    """Call ``write("compiling kernels (first run only)…")`` once, when numba starts compiling a
    kernel it did not find in the cache, so that a first run does not make a step look slow.

    Listens to numba's ``numba:compile`` event, which numba fires only on a cache miss. Imports
    numba: call it from a command that is about to run kernels; later calls do nothing.
    """
    global _listening
    if _listening:
        return
    from numba.core import event

    class _FirstCompile(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            event.unregister("numba:compile", self)
            write("compiling kernels (first run only)…")

        def on_end(self, ev: event.Event) -> None:
            pass

    event.register("numba:compile", _FirstCompile())
    _listening = True
