"""TOML text from plain values (the inverse of :func:`tomllib.loads` on them): the writer behind the
resolved config a run saves (recsys_eval.pipeline.config.resolved_text).

Tables (``dict``) become ``[section]`` headers and lists of tables ``[[section]]`` headers, each
after its table's plain keys, as TOML requires; tables inside arrays and empty tables are written
inline. Values are ``str``, ``bool``, ``int``, ``float`` (``repr``, so that they read back equal;
``inf`` and ``nan`` as TOML spells them), lists and tables of them. ``None`` has no TOML form: a
key whose value is None is left out, as an absent key.
"""

from __future__ import annotations

import math
import re
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
#: Basic-string escapes TOML defines; other control characters go as \\uXXXX.
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def dumps(table: dict[str, Any]) -> str:
    """The TOML document of ``table`` (``tomllib.loads(dumps(t)) == t`` for ``t`` without None)."""
    lines: list[str] = []
    _table(table, (), lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_section(value: Any) -> bool:
    return isinstance(value, dict) and bool(value)


def _is_section_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _table(table: dict[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    """The plain keys of ``table``, then its sub-tables and arrays of tables under their headers."""
    entries = {k: v for k, v in table.items() if v is not None}
    for key, value in entries.items():
        if not (_is_section(value) or _is_section_array(value)):
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in entries.items():
        inner = (*path, key)
        if _is_section(value):
            lines += ["", f"[{'.'.join(map(_key, inner))}]"]
            _table(value, inner, lines)
        elif _is_section_array(value):
            for item in value:
                lines += ["", f"[[{'.'.join(map(_key, inner))}]]"]
                _table(item, inner, lines)


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        items = (f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None)
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__} value {value!r}")


def _string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
