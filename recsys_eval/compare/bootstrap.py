"""The bootstrap over users as mergeable parts: canonical blocks of users resampled on their own and
summed exactly, so that any partitioning of the users (the local engine's one table, a Spark job's
partitions) gives the same bits (docs/CONVENTIONS.md#bootstrap-intervals).

A replicate of the bootstrap of a column's n defined users draws counts ``c_u`` ~ Multinomial(n;
1/n, ..., 1/n) and its mean is ``sum_u c_u x_u / n``. The draw is hierarchical, over blocks of
users by user index (``user // BLOCK_USERS``; text ids by their rank), whatever the partitions:

1. **Block totals.** The block sizes ``m_b`` (defined users of the column in block b) are known
   after a first pass (:class:`BlockCounts`). Per replicate the blocks' totals are drawn by
   conditional binomial splitting in block order, ``T_b ~ Binomial(n - T_<b, m_b / (n - m_<b))``
   (the last non-empty block takes what is left): ``(T_b)`` ~ Multinomial(n; m_b / n), drawn from
   a numpy Generator seeded by the bootstrap's seed, a function of the seed and ``(m_b)`` alone
   (:class:`BlockTotals`; ``R x blocks`` draws, which each task recomputes).
2. **Counts within a block.** Given ``T_b``, the block's m_b users get T_b uniform picks:
   Multinomial(T_b; 1/m_b, ...). Pick j of replicate r in block b is ``floor(U m_b)`` for the j-th
   uniform of the counter-based stream (seed, r, b) (:func:`recsys_eval.targets.sampling.uniform`;
   the uniform has 53 bits, so a pick's probability is 1/m_b within m_b 2^-53).

Together the counts are Multinomial(n; 1/n): a bootstrap resample of the n users. A block's sum
``sum c_u x_u`` is a double summed in user order (so the same bits wherever the block is
processed), and the blocks' sums are added exactly (:mod:`recsys_eval.core.exact`), in any order,
into each replicate's mean rounded once. Columns with the same defined users get the same counts
(one draw per replicate serves every column, as a joint bootstrap); a column with other defined
users gets its own, from the same streams.

Pass 1 (:class:`BlockCounts`): per block and column, the defined users; per column, the exact sum
of the defined values (the mean), their min and max. Pass 2 (:meth:`ResamplePlan.resample`): per
block, every replicate's sum and the BCa acceleration's sums of (x - mean)^2 and (x - mean)^3.
Both are states of disjoint blocks that merge by addition; :func:`bounds` makes the intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from recsys_eval.compare.frames import mask_groups
from recsys_eval.compare.resampling import acceleration, bootstrap_interval
from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.exact import VALUE_SCALE, group_sums, ratio
from recsys_eval.core.rng import derive_seed
from recsys_eval.targets.sampling import stream_state, uniform

#: Users per block: a block's users are resampled together, by one task.
BLOCK_USERS = 1 << 16
#: Draws (resamples x users) below which a block sums its resamples on the calling thread:
#: handing a few milliseconds of work to threads costs more than it saves on a loaded machine.
SERIAL_DRAWS = 2_000_000


def user_blocks(users: np.ndarray, block_users: int = BLOCK_USERS) -> np.ndarray:
    """The block of each user of an ascending array of distinct ids: ``user // block_users`` for
    integer ids, the rank among ``users`` ``// block_users`` for text ids."""
    if np.issubdtype(users.dtype, np.integer):
        return users.astype(np.int64) // block_users
    return np.arange(len(users), dtype=np.int64) // block_users


@dataclass
class BlockCounts:
    """Pass 1 over blocks of users (``values``: users x columns, NaN where undefined): per block
    (``blocks``, ascending) and column, the users with a defined value (``defined``, blocks x
    columns); per column the exact sum of those values (units of 2^-1074), their min and max.
    States of disjoint users merge by addition (:meth:`merge`)."""

    blocks: np.ndarray
    defined: np.ndarray
    totals: list[int]
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray, block: int) -> BlockCounts:
        finite = ~np.isnan(values)
        n_cols = values.shape[1]
        totals, _ = group_sums(np.ascontiguousarray(values.T).ravel(), np.arange(n_cols) * values.shape[0])
        low = np.where(finite, values, np.inf).min(axis=0, initial=np.inf)
        high = np.where(finite, values, -np.inf).max(axis=0, initial=-np.inf)
        return cls(np.array([block], dtype=np.int64), finite.sum(axis=0, dtype=np.int64)[None, :], totals, low, high)

    @classmethod
    def merge(cls, parts: list[BlockCounts]) -> BlockCounts:
        """The state of the union of the parts' users (a block split between parts adds up)."""
        blocks = np.unique(np.concatenate([p.blocks for p in parts]))
        defined = np.zeros((len(blocks), parts[0].defined.shape[1]), dtype=np.int64)
        for p in parts:
            np.add.at(defined, np.searchsorted(blocks, p.blocks), p.defined)
        totals = [sum(column) for column in zip(*(p.totals for p in parts), strict=True)]
        return cls(blocks, defined, totals, np.min([p.low for p in parts], axis=0),
                   np.max([p.high for p in parts], axis=0))

    @property
    def n(self) -> np.ndarray:
        """Users with a defined value, per column."""
        return self.defined.sum(axis=0)

    def means(self) -> np.ndarray:
        """Each column's mean over its defined users, rounded once (NaN without one)."""
        return np.array([ratio(t, VALUE_SCALE, int(n)) for t, n in zip(self.totals, self.n, strict=True)])


