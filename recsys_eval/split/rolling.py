"""Rolling time windows: several consecutive test windows, each trained on everything before it
(docs/CONVENTIONS.md#rolling-time-split).

Fold i tests the interactions in ``[start_i, start_i + length)`` and trains on those before
``start_i``; later interactions belong to neither side of that fold. A validation window for
tuning is the same splitter applied to a fold's train side with ``n = 1`` (the window just before
``start_i``), e.g. ``[tuning.validation] method = "rolling_time"``.
"""

from __future__ import annotations

import datetime as dt
import numbers
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split.common import DropUnknown, build_split, check_count, options, require_timestamps
from recsys_eval.split.temporal import SplitPoint, iso_utc, split_point

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"\s*(\d+)\s*([smhdwSMHDW])\s*")


def rolling_time(
    data: Interactions,
    length: int | str,
    *,
    n: int | None = None,
    starts: Sequence[SplitPoint] | None = None,
    seed: int | None = None,
    drop_unknown: DropUnknown = False,
) -> list[Split]:
    """Folds ``window1``..``windowN``, one per test window of ``length`` (seconds, or a duration
    such as ``"7d"``, ``"12h"``, ``"2w"``).

    Give ``n`` (the last n consecutive windows: the last ends one second after the latest
    interaction) or ``starts`` (each window's start: a timestamp in seconds or an ISO date or
    datetime, naive meaning UTC; increasing). Fold i trains on every interaction before its start
    and tests those within its window. Every window must hold a test interaction and follow a train
    one. No randomness is involved; ``seed`` is accepted so that every splitter takes one.
    """
    if (n is None) == (starts is None):
        raise ConfigError("rolling_time: give exactly one of n (windows before the data's end) and starts")
    seconds = window_length(length)
    opts = options(data, seed=seed, min_user_interactions=1, drop_unknown=drop_unknown, seed_required=False)
    times = require_timestamps(data, "rolling_time")
    if n is not None:
        n = check_count("n", n)
        end = int(times.max()) + 1
        begins = [end - (n - i) * seconds for i in range(n)]
    else:
        begins = _starts(starts, times)
    folds = []
    for i, start in enumerate(begins, 1):
        train, test = times < start, (times >= start) & (times < start + seconds)
        if not test.any() or not train.any():
            side = "test interaction in it" if not test.any() else "train interaction before it"
            raise DataError(
                f"{data.source}: rolling_time window {i} [{iso_utc(start)}, {iso_utc(start + seconds)}) "
                f"has no {side}; the data spans {iso_utc(int(times.min()))} .. {iso_utc(int(times.max()))}"
            )
        params = opts.params(length=length, n=n, starts=None if starts is None else [_show(s) for s in starts])
        params.pop("min_user_interactions")
        extra = {"fold": i, "window_start": start, "window_end": start + seconds,
                 "window_utc": f"{iso_utc(start)} .. {iso_utc(start + seconds)}"}
        folds.append(build_split(data, test, opts, name=f"window{i}", splitter="rolling_time", params=params,
                                 extra=extra, train=train))
    return folds


def window_length(length: Any) -> int:
    """A window length in seconds: a positive int, or ``"<count><unit>"`` with unit s, m, h, d or w."""
    if isinstance(length, numbers.Integral) and not isinstance(length, bool) and length > 0:
        return int(length)
    match = _DURATION.fullmatch(length) if isinstance(length, str) else None
    if match is None or int(match.group(1)) == 0:
        raise ConfigError(
            f"rolling_time: length must be a positive number of seconds or a duration such as '7d', "
            f"'12h' or '2w' (units s, m, h, d, w); got {length!r}"
        )
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _starts(starts: Any, times: np.ndarray) -> list[int]:
    """Window starts in seconds (the first second of each window), increasing."""
    if isinstance(starts, (str, bytes)) or not isinstance(starts, Sequence) or not starts:
        raise ConfigError(f"rolling_time: starts must be a non-empty list of dates or timestamps, got {starts!r}")
    begins = []
    for start in starts:
        if isinstance(start, numbers.Integral) and not isinstance(start, bool):
            begins.append(int(start))
        elif isinstance(start, (str, dt.date)):
            begins.append(split_point(start, times)[0] + 1)  # the last second before the date, + 1
        else:
            raise ConfigError(f"rolling_time: a window start is a timestamp (int) or a date, got {start!r}")
    if any(b <= a for a, b in zip(begins, begins[1:])):
        raise ConfigError(f"rolling_time: starts must increase, got {[_show(s) for s in starts]}")
    return begins


def _show(start: Any) -> Any:
    return start.isoformat() if isinstance(start, dt.date) else start
