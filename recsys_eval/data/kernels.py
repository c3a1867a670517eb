"""The compiled kernels of reading and indexing run and judgment files: the integer-file scan of
:mod:`recsys_eval.data.delimited` and the id index, row grouping and checks of
:mod:`recsys_eval.data.runs`.

A table's rows grouped by user are a list of row numbers, ``rows``; an empty list stands for the
table's own order (a file already grouped by user, a run already in rank order: most files), which
:func:`row_at` reads as ``j``, so that no identity list of the file's length is built.

They live apart so that importing those modules does not import numba (~0.3 s): reading a file
needs no kernel (Parquet) or only the scan, and :func:`recsys_eval.data.runs.load_run` imports this
module on a thread while the files are read, so numba's import overlaps polars' reading.
"""

from __future__ import annotations

import numba
import numpy as np

from recsys_eval.core.sorting import stable_argsort


def warm_up() -> None:
    """numba's first dispatch in a process loads its typing and lowering registries (~0.2 s of
    Python, whatever the kernel): done once here, on the thread that imports this module while the
    files are read, with the signature the index's grouping then calls."""
    count_users(np.zeros(0, dtype=np.int32), 0)


@numba.njit(cache=True, nogil=True)
def row_at(rows: np.ndarray, j: int) -> int:
    """``rows[j]``, or ``j`` when ``rows`` is empty (the table's own order)."""
    return rows[j] if len(rows) else j


@numba.njit(cache=True, nogil=True)
def count_lines(chunk_index: int, start: int, stop: int, data: np.ndarray, lines: np.ndarray) -> None:
    """``lines[chunk_index]``: the lines in ``data[start:stop]`` (its newlines, and a last line
    without one)."""
    chunk = data[start:stop]
    count = 0
    for p in range(len(chunk)):  # a loop over a slice, which LLVM vectorises
        count += chunk[p] == 10
    lines[chunk_index] = count + (stop > start and data[stop - 1] != 10)


@numba.njit(cache=True, nogil=True)
def parse_integers(chunk_index: int, start: int, stop: int, data: np.ndarray, separator: int, out: np.ndarray,
                    first_rows: np.ndarray, failed: np.ndarray) -> None:
    """Parse the lines of ``data[start:stop]`` into ``out[:, first_rows[chunk_index]:]``; sets
    ``failed[chunk_index]`` to the position of the first byte that is not part of a line of
    ``out.shape[0]`` non-negative integers."""
    failed[chunk_index] = parse_lines(data, start, stop, separator, out, first_rows[chunk_index])


@numba.njit(cache=True, nogil=True)
def parse_lines(data: np.ndarray, start: int, stop: int, separator: int, out: np.ndarray, row: int) -> int:
    n_fields = out.shape[0]
    field, value, digits = 0, 0, 0
    for p in range(start, stop):
        c = data[p]
        if 48 <= c <= 57:
            if digits == 18:
                return p
            value = value * 10 + (c - 48)
            digits += 1
        elif c == separator and digits and field < n_fields - 1:
            out[field, row] = value
            field, value, digits = field + 1, 0, 0
        elif c == 10 and digits and field == n_fields - 1:
            out[field, row] = value
            row, field, value, digits = row + 1, 0, 0, 0
        elif not (c == 13 and p + 1 < stop and data[p + 1] == 10):
            return p
    if field or digits:  # a last line without a newline
        if not digits or field != n_fields - 1:
            return stop
        out[field, row] = value
    return -1


def id_range(chunks: list[np.ndarray]) -> tuple[int, int]:
    """The smallest and largest value of integer ``chunks`` in one pass each, ``(0, -1)`` for none."""
    bounds = [_min_max(values) for values in chunks]
    return min((b[0] for b in bounds), default=0), max((b[1] for b in bounds), default=-1)


@numba.njit(cache=True, nogil=True)
def _min_max(values: np.ndarray) -> tuple[int, int]:
    low = high = values[0]
    for value in values:
        low, high = min(low, value), max(high, value)
    return low, high


@numba.njit(cache=True, nogil=True)
def offset_codes(values: np.ndarray, low: int, present: np.ndarray, codes: np.ndarray) -> None:
    """``codes = values - low``, marking each in ``present``."""
    for row in range(len(values)):
        code = values[row] - low
        present[code] = True
        codes[row] = code


