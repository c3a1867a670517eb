"""Running a serial ``nogil`` kernel over chunks of units on a pool of threads; mapping a function
over a stream of independent parts on threads, its results in the stream's order.

numba compiles a ``parallel=True`` (``prange``) kernel several times slower than the same loop
without it: the parfor passes, the outlined gufunc and the threading-layer glue cost seconds per
kernel on a first run (the quickstart's 15 prange kernels took about 40 s of its 105 s of
compiling). The kernels here have one parallel loop over independent chunks, so a serial kernel
compiled with ``nogil=True`` that does the chunks ``lo:hi`` it is given, called from this pool, does
the same work on as many threads, in the same order within a chunk: the same bits.

The pool has numba's thread count (:func:`numba.get_num_threads`, which the caller may have
lowered with :func:`numba.set_num_threads`) of workers busy at a time; each takes the next chunk
when it is done with one, as numba's work queue does.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def chunk_bounds(n_units: int, per_thread: int = 4) -> np.ndarray:
    """Unit bounds of the parallel chunks (a few per thread, for load balance)."""
    from numba import get_num_threads

    n_chunks = max(1, min(n_units, per_thread * get_num_threads()))
    return np.linspace(0, n_units, n_chunks + 1).astype(np.int64)


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            from numba import config

            _pool = ThreadPoolExecutor(max_workers=config.NUMBA_NUM_THREADS, thread_name_prefix="recsys-chunks")
        return _pool


def run_chunks(kernel: Callable[..., Any], bounds: np.ndarray, *args: Any, index: bool = False) -> None:
    """``kernel(bounds[c], bounds[c + 1], *args)`` for every chunk ``c`` (``kernel(c, bounds[c],
    bounds[c + 1], *args)`` with ``index``, for per-chunk partial results), on numba's thread count
    of threads; ``kernel`` writes its results into arrays among ``args``. Raises what a chunk
    raised."""
    from numba import get_num_threads

    chunks = [(c, int(bounds[c]), int(bounds[c + 1])) if index else (int(bounds[c]), int(bounds[c + 1]))
              for c in range(len(bounds) - 1)]
    threads = min(get_num_threads(), len(chunks))
    if threads <= 1:
        for chunk in chunks:
            kernel(*chunk, *args)
        return
    taken = itertools.count()  # next() of a count is atomic under the GIL

    def work() -> None:
        for c in iter(taken.__next__, None):
            if c >= len(chunks):
                return
            kernel(*chunks[c], *args)

    futures = [_executor().submit(work) for _ in range(threads)]
    for future in futures:
        future.result()


def map_in_order(function: Callable[[Any], Any], items: Iterable[Any], *, workers: int = 2, ahead: int = 2) -> Iterator[Any]:
    """``function(item)`` of every item, computed on ``workers`` threads and yielded in the items'
    order: the same results as a loop when ``function`` depends on its item alone. At most
    ``ahead`` items are taken from ``items`` before their results are yielded, so a stream of large
    parts holds about ``ahead + 1`` of them at once (the one the caller reads next among them).

    Threads pay where ``function`` spends its time in code that releases the GIL (numpy, polars,
    ``nogil`` numba kernels). Its own pool: a function that calls :func:`run_chunks` does not wait
    on the pool it runs in. Raises what a call raised, when its result is reached."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="recsys-parts") as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(function, item))
            del item  # the pending call holds it until it is done
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
