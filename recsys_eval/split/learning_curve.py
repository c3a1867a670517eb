"""Learning curves: nested subsamples of a train side at growing fractions, the test side fixed.

Every train row gets one seeded random rank (globally, or within its user); the subsample at
fraction f keeps the rows ranked below its size, so each subsample contains every smaller one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError
from recsys_eval.split.common import check_fraction, check_seed, round_half_up
from recsys_eval.split.order import random_rank, rank_within


def learning_curve(
    split: Split,
    fractions: Sequence[float],
    *,
    per_user: bool = False,
    seed: int,
) -> list[Split]:
    """One Split per fraction f (strictly increasing, in (0, 1]), named ``"<split>@<f>"``.

    Global: the train side keeps ``round(f * n)`` of its n interactions. Per user: each user keeps
    ``round(f * n_u)`` of its n_u, and at least one, so no user of train drops out. Halves round
    up. The test side is the same object in every Split.
    """
    if not isinstance(split, Split):
        raise ConfigError(f"learning_curve: expected a Split, got {type(split).__name__}")
    if isinstance(fractions, (str, bytes)) or not isinstance(fractions, Sequence) or not fractions:
        raise ConfigError(f"learning-curve fractions must be a non-empty list, got {fractions!r}")
    fractions = [check_fraction("learning-curve fraction", f, allow_one=True) for f in fractions]
    for before, after in zip(fractions, fractions[1:]):
        if after <= before:
            raise ConfigError(
                f"learning-curve fractions must increase strictly, got {before:g} then {after:g}"
            )
    seed = check_seed(seed)
    rng = np.random.default_rng(seed)
    train = split.train
    users = train.users
    if per_user:
        counts = np.bincount(users, minlength=train.n_users)
        rank = rank_within(users, train.n_users, rng)
    else:
        rank = random_rank(len(train), rng)
    curve = []
    for f in fractions:
        if per_user:
            size = np.minimum(np.maximum(round_half_up(f * counts), 1), counts)
            keep = rank < size[users]
        else:
            keep = rank < int(round_half_up(f * len(train)))
        sub = train.with_frame(train.frame.filter(pl.Series(keep)))
        info = {
            "splitter": "learning_curve",
            "params": {"fractions": fractions, "per_user": bool(per_user)},
            "seed": seed,
            "fraction": f,
            "of": split.name,
            "train_interactions": len(sub),
            "test_interactions": len(split.test),
        }
        curve.append(Split(sub, split.test, name=f"{split.name}@{f:g}", info=info))
    return curve
