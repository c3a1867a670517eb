"""Time-based splits: one split point for everyone, or each user's latest interactions.

Global: train holds the interactions at or before the split point p, test the later ones, so that
``max(train time) <= p < min(test time)``. Per user: each user's latest interactions go to test
(ties in time in an order keyed on the seed and the user's own rows), so no test interaction of a
user precedes a train one.
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError
from recsys_eval.split.common import DropUnknown, build_split, check_fraction, options, require_timestamps
from recsys_eval.split.keyed import PerUserRule, split_keys

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
    point = checked_point(at, split_point(at, times), int(times.min()), int(times.max()))
    test = times > point
    if opts.min_user_interactions > 1:
        test &= opts.eligible[data.users]
    params = opts.params(at=recorded_at(at))
    return build_split(data, test, opts, name="time", splitter="time", params=params, extra=point_extra(point))


def checked_point(at: Any, read: tuple[int, str], low: int, high: int) -> int:
    """The split point ``read`` (:func:`split_point`'s) of ``at``, or a ConfigError when it does
    not lie in ``low .. high - 1`` (the data's earliest and latest timestamps): both sides must
    hold interactions."""
    point, how = read
    if not low <= point < high:
        raise ConfigError(
            f"split point {at!r} ({how}: {point} = {iso_utc(point)}) lies outside the data's time range "
            f"{low} ({iso_utc(low)}) .. {high} ({iso_utc(high)}); a split point must leave interactions "
            "on both sides (at least the earliest, at most one second before the latest)"
        )
    return point


def recorded_at(at: Any) -> Any:
    """``at`` as the split's ``info`` records it (a date as its ISO text)."""
    return at.isoformat() if isinstance(at, dt.date) else at


def point_extra(point: int) -> dict[str, Any]:
    """What a time split's ``info`` records of its split point."""
    return {"split_point": point, "split_point_utc": iso_utc(point)}


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
    ``n`` interactions to test; ties in time are ordered by keys drawn from the seed and the user's
    own rows (:mod:`recsys_eval.split.keyed`, docs/CONVENTIONS.md#per-user-split-draws).

    Give exactly one of ``fraction`` and ``n``. ``min_user_interactions`` defaults to 2
    (fraction) or ``n + 1`` (n), so that every user split keeps a training interaction.
    """
    rule = PerUserRule.user_time(fraction, n, min_user_interactions)
    opts = options(data, seed=seed, min_user_interactions=rule.min_user_interactions, drop_unknown=drop_unknown)
    times = require_timestamps(data, "user_time_split")
    test = rule.test_rows(data.users, data.n_users, split_keys(data, opts.seed), times)
    params = opts.params(fraction=rule.fraction, n=rule.n)
    return build_split(data, test, opts, name="user_time", splitter="user_time", params=params)


def split_point(at: Any, times: np.ndarray) -> tuple[int, str]:
    """The last second of train for ``at``, and how it was read (for messages)."""
    return point_of(at, len(times), lambda index: int(np.partition(times, index)[index]))


def point_of(at: Any, n_rows: int, nth: Callable[[int], int]) -> tuple[int, str]:
    """:func:`split_point` of ``at`` over ``n_rows`` timestamps, ``nth(i)`` giving the one at 0-based
    place ``i`` in ascending order (called for a quantile alone, so that an engine that holds the
    timestamps elsewhere computes that one order statistic: :mod:`recsys_eval.engine.split`)."""
    if isinstance(at, bool):
        raise ConfigError(f"split point must be a timestamp, a date or a quantile, got {at!r}")
    if isinstance(at, numbers.Integral):
        return int(at), "timestamp"  # numpy integers included
    if isinstance(at, numbers.Real):
        q = check_fraction("split point quantile", at)
        return int(nth(max(math.ceil(q * n_rows) - 1, 0))), f"quantile {q:g}"
    return date_point(at)


def date_point(at: Any) -> tuple[int, str]:
    """The last second before the date or datetime ``at`` (an object or ISO text; naive means UTC),
    and how it was read; a ConfigError for anything else."""
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
