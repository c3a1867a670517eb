"""An external run: the scores or ranks some other system wrote to a file, evaluated like any
internal recommender. Items the run did not list for a user are unranked (score -inf)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from recsys_eval.core import Interactions
from recsys_eval.errors import DataError
from recsys_eval.recommend.base import Recommender


def read_table(path: Path) -> pl.DataFrame:
    """A CSV or Parquet file as a DataFrame, with a clear error for anything else."""
    if not path.is_file():
        raise DataError(f"{path}: run file not found")
    try:
        if path.suffix.lower() == ".parquet":
            return pl.read_parquet(path)
        return pl.read_csv(path, infer_schema_length=10_000)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DataError(f"{path}: cannot read as {'Parquet' if path.suffix == '.parquet' else 'CSV'}: {exc}") from None


class ExternalRun(Recommender):
    """Scores from a file with columns ``user``, ``item`` and ``score`` (higher is better) or
    ``rank`` (1 is best), in the dataset's raw ids.

    Raw ids unknown to the dataset are counted in ``unknown`` (with examples) and left out, never
    silently: the runner logs them. ``fit`` does nothing: the run was made elsewhere.
    """

    def __init__(self, frame: pl.DataFrame, data: Interactions, source: str = "run") -> None:
        missing = [c for c in ("user", "item") if c not in frame.columns]
        value = "score" if "score" in frame.columns else "rank" if "rank" in frame.columns else None
        if missing or value is None:
            need = missing + ([] if value else ["score or rank"])
            raise DataError(f"{source}: missing column(s) {need}; columns are {frame.columns}")
        values = frame.get_column(value)
        if not values.dtype.is_numeric():
            raise DataError(f"{source}: column {value!r} has type {values.dtype}; expected numbers")
        values = values.cast(pl.Float64)
        bad = values.is_null() | values.is_nan() | values.is_infinite()
        if bad.any():
            row = int(bad.arg_true()[0])
            raise DataError(f"{source}: {int(bad.sum()):,} NaN, null or infinite {value}s (first at row {row + 1})")
        dup = frame.select("user", "item").is_duplicated()
        if dup.any():
            first = frame.filter(dup).row(0, named=True)
            raise DataError(
                f"{source}: {int(dup.sum()):,} rows repeat a (user, item) pair, e.g. user "
                f"{first['user']!r}, item {first['item']!r}"
            )
        users = data.user_index(frame.get_column("user"))
        items = data.item_index(frame.get_column("item"))
        known = (users >= 0) & (items >= 0)
        self.unknown = {
            "rows": int((~known).sum()),
            "users": frame.filter(pl.Series(users < 0)).get_column("user").unique().head(5).to_list(),
            "items": frame.filter(pl.Series(items < 0)).get_column("item").unique().head(5).to_list(),
        }
        if not known.any():
            raise DataError(f"{source}: no (user, item) of the run is in the dataset's index")
        scores = values.to_numpy()[known]
        if value == "rank":
            scores = -scores
        # Shift so every listed score is > 0: an explicit zero in the sparse matrix would read as
        # "not listed".
        shifted = scores - scores.min() + 1.0
        self.offset = float(scores.min()) - 1.0
        self.matrix = sp.csr_matrix(
            (shifted, (users[known], items[known])), shape=(data.n_users, data.n_items)
        )
        self.matrix.sort_indices()
        self.n_items = data.n_items
        self.source = source

    @classmethod
    def from_file(cls, path: str | Path, data: Interactions) -> ExternalRun:
        path = Path(path)
        return cls(read_table(path), data, source=str(path))

    def fit(self, train: Interactions) -> ExternalRun:
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        listed = np.asarray(self.matrix[np.asarray(users), np.asarray(items)]).ravel()
        return np.where(listed > 0, listed + self.offset, -np.inf).astype(np.float32)

    def score_block(self, users: np.ndarray) -> np.ndarray:
        block = self.matrix[np.asarray(users)].toarray()
        return np.where(block > 0, block + self.offset, -np.inf).astype(np.float32)
