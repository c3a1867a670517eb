"""Miscalibration C_KL of top-k lists (Steck, "Calibrated Recommendations", RecSys 2018;
docs/CONVENTIONS.md#calibration).

For a unit of user u, with p(g|i) = 1/|G_i| for each genre g of item i (0 for an item without
genres), H the user's train items with genres and L the listed top-k items with genres:

    p(g|u) = sum_{i in H} p(g|i) / |H|,   q(g|u) = sum_{i in L} p(g|i) / |L|,
    q~ = (1 - alpha) q + alpha p,          C_KL = sum_g p(g|u) log(p(g|u) / q~(g|u))   (nats)

with uniform weights (Steck's w_{u,i} = w_r(i) = 1) and alpha = ``calibration_alpha`` (0.01). NaN
when H or L is empty: no genre data in the user's profile, or in the list.

The one pass over every unit's list computes it (:func:`recsys_eval.measure.listpass.list_pass`
runs :func:`calibration_units`), from profiles kept per train (:func:`profiles`).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from recsys_eval.core.chunks import chunk_bounds, run_chunks

#: The spare sums past the genres' that take the padding of :func:`genre_rows` (never read).
SPARE = 16


def genre_rows(genres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An items x genres bool matrix as one row per item: its genre count, then its genres
    ascending, padded to the widest row with spare slots past every genre (slot j of item i:
    ``n_genres + (i x width + j) mod SPARE``), in the smallest integer type; and p(g|i) = 1/|G_i|
    by count. A row is a few bytes and the table a few hundred kB, so that each lookup of a train or
    listed item, the kernels' cost, is one cache line and the table stays in cache; every row is as
    wide as the widest, so that adding an item is a loop of fixed length (:func:`add_item`),
    without the mispredicted branch of a loop over 1 to 3 genres. The padding goes to one of
    :data:`SPARE` sums, not to one: with one, every item of fewer genres than the widest added to
    the same sum, each addition waiting for the last one's store (a third of calibration's time)."""
    genres = np.asarray(genres, dtype=bool)
    n_genres = genres.shape[1]
    per_item = genres.sum(axis=1)
    width = int(per_item.max(initial=0))
    dtype = np.uint8 if max(n_genres + SPARE, width + 1) <= 256 else np.int64
    slot = np.arange(len(genres) * (1 + width), dtype=np.int64).reshape(len(genres), 1 + width)
    rows = (n_genres + slot % SPARE).astype(dtype)
    rows[:, 0] = per_item
    items, columns = np.nonzero(genres)
    rows[items, 1 + np.arange(len(items)) - np.repeat(np.cumsum(per_item) - per_item, per_item)] = columns
    with np.errstate(divide="ignore"):
        weight = np.where(np.arange(width + 1) > 0, 1.0 / np.arange(width + 1), 0.0)
    return rows, weight


@njit(cache=True, nogil=True, inline="always")
def add_item(item, g_rows, g_weight, into):
    """Add p(.|item) to ``into`` (genres + :data:`SPARE` sums: the spare ones take the padding of
    :func:`genre_rows` and are never read); 1 if the item has genres, else 0. Each genre's sum adds
    the same terms in the same order as a loop over the item's genres alone."""
    n = g_rows[item, 0]
    weight = g_weight[n]
    for j in range(1, g_rows.shape[1]):
        into[g_rows[item, j]] += weight
    return 1 if n > 0 else 0


