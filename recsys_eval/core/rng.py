"""Seeds: every random choice of a run takes its own seed, derived from the run's seed and the
*definition* of what it randomises (docs/CONVENTIONS.md#seeds-and-reproducibility).

A definition is what makes the choice what it is: the splitter and its parameters, the fold name, a
protocol's canonical name and options, a recommender's name and hyperparameters. Display labels
never enter a seed, so relabelling a protocol or a system keeps its samples, and adding or
reordering entries never changes another entry's stream.

Three kinds of randomness, one seed each: numpy Generators (``np.random.default_rng(seed)``) for
splits and resampling; counter-based streams (:func:`splitmix64`) for targets and the random
recommender, where a number depends only on (seed, user, item), never on the order or chunk in
which users are processed.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
from numba import njit

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def derive_seed(base: int, *parts: object) -> int:
    """A 32-bit seed for one random choice, a BLAKE2b hash of the run's seed and the parts.

    Parts are definitions (strings, numbers, or dicts/lists serialised with sorted keys), so equal
    definitions give equal seeds whatever they are called.
    """
    key = "/".join([str(base), *(definition(p) for p in parts)]).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "little")


def definition(value: Any) -> str:
    """A canonical text of a definition: strings as they are, anything else as sorted JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@njit(cache=True)
def splitmix64(x):
    """splitmix64's finaliser (Steele, Lea & Flood 2014): a bijective, well-mixed hash of a uint64."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))
