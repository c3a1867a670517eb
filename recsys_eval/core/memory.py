"""Memory: a budget given as text (``"4GB"``), the process's resident memory now, and the peak of a
step (Linux resets the peak through ``/proc/self/clear_refs``; elsewhere the peak of the process
so far is reported)."""

from __future__ import annotations

import re
import resource
import sys
from pathlib import Path

from recsys_eval.errors import ConfigError

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def parse_size(text: str | int) -> int:
    """Bytes of a size such as ``"4GB"``, ``"512 MiB"`` or a plain number of bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text > 0:
            return text
        raise ConfigError(f"memory {text!r}: expected a positive size such as '4GB'")
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?I?B?)\s*", str(text).upper())
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(f"memory {text!r}: expected a positive size such as '4GB', '1500MB' or '8GiB'")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def format_size(n_bytes: float) -> str:
    """``3.2 GB``, ``850 MB``."""
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.0f} MB"


def _status_bytes(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def resident_bytes() -> int:
    """The process's resident memory now (its peak so far where the current value is unknown)."""
    return _status_bytes("VmRSS") or peak_bytes()


def peak_bytes() -> int:
    """The process's peak resident memory since the last :func:`reset_peak` (or its start)."""
    found = _status_bytes("VmHWM")
    if found is not None:
        return found
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def reset_peak() -> None:
    """Start a new peak measurement (Linux); elsewhere a no-op, so peaks are the process's so far."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        pass
