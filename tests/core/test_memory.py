"""Step peaks are sampled; the process's own peak mark, which /usr/bin/time reads, is never reset."""

from __future__ import annotations

import resource
import time

import numpy as np

from recsys_eval.core.memory import StepPeaks, peak_bytes, resident_bytes
from recsys_eval.pipeline.timings import Timings

MB = 10**6


def _hold(n_bytes: int, seconds: float) -> None:
    block = np.ones(n_bytes // 8)  # written, so resident
    time.sleep(seconds)
    del block


def test_a_step_sees_the_peak_inside_it_and_the_process_mark_keeps_it():
    peaks = StepPeaks(interval=0.005)
    try:
        start = peaks.take()
        _hold(300 * MB, 0.5)
        step = peaks.take()
        after = peaks.take()
    finally:
        peaks.close()
    assert step >= start + 250 * MB
    assert after < step - 200 * MB  # a new step starts from the memory now, not from the old peak
    # the kernel's mark lags the resident count by its per-thread batching (a few pages)
    assert peak_bytes() >= step - 4 * MB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 >= step - 4 * MB  # what /usr/bin/time sees


def test_timings_rows_hold_each_steps_peak_and_the_run_peak_is_the_process_mark():
    with Timings() as timings:
        start = time.perf_counter()
        _hold(300 * MB, 0.5)
        timings.add("f", "", "big", start)
        timings.add("f", "", "small", time.perf_counter())
    big, small = (row["peak_rss_mb"] for row in timings.rows)
    assert big >= small + 200
    assert timings.peak_mb >= big - 4
    assert timings.peak_mb * MB >= resident_bytes() - MB


def test_a_run_after_a_larger_one_in_the_same_process_reports_its_own_peak():
    """In one Python session (the API, the tests) the kernel's mark may come from an earlier run:
    the run's peak is then its own largest sample, not the session's mark."""
    _hold(400 * MB, 0.05)
    with Timings() as timings:
        start = time.perf_counter()
        _hold(50 * MB, 0.5)
        timings.add("f", "", "small", start)
        peak = timings.add_whole_run(start)
    assert peak < peak_bytes() / MB - 200
    assert peak >= timings.rows[0]["peak_rss_mb"]
