"""Memory: a budget given as text (``"4GB"``), the process's resident memory now, its peak, the
peak of each step, and freed memory handed back to the system.

A step's peak comes from :class:`StepPeaks`, a thread that samples the resident memory, never from
resetting the kernel's mark (``/proc/self/clear_refs``): that reset also lowers what ``getrusage``
and ``/usr/bin/time`` report for the whole process, so a peak between two resets would be hidden
from the user's own measurement."""

from __future__ import annotations

import re
import resource
import sys
import threading
from pathlib import Path

from recsys_eval.errors import ConfigError

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_STATUS = Path("/proc/self/status")


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
    """The process's peak resident memory since it started (the kernel's high-water mark)."""
    found = _status_bytes("VmHWM")
    if found is not None:
        return found
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def release_freed_memory() -> None:
    """Collect unreachable objects and hand the memory the C allocator keeps of freed buffers back
    to the system (glibc's ``malloc_trim``). Buffers freed by a thread stay in that thread's arena,
    where another thread cannot reuse them: after the folds (ranked, measured and written by worker
    threads) they would sit under the analysis's own peak. A no-op where the C library has no
    ``malloc_trim`` (macOS, musl)."""
    import ctypes
    import gc

    gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


class StepPeaks:
    """The peak resident memory of successive steps, sampled by a daemon thread every ``interval``
    seconds (a step's peak is the largest sample since the previous :meth:`take`, at least the
    memory at its start and end). A peak shorter than the interval can be missed by a step, never by
    :func:`peak_bytes`, which is the kernel's exact whole-process mark."""

    def __init__(self, interval: float = 0.05) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._peak = resident_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="recsys-eval-memory", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self._observe()

    def _observe(self) -> None:
        now = resident_bytes()
        with self._lock:
            self._peak = max(self._peak, now)

    def take(self) -> int:
        """The peak since the previous call (or the start), in bytes; a new step starts."""
        self._observe()
        with self._lock:
            peak, self._peak = self._peak, resident_bytes()
        return peak

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
