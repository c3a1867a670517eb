"""Lazy re-exports for the package ``__init__`` files (PEP 562 module ``__getattr__``).

A package that re-exports names from modules importing polars, numpy or numba would import them
all at its own import, which costs seconds (``recsys-eval --help`` imports ``recsys_eval``). With
:func:`lazy_exports` the package lists what it re-exports, and each name's module is imported on
first access: ``from recsys_eval.measure import measure`` works as before.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, list[str]]) -> tuple[list[str], Callable, Callable]:
    """``(__all__, __getattr__, __dir__)`` for ``package``, re-exporting ``exports`` (module ->
    names). A name is imported from its module on first access, then kept on the package."""
    home = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | home.keys())

    return sorted(home), __getattr__, __dir__


def import_meanwhile(*modules: str) -> threading.Thread:
    """Import ``modules`` on a daemon thread, in order, and return it, so that a module's import
    (numba's ~0.3 s) overlaps work that releases the GIL, such as polars reading a file. A later
    import of the same module waits for this one (Python's per-module import lock); an import error
    is raised there, where the module is used, not here. ``"module:function"`` also calls
    ``function()`` once imported (a warm-up, such as numba's first dispatch)."""

    def load() -> None:
        for entry in modules:
            module, _, function = entry.partition(":")
            try:
                loaded = importlib.import_module(module)
                if function:
                    getattr(loaded, function)()
            except Exception:  # the caller's own import or call reports it
                return

    thread = threading.Thread(target=load, name="recsys-eval-import", daemon=True)
    thread.start()
    return thread
