"""Errors raised for bad input or a bad environment.

Every error the user can cause derives from :class:`RecsysEvalError`, and the Python API raises no
other exception for bad input (a polars, numpy or OS exception escaping for bad input is a bug):

- :class:`DataError`: a data, run, judgment or split file is missing, malformed or inconsistent;
  :class:`DownloadError`, its subclass, when a dataset archive cannot be fetched or verified.
- :class:`ConfigError`: a config, an argument or a parameter is invalid.
- :class:`OutputError`: a result cannot be written (full disk, unwritable or read-only folder); the
  file it would have replaced is left as it was.
- :class:`BusyError`: another process is writing the same results folder.

The CLI prints the message and exits with status 1, without a traceback. Messages name the file,
column, key or value at fault and say what was expected.
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
    """A configuration or an argument is invalid.

    ``key`` names the entry at fault inside the mapping that was checked (a hyperparameter's or a
    splitter parameter's name), so that a config check can report the full key path
    (``recommenders[3].params.factorz``)."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class OutputError(RecsysEvalError):
    """A file or folder could not be written; the previous version, if any, is intact."""


class BusyError(RecsysEvalError):
    """Another process holds the lock of a folder this one needs to write."""


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