class BlockTotals:
    """Per replicate, the number of draws of each block (by its position in the block order of
    ``defined``, blocks x columns), by conditional binomial splitting in block order from a
    Generator seeded by ``seed``: :meth:`at` returns (replicates, columns) for a block, walking the
    chain from where the last call left it (blocks asked in ascending order cost one walk in all).
    Columns with the same block sizes share one chain, so get the same totals (see the module)."""

    def __init__(self, defined: np.ndarray, n_resamples: int, seed: int) -> None:
        self.n_resamples, self.seed, self.n_cols = n_resamples, seed, defined.shape[1]
        self.sizes, group = np.unique(defined.T, axis=0, return_inverse=True)
        self.columns = [np.flatnonzero(group.ravel() == g) for g in range(len(self.sizes))]
        self._restart()

    def _restart(self) -> None:
        self.next = 0
        self.rngs = [np.random.default_rng(self.seed) for _ in self.sizes]
        self.left = [np.full(self.n_resamples, int(size.sum()), dtype=np.int64) for size in self.sizes]
        self.rest = [int(size.sum()) for size in self.sizes]

    def at(self, position: int) -> np.ndarray:
        if position < self.next:
            self._restart()
        out = np.zeros((self.n_resamples, self.n_cols), dtype=np.int64)
        for g, size in enumerate(self.sizes):
            for b in range(self.next, position + 1):
                m = int(size[b])
                if m == 0:
                    continue
                drawn = self.left[g].copy() if m == self.rest[g] else self.rngs[g].binomial(
                    self.left[g], m / self.rest[g]).astype(np.int64)
                self.left[g] -= drawn
                self.rest[g] -= m
                if b == position:
                    out[:, self.columns[g]] = drawn[:, None]
        self.next = position + 1
        return out


@numba.njit(cache=True, nogil=True)
def _block_sums(lo, hi, values, totals, seed, block, out):  # pragma: no cover - compiled
    """out[r, c] = sum_i counts_r[i] values[i, c] for the replicates r in lo:hi, over one block's
    users with a defined value in every column of ``values`` (m x columns, users in order); the
    counts of replicate r are totals[r, c] uniform picks among the m users from the stream (seed,
    r, block), shared by consecutive columns with the same total."""
    m = values.shape[0]
    counts = np.zeros(m, np.int64)
    for r in range(lo, hi):
        state = stream_state(seed, r, block)
        drawn = -1
        for c in range(values.shape[1]):
            if totals[r, c] != drawn:
                drawn = totals[r, c]
                counts[:] = 0
                for j in range(drawn):
                    pick = int(uniform(state, j) * m)
                    counts[min(pick, m - 1)] += 1
            total = 0.0
            for i in range(m):
                if counts[i] != 0:
                    total += counts[i] * values[i, c]
            out[r, c] = total


@dataclass
class Resampled:
    """Pass 2 over blocks: per replicate and column the sum of the resampled values, and per column
    the exact sums of (x - mean)^2 and (x - mean)^3 over the defined users (the BCa acceleration;
    units of 2^-1074, Python integers). One block's sums are its doubles (``block``); blocks merge
    into exact sums (``exact``, an object array of Python integers), added in any order."""

    block: np.ndarray | None
    exact: np.ndarray | None
    squares: np.ndarray
    cubes: np.ndarray

    @classmethod
    def merge(cls, parts: list[Resampled]) -> Resampled:
        if len(parts) == 1:
            return parts[0]
        exact = sum(p.exact_sums() for p in parts[1:]) + parts[0].exact_sums()
        return cls(None, exact, sum(p.squares for p in parts[1:]) + parts[0].squares,
                   sum(p.cubes for p in parts[1:]) + parts[0].cubes)

    def exact_sums(self) -> np.ndarray:
        """Every replicate's sum as an exact integer (units of 2^-1074)."""
        if self.exact is not None:
            return self.exact
        exact, _ = group_sums(self.block.ravel(), np.arange(self.block.size))
        return _integers(exact).reshape(self.block.shape)

    def means(self, n: np.ndarray) -> np.ndarray:
        """Every replicate's mean, the sum over ``n`` users (per column) rounded once: one block's
        double divided by n is that already (IEEE division rounds the exact quotient)."""
        if self.block is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(n > 0, self.block / np.maximum(n, 1), np.nan)
        return np.array([[ratio(int(t), VALUE_SCALE, int(k)) for t, k in zip(row, n, strict=True)]
                         for row in self.exact]).reshape(self.exact.shape)


