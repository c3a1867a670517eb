"""Intra-list diversity (ILD@k) of top-k lists (docs/CONVENTIONS.md#beyond-accuracy): the mean Jaccard
distance d(A, B) = 1 - |A & B| / |A | B| between the genre sets of every pair of a unit's top-k items
(0 for two items without genres), NaN below 2 items.

The one pass over the lists (:func:`recsys_eval.measure.listpass.list_pass`) reads every cutoff
from one walk of a list: the distances of each new item to those above it
are added to a running total, read at each cutoff (the k(k-1)/2 pairs of the top k, not of every
cutoff). d depends on a pair only through the overlap t = |A & B| and the size sum s = |A| + |B|
(the union is s - t), so it is read from a table by (t, s); with at most :data:`PACKED_GENRES`
genres an item's genre bits and its genre count share one 64-bit word, the overlap a popcount of
two words, and the pairs of a new item are summed in four running sums (the loop's cost is then
the pairs' work, not the latency of one sum). Wider genre sets take several words a pair.

The sum over pairs stays pairwise, O(k^2): under cosine similarity of genre vectors it would be
linear in k, sum_{i<j} cos(g_i, g_j) = (||sum_i u_i||^2 - sum_i ||u_i||^2) / 2 with u_i = g_i/||g_i||,
but Jaccard's denominator |A | B| depends on the pair, so no sum of per-item vectors gives it.
Counting the items above by size and genre (so that a new item's distances follow from its genres'
counts, O(genres) instead of O(k)) was measured slower at k = 100: with one to three genres an
item, the counts' short loops of varying length cost more than the 100 popcounts they replace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


#: Genre sets of at most this many genres are packed with their size in one 64-bit word.
PACKED_GENRES = 57
_SIZE_SHIFT = 58  # the size in the top 6 bits (at most 57 genres, so a size fits)
_SUM_STRIDE = 128  # the table's row length, above the largest size sum 2 x 57


@dataclass(frozen=True)
class GenreSets:
    """Every item's genre set as the ILD kernels read it: with at most :data:`PACKED_GENRES` genres
    (``packed``), one 64-bit ``words`` entry an item (its genre bits, its genre count in the top
    bits); else ``masks`` (items x 64-bit words) and ``sizes``. ``distance``: :func:`distance_table`
    flattened, rows ``stride`` long."""

    packed: bool
    words: np.ndarray
    masks: np.ndarray
    sizes: np.ndarray
    distance: np.ndarray
    stride: int

    @classmethod
    def of(cls, genres: np.ndarray) -> GenreSets:
        """The sets of an items x genres bool matrix."""
        masks, sizes = genre_masks(genres)
        distance = distance_table(int(sizes.max(initial=0)))
        if genres.shape[1] > PACKED_GENRES:
            return cls(False, np.zeros(0, dtype=np.uint64), masks, sizes, distance.ravel(), distance.shape[1])
        words = masks[:, 0] | (sizes.astype(np.uint64) << np.uint64(_SIZE_SHIFT))
        return cls(True, words, np.zeros((0, 0), dtype=np.uint64), sizes[:0], distance.ravel(), distance.shape[1])


def distance_table(most: int) -> np.ndarray:
    """d by overlap t (row) and size sum s (column; rows :data:`_SUM_STRIDE` long at least, so that
    the flattened table is read at t * _SUM_STRIDE + s for packed sets): 1 - t / (s - t),
    0 where the union s - t is 0 (two items without genres), for sizes up to ``most``."""
    t, s = np.meshgrid(np.arange(most + 1), np.arange(max(2 * most + 1, _SUM_STRIDE)), indexing="ij")
    union = s - t
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, 1.0 - t / np.maximum(union, 1), 0.0)


def genre_masks(genres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every item's genre set as bits (items x 64-bit words) and its genre count."""
    genres = np.asarray(genres, dtype=bool)
    n_items = genres.shape[0]
    n_words = max(1, -(-genres.shape[1] // 64))
    padded = np.zeros((n_items, n_words * 64), dtype=bool)
    padded[:, : genres.shape[1]] = genres
    bits = np.packbits(padded.reshape(n_items, n_words, 64), axis=2, bitorder="little")
    return bits.view(np.uint64).reshape(n_items, n_words), genres.sum(axis=1).astype(np.int64)


@njit(cache=True, nogil=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True, nogil=True)
def _distance(x, bits, size, distance):
    """d between the item of packed word ``x`` and one of genre ``bits`` and ``size``: the table
    (flattened) at overlap t and size sum s, t * :data:`_SUM_STRIDE` + s."""
    return distance[_popcount(x & bits) * np.uint64(_SUM_STRIDE) + (x >> np.uint64(_SIZE_SHIFT)) + size]


@njit(cache=True, nogil=True)
def packed_distances(listed, b, distance):
    """The sum of d between packed item b and each item above it, in four running sums."""
    word = listed[b]
    bits, size = word & np.uint64((1 << _SIZE_SHIFT) - 1), word >> np.uint64(_SIZE_SHIFT)
    s0, s1, s2, s3 = 0.0, 0.0, 0.0, 0.0
    a = 0
    while a + 4 <= b:
        s0 += _distance(listed[a], bits, size, distance)
        s1 += _distance(listed[a + 1], bits, size, distance)
        s2 += _distance(listed[a + 2], bits, size, distance)
        s3 += _distance(listed[a + 3], bits, size, distance)
        a += 4
    while a < b:
        s0 += _distance(listed[a], bits, size, distance)
        a += 1
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, nogil=True)
def wide_distances(listed_masks, listed_size, b, distance, stride):
    """The sum of d between item b and each item above it, genre sets of several words."""
    total = 0.0
    for a in range(b):
        inter = 0
        for w in range(listed_masks.shape[1]):
            inter += _popcount(listed_masks[a, w] & listed_masks[b, w])
        total += distance[inter * stride + listed_size[a] + listed_size[b]]
    return total


@njit(cache=True, nogil=True)
def ild_units(lo, hi, offsets, items, packed, words, masks, sizes, distance, stride, cutoffs, row, out):
    """ILD of the lists of units lo:hi at every cutoff (into ``out`` from ``row``): each new item's
    distances to those above it (:func:`packed_distances` of the ``words`` when ``packed``, else
    :func:`wide_distances` of the ``masks`` and ``sizes``) added to a running total, read at each
    cutoff. One loop over the units, called once a chunk: a helper with array arguments called
    per unit costs numba's atomic reference counts."""
    kmax = cutoffs[len(cutoffs) - 1]
    listed_words = np.zeros(kmax, dtype=np.uint64)  # the top k's genre words, contiguous
    listed_masks = np.zeros((kmax, masks.shape[1]), dtype=np.uint64)  # or their genre bits and sizes
    listed_sizes = np.zeros(kmax, dtype=np.int64)
    for u in range(lo, hi):
        first, length = offsets[u], min(offsets[u + 1] - offsets[u], kmax)
        total, r = 0.0, 0
        for c in range(len(cutoffs)):
            stop = min(cutoffs[c], length)
            while r < stop:
                item = items[first + r]
                if packed:
                    listed_words[r] = words[item]
                    total += packed_distances(listed_words, r, distance)
                else:
                    for w in range(masks.shape[1]):
                        listed_masks[r, w] = masks[item, w]
                    listed_sizes[r] = sizes[item]
                    total += wide_distances(listed_masks, listed_sizes, r, distance, stride)
                r += 1
            out[row + c, u] = total / (r * (r - 1) / 2.0) if r >= 2 else np.nan
