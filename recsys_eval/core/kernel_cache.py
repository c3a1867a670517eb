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

Every new version or source digest starts a new folder (~6 MB for the quickstart's kernels): a
process that starts a folder removes the sibling folders no process used in ``STALE_DAYS`` days
(:func:`use_cache_folder`), so that upgrades and edits do not pile up caches nobody reads.
"""

from __future__ import annotations

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
    """Have numba locate recsys_eval's kernel caches in :func:`cache_folder`, unless the user set
    ``NUMBA_CACHE_DIR`` or ``NUMBA_CACHE_LOCATOR_CLASSES``; other packages' kernels are unaffected.

    Sets numba's ``config.CACHE_LOCATOR_CLASSES`` as soon as numba imports its config module (an
    import hook), rather than the environment variable, which child processes would inherit even
    when they run another environment without recsys_eval."""
    if os.environ.get("NUMBA_CACHE_DIR") or os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES"):
        return
    config = sys.modules.get("numba.core.config")
    if config is not None:
        _use_locator(config)
    elif not any(isinstance(finder, _NumbaConfigHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NumbaConfigHook())


def _use_locator(config: ModuleType) -> None:
    if not config.CACHE_DIR and not config.CACHE_LOCATOR_CLASSES:
        config.CACHE_LOCATOR_CLASSES = LOCATOR


class _NumbaConfigHook:
    """A meta path finder that lets ``numba.core.config`` load as usual, then sets the locator."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "numba.core.config":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            load = spec.loader.exec_module

            def exec_module(module: ModuleType) -> None:
                load(module)
                _use_locator(module)

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
