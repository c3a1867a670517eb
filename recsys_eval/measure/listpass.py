"""One pass over every unit's top-k list for all the beyond-accuracy metrics of lists
(docs/CONVENTIONS.md#beyond-accuracy): the popularity metrics (ARP, APLT, ACLT, surprisal, novelty,
EPC, EFD, unexpectedness, serendipity; :mod:`recsys_eval.measure.popularity` gives their formulas),
calibration (:mod:`recsys_eval.measure.calibration`), ILD (:mod:`recsys_eval.measure.diversity`),
and the head/tail counts PopRSP and PopREO are ratios of.

A numba kernel over chunks of units marks each unit's relevant targets, reads its list once from
one 64-byte record an item (:func:`item_table`: its popularity values and place in the
most-popular order, one cache line) into running sums and small buffers, and writes each asked
metric at every cutoff straight into its row of the caller's metric-major matrix (columns x
units, what :func:`~recsys_eval.measure.frames.long_frame` takes without a copy); the run-level
head/tail counts are summed per chunk. MostPop (from the user's train places in the
most-popular order, kept ascending), calibration (from the user's kept genre profile) and ILD (from
packed genre words) are each a tight loop of their own over the unit's list, run only when a
metric asks: a loop that tests every family's flag at every item, or calls a helper with array
arguments (numba's reference counting per call), measured slower. No units x cutoffs x sums array
is kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import DataError
from recsys_eval.measure.calibration import add_item, genre_rows, miscalibration, profiles
from recsys_eval.measure.diversity import GenreSets, packed_distances, wide_distances
from recsys_eval.measure.lists import per_train, train_rows

#: The metrics the pass computes, in the order of its column table.
PASS_METRICS = ("arp", "aplt", "aclt", "surprisal", "novelty", "epc", "efd", "unexpectedness", "serendipity",
                "calibration", "ild")
(ARP, APLT, ACLT, SURPRISAL, NOVELTY, EPC, EFD, UNEXPECTED, SERENDIPITY, CALIBRATION, ILD) = range(len(PASS_METRICS))
#: The metrics of the pass that read the items' popularity.
POPULARITY_METRICS = PASS_METRICS[:CALIBRATION]
#: Per cutoff, the counts summed over every unit that PopRSP and PopREO are ratios of: listed items,
#: listed long-tail items, listed relevant items, listed relevant long-tail items.
(LISTED, LISTED_TAIL, LISTED_RELEVANT, LISTED_RELEVANT_TAIL) = range(4)
N_TOTALS = 4
#: An item's record: phi(i), long-tail flag, surprisal, EPC gain 1 - phi(i)/|U|, EFD gain
#: -log2 p(i | seen), self-information, place in the most-popular order (and a spare slot): 8 x 8
#: bytes, one cache line.
_RECORD = 8
(_HOLDERS, _TAIL, _SURPRISAL, _EPC_GAIN, _EFD_GAIN, _SELF_INFORMATION, _PLACE) = range(_RECORD - 1)


def list_pass(rankings: Rankings, cutoffs: Sequence[int], out: np.ndarray | None = None,
              rows: Mapping[str, int] | None = None, *, records: np.ndarray | None = None,
              targets: Targets | None = None, train=None, genres: np.ndarray | None = None,
              alpha: float = 0.01) -> np.ndarray:
    """Every metric of ``rows`` (name of :data:`PASS_METRICS` -> its first row in ``out``, a
    C-contiguous columns x units float matrix: the metric at cutoffs[c] goes to row + c), and the
    cutoffs x :data:`N_TOTALS` head/tail counts, returned.

    ``records`` (:func:`item_table`, items x 8) for the popularity metrics and the counts; ``targets``, the rankings' own, for relevance
    (EPC, EFD, serendipity, the relevant counts); ``train`` for MostPop's lists (unexpectedness,
    serendipity) and calibration's profiles; ``genres`` (items x genres bool) for calibration and
    ILD, with smoothing ``alpha``."""
    rows = dict(rows or {})
    cutoffs = np.asarray(sorted(cutoffs), dtype=np.int64)
    if targets is not None and targets.n_units != rankings.n_units:
        raise DataError(f"rankings have {rankings.n_units:,} units, targets {targets.n_units:,}: the "
                        "beyond-accuracy metrics that read relevance need the rankings' own targets")
    column = np.full(len(PASS_METRICS), -1, dtype=np.int64)
    for name, row in rows.items():
        column[PASS_METRICS.index(name)] = row
    if out is None:
        out = np.zeros((0, rankings.n_units))
    n_items = len(records) if records is not None else len(genres)
    sets = GenreSets.of(genres if "ild" in rows else np.zeros((1, 0), dtype=bool))
    most_popular = train is not None and bool({"unexpectedness", "serendipity"} & set(rows))
    calibrate = train is not None and genres is not None and "calibration" in rows
    indptr, places = _train_places(train if most_popular else None, records, rankings)
    g_rows, g_weight, p_offsets, p_entries, p_counts = (
        _profiles(train, n_items, genres, alpha) if calibrate else
        (np.zeros((1, 1), dtype=np.uint8), np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros((0, 3)),
         np.zeros((0, 2), dtype=np.int64)))
    t_offsets, t_items, t_gain = _target_arrays(targets, rankings.n_units)
    bounds = chunk_bounds(rankings.n_units)
    totals = np.zeros((len(bounds) - 1, len(cutoffs), N_TOTALS))
    flags = np.array([records is not None, most_popular, calibrate, "ild" in rows, sets.packed], dtype=np.bool_)
    run_chunks(_pass_chunk, bounds, rankings.offsets, rankings.items, rankings.unit_user, t_offsets, t_items, t_gain,
               records if records is not None else np.zeros((1, _RECORD)), sets.words, sets.masks, sets.sizes, sets.distance, sets.stride, discount(int(cutoffs[-1])),
               indptr, places, g_rows, g_weight, p_offsets, p_entries, p_counts,
               genres.shape[1] if calibrate else 0, float(alpha), flags,
               cutoffs, column, out, totals, n_items, index=True)
    return totals.sum(axis=0)


def item_table(popularity, head: np.ndarray, *, surprisal: bool = False) -> np.ndarray:
    """items x 8 float64: each item's record from its
    :class:`~recsys_eval.measure.popularity.ItemPopularity` and the ``head`` mask (the surprisal
    column 0 unless asked)."""
    table = np.zeros((len(popularity.holders), _RECORD))
    table[:, _HOLDERS] = popularity.holders
    table[:, _TAIL] = ~head
    if surprisal:
        table[:, _SURPRISAL] = popularity.surprisal()
    table[:, _EPC_GAIN] = 1.0 - popularity.holders / popularity.n_users
    table[:, _EFD_GAIN] = popularity.discovery_information()
    table[:, _SELF_INFORMATION] = popularity.self_information()
    table[:, _PLACE] = popularity.pop_rank
    return table


def discount(kmax: int) -> np.ndarray:
    """disc(r) = 1 / log2(r + 1) by 0-based rank r - 1, for ranks 1..kmax."""
    return 1.0 / np.log2(np.arange(kmax, dtype=np.float64) + 2.0)


def _profiles(train, n_items: int, genres: np.ndarray, alpha: float) -> tuple[np.ndarray, ...]:
    """The genre rows (:func:`~recsys_eval.measure.calibration.genre_rows`) and every train user's
    genre profile under smoothing ``alpha`` (:func:`~recsys_eval.measure.calibration.profiles`),
    kept with an Interactions under the genres' digest."""
    digest = hashlib.blake2b(np.packbits(genres).tobytes() + repr(genres.shape).encode(), digest_size=16).hexdigest()

    def compute() -> tuple[np.ndarray, ...]:
        g_rows, g_weight = genre_rows(genres)
        return g_rows, g_weight, *profiles(*train_rows(train, n_items), g_rows, g_weight, genres.shape[1], alpha)

    return per_train(train, ("calibration profiles", n_items, digest, float(alpha)), compute)


