"""``timings.csv``: each step's wall time and its own peak memory, one row per step."""

from __future__ import annotations

import time

from recsys_eval.core.memory import peak_bytes, reset_peak


class Timings:
    """The steps of a run, in the order they end. A row holds the step's wall time since ``start``
    (a ``time.perf_counter()`` reading) and the process's peak memory since the previous row, so
    each step's own peak; then a new peak measurement starts."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    @property
    def peak_mb(self) -> int | None:
        """The process's peak memory over every step so far: each row holds the peak since the
        row before it, so the largest row is the whole run's (the analysis and report included
        once they are steps)."""
        return max((row["peak_rss_mb"] for row in self.rows), default=None)

    def add(self, fold: str, system: str, step: str, start: float) -> None:
        peak = peak_bytes()
        reset_peak()
        self.rows.append({"fold": fold, "system": system, "step": step, "seconds": time.perf_counter() - start,
                          "peak_rss_mb": round(peak / 1e6)})
