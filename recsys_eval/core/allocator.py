"""polars' allocator told to keep freed pages for a few seconds before handing them back.

polars allocates through its own jemalloc, whose options it sets when it is imported
(``dirty_decay_ms:500,muzzy_decay_ms:1000`` in ``polars/__init__.py``, followed by what
``_RJEM_MALLOC_CONF`` held, which so overrides them): freed pages go back to the kernel after half a
second, usually before the next call asks for them again, so every measuring call faults its per-unit rows' memory in afresh (at ML-25M size, 162,541 users x
top-100 with the beyond-accuracy metrics, ~300 MB and ~88,000 minor page faults a call, most of
the rows' cost; ``benchmarks/bench_beyond.py`` prints the faults). With freed pages kept for
:data:`DIRTY_DECAY_MS` the next call reuses them (~2,400 faults). The price: memory a call freed
stays resident up to that long, which a whole run's peak includes (measured on the ML-1M study,
``benchmarks/bench_experiment.py``).

jemalloc reads its options once, when polars is loaded, which is why :func:`configure` runs in the
package's ``__init__``: it applies where recsys_eval is imported before polars (the CLI, and scripts
that import it first), and leaves a ``_RJEM_MALLOC_CONF`` the user set as it is.
"""

from __future__ import annotations

import os
import sys

#: How long jemalloc keeps a freed page before handing it back (its own default is 10 s).
DIRTY_DECAY_MS = 5000


def configure() -> None:
    """Set polars' jemalloc options unless polars is already loaded or the user set them."""
    if "polars" not in sys.modules:
        os.environ.setdefault("_RJEM_MALLOC_CONF", f"dirty_decay_ms:{DIRTY_DECAY_MS}")
