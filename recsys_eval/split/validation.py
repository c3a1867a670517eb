"""Validation splits: a splitter applied to the train side of a split, for tuning.

The outer test side is neither read nor changed: tuning on (train', validation) and measuring on
the outer test keeps the test unseen until the end (docs/CONVENTIONS.md#preparation-and-splitting).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError


def validation_split(
    split: Split,
    splitter: str | Callable[..., Split | list[Split]],
    **params: Any,
) -> Split | list[Split]:
    """Split ``split.train`` with ``splitter`` (a method name of :func:`make_split`, or a splitter
    function) and ``params``; the result's test side is the validation set.

    Returns what the splitter returns (a list for k-fold), each named ``"<outer>/<inner>"``, with
    ``info`` of the inner splitter plus ``validation_of`` (the outer split's name).
    """
    from recsys_eval.split.make import make_split

    if not isinstance(split, Split):
        raise ConfigError(f"validation_split: expected a Split, got {type(split).__name__}")
    if splitter == "official":
        raise ConfigError("validation_split: the official folds split u.data, not a train side")
    made = (
        make_split(split.train, splitter, **params)
        if isinstance(splitter, str)
        else splitter(split.train, **params)
    )
    inner = made if isinstance(made, list) else [made]
    out = [
        Split(
            s.train,
            s.test,
            name=f"{split.name}/{s.name}",
            info={**s.info, "validation_of": split.name},
        )
        for s in inner
    ]
    return out if isinstance(made, list) else out[0]
