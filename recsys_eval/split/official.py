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
    splits = []
    for name in names:
        base, base_missing = _rows_of(data, folder / f"{name}.base")
        test, test_missing = _rows_of(data, folder / f"{name}.test")
        overlap = np.intersect1d(base, test)
        if len(overlap):
            raise DataError(
                f"{folder / name}.base and .test share {len(overlap):,} interactions; "
                "official folds keep them apart"
            )
        in_test = np.zeros(len(data), dtype=bool)
        in_test[test] = True
        in_base = np.zeros(len(data), dtype=bool)
        in_base[base] = True
        frame_rows = in_base | in_test
        subset = data.with_frame(data.frame.filter(pl.Series(frame_rows)))
        params = {"folder": str(folder), "names": names, "drop_unknown": opts.drop_unknown}
        extra = {
            "fold": name,
            "file_lines_not_in_data": base_missing + test_missing,
            "data_rows_in_neither_file": int((~frame_rows).sum()),
        }
        splits.append(
            build_split(subset, in_test[frame_rows], opts, name=name, splitter="official",
                        params=params, extra=extra)
        )
    return splits


def _rows_of(data: Interactions, path: Path) -> tuple[np.ndarray, int]:
    """Rows of ``data`` listed in the fold file ``path`` (sorted), and how many lines matched none."""
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
    pairs = pl.DataFrame(
        {
            "user": data.user_index(lines.get_column("user")),
            "item": data.item_index(lines.get_column("item")),
        }
    )
    repeated = lines.select("user", "item").is_duplicated()
    if repeated.any():
        line = int(np.flatnonzero(repeated.to_numpy())[0]) + 1
        raise DataError(f"{path}: line {line} repeats a (user, item) pair listed on another line")
    rows = data.frame.select("user", "item").with_row_index("_row")
    matched = pairs.join(rows, on=["user", "item"], how="inner").get_column("_row").to_numpy()
    if len(lines) and not len(matched):
        raise DataError(
            f"{path}: none of its {len(lines):,} lines is an interaction of {data.source}; "
            "give the Interactions loaded from this folder's u.data"
        )
    return np.sort(matched.astype(np.int64)), len(lines) - len(matched)
