"""``timings.csv``: each step's wall time and its own peak memory, one row per step."""

from __future__ import annotations

import time

from recsys_eval.core.memory import StepPeaks, peak_bytes, resident_bytes

#: The step name of ``timings.csv``'s last row, the whole run (its steps overlap: fits run beside
#: other work, so the steps' seconds do not add up to it).
WHOLE_RUN = "whole run"


class Timings:
    """The steps of a run, in the order they end. A row holds the step's wall time since ``start``
    (a ``time.perf_counter()`` reading) and the largest resident memory sampled since the previous
    row, so each step's own peak (recsys_eval.core.memory.StepPeaks)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self._peaks = StepPeaks()
        self._mark_before = peak_bytes()
        self._sampled = 0

    @property
    def peak_mb(self) -> int:
        """The run's peak memory so far. The kernel's high-water mark, which nothing resets, holds
        every moment, between the steps too; it is the run's when the run raised it. When the
        process peaked higher before the run (earlier runs of one Python session), the largest step
        sample is the run's."""
        mark = peak_bytes()
        return round((mark if mark > self._mark_before else max(self._sampled, resident_bytes())) / 1e6)

    def add(self, fold: str, system: str, step: str, start: float) -> None:
        peak = self._peaks.take()
        self._sampled = max(self._sampled, peak)
        self.rows.append({"fold": fold, "system": system, "step": step, "seconds": time.perf_counter() - start,
                          "peak_rss_mb": round(peak / 1e6)})

    def add_whole_run(self, start: float) -> int:
        """The last row: the run's wall time since ``start`` and its peak (:attr:`peak_mb`), which
        covers every moment, between the steps too. Returns the peak (MB), for the manifest."""
        peak = self.peak_mb
        self.rows.append({"fold": "", "system": "", "step": WHOLE_RUN, "seconds": time.perf_counter() - start,
                          "peak_rss_mb": peak})
        return peak

    def __enter__(self) -> Timings:
        return self

    def __exit__(self, *exc) -> None:
        self._peaks.close()  # the rows stay
