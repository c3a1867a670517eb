"""What a run needs of 1R units beyond their metrics, read off per-user lists instead of a ranking
per unit.

Under 1R a unit's targets are its relevant item r plus the non-relevant targets of its *group* (its
user's shared sample, its own fresh sample, or every candidate of its user less the user's relevant
items). Ranked by (score desc, item asc) with ``-inf`` left out, the unit's list is therefore its
group's list G with r inserted at position p = above + before (0-based; r is left out when it
scored ``-inf``): the relative order of G's items does not depend on r. So

- the top-k list of a unit is ``G[:p] + [r] + G[p:k-1]`` (``G[:k]`` when r is not ranked);
- the items ranked anywhere are G's items and the ranked relevant items;
- the scored targets of the pooled AUC (:func:`recsys_eval.measure.auc.scored_targets`) are each
  ranked relevant score (label 1) and, per unit in unit order, G's scores in list order (label 0):
  a virtual array whose sampled positions map to (unit, position in G).

Each G is sorted once per group, not once per unit. Listed groups come scored from
:func:`~recsys_eval.recommend.base.score_one_relevant`; "every candidate" groups (AI/TI+1R+AN)
are scored again from score blocks of a bounded number of users, only when a list or a pooled
AUC sample is asked for. Both give exactly what ranking every unit's listed targets gives
(:func:`~recsys_eval.recommend.base.rank_targets`, same scores, same order).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numba
import numpy as np
import polars as pl

from recsys_eval.core import Interactions, Rankings, Targets
from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.units import RelevantRanks
from recsys_eval.errors import ConfigError
from recsys_eval.recommend.base import (
    BLOCK_CELLS,
    OneRelevantScores,
    Recommender,
    _blocked,
    _checked_scores,
    _nan_scores,
    score_one_relevant,
)
from recsys_eval.recommend.topk import no_places, sort_units, top_k_rows


@dataclass(eq=False)
class OneRelevantRanking:
    """1R units ranked in closed form: their RelevantRanks (``ranks``, every metric of a unit) and
    what is needed to read lists and scored targets off their groups on demand."""

    model: Recommender
    train: Interactions
    targets: Targets
    scored: OneRelevantScores
    _groups: tuple | None = field(default=None, repr=False)
    _lists: dict = field(default_factory=dict, repr=False)
    _ranked: np.ndarray | None = field(default=None, repr=False)

    @property
    def ranks(self) -> RelevantRanks:
        return self.scored.ranks

    @property
    def n_units(self) -> int:
        return self.targets.n_units

    @property
    def unit_group(self) -> np.ndarray:
        """The group of every unit: its listed group, or its user's place among the distinct users."""
        if self.scored.groups is not None:
            return self.scored.groups[0]
        starts = np.r_[True, self.targets.unit_user[1:] != self.targets.unit_user[:-1]]
        return np.cumsum(starts) - 1

    def _group_lists(self, depth: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every group's list G, its first ``depth`` items (None: whole, listed groups only):
        ``(offsets, items, scores, ranked)`` with ``ranked`` the length of the whole G."""
        if self.scored.groups is not None:
            if self._groups is None:
                _, offsets, negatives, scores = self.scored.groups
                order = sort_units(offsets, negatives, scores)
                keep = scores[order] > -np.inf
                counts = np.concatenate([[0], np.cumsum(keep)])
                ranked = counts[offsets[1:]] - counts[offsets[:-1]]
                self._groups = (counts[offsets].astype(np.int64), negatives[order[keep]], scores[order[keep]], ranked)
            offsets, items, scores, ranked = self._groups
            if depth is None:
                return offsets, items, scores, ranked
            head = np.minimum(ranked, depth)
            position = np.arange(len(items)) - np.repeat(offsets[:-1], ranked)
            keep = position < np.repeat(head, ranked)
            return np.concatenate([[0], np.cumsum(head)]).astype(np.int64), items[keep], scores[keep], ranked
        if depth is None:
            raise ConfigError("every-candidate groups are read a bounded head at a time")
        heads, scores, ranked = [], [], []
        for _, block_scores in self._candidate_blocks():
            rows = np.arange(len(block_scores), dtype=np.int32)
            # the heap keeps (score desc, item asc) and never takes -inf: the head of G, no sort
            items, top, count, _ = top_k_rows(block_scores, rows, np.zeros(len(rows) + 1, dtype=np.int64),
                                              np.zeros(0, dtype=np.int32), np.zeros(block_scores.shape[1], np.bool_),
                                              depth, *no_places(len(rows)))
            take = np.arange(depth)[None, :] < count[:, None]
            heads.append(items[take])
            scores.append(top[take])
            ranked.append(_ranked(block_scores))
        ranked = np.concatenate(ranked) if ranked else np.zeros(0, np.int64)
        self._ranked = ranked  # the lengths of the whole lists: a pooled-AUC sample needs no pass for them
        offsets = np.concatenate([[0], np.cumsum(np.minimum(ranked, depth))]).astype(np.int64)
        return (offsets, np.concatenate(heads) if heads else np.zeros(0, np.int32),
                np.concatenate(scores) if scores else np.zeros(0, np.float32), ranked)

    def _candidate_blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """For every-candidate groups, blocks of distinct users in unit order: ``(first group,
        scores)`` with the candidates of the user that are not in train and not relevant to it
        kept, the rest at -inf. No block is sorted: a head is a heap's top-k and a position's
        score an order statistic of the row's values (ties do not change a value)."""
        targets, model = self.targets, self.model
        group = self.unit_group
        starts = np.flatnonzero(np.r_[True, np.diff(group) != 0])
        users = targets.unit_user[starts].astype(np.int32)
        n_items = self.train.n_items
        blocked = _blocked(targets.candidates, n_items)
        seen = self.train.csr()
        per_block = max(1, BLOCK_CELLS // max(n_items, 1))
        for first in range(0, len(users), per_block):
            block = users[first:first + per_block]
            scores = _checked_scores(model, model.score_block(block), (len(block), n_items), "score_block")
            hi = starts[first + len(block)] if first + len(block) < len(starts) else targets.n_units
            unit_starts = np.append(starts[first:first + len(block)], hi).astype(np.int64)
            kept = np.empty_like(scores)
            nans = np.zeros(len(block), dtype=np.int64)
            run_chunks(_kept_candidates_chunk, chunk_bounds(len(block)), scores, block, seen.indptr, seen.indices,
                       unit_starts, targets.items, blocked, kept, nans)
            if nans.any():
                raise _nan_scores(model, "score_block")
            yield first, kept

    def lists(self, depth: int) -> Rankings:
        """Every unit's top-``depth`` ranked list (and scores): what ranking its listed targets
        gives, cut at ``depth``."""
        if depth not in self._lists:
            self._lists[depth] = self._unit_lists(depth)
        return self._lists[depth]

    def _unit_lists(self, depth: int) -> Rankings:
        g_offsets, g_items, g_scores, _ = self._group_lists(depth)
        ranks = self.ranks
        group = self.unit_group
        relevant, rel_scores = self.targets.items, self.scored.relevant_scores
        head = np.diff(g_offsets)[group]
        ranked = ranks.ranked
        place = ranks.above + ranks.before
        length = np.minimum(depth, head + ranked)
        offsets = np.concatenate([[0], np.cumsum(length)]).astype(np.int64)
        unit = np.repeat(np.arange(self.n_units), length)
        j = np.arange(offsets[-1]) - offsets[unit]
        at = ranked[unit] & (j == place[unit])
        source = g_offsets[group[unit]] + j - (ranked[unit] & (j > place[unit]))
        source = np.where(at, 0, source)
        items = np.where(at, relevant[unit], g_items[source] if len(g_items) else 0).astype(np.int32)
        scores = np.where(at, rel_scores[unit], g_scores[source] if len(g_scores) else 0).astype(np.float32)
        return Rankings(self.targets.unit_user.astype(np.int32), offsets, items, scores)

    def ranked_items(self) -> np.ndarray:
        """Bool mask over items: ranked in some unit's whole list (prediction coverage)."""
        mask = np.zeros(self.train.n_items, dtype=bool)
        mask[self.targets.items[self.ranks.ranked]] = True
        if self.scored.groups is not None:
            mask[self._group_lists(None)[1]] = True
            return mask
        for _, scores in self._candidate_blocks():
            mask |= (scores > -np.inf).any(axis=0)
        return mask

    def scored_targets(self, sample: int | None, seed: int) -> pl.DataFrame:
        """The rows of :func:`recsys_eval.measure.auc.scored_targets` for the ranking of every
        unit's listed targets (same sample, same seed), from the groups' lists."""
        from recsys_eval.core.scored import label_rows, sampled_positions

        ranks, rng = self.ranks, np.random.default_rng(seed)
        rel = self.scored.relevant_scores[ranks.ranked]
        kept, weight = sampled_positions(len(rel), sample, rng)
        parts = label_rows(1, rel[kept], weight, self.n_units - len(rel))
        group = self.unit_group
        per_unit = self._ranked_per_group()[group]
        starts = np.concatenate([[0], np.cumsum(per_unit)])
        kept, weight = sampled_positions(int(starts[-1]), sample, rng)
        unit = np.searchsorted(starts, kept, side="right") - 1
        parts += label_rows(0, self._group_scores_at(group[unit], kept - starts[unit]), weight,
                            int(ranks.n_nonrelevant.sum()) - int(starts[-1]))
        return pl.concat(parts)

    def _ranked_per_group(self) -> np.ndarray:
        if self.scored.groups is not None:
            return self._group_lists(None)[3]
        if self._ranked is not None:
            return self._ranked
        return np.concatenate([_ranked(scores) for _, scores in self._candidate_blocks()] or [np.zeros(0, np.int64)])

    def _group_scores_at(self, groups: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The score at ``positions`` of the lists of ``groups`` (G in list order)."""
        if self.scored.groups is not None:
            offsets, _, scores, _ = self._group_lists(None)
            return scores[offsets[groups] + positions]
        out = np.empty(len(groups), dtype=np.float32)
        for first, scores in self._candidate_blocks():
            mine = np.flatnonzero((groups >= first) & (groups < first + len(scores)))
            rows, inverse = np.unique(groups[mine] - first, return_inverse=True)
            descending = -np.sort(-scores[rows], axis=1)  # only the rows sampled, values only
            out[mine] = descending[inverse, positions[mine]]
        return out


@numba.njit(cache=True, nogil=True)
def _kept_candidates_chunk(lo, hi, scores, users, seen_indptr, seen_indices, unit_starts, items, blocked, kept, nans):
    """For the rows ``lo:hi`` of a block of every-candidate groups' scores (row r: user
    ``users[r]``, its relevant items ``items[unit_starts[r]:unit_starts[r + 1]]``): ``kept[r]``,
    the row with its blocked, train and relevant items at -inf, and ``nans[r]``, the NaN scores
    left. One pass over the block, where boolean masks of it took five."""
    n_items = scores.shape[1]
    for r in range(lo, hi):
        for j in range(n_items):
            kept[r, j] = -np.inf if blocked[j] else scores[r, j]
        u = users[r]
        for p in range(seen_indptr[u], seen_indptr[u + 1]):
            kept[r, seen_indices[p]] = -np.inf
        for p in range(unit_starts[r], unit_starts[r + 1]):
            kept[r, items[p]] = -np.inf
        count = 0
        for j in range(n_items):
            count += kept[r, j] != kept[r, j]
        nans[r] = count


def _ranked(scores: np.ndarray) -> np.ndarray:
    """Each row's count of items scored above -inf (its list's length)."""
    return (scores > -np.inf).sum(axis=1)


def rank_one_relevant_units(model: Recommender, train: Interactions, targets: Targets, *,
                            chunk_size: int = 2048) -> OneRelevantRanking:
    """The closed-form ranking of one-relevant Targets (``build_targets(..., one_relevant=True)``)."""
    if not targets.one_relevant:
        raise ConfigError(f"rank_one_relevant_units takes one-relevant targets, not {targets!r}")
    return OneRelevantRanking(model, train, targets, score_one_relevant(model, train, targets, chunk_size=chunk_size))

