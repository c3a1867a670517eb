"""An external run: the scores or ranks some other system wrote to a file, evaluated like any
internal recommender. Items the run did not list for a user are unranked (score -inf)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from recsys_eval.core import Interactions
from recsys_eval.data.runs import Source, detect_format, read_run
from recsys_eval.errors import DataError
from recsys_eval.recommend.base import Recommender


class UnknownIdsWarning(UserWarning):
    """An external run names users or items that the dataset does not know."""


class ExternalRun(Recommender):
    """Scores from a run (a file of any format :mod:`recsys_eval.data.runs` reads, or a polars or
    pandas DataFrame) with ``user``, ``item`` and ``score`` (higher is better) or ``rank`` (1 is
    best) or both (ordered by rank), in the dataset's raw ids, checked like every run.

    A unit's ranking is the run's order of that user's listed items (equal scores or ranks tie,
    broken by item index like every ranking); the items it did not list are unranked. Scores are
    minus each item's dense rank within its user's list, an exact order key whatever the file's
    precision. Rows whose user or item the dataset does not know are left out and reported: an
    :class:`UnknownIdsWarning` and ``unknown`` (row count and examples). ``fit`` does nothing: the
    run was made elsewhere.
    """

    def __init__(self, frame: Source, data: Interactions, source: str = "run", *,
                 format: str | None = None, columns: list[str] | None = None) -> None:
        self.source = source
        detected = detect_format(frame, format, "run", source, sniff=columns is None)
        self.notes = [detected.note] if detected.note else []  # how the format was detected
        frame = read_run(frame, format=detected.format, columns=columns, name=source)
        values = {c: frame.get_column(c).to_numpy().astype(np.float64) for c in ("rank", "score") if c in frame.columns}
        users = data.user_index(frame.get_column("user"))
        items = data.item_index(frame.get_column("item"))
        known = (users >= 0) & (items >= 0)
        self.unknown = {
            "rows": int((~known).sum()),
            "users": _examples(frame, users < 0, "user"),
            "items": _examples(frame, items < 0, "item"),
        }
        if not known.any():
            raise DataError(
                f"{source}: none of the run's {frame.height:,} (user, item) rows is in the dataset "
                f"{data.source!r} (e.g. user {frame[0, 'user']!r}, item {frame[0, 'item']!r}); "
                "are the ids raw dataset ids?"
            )
        if self.unknown["rows"]:
            warnings.warn(self.unknown_message(), UnknownIdsWarning, stacklevel=2)
        users, items = users[known], items[known]
        zeros = np.zeros(frame.height)
        ranks = _dense_ranks(users, values.get("rank", zeros)[known], values.get("score", zeros)[known])
        # stored: the dense rank (>= 1), so that an absent entry (0) reads as "not listed"
        self.ranks = sp.csr_matrix((ranks, (users, items)), shape=(data.n_users, data.n_items))
        self.ranks.sort_indices()
        self.n_items = data.n_items

    @classmethod
    def from_file(cls, path: str | Path, data: Interactions, *, format: str | None = None,
                  columns: list[str] | None = None) -> ExternalRun:
        """Read a run file (format from the extension or ``format``); raw ids are mapped through
        ``data``'s index."""
        return cls(path, data, source=str(path), format=format, columns=columns)

    def unknown_message(self) -> str:
        """What was left out for unknown ids, for logs."""
        u = self.unknown
        return (
            f"{self.source}: {u['rows']:,} rows name a user or item the dataset does not know and "
            f"are left out (unknown users e.g. {u['users']}, unknown items e.g. {u['items']})"
        )

    def listed_users(self) -> np.ndarray:
        """Bool mask over user indices: users with at least one listed item."""
        return np.diff(self.ranks.indptr) > 0

    def check_overlap(self, users: np.ndarray, what: str = "test users") -> None:
        """Raise a DataError when none of ``users`` has a listed item."""
        users = np.asarray(users)
        if len(users) and not self.listed_users()[users].any():
            raise DataError(f"{self.source}: the run ranks items for none of the {len(np.unique(users)):,} {what}")

    #: A run's scores were computed elsewhere; whether its producer fitted on the test users of a
    #: user-disjoint split is the producer's to ensure (docs/CONVENTIONS.md#user-disjoint-split).
    folds_in = True

    def fit(self, train: Interactions) -> ExternalRun:
        return self

    def fold_in(self, history: Interactions, users: np.ndarray) -> ExternalRun:
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """The pairs' scores. The indices are copied: scipy's pair indexing sets its index arrays
        writeable, which numpy refuses for a column polars rechunked into an array of its own
        (``cannot set WRITEABLE flag``), as a fold's test pairs can be."""
        if len(users) == 0:
            return np.zeros(0, dtype=np.float32)
        index = self.ranks.indices.dtype
        rank = np.asarray(self.ranks[np.array(users, dtype=index), np.array(items, dtype=index)],
                          dtype=np.float32).ravel()
        return np.where(rank > 0, -rank, -np.inf).astype(np.float32)

    def score_block(self, users: np.ndarray) -> np.ndarray:
        rank = self.ranks[np.asarray(users)].toarray()
        return np.where(rank > 0, -rank, -np.inf).astype(np.float32)


def _dense_ranks(users: np.ndarray, rank: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Each row's dense rank within its user, 1 = best, as float32: by ``rank`` ascending, then
    ``score`` descending (the order of ``recsys-eval evaluate`` for a run with both); rows equal
    on both share a rank."""
    order = np.lexsort((-score, rank, users))
    u, r, s = users[order], rank[order], score[order]
    new_key = np.ones(len(order), dtype=bool)
    new_key[1:] = (u[1:] != u[:-1]) | (r[1:] != r[:-1]) | (s[1:] != s[:-1])
    new_user = np.ones(len(order), dtype=bool)
    new_user[1:] = u[1:] != u[:-1]
    key = np.cumsum(new_key)
    first_key_of_user = np.maximum.accumulate(np.where(new_user, key, 0))
    dense = np.empty(len(order), dtype=np.float32)
    dense[order] = key - first_key_of_user + 1
    return dense


def _examples(frame: pl.DataFrame, mask: np.ndarray, column: str, n: int = 5) -> list:
    return frame.filter(pl.Series(mask)).get_column(column).unique(maintain_order=True).head(n).to_list()
