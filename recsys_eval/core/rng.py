"""Seeds: every random choice of a run takes its own seed, derived from the run's seed and the
*definition* of what it randomises (docs/CONVENTIONS.md#seeds-and-reproducibility).

A definition is what makes the choice what it is: the splitter and its parameters, the fold name, a
protocol's canonical name and options, a recommender's name and hyperparameters. Display labels
never enter a seed, so relabelling a protocol or a system keeps its samples, and adding or
reordering entries never changes another entry's stream.

Three kinds of randomness, one seed each: numpy Generators (``np.random.default_rng(seed)``) for
resampling and learning-curve subsamples; counter-based streams (:func:`splitmix64`) for targets and
the random recommender, where a number depends only on (seed, user, item), never on the order or
chunk in which users are processed; and hashes of raw ids (:func:`id_keys`) for the splits, so that
a row's side depends on the seed and its own raw ids (a user's rows, for a per-user split) alone,
whichever engine draws it (docs/CONVENTIONS.md#per-user-split-draws,
docs/CONVENTIONS.md#global-split-draws).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import polars as pl
from numba import njit

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


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


def id_keys(ids: pl.Series) -> np.ndarray:
    """A uint64 key of every raw id, the same in any process and for any polars or Spark reader:
    an integer id's own value (as a 64-bit two's complement), a text id's 64-bit FNV-1a hash of
    its UTF-8 bytes (Fowler, Noll & Vo)."""
    if ids.dtype.is_integer():
        return ids.cast(pl.Int64, wrap_numerical=True).to_numpy().astype(np.int64, copy=False).view(np.uint64)
    text = ids.cast(pl.String)
    lengths = text.str.len_bytes().cast(pl.Int64).to_numpy()
    bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = np.frombuffer(text.str.join("").item().encode(), np.uint8) if len(text) else np.zeros(0, np.uint8)
    return _fnv1a(data, bounds)


@njit(cache=True)
def _fnv1a(data, bounds):  # pragma: no cover - compiled
    """64-bit FNV-1a of the byte strings ``data[bounds[i]:bounds[i + 1]]``."""
    out = np.empty(len(bounds) - 1, np.uint64)
    for i in range(len(out)):
        h = _FNV_OFFSET
        for p in range(bounds[i], bounds[i + 1]):
            h = (h ^ np.uint64(data[p])) * _FNV_PRIME
        out[i] = h
    return out