@numba.njit(cache=True, nogil=True)
def lookup_codes(values: np.ndarray, low: int, code_of: np.ndarray, codes: np.ndarray) -> None:
    for row in range(len(values)):
        codes[row] = code_of[values[row] - low]


@numba.njit(cache=True, nogil=True)
def count_users(user: np.ndarray, n_users: int) -> tuple[np.ndarray, bool]:
    offsets = np.zeros(n_users + 1, dtype=np.int64)
    ascending = True
    for row in range(len(user)):
        offsets[user[row] + 1] += 1
        ascending &= row == 0 or user[row] >= user[row - 1]
    for u in range(n_users):
        offsets[u + 1] += offsets[u]
    return offsets, ascending


@numba.njit(cache=True, nogil=True)
def scatter_rows(user: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> None:
    fill = offsets[:-1].copy()
    for row in range(len(user)):
        u = user[row]
        rows[fill[u]] = row
        fill[u] += 1


@numba.njit(cache=True, nogil=True)
def check_user_rows(offsets, rows, item, n_items, rank, by_rank):
    """Repeated items and ranks of each user's rows (see :func:`check_rows`); puts the rows in rank
    order into ``by_rank`` (all -1) when ``rank`` is given. Returns the repeat count, the first
    repeated row (the smallest) and the row it repeats, and the count of users whose ranks are not
    1..L and the first of them."""
    owner = np.full(n_items, -1, dtype=np.int64)
    first = np.empty(n_items, dtype=np.int64)
    has_rank = len(rank) > 0
    n_repeats, repeat, earlier, n_bad, bad_user = 0, -1, -1, 0, -1
    for u in range(len(offsets) - 1):
        a, b = offsets[u], offsets[u + 1]
        bad = False
        for j in range(a, b):
            row = row_at(rows, j)
            i = item[row]
            if owner[i] == u:
                if n_repeats == 0 or row < repeat:
                    repeat, earlier = row, first[i]
                n_repeats += 1
            else:
                owner[i], first[i] = u, row
            if has_rank:
                slot = a + rank[row] - 1
                if a <= slot < b and by_rank[slot] < 0:
                    by_rank[slot] = row
                else:
                    bad = True
        if bad:
            if n_bad == 0:
                bad_user = u
            n_bad += 1
    return n_repeats, repeat, earlier, n_bad, bad_user


@numba.njit(cache=True, nogil=True)
def ranks_in_order(offsets, rank):
    """Whether the rows, grouped by user in the table's own order, have ranks 1, 2, ..., L in that
    order, user after user (the rank check passed, and no row to move)."""
    for u in range(len(offsets) - 1):
        a = offsets[u]
        for j in range(a, offsets[u + 1]):
            if rank[j] != j - a + 1:
                return False
    return True


@numba.njit(cache=True, nogil=True)
def order_by_score(offsets, rows, item, primary):
    """Each user's rows by ``primary`` ascending, ties by item."""
    ordered = np.empty(offsets[-1], dtype=np.int64)
    for u in range(len(offsets) - 1):
        a, b = offsets[u], offsets[u + 1]
        keys = np.empty(b - a)  # float64 keys and loops: see recsys_eval.core.sorting
        for j in range(b - a):
            keys[j] = item[row_at(rows, a + j)]
        by_item = stable_argsort(keys)
        for j in range(b - a):
            keys[j] = primary[row_at(rows, a + by_item[j])]
        by_primary = stable_argsort(keys)
        for j in range(b - a):
            ordered[a + j] = row_at(rows, a + by_item[by_primary[j]])
    return ordered


@numba.njit(cache=True, nogil=True)
def items_ascend(offsets, item):
    """Whether each user's items ascend in the table's own order."""
    for u in range(len(offsets) - 1):
        for j in range(offsets[u] + 1, offsets[u + 1]):
            if item[j] < item[j - 1]:
                return False
    return True


@numba.njit(cache=True, nogil=True)
def by_item(offsets, rows, item):
    """Each user's rows by item: empty (the table's own order) when ``rows`` is and each user's
    items already ascend; else a new list (an insertion sort for the usual few rows a user has)."""
    if len(rows) == 0 and items_ascend(offsets, item):
        return rows
    out = np.empty(offsets[-1], dtype=np.int64)
    for j in range(len(out)):
        out[j] = row_at(rows, j)
    for u in range(len(offsets) - 1):
        a, b = offsets[u], offsets[u + 1]
        if b - a > 32:
            given = out[a:b].copy()
            keys = np.empty(b - a)
            for j in range(b - a):
                keys[j] = item[given[j]]
            order = stable_argsort(keys)
            for j in range(b - a):
                out[a + j] = given[order[j]]
            continue
        for j in range(a + 1, b):
            row = out[j]
            key = item[row]
            k = j
            while k > a and item[out[k - 1]] > key:
                out[k] = out[k - 1]
                k -= 1
            out[k] = row
    return out


@numba.njit(cache=True, nogil=True)
def gather_users(rows, offsets, users, out):
    """The rows ``offsets[u]:offsets[u + 1]`` of ``rows`` (see :func:`row_at`) for every ``u`` of
    ``users``, one user after the other, into ``out``."""
    at = 0
    for u in users:
        for j in range(offsets[u], offsets[u + 1]):
            out[at] = row_at(rows, j)
            at += 1


@numba.njit(cache=True, nogil=True)
def train_chunk(chunk, lo, hi, train, test, run, tested, n_items, users_before, pair_user, pair_item, removed,
                 ranked_train, n_pairs):
    """Users ``lo:hi`` of TRAIN grouped by user (each of ``train``, ``test``, ``run`` is
    ``(offsets, rows, item)``): their (user, item) pairs once, from ``train[0][lo]`` on, into
    ``pair_user`` (the train-user index of ascending user codes: ``users_before[u]`` users with
    train rows come before ``u``) and ``pair_item``, their count into ``n_pairs[chunk]``; for
    tested users, how many of their train items are neither tested nor ranked (they leave the AUC
    candidates, ``removed``), and how many ranked items are train items (``ranked_train[chunk]``).
    Empty ``pair_user`` and ``pair_item``: the pairs are counted, not written."""
    w_offsets, w_rows, w_item = train
    write = len(pair_user) > 0
    t_offsets, t_rows, t_item = test
    r_offsets, r_rows, r_item = run
    last = np.full((n_items, 3), -1, dtype=np.int32)  # the last user that tests, ranks, trains on the item
    judged, ranked, trained = last[:, 0], last[:, 1], last[:, 2]  # side by side: one cache line an item
    at, n_ranked_train = w_offsets[lo], 0
    for u in range(lo, hi):
        a, b = w_offsets[u], w_offsets[u + 1]
        if a == b:
            continue
        if tested[u]:
            for j in range(r_offsets[u], r_offsets[u + 1]):
                ranked[r_item[row_at(r_rows, j)]] = u
            for j in range(t_offsets[u], t_offsets[u + 1]):
                judged[t_item[row_at(t_rows, j)]] = u
        for j in range(a, b):
            i = w_item[row_at(w_rows, j)]
            if trained[i] == u:
                continue
            trained[i] = u
            if tested[u]:
                removed[u] += judged[i] != u and ranked[i] != u
                n_ranked_train += ranked[i] == u
            if write:
                pair_user[at], pair_item[at] = users_before[u], i
            at += 1
    n_pairs[chunk], ranked_train[chunk] = at - w_offsets[lo], n_ranked_train


@numba.njit(cache=True, nogil=True)
def judged_pairs(test, run, n_items):
    """(TEST row, RUN row) of every judged pair the run ranks, by user then item (``test`` rows
    sorted by item within each user; each is ``(offsets, rows, item)``)."""
    t_offsets, t_rows, t_item = test
    r_offsets, r_rows, r_item = run
    at = np.full(n_items, -1, dtype=np.int64)
    owner = np.full(n_items, -1, dtype=np.int64)
    test_rows = np.empty(t_offsets[-1], dtype=np.int64)
    run_rows = np.empty(t_offsets[-1], dtype=np.int64)
    n = 0
    for u in range(len(t_offsets) - 1):
        if t_offsets[u] == t_offsets[u + 1]:
            continue
        for j in range(r_offsets[u], r_offsets[u + 1]):
            row = row_at(r_rows, j)
            owner[r_item[row]], at[r_item[row]] = u, row
        for j in range(t_offsets[u], t_offsets[u + 1]):
            row = row_at(t_rows, j)
            i = t_item[row]
            if owner[i] == u:
                test_rows[n], run_rows[n] = row, at[i]
                n += 1
    return test_rows[:n], run_rows[:n]
