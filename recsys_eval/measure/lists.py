"""What the beyond-accuracy metrics of lists share: the train pairs of any train input, and values
kept per train.

A value kept per train is of one of two sides: the item side (:data:`ITEM_SIDE`: item popularity,
its order, the catalogue, the head, the list pass's item records) reads every train user's rows; the
user side (:data:`USER_SIDE`: a user's train items in the head, its genre profile) reads each user's
own rows alone. A chunk of users measured apart from the others (a Spark task's users) is
given the whole train's item side (:func:`item_side`, :func:`with_item_side`) and computes its user
side from its own rows, which are whole: its values are those of the whole train."""

from __future__ import annotations

import sys

import numpy as np
import polars as pl

from recsys_eval.core.interactions import Interactions
from recsys_eval.errors import DataError


#: Kinds of values kept per train (the first element of a key) that read every train user's rows.
ITEM_SIDE = ("holders", "n_train_users", "pop_rank", "catalogue", "head", "item records")
#: Kinds of values kept per train that read, for each user, that user's own rows alone (its train
#: items in the head, its genre profile, its train items' places in the most-popular order).
USER_SIDE = ("train_head", "calibration profiles", "train places")


def per_train(train, key: tuple, compute) -> np.ndarray:
    """``compute()`` (an array or a tuple of arrays), kept in an Interactions' cache under ``key``
    (other inputs: computed each time), read-only. The key's kind (``key[0]``) is of
    :data:`ITEM_SIDE` or :data:`USER_SIDE`: a new kind must say which side it reads, or a chunk of
    users measured apart would compute an item side from its own users alone."""
    if key[0] not in ITEM_SIDE + USER_SIDE:
        raise ValueError(f"per-train value {key[0]!r} is in neither ITEM_SIDE nor USER_SIDE")
    if not isinstance(train, Interactions):
        return compute()
    if key not in train._cache:
        value = compute()
        for array in value if isinstance(value, tuple) else (value,):
            array.flags.writeable = False
        train._cache[key] = value
    return train._cache[key]


def item_side(train: Interactions) -> dict[tuple, np.ndarray]:
    """The item-side values ``train`` keeps (those computed so far): a few arrays over items, what a
    chunk of its users needs of the others (:func:`with_item_side`)."""
    return {key: value for key, value in train._cache.items() if isinstance(key, tuple) and key[0] in ITEM_SIDE}


def with_item_side(train: Interactions, side: dict[tuple, np.ndarray]) -> Interactions:
    """``train``, the whole rows of some users of a train, reading that train's item side ``side``
    (:func:`item_side`) instead of computing one from these users alone."""
    train._cache.update(side)
    return train


def is_sparse(value) -> bool:
    """A scipy sparse matrix or array, without importing scipy (0.2 s) when nothing made one."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(value)


def train_pairs(train, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(train, Interactions):
        users, items = train.users, train.items
    elif isinstance(train, pl.DataFrame):
        if "user" not in train.columns or "item" not in train.columns:
            raise DataError(f"train: expected columns 'user' and 'item', got {train.columns}")
        users = train.get_column("user").to_numpy()
        items = train.get_column("item").to_numpy()
    elif is_sparse(train):
        coo = train.tocoo()
        users, items = coo.row, coo.col
    else:
        raise DataError(f"train: expected Interactions, a polars frame or a sparse matrix, got {type(train).__name__}")
    items = np.asarray(items, dtype=np.int64)
    if len(items) and (items.min() < 0 or items.max() >= n_items):
        raise DataError(f"train: item index outside 0..{n_items - 1}")
    return np.asarray(users, dtype=np.int64), items


def train_rows(train, n_items: int, n_users: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The train items of every user index as CSR (``indptr``, ``indices``), each pair once
    (an Interactions' cached matrix; other inputs made unique), with rows for at least ``n_users``
    users (a user without train items has an empty row)."""
    if isinstance(train, Interactions):
        csr = train.csr()
        indptr, indices = csr.indptr, csr.indices
    else:
        users, items = train_pairs(train, n_items)
        pairs = np.unique(users * n_items + items)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(pairs // n_items))]).astype(np.int64)
        indices = pairs % n_items
    if len(indptr) < n_users + 1:
        indptr = np.concatenate([indptr, np.full(n_users + 1 - len(indptr), indptr[-1])])
    return indptr, indices