class ResamplePlan:
    """What pass 2 needs to know of every block (pass 1's counts) and the bootstrap's options."""

    def __init__(self, counts: BlockCounts, n_resamples: int, seed: int) -> None:
        self.counts, self.n_resamples, self.seed = counts, n_resamples, seed
        self.means = counts.means()
        self._totals: BlockTotals | None = None  # made where it is used (a Spark task), not shipped

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_totals": None}

    def resample(self, values: np.ndarray, block: int) -> Resampled:
        """Pass 2 over one block (``values``: its users x columns, users ascending)."""
        if self._totals is None:
            self._totals = BlockTotals(self.counts.defined, self.n_resamples, derive_seed(self.seed, "bootstrap blocks"))
        totals = self._totals.at(int(np.searchsorted(self.counts.blocks, block)))
        sums = np.zeros((self.n_resamples, values.shape[1]))
        picks = derive_seed(self.seed, "bootstrap picks")
        finite = ~np.isnan(values)
        for rows, cols in mask_groups(finite):
            if not rows.size:
                continue
            block_values = np.ascontiguousarray(values[np.ix_(rows, cols)])
            part_totals = np.ascontiguousarray(totals[:, cols])
            out = np.zeros((self.n_resamples, len(cols)))
            args = (block_values, part_totals, np.uint64(picks), np.int64(block), out)
            if self.n_resamples * rows.size < SERIAL_DRAWS:
                _block_sums(0, self.n_resamples, *args)
            else:
                run_chunks(_block_sums, chunk_bounds(self.n_resamples), *args)
            sums[:, cols] = out
        deviations = values - self.means
        starts = np.arange(values.shape[1]) * values.shape[0]
        squares, _ = group_sums(np.ascontiguousarray((deviations**2).T).ravel(), starts)
        cubes, _ = group_sums(np.ascontiguousarray((deviations**3).T).ravel(), starts)
        return Resampled(sums, None, _integers(squares), _integers(cubes))


def _integers(values: list[int]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def bounds(counts: BlockCounts, resampled: Resampled, *, level: float, method: str) -> tuple[np.ndarray, ...]:
    """Per column: the mean, and the interval's lower and upper bounds from the merged passes (as
    :func:`~recsys_eval.compare.resampling.bootstrap_interval` makes them; BCa's acceleration
    sum(u^3) / (6 sum(u^2)^1.5), u = x - mean, from the exact sums, each rounded once). A column
    without a defined value gets NaN; one whose values are all equal, its value."""
    n = counts.n
    mean = counts.means()
    distribution = resampled.means(n)
    squares = np.array([ratio(int(s), VALUE_SCALE, 1) for s in resampled.squares])
    cubes = np.array([ratio(int(s), VALUE_SCALE, 1) for s in resampled.cubes])
    lower, upper = bootstrap_interval(np.where(np.isnan(distribution), 0.0, distribution), mean, level=level,
                                      method=method, acceleration=acceleration(squares, cubes))
    constant = counts.low == counts.high
    lower, upper = np.where(constant, mean, lower), np.where(constant, mean, upper)
    empty = n == 0
    return mean, np.where(empty, np.nan, lower), np.where(empty, np.nan, upper)


def resample_columns(values: np.ndarray, users: np.ndarray, *, n_resamples: int, seed: int,
                     block_users: int = BLOCK_USERS) -> tuple[BlockCounts, Resampled]:
    """Both passes over the columns of ``values`` (users x columns, NaN where undefined; ``users``
    their ascending ids) through the blocks as a Spark job takes them: pass 1 per block, merged;
    pass 2 per block, merged."""
    blocks = user_blocks(users, block_users)
    starts = np.flatnonzero(np.r_[True, blocks[1:] != blocks[:-1]]) if len(blocks) else blocks
    parts = np.split(np.arange(len(blocks)), starts[1:])
    counts = BlockCounts.merge([BlockCounts.of(values[rows], int(blocks[rows[0]])) for rows in parts])
    plan = ResamplePlan(counts, n_resamples, seed)
    return counts, Resampled.merge([plan.resample(values[rows], int(blocks[rows[0]])) for rows in parts])


def bootstrap_columns(values: np.ndarray, users: np.ndarray, *, n_resamples: int, seed: int, level: float,
                      method: str, block_users: int = BLOCK_USERS) -> tuple[np.ndarray, ...]:
    """The mean and bootstrap interval of every column of ``values`` (users x columns, NaN where
    undefined; ``users`` their ascending ids): :func:`resample_columns`, then :func:`bounds`."""
    counts, resampled = resample_columns(values, users, n_resamples=n_resamples, seed=seed, block_users=block_users)
    return bounds(counts, resampled, level=level, method=method)
