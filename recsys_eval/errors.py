"""Errors raised for bad input.

Every error the user can cause derives from :class:`RecsysEvalError`; the CLI prints its message
and exits non-zero without a traceback. Messages name the file, column, key or value at fault and
say what was expected.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RecsysEvalError(Exception):
    """Base class of every error caused by bad input or a bad environment."""


class DataError(RecsysEvalError):
    """Input data is missing, malformed or inconsistent."""


class DownloadError(DataError):
    """A dataset archive could not be fetched or failed verification."""


class ConfigError(RecsysEvalError):
    """A configuration or an argument is invalid."""


def closest(value: str, allowed: Iterable[str]) -> str:
    """A hint naming the allowed values and the closest one to `value`, for error messages."""
    allowed = sorted(allowed)
    match = difflib.get_close_matches(value, allowed, n=1, cutoff=0.5)
    hint = f"; did you mean {match[0]!r}?" if match else ""
    return f"expected one of {', '.join(map(repr, allowed))}{hint}"


def check_choice(what: str, value: str, allowed: Iterable[str]) -> str:
    """Return `value` if it is one of `allowed`, else raise a ConfigError naming `what`."""
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}: {closest(value, allowed)}")
    return value
