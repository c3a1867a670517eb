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

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split.common import DropUnknown, build_split, check_count, options, require_timestamps
from recsys_eval.split.temporal import SplitPoint, date_point, iso_utc

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
    check_window_choice(n, starts)
    opts = options(data, seed=seed, min_user_interactions=1, drop_unknown=drop_unknown, seed_required=False)
    times = require_timestamps(data, "rolling_time")
    low, high = int(times.min()), int(times.max())
    seconds, begins = rolling_windows(length, n, starts, high)
    folds = []
    for i, start in enumerate(begins, 1):
        train, test = times < start, (times >= start) & (times < start + seconds)
        check_window(i, start, seconds, int(test.sum()), int(train.sum()), (low, high), data.source)
        folds.append(build_split(data, test, opts, name=window_name(i), splitter="rolling_time",
                                 params=rolling_params(length, n, starts, opts.drop_unknown),
                                 extra=window_extra(i, start, seconds), train=train))
    return folds


def check_window_choice(n: Any, starts: Any) -> None:
    if (n is None) == (starts is None):
        raise ConfigError("rolling_time: give exactly one of n (windows before the data's end) and starts")


def rolling_windows(length: Any, n: Any, starts: Any, latest: int) -> tuple[int, list[int]]:
    """The window length in seconds and each window's first second: the last ``n`` windows, the
    last ending one second after ``latest`` (the data's latest timestamp), or the ``starts`` given."""
    check_window_choice(n, starts)
    seconds = window_length(length)
    if n is None:
        return seconds, _starts(starts)
    n = check_count("n", n)
    return seconds, [latest + 1 - (n - i) * seconds for i in range(n)]


def check_window(i: int, start: int, seconds: int, n_test: int, n_train: int, span: tuple[int, int],
                 source: str) -> None:
    """A DataError unless window ``i`` (``n_test`` rows in it, ``n_train`` before it) holds a test
    interaction and follows a train one; ``span``: the data's earliest and latest timestamps."""
    if n_test and n_train:
        return
    side = "test interaction in it" if not n_test else "train interaction before it"
    raise DataError(
        f"{source}: rolling_time window {i} [{iso_utc(start)}, {iso_utc(start + seconds)}) "
        f"has no {side}; the data spans {iso_utc(span[0])} .. {iso_utc(span[1])}"
    )


def window_name(i: int) -> str:
    """The name of the ``i``-th (from 1) window's fold."""
    return f"window{i}"


def rolling_params(length: Any, n: Any, starts: Any, drop_unknown: Any) -> dict[str, Any]:
    """The parameters a rolling split's ``info`` records."""
    return {"length": length, "n": n, "starts": None if starts is None else [_show(s) for s in starts],
            "drop_unknown": drop_unknown}


def window_extra(i: int, start: int, seconds: int) -> dict[str, Any]:
    """What a window's ``info`` records of it beyond the counts."""
    return {"fold": i, "window_start": start, "window_end": start + seconds,
            "window_utc": f"{iso_utc(start)} .. {iso_utc(start + seconds)}"}


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


def _starts(starts: Any) -> list[int]:
    """Window starts in seconds (the first second of each window), increasing."""
    if isinstance(starts, (str, bytes)) or not isinstance(starts, Sequence) or not starts:
        raise ConfigError(f"rolling_time: starts must be a non-empty list of dates or timestamps, got {starts!r}")
    begins = []
    for start in starts:
        if isinstance(start, numbers.Integral) and not isinstance(start, bool):
            begins.append(int(start))
        elif isinstance(start, (str, dt.date)):
            begins.append(date_point(start)[0] + 1)  # the last second before the date, + 1
        else:
            raise ConfigError(f"rolling_time: a window start is a timestamp (int) or a date, got {start!r}")
    if any(b <= a for a, b in zip(begins, begins[1:])):
        raise ConfigError(f"rolling_time: starts must increase, got {[_show(s) for s in starts]}")
    return begins


def _show(start: Any) -> Any:
    return start.isoformat() if isinstance(start, dt.date) else start
