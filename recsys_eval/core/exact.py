"""Exact sums of doubles, so that a summary does not depend on how its users were split up.

A float sum depends on the order of its terms: the local engine sums a fold's users in user order,
a Spark job in partitions, each partition in its own order, and the last bits differ. Here every
sum is exact instead: every finite double is an integer multiple of 2^-1074 (``m 2^q`` with an
integer ``m < 2^53``), so a sum of doubles is that integer's sum, kept in 32-bit digits of int64
(a Kulisch accumulator) by a kernel, then as a Python integer. Integer sums are associative, so a
group's sum is the same for any order, chunking or partitioning of its values, and states of
disjoint parts merge by adding integers. Squares are exact too (``m^2`` is added as three products
of 27-bit halves), so the sample variance comes from exact moments.

A value is rounded once, at the end (:func:`ratio`: Python's integer division rounds correctly),
so a mean is the correctly rounded mean of its values, and a variance the correctly rounded
``(n S2 - S1^2) / (n (n - 1))`` (docs/CONVENTIONS.md#averaging).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks

#: Sums are integers in units of 2^-1074 (values) and 2^-2148 (squares).
VALUE_SCALE, SQUARE_SCALE = 1074, 2148
#: 32-bit digits per sum: the top bit of a finite double is bit 2097 of its integer (4196 for its
#: square), plus room for the carries of 2^63 terms in the top digit.
VALUE_DIGITS, SQUARE_DIGITS = 67, 133
_MASK = (1 << 32) - 1
#: Terms added into a digit between two carry propagations: each adds less than 2^33.
_BETWEEN_CARRIES = 1 << 28


@njit(cache=True, nogil=True, inline="always")
def _add_at(digits, group, value, position, sign):  # pragma: no cover - compiled
    """Add ``sign * value * 2^position`` (``value < 2^54``) to a group's digits."""
    d, r = position >> 5, position & 31
    low = (value & _MASK) << r
    high = (value >> 32) << r
    digits[group, d] += sign * (low & _MASK)
    digits[group, d + 1] += sign * ((high & _MASK) + (low >> 32))
    digits[group, d + 2] += sign * (high >> 32)


@njit(cache=True, nogil=True)
def _carry(digits, g):  # pragma: no cover - compiled
    """Propagate the carries of group ``g``: every digit but the top one in [0, 2^32), the same
    integer."""
    for d in range(digits.shape[1] - 1):
        carry = digits[g, d] >> 32
        digits[g, d] -= carry << 32
        digits[g, d + 1] += carry


@njit(cache=True, nogil=True)
def _group_digits(lo, hi, bits, starts, squares, sums, square_sums, infinite):  # pragma: no cover - compiled
    """For the runs ``lo:hi`` of values (their IEEE-754 ``bits`` as int64) starting at ``starts``,
    into their rows of ``sums`` and (``squares``) ``square_sums``, the digits of the exact sum of
    each run's finite values and of their squares; NaN is skipped, infinite values are counted in
    ``infinite``. Runs are independent: each writes its own rows (:func:`run_chunks` runs chunks of
    them on threads)."""
    n_groups = len(starts)
    for g in range(lo, hi):
        stop = starts[g + 1] if g + 1 < n_groups else len(bits)
        added = 0
        for i in range(starts[g], stop):
            exponent = (bits[i] >> 52) & 0x7FF
            m = bits[i] & 0xFFFFFFFFFFFFF
            if exponent == 0x7FF:  # NaN (skipped) or infinite
                infinite[g] += m == 0
                continue
            if exponent:  # normal: x = (2^52 + m) 2^(exponent - 1075)
                m |= 1 << 52
                exponent -= 1
            elif m == 0:
                continue
            sign = -1 if bits[i] < 0 else 1  # x = m 2^(exponent - 1074)
            _add_at(sums, g, m, exponent, sign)
            if squares:
                high, low = m >> 27, m & ((1 << 27) - 1)
                _add_at(square_sums, g, high * high, 2 * exponent + 54, 1)
                _add_at(square_sums, g, 2 * high * low, 2 * exponent + 27, 1)
                _add_at(square_sums, g, low * low, 2 * exponent, 1)
            added += 1
            if added == _BETWEEN_CARRIES:
                _carry(sums, g)
                if squares:
                    _carry(square_sums, g)
                added = 0
        _carry(sums, g)
        if squares:
            _carry(square_sums, g)


def group_sums(values: np.ndarray, starts: np.ndarray, *, squares: bool = False) -> tuple[list[int], list[int]]:
    """Exact sums (Python integers in units of 2^-1074) of the finite values of each run of
    ``values`` starting at ``starts`` and, with ``squares``, of their squares (units of
    2^-2148; else an empty list). NaN values are skipped; an infinite value is an error."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    sums = np.zeros((len(starts), VALUE_DIGITS), dtype=np.int64)
    square_sums = np.zeros((len(starts) if squares else 0, SQUARE_DIGITS), dtype=np.int64)
    counted = np.zeros(len(starts), dtype=np.int64)
    run_chunks(_group_digits, chunk_bounds(len(starts)), bits, starts, squares, sums, square_sums, counted)
    infinite = int(counted.sum())
    if infinite:
        raise ValueError(f"{infinite} infinite value(s) in a sum: every summed value must be finite or NaN")
    return _integers(sums), _integers(square_sums)


def _integers(digits: np.ndarray) -> list[int]:
    """Per row, the integer whose 32-bit digits (least significant first, the top one signed) are
    the row's: the digits of every row turned to bytes at once, then each row's read as one integer."""
    width = 4 * (digits.shape[1] - 1)
    low = memoryview(np.ascontiguousarray(digits[:, :-1].astype(np.uint32)).tobytes())
    shift = 32 * (digits.shape[1] - 1)
    return [int.from_bytes(low[i * width:(i + 1) * width], "little") + (top << shift)
            for i, top in enumerate(digits[:, -1].tolist())]


def ratio(total: int, scale: int, n: int) -> float:
    """``total 2^-scale / n`` rounded once (NaN when ``n`` is 0)."""
    return total / (n << scale) if n else math.nan


def mean_and_sd(n: int, total: int, square_total: int) -> tuple[float, float]:
    """The mean and sample standard deviation of ``n`` values from their exact sum and sum of
    squares: sd = sqrt((n S2 - S1^2) / (n (n - 1))), the variance rounded once (NaN for n < 2)."""
    mean = ratio(total, VALUE_SCALE, n)
    if n < 2:
        return mean, math.nan
    spread = n * square_total - total * total  # units of 2^-2148, never negative
    return mean, math.sqrt(ratio(spread, SQUARE_SCALE, n * (n - 1)))