def profiles(indptr: np.ndarray, indices: np.ndarray, g_rows: np.ndarray, g_weight: np.ndarray,
             n_genres: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every train user's genre profile p(.|u) from its train row (CSR ``indptr``, ``indices``), as
    its non-zero entries in genre order: row offsets (each user's room is min(genres, sum of its
    items' genre counts)), the entries (entries x 3: genre, p(g|u) and log p(g|u)) and per user its
    entry count (none: no train item with genres, H empty). A user's profile depends on its
    train items alone, so that every list of the user, of any system, reads it instead of its
    train row, and every cutoff of every list reads its logarithms instead of computing them."""
    n_users = len(indptr) - 1
    row = np.repeat(np.arange(n_users), np.diff(indptr))
    room = np.minimum(np.bincount(row, weights=g_rows[indices, 0], minlength=n_users), n_genres).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(room)]).astype(np.int64)
    entries, counts = np.zeros((offsets[-1], 3)), np.zeros(n_users, dtype=np.int64)
    run_chunks(_profiles_chunk, chunk_bounds(n_users), indptr, indices, g_rows, g_weight, n_genres, offsets, entries,
               counts)
    return offsets, entries, counts


@njit(cache=True, nogil=True)
def _profiles_chunk(lo, hi, indptr, indices, g_rows, g_weight, n_genres, offsets, entries, counts):
    """:func:`profiles` of users lo:hi: p(g|u) = sum_{i in H} p(g|i) / |H|, summed in train order."""
    profile = np.zeros(n_genres + SPARE)  # and the spare slots of add_item
    for user in range(lo, hi):
        n_profile = 0
        for j in range(indptr[user], indptr[user + 1]):
            n_profile += add_item(indices[j], g_rows, g_weight, profile)
        e = offsets[user]
        for g in range(n_genres):
            if profile[g] > 0:
                entries[e, 0] = g
                entries[e, 1] = profile[g] / max(n_profile, 1)
                entries[e, 2] = np.log(entries[e, 1])
                e += 1
            profile[g] = 0.0
        counts[user] = e - offsets[user]


@njit(cache=True, nogil=True, error_model="numpy")
def calibration_units(lo, hi, offsets, items, unit_user, p_offsets, p_entries, p_counts, g_rows, g_weight, n_genres,
                      alpha, cutoffs, row, out):
    """C_KL of the lists of units lo:hi at every cutoff (into ``out`` from ``row``); NaN where the
    profile or the list has no genre data. p is the profile of the unit's user (:func:`profiles`;
    none past its rows), q the genre sums of the list's items, added in list order (:func:`add_item`),
    each cutoff's a prefix of the next's; at cutoff k, with L the n listed items with genres,

        C_KL = sum_{g: p > 0} p (log p - log((1 - alpha) / n q_g + alpha p))

    log p read from the profile: one logarithm a term, no division (a genre the list lacks takes
    the same formula, log(alpha p), without a branch on it). A unit's arguments of every cutoff are
    gathered first, then their logarithms taken in one loop over a contiguous array, which
    :func:`vector_log` lets the compiler run on SIMD lanes (numba's own log is a call a term, a
    third of the kernel's time; "numpy" error model: no ZeroDivisionError branch in the loop); a
    unit whose arguments may be subnormal (alpha p is, for a genre the list lacks) takes np.log's.
    One loop over the units, called once a chunk: helpers with array arguments called per unit
    cost numba's atomic reference counts, which measured more than the metric's arithmetic."""
    n_cut = len(cutoffs)
    kmax = cutoffs[n_cut - 1]
    q = np.zeros(n_genres + SPARE)  # the list's genre sums, and add_item's spare slots
    logs = np.empty(n_cut * n_genres)  # per cutoff, the log arguments of the profile's genres
    listed = np.zeros(n_cut, dtype=np.int64)
    for u in range(lo, hi):
        user = unit_user[u]
        start = p_offsets[user] if user < len(p_counts) else 0
        n_p = p_counts[user] if user < len(p_counts) else 0
        first, length = offsets[u], min(offsets[u + 1] - offsets[u], kmax)
        n_listed = r = 0
        smallest = np.inf  # of the arguments' lower bounds alpha p (q >= 0): vector_log's domain
        for i in range(n_p):
            smallest = min(smallest, alpha * p_entries[start + i, 1])
        for c in range(n_cut):
            end = min(cutoffs[c], length)
            while r < end:
                n_listed += add_item(items[first + r], g_rows, g_weight, q)
                r += 1
            listed[c] = n_listed
            scale = (1.0 - alpha) / max(n_listed, 1)
            for i in range(n_p):
                p = p_entries[start + i, 1]
                logs[c * n_p + i] = scale * q[np.int64(p_entries[start + i, 0])] + alpha * p
        if smallest >= _SMALLEST_NORMAL:
            for j in range(n_cut * n_p):
                logs[j] = vector_log(logs[j])
        else:
            for j in range(n_cut * n_p):
                logs[j] = np.log(logs[j])
        for c in range(n_cut):
            kl = 0.0
            for i in range(n_p):
                kl += p_entries[start + i, 1] * (p_entries[start + i, 2] - logs[c * n_p + i])
            out[row + c, u] = kl if n_p > 0 and listed[c] > 0 else np.nan
        for g in range(n_genres):
            q[g] = 0.0


@intrinsic
def _bits_of(typingctx, x):
    """The bits of a float64 as an int64 (a bit cast, no conversion)."""
    return types.int64(types.float64), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(64))


@intrinsic
def _float_of(typingctx, bits):
    """The float64 whose bits an int64 holds."""
    return types.float64(types.int64), lambda context, builder, sig, args: builder.bitcast(args[0], ir.DoubleType())


_SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)
_SQRT2 = float(np.sqrt(2.0))
#: ln 2 split: its high part with 32 zero bits, so that e * _LN2_HIGH is exact for any exponent e.
_LN2_HIGH = float((np.array([np.log(2.0)]).view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)[0])
_LN2_LOW = float(np.log(2.0) - _LN2_HIGH)
#: 2 / (2j + 1), j = 0..9: log m = 2 atanh s = sum_j 2 s^(2j+1) / (2j + 1).
(_A0, _A1, _A2, _A3, _A4, _A5, _A6, _A7, _A8, _A9) = (2.0 / (2 * j + 1) for j in range(10))


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def vector_log(x):
    """ln x of a positive normal finite float64, in arithmetic alone (no call), so that a loop of
    them runs on SIMD lanes: x = m 2^e with m in [sqrt(1/2), sqrt 2] (its exponent and mantissa
    bits), ln x = e ln 2 + 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172, the atanh series to
    s^19 (the next term is below 2e-16 of the sum). Within a few units in the last place of np.log
    (tests/measure/test_measure_calibration.py measures it); zero, subnormal, infinite or NaN x is
    not handled (the caller takes np.log there)."""
    bits = _bits_of(x)
    high = np.int64(_float_of((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000) > _SQRT2)
    m = _float_of((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000) * (1.0 - 0.5 * high)
    e = np.float64((bits >> 52) - 1023 + high)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    series = (((((((((_A9 * z + _A8) * z + _A7) * z + _A6) * z + _A5) * z + _A4) * z + _A3) * z + _A2) * z + _A1) * z
              + _A0)
    return e * _LN2_HIGH + (e * _LN2_LOW + s * series)
