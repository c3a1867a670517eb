"""The numba cache locator of recsys_eval's kernels: one cache per machine and version.

numba's own locators key a kernel's cache by the absolute path of its source folder, so every clone,
virtual environment or reinstall compiles all kernels again. This locator puts the cache of a
kernel defined in ``recsys_eval/<sub>/<module>.py`` in ``<kernel cache folder>/<sub>`` (see
:mod:`recsys_eval.core.kernel_cache`), whatever the path of the package; numba checks every entry
against the SHA-256 of the source file, so a clone whose kernel file differs recompiles it. Kernels
defined outside the package are left to numba's own locators.

numba imports this module itself, named in ``NUMBA_CACHE_LOCATOR_CLASSES``, when it sets up the
first cached kernel.
"""

from __future__ import annotations

from pathlib import Path

from numba.core.caching import CacheImpl, _CacheLocator, _SourceFileBackedLocatorMixin

from recsys_eval.core.kernel_cache import PACKAGE, cache_folder, package_version, use_cache_folder


class PackageCacheLocator(_SourceFileBackedLocatorMixin, _CacheLocator):
    """Caches recsys_eval's kernels by their place in the package; defers any other function to
    numba's default locators."""

    def __init__(self, py_func, py_file: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        inside = Path(py_file).resolve().parent.relative_to(PACKAGE)
        folder = cache_folder(package_version())
        use_cache_folder(folder)
        self._cache_path = str(folder / inside)

    def get_cache_path(self) -> str:
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file: str) -> _CacheLocator | None:
        if Path(py_file).resolve().is_relative_to(PACKAGE):
            found = super().from_function(py_func, py_file)
            if found is not None:
                return found
        for default in CacheImpl._locator_classes:
            found = default.from_function(py_func, py_file)
            if found is not None:
                return found
        return None
