"""Splitters by name, as configs and the CLI give them: ``make_split(data, "holdout", ...)``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError, check_choice, closest
from recsys_eval.split.disjoint import cold_items, user_disjoint
from recsys_eval.split.holdout import holdout
from recsys_eval.split.kfold import kfold
from recsys_eval.split.official import official_folds
from recsys_eval.split.per_user import all_but_n, given_n, leave_last_n
from recsys_eval.split.rolling import rolling_time
from recsys_eval.split.temporal import time_split, user_time_split

SPLITTERS: dict[str, Callable[..., Split | list[Split]]] = {
    "holdout": holdout,
    "kfold": kfold,
    "time": time_split,
    "user_time": user_time_split,
    "all_but_n": all_but_n,
    "given_n": given_n,
    "leave_last_n": leave_last_n,
    "official": official_folds,
    "user_disjoint": user_disjoint,
    "cold_items": cold_items,
    "rolling_time": rolling_time,
}


def split_parameters(method: str) -> dict[str, inspect.Parameter]:
    """The parameters of splitter ``method`` (all but the data), by name."""
    check_choice("split method", method, SPLITTERS)
    params = list(inspect.signature(SPLITTERS[method]).parameters.values())[1:]
    return {p.name: p for p in params}


def check_split(method: str, params: Mapping[str, Any]) -> None:
    """Raise a ConfigError for an unknown method, an unknown parameter name or a missing required
    parameter; ``seed`` may be left out (the experiment runner derives one)."""
    _check(method, params, may_lack=("seed",))


def make_split(data: Interactions, method: str, **params: Any) -> Split | list[Split]:
    """Run splitter ``method`` (one of :data:`SPLITTERS`) on ``data`` with ``params``.

    Returns one Split, or a list for ``kfold``, ``official`` and ``rolling_time``.
    """
    _check(method, params, may_lack=())
    return SPLITTERS[method](data, **params)


def _check(method: str, params: Mapping[str, Any], may_lack: tuple[str, ...]) -> None:
    allowed = split_parameters(method)
    for name in params:
        if name not in allowed:
            raise ConfigError(
                f"split method {method!r} has no parameter {name!r}: {closest(name, allowed)}", key=name
            )
    missing = [
        name for name, p in allowed.items()
        if p.default is inspect.Parameter.empty and name not in params and name not in may_lack
    ]
    if missing:
        raise ConfigError(f"split method {method!r} needs parameter(s) {', '.join(map(repr, missing))}")
