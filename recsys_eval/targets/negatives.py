"""Negatives as data: a sampled protocol's non-relevant target items read from a file instead of
drawn, and a run's samples written out for others (docs/CONVENTIONS.md#fixed-negatives).

Two layouts, both in the dataset's raw ids:

- NCF's ``test.negative`` (He et al. 2017): one line per held-out (user, item) pair,
  ``(user,item)`` followed by that user's negatives, separated by tabs (or spaces). A user may have
  several lines (one per held-out item) if they list the same negatives: a user's negatives are one
  sample, shared by all of its units, as sampled protocols draw them. A user without a relevant
  test item has no line (its AR unit, which no metric measures, then lists no negative).
- a table, CSV with a header or Parquet, with columns ``user`` and ``item``: one row per (user,
  negative).

Read for a split, the negatives are checked before use: none may be a training item or a relevant
test item of its user, every user with units must have some and no more than the protocol's n, and
an NCF line's held-out pair must be a relevant test pair of the split. Each check names the first
offender and counts them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from numba import njit

from recsys_eval.core import atomic
from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.core.units import Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.targets.relevance import Qrels, _first_shared, row_sums
from recsys_eval.targets.sampling import write_unit

TABLE_SUFFIXES = (".parquet", ".csv")
_NCF_LINE = r"^\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)\s*(.*)$"


@dataclass(frozen=True)
class Negatives:
    """Every user's fixed non-relevant items, by user index: CSR ``indptr`` (int64, n_users + 1)
    and ``items`` (int32, ascending within a user); ``held_out``, the (user, item) index pairs an
    NCF file's lines name (None for a table); ``source``, the file, for messages."""

    indptr: np.ndarray
    items: np.ndarray
    held_out: tuple[np.ndarray, np.ndarray] | None
    source: str

    def counts(self) -> np.ndarray:
        return np.diff(self.indptr)


# -- reading -----------------------------------------------------------------------------------
def read_negatives(path: str | Path, data: Interactions) -> Negatives:
    """The negatives of the file at ``path`` (a table for ``.parquet``/``.csv``, else the NCF
    layout), mapped to the index of ``data`` (a split side or the whole data)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"negatives file {str(path)!r} is not a file")
    if path.suffix.lower() in TABLE_SUFFIXES:
        pairs, held_out = _read_table(path), None
    else:
        pairs, held_out = _read_ncf(path)
    users = _index(data.user_index(pairs.get_column("user")), pairs, "user", path)
    items = _index(data.item_index(pairs.get_column("item")), pairs, "item", path)
    if held_out is not None:
        held = (_index(data.user_index(held_out.get_column("user")), held_out, "user", path),
                _index(data.item_index(held_out.get_column("item")), held_out, "item", path))
        _check_shared_per_user(users, items, pairs.get_column("line").to_numpy().astype(np.int64), held[0],
                               data, path)
        users, items = _unique_pairs(users, items, data.n_items)
    else:
        held = None
        _check_no_repeats(users, items, data, path)
    order = np.lexsort((items, users))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(users, minlength=data.n_users))]).astype(np.int64)
    return Negatives(indptr, items[order].astype(np.int32), held, str(path))


def _read_table(path: Path) -> pl.DataFrame:
    try:
        frame = (pl.read_parquet(path) if path.suffix.lower() == ".parquet"
                 else pl.read_csv(path, infer_schema=False))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DataError(f"{path}: not a readable table of negatives ({str(exc).strip().splitlines()[0]})") from None
    missing = [c for c in ("user", "item") if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: a negatives table needs columns 'user' and 'item'; missing {missing}, "
                        f"columns are {frame.columns}")
    return frame.select("user", "item").with_row_index("line", offset=2 if path.suffix.lower() == ".csv" else 1)


def _read_ncf(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(negatives: user, item, line) and (held-out pairs: user, item, line) of an NCF file."""
    try:
        text = pl.read_csv(path, has_header=False, separator="\x1f", quote_char=None, new_columns=["text"],
                           schema_overrides={"text": pl.String}, truncate_ragged_lines=True)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DataError(f"{path}: not a readable text file ({str(exc).strip().splitlines()[0]})") from None
    lines = (text.with_row_index("line", offset=1)
             .with_columns(pl.col("text").str.strip_chars())
             .filter(pl.col("text") != "")
             .with_columns(pl.col("text").str.extract_groups(_NCF_LINE).alias("parts")))
    bad = lines.filter(pl.col("parts").struct.field("1").is_null())
    if bad.height or not lines.height:
        shown = f"line {bad.item(0, 'line')}: {bad.item(0, 'text')[:60]!r}" if bad.height else "no lines"
        raise DataError(f"{path}: not in the NCF negatives layout '(user,item)<tab>neg1<tab>neg2...' "
                        f"({bad.height:,} lines do not match; {shown})")
    parts = lines.select("line", pl.col("parts").struct.field("1").alias("user"),
                         pl.col("parts").struct.field("2").alias("item"),
                         pl.col("parts").struct.field("3").str.replace_all(r"\s+", " ").str.split(" ").alias("negatives"))
    held_out = parts.select("user", "item", "line")
    negatives = (parts.select("line", "user", pl.col("negatives").list.eval(pl.element().filter(pl.element() != "")))
                 .explode("negatives").drop_nulls("negatives").rename({"negatives": "item"}))
    return negatives.select("user", "item", "line"), held_out


