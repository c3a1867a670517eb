"""recsys_eval: offline evaluation of recommender systems.

The package mirrors the pipeline: ``data`` (load, prepare), ``split``, ``targets``, ``recommend``,
``measure``, ``compare``, ``report``, ``pipeline`` (one fold and how it runs), ``tune``, ``engine``
(Spark) and ``experiment``, over the core types in ``core``; each imports only those before it.

Importing it is cheap: the core types are imported on first use. It also points numba's cache of
recsys_eval's compiled kernels at the per-user cache folder (unless ``NUMBA_CACHE_DIR`` is set),
keyed by the versions of recsys-eval, numba and Python, so that every clone and environment of one
version compiles the kernels once per machine (see :mod:`recsys_eval.core.kernel_cache`), and asks
polars' allocator to keep freed pages a few seconds, so that repeated measuring calls do not fault
their memory in afresh (:mod:`recsys_eval.core.allocator`).
"""

from recsys_eval._lazy import lazy_exports
from recsys_eval.core import allocator, kernel_cache
from recsys_eval.errors import ConfigError, DataError, RecsysEvalError  # noqa: F401

__version__ = kernel_cache.package_version()
kernel_cache.configure()
allocator.configure()

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "recsys_eval.core": ["Interactions", "Rankings", "Split", "Targets"],
    "recsys_eval.pipeline.api": ["evaluate"],
})
__all__ += ["ConfigError", "DataError", "RecsysEvalError", "__version__"]
