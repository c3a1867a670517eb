"""The official ML-100K folds: u1..u5 (five-fold cross-validation) and ua, ub (ten test ratings
per user), read from the dataset's own ``uN.base``/``uN.test`` files.

Each file line is ``user<TAB>item<TAB>rating<TAB>timestamp`` in raw MovieLens ids. The lines are
mapped through the index of ``data`` (the Interactions loaded from ``u.data``) and matched to its
rows, so that the folds carry ``data``'s values: after a preparation step (threshold, k-core) the
file lines whose interaction is no longer in ``data`` are left out and counted in ``info``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split.common import DropUnknown, build_split, options

OFFICIAL_FOLDS = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")
FIVE_FOLDS = ("u1", "u2", "u3", "u4", "u5")
_COLUMNS = {"user": pl.Int64, "item": pl.Int64, "rating": pl.Float64, "timestamp": pl.Int64}


def official_folds(
    data: Interactions,
    folder: str | Path | None = None,
    names: Sequence[str] | str = FIVE_FOLDS,
    *,
    seed: int | None = None,
    drop_unknown: DropUnknown = False,
    data_home: str | Path | None = None,
) -> list[Split]:
    """One Split per official fold in ``names``, named after it (``"u1"``, ..., ``"ub"``).

    ``folder`` holds the fold files; by default the ``ml-100k`` folder of the data home. The folds
    are fixed: ``seed`` is accepted so that every splitter takes one, and recorded.
    """
    opts = options(data, seed=seed, min_user_interactions=1, drop_unknown=drop_unknown,
                   seed_required=False)
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise ConfigError(f"official folds: names is empty; choose among {', '.join(OFFICIAL_FOLDS)}")
    for name in names:
        if name not in OFFICIAL_FOLDS:
            raise ConfigError(
                f"unknown official fold {name!r}: expected some of {', '.join(OFFICIAL_FOLDS)}"
            )
    if folder is None:
        from recsys_eval.data import dataset_path

        folder = dataset_path("ml-100k", data_home)
    folder = Path(folder)
    index = _PairIndex(data)
    splits = []
    for name in names:
        in_base, base_missing = index.rows_of(folder / f"{name}.base")
        in_test, test_missing = index.rows_of(folder / f"{name}.test")
        shared = int((in_base & in_test).sum())
        if shared:
            raise DataError(
                f"{folder / name}.base and .test share {shared:,} interactions; "
                "official folds keep them apart"
            )
        listed = in_base | in_test
        subset = data.with_frame(data.frame.filter(pl.Series(listed)))
        params = {"folder": str(folder), "names": names, "drop_unknown": opts.drop_unknown}
        extra = {
            "fold": name,
            "file_lines_not_in_data": base_missing + test_missing,
            "data_rows_in_neither_file": int((~listed).sum()),
        }
        splits.append(
            build_split(subset, in_test[listed], opts, name=name, splitter="official",
                        params=params, extra=extra)
        )
    return splits


class _PairIndex:
    """Finds the rows of ``data`` that fold-file lines name, by a sorted (user, item) key."""

    def __init__(self, data: Interactions) -> None:
        self.data = data
        keys = data.users.astype(np.int64) * data.n_items + data.items
        self.order = np.argsort(keys)
        self.keys = keys[self.order]

    def rows_of(self, path: Path) -> tuple[np.ndarray, int]:
        """Bool per row of ``data``: listed in ``path``; and how many lines matched no row."""
        lines = _read_fold_file(path)
        data = self.data
        users = _index_of(data.user_ids, lines.get_column("user"))
        items = _index_of(data.item_ids, lines.get_column("item"))
        known = (users >= 0) & (items >= 0)
        wanted = users[known] * data.n_items + items[known]
        pos = np.minimum(np.searchsorted(self.keys, wanted), max(len(self.keys) - 1, 0))
        found = self.keys[pos] == wanted
        rows = self.order[pos[found]]
        if len(lines) and not len(rows):
            raise DataError(
                f"{path}: none of its {len(lines):,} lines is an interaction of {data.source}; "
                "give the Interactions loaded from this folder's u.data"
            )
        listed = np.bincount(rows, minlength=len(data))
        if (listed > 1).any():
            user, item = data.to_raw(data.frame[int(np.argmax(listed > 1))]).select("user", "item").row(0)
            raise DataError(f"{path}: user {user}, item {item} is listed on more than one line")
        return listed > 0, len(lines) - len(rows)


def _index_of(ids: pl.Series, raw: pl.Series) -> np.ndarray:
    """Index of every raw id in the sorted ``ids`` (-1 when absent): a numpy binary search."""
    if not ids.dtype.is_integer() or ids.len() == 0:
        return np.full(raw.len(), -1, dtype=np.int64)  # fold files hold integer ids only
    ids_np, raw_np = ids.to_numpy(), raw.to_numpy()
    pos = np.minimum(np.searchsorted(ids_np, raw_np), len(ids_np) - 1)
    return np.where(ids_np[pos] == raw_np, pos, -1).astype(np.int64)


def _read_fold_file(path: Path) -> pl.DataFrame:
    if not path.is_file():
        raise DataError(f"no official fold file {path}")
    try:
        lines = pl.read_csv(
            path, separator="\t", has_header=False, new_columns=list(_COLUMNS),
            schema_overrides=_COLUMNS,
        )
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"{path}: not an ML-100K fold file (user, item, rating, timestamp separated by tabs): {first}"
        ) from None
    if lines.width != 4 or lines.null_count().sum_horizontal().item():
        raise DataError(f"{path}: expected 4 tab-separated integer fields on every line")
    return lines