def _index(index: np.ndarray, frame: pl.DataFrame, role: str, path: Path) -> np.ndarray:
    unknown = index < 0
    if unknown.any():
        first = int(np.argmax(unknown))
        raise DataError(f"{path}: {int(unknown.sum()):,} {role} ids are not in the dataset, first "
                        f"{frame.item(first, role)!r} on line {frame.item(first, 'line')}")
    return index.astype(np.int64)


def _check_no_repeats(users: np.ndarray, items: np.ndarray, data: Interactions, path: Path) -> None:
    keys = users * data.n_items + items
    unique, counts = np.unique(keys, return_counts=True)
    if (counts > 1).any():
        first = unique[np.argmax(counts > 1)]
        raise DataError(f"{path}: {int((counts > 1).sum()):,} (user, negative) pairs are listed more than once, "
                        f"first user {data.user_ids[int(first // data.n_items)]!r} item "
                        f"{data.item_ids[int(first % data.n_items)]!r}")


def _check_shared_per_user(users, items, lines, held_users, data, path) -> None:
    """A user's NCF lines must list the same negatives: no line lists an item twice, and each
    (user, negative) pair appears on every line of that user, so all its lines hold one set."""
    n_items = data.n_items
    keys, repeats = np.unique(lines * n_items + items, return_counts=True)
    if (repeats > 1).any():
        line = int(keys[np.argmax(repeats > 1)] // n_items)
        raise DataError(f"{path}: {int((repeats > 1).sum()):,} negatives are listed twice on their line, first on "
                        f"line {line}")
    lines_of = np.bincount(held_users, minlength=data.n_users)
    _, inverse, counts = np.unique(users * n_items + items, return_inverse=True, return_counts=True)
    differ = counts[inverse] != lines_of[users]
    if differ.any():
        first = int(np.argmax(differ))
        raise DataError(f"{path}: {len(np.unique(users[differ])):,} users have lines listing different negatives, "
                        f"first user {data.user_ids[int(users[first])]!r}; a user's negatives are one sample "
                        "shared by all its lines")


def _unique_pairs(users: np.ndarray, items: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    keys = np.unique(users * n_items + items)
    return keys // n_items, (keys % n_items)


# -- checking against a split and filling units --------------------------------------------------
def check_negatives(negatives: Negatives, split: Split, judged: Qrels, tr_ptr: np.ndarray, tr_idx: np.ndarray,
                    users: np.ndarray, n: int, pool: np.ndarray | None) -> np.ndarray:
    """The number of negatives of each of ``users`` (the users with units), after checking that
    ``negatives`` fit ``split``: none is a training item or a relevant test item of its user (or
    outside the candidate ``pool``), each of ``users`` has at most ``n`` and, if it has a relevant
    test item, at least one, and an NCF line's held-out pair is a relevant test pair. A DataError names the first offender and the count."""
    if len(negatives.indptr) != split.n_users + 1:
        raise DataError(f"{negatives.source}: read for another index ({len(negatives.indptr) - 1:,} users, "
                        f"the split has {split.n_users:,})")
    ids = split.train
    where = f"{negatives.source} (split {split.name!r})"
    shared, user, item = _first_shared(tr_ptr, tr_idx, negatives.indptr, negatives.items)
    if shared:
        raise DataError(f"{where}: {shared:,} negatives are training items of their user, first user "
                        f"{ids.user_ids[user]!r} item {ids.item_ids[item]!r}")
    relevant = judged.gain > 0
    rel_ptr = np.concatenate([[0], np.cumsum(row_sums(relevant, judged.indptr))]).astype(np.int64)
    shared, user, item = _first_shared(rel_ptr, judged.items[relevant], negatives.indptr, negatives.items)
    if shared:
        raise DataError(f"{where}: {shared:,} negatives are relevant test items of their user, first user "
                        f"{ids.user_ids[user]!r} item {ids.item_ids[item]!r}")
    if pool is not None and not pool[negatives.items].all():
        outside = ~pool[negatives.items]
        raise DataError(f"{where}: {int(outside.sum()):,} negatives are not candidates of the protocol, first "
                        f"item {ids.item_ids[int(negatives.items[np.argmax(outside)])]!r}")
    counts = negatives.counts()[users]
    measured = row_sums(relevant, judged.indptr)[users] > 0  # an AR unit without relevant items is not
    for bad, what in ((measured & (counts == 0), "have no negatives in the file"),
                      (counts > n, f"have more than n = {n} negatives")):
        if bad.any():
            raise DataError(f"{where}: {int(bad.sum()):,} users with test units {what}, first user "
                            f"{ids.user_ids[int(users[np.argmax(bad)])]!r}")
    if negatives.held_out is not None:
        held_users, held_items = negatives.held_out
        rel_keys = np.repeat(np.arange(judged.n_users, dtype=np.int64), np.diff(rel_ptr)) * split.n_items
        rel_keys += judged.items[relevant]
        stray = ~np.isin(held_users * split.n_items + held_items, rel_keys)
        if stray.any():
            first = int(np.argmax(stray))
            raise DataError(f"{where}: {int(stray.sum()):,} held-out (user, item) pairs of the file are not "
                            f"relevant test pairs of the split, first ({ids.user_ids[int(held_users[first])]!r}, "
                            f"{ids.item_ids[int(held_items[first])]!r}); the file was made for another split")
    return counts.astype(np.int64)


@njit(cache=True)
def fill_fixed(users, first_unit, unit_offsets, neg_ptr, neg_items, te_ptr, te_items, te_gain, one_relevant,
               negatives_only, out_items, out_gain):  # pragma: no cover - compiled
    """The units of ``users`` with each user's fixed negatives as its sample: as the sampling
    kernel writes them (:func:`recsys_eval.targets.sampling.fill_units`), its draws replaced."""
    for j in range(len(users)):
        u = users[j]
        sample = neg_items[neg_ptr[u]:neg_ptr[u + 1]]
        m = len(sample)
        start, stop = te_ptr[u], te_ptr[u + 1]
        if not one_relevant:
            write_unit(unit_offsets[first_unit[j]], out_items, out_gain, te_items, te_gain, start,
                       start if negatives_only else stop, sample, m)
            continue
        unit = first_unit[j]
        for p in range(start, stop):
            if te_gain[p] > 0:
                write_unit(unit_offsets[unit], out_items, out_gain, te_items, te_gain, p,
                           p if negatives_only else p + 1, sample, m)
                unit += 1


# -- writing ------------------------------------------------------------------------------------
def negatives_of(targets: Targets) -> tuple[np.ndarray, np.ndarray]:
    """The (user, item) index pairs of the non-relevant items ``targets`` list, each once, in
    (user, item) order: a sampled protocol's negatives."""
    if targets.all_candidates:
        raise ConfigError(f"{targets.protocol} lists no negatives: every candidate is ranked")
    if targets.one_relevant:
        group_user = np.zeros(len(targets.negative_offsets) - 1, dtype=np.int64)
        group_user[targets.unit_group] = targets.unit_user
        users = np.repeat(group_user, np.diff(targets.negative_offsets))
        items = targets.negatives
    else:
        users = np.repeat(targets.unit_user.astype(np.int64), np.diff(targets.offsets))
        keep = targets.gain == 0
        users, items = users[keep], targets.items[keep]
    keys = np.unique(users * targets.n_items + items.astype(np.int64))
    return keys // targets.n_items, keys % targets.n_items


def write_negatives(users: np.ndarray, items: np.ndarray, held_out: tuple[np.ndarray, np.ndarray],
                    ids: Interactions, table_path: Path, ncf_path: Path) -> None:
    """Write the negatives ``(users, items)`` (index pairs) in both layouts, in raw ids: the table
    (Parquet: user, item) and the NCF text, one line per ``held_out`` (user, item) pair of a user
    with negatives, ``(user,item)`` then the user's negatives."""
    table = pl.DataFrame({"user": ids.user_ids.gather(users), "item": ids.item_ids.gather(items)})
    atomic.write_parquet(table, table_path)
    per_user = (pl.DataFrame({"u": users, "neg": ids.item_ids.gather(items).cast(pl.String)})
                .group_by("u", maintain_order=True).agg(pl.col("neg").str.join("\t")))
    lines = (pl.DataFrame({"u": held_out[0].astype(np.int64), "user": ids.user_ids.gather(held_out[0]).cast(pl.String),
                           "item": ids.item_ids.gather(held_out[1]).cast(pl.String)})
             .join(per_user, on="u", how="inner", maintain_order="left")
             .select(pl.format("({},{})\t{}", "user", "item", "neg").alias("line")))
    atomic.write_text(ncf_path, "\n".join(lines.get_column("line").to_list()) + "\n")
