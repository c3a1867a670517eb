"""One pass over every unit's top-k list for all the beyond-accuracy metrics of lists
(docs/CONVENTIONS.md#beyond-accuracy): the popularity metrics (ARP, APLT, ACLT, surprisal, novelty,
EPC, EFD, unexpectedness, serendipity; :mod:`recsys_eval.measure.popularity` gives their formulas),
calibration (:mod:`recsys_eval.measure.calibration`), ILD (:mod:`recsys_eval.measure.diversity`),
and the head/tail counts PopRSP and PopREO are ratios of.

A numba kernel over chunks of units runs, for each family a metric asks for, one loop of its own
over the chunk's units, each writing every asked metric at every cutoff straight into its row of the
caller's metric-major matrix (columns x units, what :func:`~recsys_eval.measure.frames.long_frame`
takes without a copy): the popularity metrics mark each unit's relevant targets and read its list
from one 32-byte record an item (:func:`item_table`: its popularity values, half a cache line;
the table of 59,047 items, 1.9 MB, misses the cache less than one of 64 bytes, which took the
list loop 1.5x its time) into running sums, and sum the run-level head/tail counts per chunk;
MostPop reads the user's train places in the most-popular order (kept ascending) and each listed item's place (a small int32
table, which stays in cache); calibration (:func:`~recsys_eval.measure.calibration.calibration_units`)
reads the user's kept genre profile, ILD (:func:`~recsys_eval.measure.diversity.ild_units`) packed
genre words. No helper that takes an array is called per unit or cutoff unless numba inlines it
without reference counts: each such call cost an atomic increment and decrement of every array it
took, which measured more than the popularity metrics' arithmetic (the loops of the families, each
a function called once a chunk, made the pass of issue 30's metrics about 0.8x its time as one loop
with inlined helpers, values bit-identical). No units x cutoffs x sums array is kept.

numba's cache of :func:`_pass_chunk` holds the family loops of the other modules compiled into it,
and is renewed when this file changes, not when theirs do: after editing calibration.py or
diversity.py, clear the cache (``NUMBA_CACHE_DIR``, or ``__pycache__``), or the pass runs the old
loops, which may read arrays laid out anew out of bounds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import DataError
from recsys_eval.measure.calibration import calibration_units, genre_rows, profiles
from recsys_eval.measure.diversity import GenreSets, ild_units
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
#: An item's record: phi(i), long-tail flag, self-information -log2 phi(i)/|U|, surprisal: 4 x 8
#: bytes. EPC's gain 1 - phi(i)/|U| and EFD's, the self-information + log2(sum_j phi(j) / |U|)
#: (:meth:`~recsys_eval.measure.popularity.ItemPopularity.discovery_shift`), follow from it, for
#: the few relevant listed items.
_RECORD = 4
(_HOLDERS, _TAIL, _SELF_INFORMATION, _SURPRISAL) = range(_RECORD)


class ItemRecords(NamedTuple):
    """The items' records the list pass reads (``table``, items x :data:`_RECORD`), their places
    in the most-popular order (``place``, int32: MostPop's), and ``gains``: the train user count
    |U| and EFD's shift log2(sum_j phi(j) / |U|). Arrays alone, kept read-only with an Interactions
    (:func:`~recsys_eval.measure.lists.per_train`)."""

    table: np.ndarray
    place: np.ndarray
    gains: np.ndarray


def list_pass(rankings: Rankings, cutoffs: Sequence[int], out: np.ndarray | None = None,
              rows: Mapping[str, int] | None = None, *, records: ItemRecords | None = None,
              targets: Targets | None = None, train=None, genres: np.ndarray | None = None,
              alpha: float = 0.01) -> np.ndarray:
    """Every metric of ``rows`` (name of :data:`PASS_METRICS` -> its first row in ``out``, a
    C-contiguous columns x units float matrix: the metric at cutoffs[c] goes to row + c), and the
    cutoffs x :data:`N_TOTALS` head/tail counts, returned.

    ``records`` (:func:`item_table`) for the popularity metrics and the counts; ``targets``, the rankings' own, for relevance
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
    n_items = len(records.place) if records is not None else len(genres)
    sets = GenreSets.of(genres if "ild" in rows else np.zeros((1, 0), dtype=bool))
    most_popular = train is not None and bool({"unexpectedness", "serendipity"} & set(rows))
    calibrate = train is not None and genres is not None and "calibration" in rows
    indptr, places = _train_places(train if most_popular else None, records, rankings)
    place = records.place if most_popular else np.zeros(0, dtype=np.int32)
    table, gains = (records.table, records.gains) if records is not None else (np.zeros((1, _RECORD)), np.ones(2))
    g_rows, g_weight, p_offsets, p_entries, p_counts = (
        _profiles(train, n_items, genres) if calibrate else
        (np.zeros((1, 1), dtype=np.uint8), np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros((0, 3)),
         np.zeros(0, dtype=np.int64)))
    t_offsets, t_items, t_gain = _target_arrays(targets, rankings.n_units)
    bounds = chunk_bounds(rankings.n_units)
    totals = np.zeros((len(bounds) - 1, len(cutoffs), N_TOTALS))
    flags = np.array([records is not None, most_popular, calibrate, "ild" in rows, sets.packed], dtype=np.bool_)
    run_chunks(_pass_chunk, bounds, rankings.offsets, rankings.items, rankings.unit_user, t_offsets, t_items, t_gain,
               table, gains, place, sets.words, sets.masks, sets.sizes,
               sets.distance, sets.stride, discount(int(cutoffs[-1])),
               indptr, places, g_rows, g_weight, p_offsets, p_entries, p_counts,
               genres.shape[1] if calibrate else 0, float(alpha), flags,
               cutoffs, column, out, totals, n_items, index=True)
    return totals.sum(axis=0)


def item_table(popularity, head: np.ndarray, *, surprisal: bool = False) -> ItemRecords:
    """Each item's record from its :class:`~recsys_eval.measure.popularity.ItemPopularity` and the
    ``head`` mask (the surprisal column 0 unless asked)."""
    table = np.zeros((len(popularity.holders), _RECORD))
    table[:, _HOLDERS] = popularity.holders
    table[:, _TAIL] = ~head
    if surprisal:
        table[:, _SURPRISAL] = popularity.surprisal()
    table[:, _SELF_INFORMATION] = popularity.self_information()
    return ItemRecords(table, popularity.pop_rank.astype(np.int32),
                       np.array([popularity.n_users, popularity.discovery_shift()], dtype=np.float64))


def discount(kmax: int) -> np.ndarray:
    """disc(r) = 1 / log2(r + 1) by 0-based rank r - 1, for ranks 1..kmax."""
    return 1.0 / np.log2(np.arange(kmax, dtype=np.float64) + 2.0)


def _profiles(train, n_items: int, genres: np.ndarray) -> tuple[np.ndarray, ...]:
    """The genre rows (:func:`~recsys_eval.measure.calibration.genre_rows`) and every train user's
    genre profile (:func:`~recsys_eval.measure.calibration.profiles`), kept with an Interactions
    under the genres' digest (any smoothing alpha reads the same)."""
    digest = hashlib.blake2b(np.packbits(genres).tobytes() + repr(genres.shape).encode(), digest_size=16).hexdigest()

    def compute() -> tuple[np.ndarray, ...]:
        g_rows, g_weight = genre_rows(genres)
        return g_rows, g_weight, *profiles(*train_rows(train, n_items), g_rows, g_weight, genres.shape[1])

    return per_train(train, ("calibration profiles", n_items, digest), compute)


def _target_arrays(targets: Targets | None, n_units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if targets is None:  # no unit has a target: empty rows, in a Targets' dtypes
        return np.zeros(n_units + 1, dtype=np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    return targets.offsets, targets.items, targets.gain


def _train_places(train, records: ItemRecords | None, rankings: Rankings) -> tuple[np.ndarray, np.ndarray]:
    """Every train user's train items as their places in the most-popular order (the records'),
    ascending, in CSR rows (each pair once: :func:`~recsys_eval.measure.lists.train_rows`), with a
    row for every user the rankings reach (empty past the train's); an empty row for each when
    the pass does not walk them. Kept with an Interactions (every list of a user reads the same
    row), so that MostPop reads a few places of a user's row in order instead of looking up the
    place of every train item."""
    n_users = int(rankings.unit_user.max(initial=-1)) + 1
    if train is None:
        return np.zeros(n_users + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
    n_items = len(records.place)
    indptr, places = per_train(train, ("train places", n_items),
                               lambda: sorted_places(*train_rows(train, n_items), records.place))
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
def _pass_chunk(chunk, lo, hi, offsets, items, unit_user, t_offsets, t_items, t_gain, table, gains, place, words, masks,
                sizes,
                distance, stride, discount, indptr, places, g_rows, g_weight, p_offsets, p_entries, p_counts,
                n_genres, alpha, flags, cutoffs, column, out, totals, n_items):
    """Units lo:hi of :func:`list_pass`, one family after the other, each its own loop over the
    units; ``flags``: popularity, MostPop, calibration, ILD, ILD of packed words."""
    popular, most_popular, calibrate, ild, packed = flags[0], flags[1], flags[2], flags[3], flags[4]
    if popular:
        _popularity_units(chunk, lo, hi, offsets, items, t_offsets, t_items, t_gain, table, gains, discount, cutoffs,
                          column, out, totals, n_items)
    if most_popular:
        _most_popular_units(lo, hi, offsets, items, unit_user, t_offsets, t_items, t_gain, place, indptr, places,
                            cutoffs, column, out, n_items)
    if calibrate:
        calibration_units(lo, hi, offsets, items, unit_user, p_offsets, p_entries, p_counts, g_rows, g_weight,
                          n_genres, alpha, cutoffs, column[CALIBRATION], out)
    if ild:
        ild_units(lo, hi, offsets, items, packed, words, masks, sizes, distance, stride, cutoffs, column[ILD], out)


@njit(cache=True, nogil=True)
def _popularity_units(chunk, lo, hi, offsets, items, t_offsets, t_items, t_gain, table, gains, discount, cutoffs,
                      column, out, totals, n_items):
    """The popularity metrics of the lists of units lo:hi at every cutoff, from running sums over
    their items' records (undefined for an empty list: the means; without a relevant target: EPC
    and EFD, 0 for an empty list, which discovers nothing), and the head/tail counts of the chunk."""
    marked = np.zeros(n_items, dtype=np.bool_)  # the unit's relevant targets, unmarked after it
    kmax = cutoffs[len(cutoffs) - 1]
    n_users, shift = gains[0], gains[1]
    arp, aplt, aclt, surprisal_row, novelty, epc_row, efd_row = (
        column[ARP], column[APLT], column[ACLT], column[SURPRISAL], column[NOVELTY], column[EPC], column[EFD])
    for u in range(lo, hi):
        first, length = offsets[u], min(offsets[u + 1] - offsets[u], kmax)
        n_relevant = _mark(marked, t_offsets[u], t_offsets[u + 1], t_items, t_gain, True)
        holders = tail = surprisal = information = disc = epc = efd = relevant = relevant_tail = 0.0
        r = 0
        for c in range(len(cutoffs)):
            stop = min(cutoffs[c], length)
            while r < stop:
                item = items[first + r]
                holders += table[item, _HOLDERS]
                tail += table[item, _TAIL]
                surprisal += table[item, _SURPRISAL]
                information += table[item, _SELF_INFORMATION]
                disc += discount[r]
                if marked[item]:  # EPC's gain 1 - phi/|U|, EFD's the self-information + log2(sum phi / |U|)
                    epc += discount[r] * (1.0 - table[item, _HOLDERS] / n_users)
                    efd += discount[r] * (table[item, _SELF_INFORMATION] + shift)
                    relevant += 1.0
                    relevant_tail += table[item, _TAIL]
                r += 1
            if arp >= 0:  # written out: a helper taking ``out`` costs a reference count a cutoff
                out[arp + c, u] = holders / r if r > 0 else np.nan
            if aplt >= 0:
                out[aplt + c, u] = tail / r if r > 0 else np.nan
            if surprisal_row >= 0:
                out[surprisal_row + c, u] = surprisal / r if r > 0 else np.nan
            if novelty >= 0:
                out[novelty + c, u] = information / r if r > 0 else np.nan
            if aclt >= 0:
                out[aclt + c, u] = tail
            if epc_row >= 0:
                out[epc_row + c, u] = np.nan if n_relevant == 0 else (epc / disc if r > 0 else 0.0)
            if efd_row >= 0:
                out[efd_row + c, u] = np.nan if n_relevant == 0 else (efd / disc if r > 0 else 0.0)
            totals[chunk, c, LISTED] += r
            totals[chunk, c, LISTED_TAIL] += tail
            totals[chunk, c, LISTED_RELEVANT] += relevant
            totals[chunk, c, LISTED_RELEVANT_TAIL] += relevant_tail
        _mark(marked, t_offsets[u], t_offsets[u + 1], t_items, t_gain, False)


@njit(cache=True, nogil=True)
def _most_popular_units(lo, hi, offsets, items, unit_user, t_offsets, t_items, t_gain, place, indptr, places,
                        cutoffs, column, out, n_items):
    """Unexpectedness and serendipity of the lists of units lo:hi at every cutoff k: the share of
    the top n items outside MostPop's top k for the unit's user (seen in train, or placed at or
    past its ``bound``), and of those the relevant ones; undefined for an empty list. Each item of
    some MostPop top k (placed below the last bound, unseen: about one listed item in five) is
    counted once, under the first cutoff whose top k holds it (``expected``: counts, relevant
    counts), so that at each cutoff the unexpected are the items so far less those counted under
    it or a smaller one; the others, never expected, cost a comparison."""
    n_cut = len(cutoffs)
    kmax = cutoffs[n_cut - 1]
    marked = np.zeros(n_items, dtype=np.bool_)  # the unit's relevant targets, for serendipity
    seen = np.zeros(n_items, dtype=np.bool_)  # by place in the most-popular order: the user's train items
    bound = np.zeros(n_cut, dtype=np.int64)  # per cutoff, the first place past MostPop's top k
    expected = np.zeros((n_cut, 2), dtype=np.int64)
    unexpected_row, serendipity_row = column[UNEXPECTED], column[SERENDIPITY]
    relevance = serendipity_row >= 0
    for u in range(lo, hi):
        first, length = offsets[u], min(offsets[u + 1] - offsets[u], kmax)
        if relevance:
            _mark(marked, t_offsets[u], t_offsets[u + 1], t_items, t_gain, True)
        start = indptr[unit_user[u]]
        below = start + _most_popular_bounds(places, start, indptr[unit_user[u] + 1], n_items, cutoffs, bound)
        for j in range(start, below):
            seen[places[j]] = True
        for c in range(n_cut):
            expected[c, 0] = expected[c, 1] = 0
        last = bound[n_cut - 1]
        r = relevant = 0
        for c in range(n_cut):
            stop = min(cutoffs[c], length)
            while r < stop:
                item = items[first + r]
                at = place[item]
                hit = marked[item]
                relevant += hit
                if at < last and not seen[at]:
                    earliest = 0
                    for b in range(n_cut):  # the bounds ascend: the cutoffs whose MostPop top k lacks it
                        earliest += at >= bound[b]
                    expected[earliest, 0] += 1
                    expected[earliest, 1] += hit
                r += 1
            in_top, relevant_in_top = 0, 0
            for f in range(c + 1):
                in_top += expected[f, 0]
                relevant_in_top += expected[f, 1]
            if unexpected_row >= 0:
                out[unexpected_row + c, u] = (r - in_top) / r if r > 0 else np.nan
            if serendipity_row >= 0:
                out[serendipity_row + c, u] = (relevant - relevant_in_top) / r if r > 0 else np.nan
        for j in range(start, below):
            seen[places[j]] = False
        if relevance:
            _mark(marked, t_offsets[u], t_offsets[u + 1], t_items, t_gain, False)


@njit(cache=True, nogil=True, inline="always")
def _mark(marked, start, stop, t_items, t_gain, on):
    """Mark the relevant targets start:stop (gain > 0), or unmark them all (``on`` False); their
    count."""
    n_relevant = 0
    for j in range(start, stop):
        relevant = t_gain[j] > 0
        marked[t_items[j]] = relevant and on
        n_relevant += relevant
    return n_relevant


@njit(cache=True, nogil=True, inline="always")
def _most_popular_bounds(places, start, stop, n_places, cutoffs, bound):
    """Per cutoff k, the first place in the most-popular order past the user's MostPop top k (its
    k-th item not in train, the user's train places ``places[start:stop]`` ascending, + 1; the
    catalogue's end ``n_places`` when fewer remain): an unseen item is in MostPop's top k iff its
    place is below the bound. The k-th unseen place is k - 1 + j, j the train places at or below
    it, found by one merge walk over the cutoffs; returns j at the last, the train places below its
    bound."""
    j = 0
    for c in range(len(cutoffs)):
        k = cutoffs[c]
        while start + j < stop and places[start + j] <= k - 1 + j:
            j += 1
        bound[c] = min(k + j, n_places)
    return j
