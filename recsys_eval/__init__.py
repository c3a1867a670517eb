"""recsys_eval: offline evaluation of recommender systems.

The package mirrors the pipeline: ``data`` (load, prepare), ``split``, ``targets``, ``recommend``,
``measure``, ``compare``, ``report`` and ``experiment``, over the core types in ``core``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("recsys-eval")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

from recsys_eval.core import Interactions, Rankings, Split, Targets  # noqa: E402
from recsys_eval.errors import ConfigError, DataError, RecsysEvalError  # noqa: E402

__all__ = [
    "ConfigError",
    "DataError",
    "Interactions",
    "Rankings",
    "RecsysEvalError",
    "Split",
    "Targets",
    "__version__",
]