def _target_arrays(targets: Targets | None, n_units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if targets is None:  # no unit has a target: empty rows, in a Targets' dtypes
        return np.zeros(n_units + 1, dtype=np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    return targets.offsets, targets.items, targets.gain


def _train_places(train, records: np.ndarray | None, rankings: Rankings) -> tuple[np.ndarray, np.ndarray]:
    """Every train user's train items as their places in the most-popular order (the records'),
    ascending, in CSR rows (each pair once: :func:`~recsys_eval.measure.lists.train_rows`), with a
    row for every user the rankings reach (empty past the train's); an empty row for each when
    the pass does not walk them. Kept with an Interactions (every list of a user reads the same
    row), so that MostPop reads a few places of a user's row in order instead of looking up the
    place of every train item."""
    n_users = int(rankings.unit_user.max(initial=-1)) + 1
    if train is None:
        return np.zeros(n_users + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
    n_items = len(records)
    indptr, places = per_train(train, ("train places", n_items),
                               lambda: sorted_places(*train_rows(train, n_items), records[:, _PLACE]))
    if len(indptr) < n_users + 1:
        indptr = np.concatenate([indptr, np.full(n_users + 1 - len(indptr), indptr[-1])])
    return indptr, places


def sorted_places(indptr: np.ndarray, indices: np.ndarray, place: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR rows ``indptr``, ``indices`` of items as the items' ``place`` values, each row
    ascending (int32; int64 row offsets)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    places = np.empty(len(indices), dtype=np.int32)
    run_chunks(_sorted_places_chunk, chunk_bounds(len(indptr) - 1), indptr, indices, place.astype(np.int32), places)
    return indptr, places


@njit(cache=True, nogil=True)
def _sorted_places_chunk(lo, hi, indptr, indices, place, places):
    for row in range(lo, hi):
        start, stop = indptr[row], indptr[row + 1]
        for j in range(start, stop):
            places[j] = place[indices[j]]
        places[start:stop].sort()


@njit(cache=True, nogil=True)
def _pass_chunk(chunk, lo, hi, offsets, items, unit_user, t_offsets, t_items, t_gain, table, words, masks, sizes,
                distance, stride, discount, indptr, places, g_rows, g_weight, p_offsets, p_entries, p_counts,
                n_genres, alpha, flags, cutoffs,
                column, out, totals, n_items):
    """Units lo:hi of :func:`list_pass`; ``flags``: popularity, MostPop, calibration, ILD, ILD of
    packed words.
    Each unit's list is read from the item records once, into small buffers (places, relevance)
    that the loops of MostPop, calibration and ILD, each its own tight loop, read again."""
    popular, most_popular, calibrate, ild, packed = flags[0], flags[1], flags[2], flags[3], flags[4]
    n_cut = len(cutoffs)
    kmax = cutoffs[n_cut - 1]
    marked = np.zeros(n_items, dtype=np.bool_)  # the unit's relevant targets, unmarked after it
    seen = np.zeros(n_items, dtype=np.bool_)  # by place in the most-popular order: the user's train items
    bound = np.zeros(n_cut, dtype=np.int64)  # per cutoff, the first place past MostPop's top k
    expected = np.zeros((n_cut, 2), dtype=np.int64)  # listed items by the first cutoff of MostPop's they are in
    listed_place = np.zeros(kmax, dtype=np.int64)
    listed_relevant = np.zeros(kmax)
    listed_words = np.zeros(kmax, dtype=np.uint64)  # ILD: the top k's genre words, contiguous
    listed_masks = np.zeros((kmax, masks.shape[1]), dtype=np.uint64)  # or their genre bits and sizes
    listed_sizes = np.zeros(kmax, dtype=np.int64)
    listed_genres = np.zeros(n_genres + 1)  # calibration's q, and add_item's spare slot
    for u in range(lo, hi):
        first, length = offsets[u], min(offsets[u + 1] - offsets[u], kmax)
        listed = items[first:first + length]
        n_relevant = 0
        for j in range(t_offsets[u], t_offsets[u + 1]):
            marked[t_items[j]] = t_gain[j] > 0
            n_relevant += t_gain[j] > 0
        if popular:
            _popularity(chunk, u, listed, marked, n_relevant, table, discount, cutoffs, column, out, totals,
                        listed_place, listed_relevant)
        for j in range(t_offsets[u], t_offsets[u + 1]):
            marked[t_items[j]] = False
        if most_popular:
            train = places[indptr[unit_user[u]]:indptr[unit_user[u] + 1]]
            below = _most_popular_bounds(train, n_items, cutoffs, bound)
            for j in range(below):
                seen[train[j]] = True
            _unexpected(out, column, u, length, cutoffs, seen, bound, listed_place, listed_relevant, expected)
            for j in range(below):
                seen[train[j]] = False
        if calibrate:
            _calibration(u, unit_user[u], listed, p_offsets, p_entries, p_counts, g_rows, g_weight, alpha, cutoffs,
                         column[CALIBRATION], out, listed_genres)
        if ild and packed:
            _packed_ild(u, listed, words, distance, cutoffs, column[ILD], out, listed_words)
        elif ild:
            _wide_ild(u, listed, masks, sizes, distance, stride, cutoffs, column[ILD], out, listed_masks,
                      listed_sizes)


@njit(cache=True, nogil=True, inline="always")
def _popularity(chunk, u, listed, marked, n_relevant, table, discount, cutoffs, column, out, totals,
                listed_place, listed_relevant):
    """The popularity metrics of unit u's list at every cutoff, from running sums over its items'
    records, and the head/tail counts; each item's place and relevance kept for MostPop."""
    holders = tail = surprisal = information = disc = epc = efd = relevant = relevant_tail = 0.0
    r = 0
    for c in range(len(cutoffs)):
        stop = min(cutoffs[c], len(listed))  # the top k, or the whole list when shorter
        while r < stop:
            item = listed[r]
            listed_place[r] = np.int64(table[item, _PLACE])
            holders += table[item, _HOLDERS]
            tail += table[item, _TAIL]
            surprisal += table[item, _SURPRISAL]
            information += table[item, _SELF_INFORMATION]
            disc += discount[r]
            listed_relevant[r] = 0.0
            if marked[item]:
                listed_relevant[r] = 1.0
                epc += discount[r] * table[item, _EPC_GAIN]
                efd += discount[r] * table[item, _EFD_GAIN]
                relevant += 1.0
                relevant_tail += table[item, _TAIL]
            r += 1
        _write(out, column, c, u, r, holders, tail, surprisal, information, disc, epc, efd, n_relevant)
        totals[chunk, c, LISTED] += r
        totals[chunk, c, LISTED_TAIL] += tail
        totals[chunk, c, LISTED_RELEVANT] += relevant
        totals[chunk, c, LISTED_RELEVANT_TAIL] += relevant_tail


@njit(cache=True, nogil=True, inline="always")
def _calibration(u, user, listed, p_offsets, p_entries, p_counts, g_rows, g_weight, alpha, cutoffs, row, out,
                 listed_genres):
    """C_KL of unit u's list at every cutoff (into ``out`` from ``row``), p its user's profile
    (:func:`~recsys_eval.measure.calibration.profiles`), q from the list's items; NaN where either
    has no genre data."""
    for g in range(len(listed_genres)):
        listed_genres[g] = 0.0
    known = user < len(p_counts)  # a user past the train rows has no profile
    n_profile = p_counts[user, 1] if known else 0
    start = p_offsets[user] if known else 0
    stop = start + (p_counts[user, 0] if known else 0)
    n_listed, r = 0, 0
    for c in range(len(cutoffs)):
        end = min(cutoffs[c], len(listed))
        while r < end:
            n_listed += add_item(listed[r], g_rows, g_weight, listed_genres)
            r += 1
        out[row + c, u] = miscalibration(p_entries, start, stop, listed_genres, n_listed, alpha) \
            if n_profile > 0 and n_listed > 0 else np.nan


@njit(cache=True, nogil=True)
def _packed_ild(u, listed, words, distance, cutoffs, row, out, listed_words):
    """ILD of unit u's list at every cutoff (into ``out`` from ``row``), packed genre words."""
    total, r = 0.0, 0
    for c in range(len(cutoffs)):
        stop = min(cutoffs[c], len(listed))
        while r < stop:
            listed_words[r] = words[listed[r]]
            total += packed_distances(listed_words, r, distance)
            r += 1
        out[row + c, u] = total / (r * (r - 1) / 2.0) if r >= 2 else np.nan


@njit(cache=True, nogil=True, inline="always")
def _wide_ild(u, listed, masks, sizes, distance, stride, cutoffs, row, out, listed_masks, listed_sizes):
    """ILD of unit u's list at every cutoff (into ``out`` from ``row``), genre sets of several words."""
    total, r = 0.0, 0
    for c in range(len(cutoffs)):
        stop = min(cutoffs[c], len(listed))
        while r < stop:
            for w in range(masks.shape[1]):
                listed_masks[r, w] = masks[listed[r], w]
            listed_sizes[r] = sizes[listed[r]]
            total += wide_distances(listed_masks, listed_sizes, r, distance, stride)
            r += 1
        out[row + c, u] = total / (r * (r - 1) / 2.0) if r >= 2 else np.nan


@njit(cache=True, nogil=True, inline="always")
def _write(out, column, c, u, n, holders, tail, surprisal, information, disc, epc, efd, n_relevant):
    """The popularity metrics of a unit's top n items at cutoff c, from their sums: means over the
    list (undefined for an empty one), the long-tail count, and EPC and EFD (undefined without a
    relevant target; 0 for an empty list, which discovers nothing)."""
    _put(out, column[ARP], c, u, holders / n if n > 0 else np.nan)
    _put(out, column[APLT], c, u, tail / n if n > 0 else np.nan)
    _put(out, column[SURPRISAL], c, u, surprisal / n if n > 0 else np.nan)
    _put(out, column[NOVELTY], c, u, information / n if n > 0 else np.nan)
    _put(out, column[ACLT], c, u, tail)
    _put(out, column[EPC], c, u, np.nan if n_relevant == 0 else (epc / disc if n > 0 else 0.0))
    _put(out, column[EFD], c, u, np.nan if n_relevant == 0 else (efd / disc if n > 0 else 0.0))


@njit(cache=True, nogil=True, inline="always")
def _put(out, row, c, u, value):
    """``value`` at cutoff c of the metric whose first row is ``row`` (-1: not asked)."""
    if row >= 0:
        out[row + c, u] = value


@njit(cache=True, nogil=True, inline="always")
def _unexpected(out, column, u, length, cutoffs, seen, bound, listed_place, listed_relevant, expected):
    """Unexpectedness and serendipity of unit u's list at every cutoff k: the share of its top n
    items outside MostPop's top k (seen in train, or placed at or past ``bound``), and of those the
    relevant ones; undefined for an empty list. Each item of some MostPop top k (placed below the
    last bound, unseen: about one listed item in five) is counted once, under the first cutoff whose
    top k holds it (``expected``: counts, relevant counts), so that at each cutoff the unexpected
    are the items so far less those counted under it or a smaller one; the others, never expected,
    cost a comparison."""
    n_cut = len(cutoffs)
    for c in range(n_cut):
        expected[c, 0] = expected[c, 1] = 0
    last = bound[n_cut - 1]
    r = relevant = 0
    for c in range(n_cut):
        stop = min(cutoffs[c], length)
        while r < stop:
            place = listed_place[r]
            hit = listed_relevant[r] > 0
            relevant += hit
            if place < last and not seen[place]:
                first = 0
                for b in range(n_cut):  # the bounds ascend: the cutoffs whose MostPop top k lacks it
                    first += place >= bound[b]
                expected[first, 0] += 1
                expected[first, 1] += hit
            r += 1
        in_top, relevant_in_top = 0, 0
        for f in range(c + 1):
            in_top += expected[f, 0]
            relevant_in_top += expected[f, 1]
        _put(out, column[UNEXPECTED], c, u, (r - in_top) / r if r > 0 else np.nan)
        _put(out, column[SERENDIPITY], c, u, (relevant - relevant_in_top) / r if r > 0 else np.nan)


@njit(cache=True, nogil=True, inline="always")
def _most_popular_bounds(train, n_places, cutoffs, bound):
    """Per cutoff k, the first place in the most-popular order past the user's MostPop top k (its
    k-th item not in ``train``, the user's train places ascending, + 1; the catalogue's end
    ``n_places`` when fewer remain): an unseen item is in MostPop's top k iff its place is below
    the bound. The k-th unseen place is k - 1 + j, j the train places at or below it, found by one
    merge walk over the cutoffs; returns j at the last, the train places below its bound."""
    j = 0
    for c in range(len(cutoffs)):
        k = cutoffs[c]
        while j < len(train) and train[j] <= k - 1 + j:
            j += 1
        bound[c] = min(k + j, n_places)
    return j
