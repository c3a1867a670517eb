"""Experiment configs as TOML text for the tests and the benchmarks: one builder instead of a config
pasted into every file, so that a renamed key or a new required table is changed in one place.

Tables are given as Python values and written out as TOML; a table given as None is left out. It
is test support, not part of the package: users write their configs by hand (``recsys-eval init``
writes a starter). The benchmarks import it with ``tests/`` on ``sys.path``, so it needs no pytest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: The column names of a MovieLens ``ratings.csv``, as ``write_synthetic_ratings`` writes them.
COLUMNS = {"user": "userId", "item": "movieId", "rating": "rating", "timestamp": "timestamp"}
#: The [output] of a run that is only measured: a report costs seconds and few tests read it.
NO_REPORT = {"report": False}
NDCG_AT_10 = {"names": ["ndcg"], "k": [10]}

Entry = str | Mapping[str, Any]


def ratings_file(path: str | Path, *, timestamp: bool = True) -> dict[str, Any]:
    """The [dataset] of a ratings file with MovieLens' column names (the tests' synthetic ratings)."""
    columns = COLUMNS if timestamp else {k: v for k, v in COLUMNS.items() if k != "timestamp"}
    return {"path": str(path), "columns": columns}


def split_table(method: str, **params: Any) -> dict[str, Any]:
    """The [split] of ``method`` with its ``params``."""
    return {"method": method, "params": params}


HOLDOUT = split_table("holdout", fraction=0.2, per_user=True)


def config_text(
    name: str,
    *,
    seed: int | None = None,
    dataset: Mapping[str, Any] | None = None,
    datasets: Sequence[Mapping[str, Any]] = (),
    split: Mapping[str, Any] | None = HOLDOUT,
    protocols: Sequence[Entry] = ("AI+AR+AN",),
    recommenders: Sequence[Entry] = ("popular",),
    metrics: Mapping[str, Any] | None = NDCG_AT_10,
    output: Mapping[str, Any] | None = NO_REPORT,
    **tables: Mapping[str, Any] | None,
) -> str:
    """The TOML of an experiment config; a protocol or recommender given as a string is its name.
    Further ``tables`` ([tuning], [compare], [run], [engine], ...) follow [output] in the order given."""
    head = [f"name = {_value(name)}"] + ([f"seed = {seed}"] if seed is not None else [])
    sections = [
        "\n".join(head),
        _table("[dataset]", dataset),
        *(_table("[[datasets]]", d) for d in datasets),
        _table("[split]", split),
        *(_table("[[protocols]]", _entry(p)) for p in protocols),
        *(_table("[[recommenders]]", _entry(r)) for r in recommenders),
        _table("[metrics]", metrics),
        _table("[output]", output),
        *(_table(f"[{key}]", values) for key, values in tables.items()),
    ]
    return "\n\n".join(s for s in sections if s is not None) + "\n"


def _entry(entry: Entry) -> Mapping[str, Any]:
    return {"name": entry} if isinstance(entry, str) else entry


def _table(header: str, values: Mapping[str, Any] | None) -> str | None:
    if values is None:
        return None
    return "\n".join([header, *(f"{key} = {_value(value)}" for key, value in values.items())])


def _value(value: Any) -> str:
    """A TOML value: tables inline (``{ k = 2 }``), strings in double quotes (JSON's escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{key} = {_value(v)}" for key, v in value.items()) + " }"
    return "[" + ", ".join(_value(v) for v in value) + "]"
