"""What every splitter shares: argument checks, the common options, and building the Split.

Common options (docs/CONVENTIONS.md#preparation-and-splitting):

- ``min_user_interactions``: users with fewer interactions are not split; all their interactions
  stay in train. The users and interactions kept this way are counted in ``info``.
- ``drop_unknown``: drop test interactions whose user (``"users"``), item (``"items"``) or either
  (``True``) has no interaction in train. Counted in ``info`` (a row whose user is unknown counts
  under users, else under items).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError, DataError

DropUnknown = bool | Literal["users", "items"]
DROP_UNKNOWN = (False, True, "users", "items")


# -- argument checks ---------------------------------------------------------------------------
def check_data(data: Interactions) -> Interactions:
    if not isinstance(data, Interactions):
        raise ConfigError(f"expected Interactions to split, got {type(data).__name__}")
    if len(data) == 0:
        raise DataError(f"{data.source}: no interactions to split")
    return data


def check_fraction(name: str, value: Any, *, allow_one: bool = False) -> float:
    """``value`` as a float in (0, 1) (or (0, 1] with ``allow_one``), else a ConfigError."""
    interval = "(0, 1]" if allow_one else "(0, 1)"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a number in {interval}, got {value!r}")
    value = float(value)
    if not (0.0 < value < 1.0 or (allow_one and value == 1.0)):
        raise ConfigError(f"{name} must lie in {interval}, got {value!r}")
    return value


def check_count(name: str, value: Any, *, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``, else a ConfigError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def check_drop_unknown(value: Any) -> DropUnknown:
    if not any(value is v or (isinstance(value, str) and value == v) for v in DROP_UNKNOWN):
        raise ConfigError(f"drop_unknown must be one of False, True, 'users', 'items'; got {value!r}")
    return value


def check_order(value: Any, allowed: tuple[str, ...] = ("random", "latest")) -> str:
    if value not in allowed:
        raise ConfigError(f"order must be one of {', '.join(map(repr, allowed))}; got {value!r}")
    return value


def require_timestamps(data: Interactions, splitter: str) -> np.ndarray:
    """The timestamps of ``data``, or a DataError naming the splitter that needs them."""
    if not data.has_timestamp:
        raise DataError(
            f"{data.source}: {splitter} needs timestamps, and the data has none "
            f"(columns {data.frame.columns})"
        )
    return data.timestamps


def round_half_up(x: np.ndarray | float) -> np.ndarray:
    """Nearest integer, halves rounded up (``floor(x + 0.5)``), so that results do not depend on
    numpy's round-half-to-even."""
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5).astype(np.int64)


# -- the common options ----------------------------------------------------------------------
@dataclass(frozen=True)
class Options:
    """The checked common options of one splitter call, and the users they leave to split."""

    seed: int | None
    min_user_interactions: int
    drop_unknown: DropUnknown
    counts: np.ndarray  # interactions per user index
    eligible: np.ndarray  # bool per user index: the user is split

    @property
    def rng(self) -> np.random.Generator:
        """A fresh generator from the seed (the same draws on every call)."""
        return np.random.default_rng(self.seed)

    def params(self, **own: Any) -> dict[str, Any]:
        """The splitter's own parameters followed by the common ones, for ``info``."""
        return {**own, "min_user_interactions": self.min_user_interactions,
                "drop_unknown": self.drop_unknown}


def options(
    data: Interactions,
    *,
    seed: Any,
    min_user_interactions: Any,
    drop_unknown: Any,
    default_min: int = 1,
    seed_required: bool = True,
) -> Options:
    """Check ``data`` and the common options; ``min_user_interactions=None`` takes ``default_min``.

    A user is split when it has at least ``min_user_interactions`` interactions (and one)."""
    check_data(data)
    if seed is not None or seed_required:
        seed = check_seed(seed)
    drop_unknown = check_drop_unknown(drop_unknown)
    if min_user_interactions is None:
        min_user_interactions = default_min
    min_user_interactions = check_count("min_user_interactions", min_user_interactions)
    counts = data.user_counts().astype(np.int64)
    return Options(seed, min_user_interactions, drop_unknown, counts, counts >= min_user_interactions)


# -- building the Split ------------------------------------------------------------------------
def build_split(
    data: Interactions,
    test: np.ndarray,
    opts: Options,
    *,
    name: str,
    splitter: str,
    params: dict[str, Any],
    extra: dict[str, Any] | None = None,
    train: np.ndarray | None = None,
) -> Split:
    """The Split with test rows ``test`` (bool per row of ``data``) and train rows ``train`` (by
    default the rest; a row in neither is left out, as after a rolling window); ``info`` counts the
    users ``opts`` kept wholly in train and the test rows ``opts.drop_unknown`` drops."""
    train = ~test if train is None else train & ~test
    dropped_users = dropped_items = 0
    if opts.drop_unknown is not False:
        users, items = data.users, data.items
        drop = np.zeros(len(test), dtype=bool)
        if opts.drop_unknown in (True, "users"):
            known = np.bincount(users[train], minlength=data.n_users) > 0
            drop |= test & ~known[users]
            dropped_users = int(drop.sum())
        if opts.drop_unknown in (True, "items"):
            known = np.bincount(items[train], minlength=data.n_items) > 0
            drop |= test & ~known[items]
            dropped_items = int(drop.sum()) - dropped_users
        test = test & ~drop
    train_side = data.with_frame(data.frame.filter(pl.Series(train)))
    test_side = data.with_frame(data.frame.filter(pl.Series(test)))
    kept = ~opts.eligible & (opts.counts > 0)
    info = {
        "splitter": splitter,
        "params": params,
        "seed": opts.seed,
        **(extra or {}),
        "train_interactions": len(train_side),
        "test_interactions": len(test_side),
        "users_kept_in_train": int(kept.sum()),
        "interactions_kept_in_train": int(opts.counts[kept].sum()),
        "test_dropped_unknown_users": dropped_users,
        "test_dropped_unknown_items": dropped_items,
    }
    return Split(train_side, test_side, name=name, info=info)
