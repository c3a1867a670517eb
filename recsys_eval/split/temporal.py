"""Time-based splits: one split point for everyone, or each user's latest interactions.

Global: train holds the interactions at or before the split point p, test the later ones, so that
``max(train time) <= p < min(test time)``. Per user: each user's latest interactions go to test
(ties in time in seeded random order), so no test interaction of a user precedes a train one.
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
from typing import Any

import numpy as np

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError
from recsys_eval.split.common import (
    DropUnknown,
    build_split,
    check_count,
    check_fraction,
    options,
    require_timestamps,
    round_half_up,
)
from recsys_eval.split.order import rank_within

SplitPoint = int | float | str | dt.date | dt.datetime


def time_split(
    data: Interactions,
    at: SplitPoint,
    *,
    seed: int | None = None,
    min_user_interactions: int = 1,
    drop_unknown: DropUnknown = False,
) -> Split:
    """Train: interactions at or before the split point; test: the later ones.

    ``at`` is one of:

    - an int: a timestamp in seconds, the last second of train;
    - a date or datetime (object or ISO string such as ``"1998-01-01"``; naive means UTC): train
      holds what happened before it;
    - a float in (0, 1): a quantile of time, the smallest timestamp t with at least that share of
      the interactions at or before t (the inverted empirical distribution function).

    The split point must leave both sides non-empty. No randomness is involved; ``seed`` is
    accepted so that every splitter takes one, and recorded.
    """
    opts = options(data, seed=seed, min_user_interactions=min_user_interactions,
                   drop_unknown=drop_unknown, seed_required=False)
    times = require_timestamps(data, "time_split")
    low, high = int(times.min()), int(times.max())
    point, how = split_point(at, times)
    if not low <= point < high:
        raise ConfigError(
            f"split point {at!r} ({how}: {point} = {iso_utc(point)}) lies outside the data's time range "
            f"{low} ({iso_utc(low)}) .. {high} ({iso_utc(high)}); a split point must leave interactions "
            "on both sides (at least the earliest, at most one second before the latest)"
        )
    test = times > point
    if opts.min_user_interactions > 1:
        test &= opts.eligible[data.users]
    params = opts.params(at=at.isoformat() if isinstance(at, dt.date) else at)
    return build_split(data, test, opts, name="time", splitter="time", params=params,
                       extra={"split_point": point, "split_point_utc": iso_utc(point)})


def user_time_split(
    data: Interactions,
    *,
    fraction: float | None = None,
    n: int | None = None,
    seed: int,
    min_user_interactions: int | None = None,
    drop_unknown: DropUnknown = False,
) -> Split:
    """Each user's latest ``fraction`` (``round(fraction * n_u)``, at most ``n_u - 1``) or latest
    ``n`` interactions to test; ties in time are ordered by the seed.

    Give exactly one of ``fraction`` and ``n``. ``min_user_interactions`` defaults to 2
    (fraction) or ``n + 1`` (n), so that every user split keeps a training interaction.
    """
    if (fraction is None) == (n is None):
        raise ConfigError("user_time_split: give exactly one of fraction and n")
    if fraction is not None:
        fraction = check_fraction("fraction", fraction)
    else:
        n = check_count("n", n)
    opts = options(data, seed=seed, min_user_interactions=min_user_interactions,
                   drop_unknown=drop_unknown, default_min=2 if n is None else n + 1)
    times = require_timestamps(data, "user_time_split")
    counts = opts.counts
    if fraction is not None:
        wanted = np.minimum(round_half_up(fraction * counts), counts - 1)
    else:
        wanted = np.minimum(n, counts)
    n_test = np.where(opts.eligible, wanted, 0)
    users = data.users
    test = rank_within(users, data.n_users, opts.rng, times) >= (counts - n_test)[users]
    params = opts.params(fraction=fraction, n=n)
    return build_split(data, test, opts, name="user_time", splitter="user_time", params=params)


def split_point(at: Any, times: np.ndarray) -> tuple[int, str]:
    """The last second of train for ``at``, and how it was read (for messages)."""
    if isinstance(at, bool):
        raise ConfigError(f"split point must be a timestamp, a date or a quantile, got {at!r}")
    if isinstance(at, numbers.Integral):
        return int(at), "timestamp"  # numpy integers included
    if isinstance(at, numbers.Real):
        q = check_fraction("split point quantile", at)
        index = max(math.ceil(q * len(times)) - 1, 0)
        return int(np.partition(times, index)[index]), f"quantile {q:g}"
    if isinstance(at, str):
        try:
            at = dt.datetime.fromisoformat(at)
        except ValueError:
            raise ConfigError(
                f"split point {at!r} is not an ISO date or datetime (e.g. '1998-01-01' or "
                "'1998-01-01T12:00:00'); give an int for a timestamp, a float in (0, 1) for a quantile"
            ) from None
    if isinstance(at, dt.date) and not isinstance(at, dt.datetime):
        at = dt.datetime(at.year, at.month, at.day)
    if isinstance(at, dt.datetime):
        if at.tzinfo is None:
            at = at.replace(tzinfo=dt.UTC)
        start = at.timestamp()
        return int(np.ceil(start)) - 1, f"before {at.isoformat()}"
    raise ConfigError(
        f"split point must be a timestamp (int), a date or datetime, or a quantile (float in (0, 1)); "
        f"got {type(at).__name__} {at!r}"
    )


def iso_utc(seconds: int) -> str:
    try:
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "out of calendar range"
