"""``timings.csv``: each step's wall time and its own peak memory, one row per step."""

from __future__ import annotations

import time

from recsys_eval.core.memory import StepPeaks, peak_bytes

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

    @property
    def peak_mb(self) -> int:
        """The whole process's peak memory so far: the kernel's high-water mark, which nothing resets,
        so it holds every moment of the run, between steps included."""
        return round(peak_bytes() / 1e6)

    def add(self, fold: str, system: str, step: str, start: float) -> None:
        self.rows.append({"fold": fold, "system": system, "step": step, "seconds": time.perf_counter() - start,
                          "peak_rss_mb": round(self._peaks.take() / 1e6)})

    def add_whole_run(self, start: float) -> None:
        """The last row: the run's wall time since ``start`` and the process's peak (:attr:`peak_mb`),
        which covers every moment, between the steps too."""
        self.rows.append({"fold": "", "system": "", "step": WHOLE_RUN, "seconds": time.perf_counter() - start,
                          "peak_rss_mb": self.peak_mb})

    def __enter__(self) -> Timings:
        return self

    def __exit__(self, *exc) -> None:
        self._peaks.close()  # the rows stay
