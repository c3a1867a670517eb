"""The last line of every benchmark: its peak resident memory as ``/usr/bin/time -f %M`` reports it.

``getrusage`` gives the kernel's high-water marks, which recsys_eval never resets: this process's
(ours and, in the in-process benchmarks, the peers' computations side by side) and the largest of
its waited-for children's (the whole-process benchmarks: each child's own figure is printed beside
its time). A benchmark runs as a script, so this module is imported from its folder.
"""

from __future__ import annotations

import resource
import sys


def report_peak() -> None:
    """Print the benchmark's peak RSS: this process's, and its largest child's."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux, bytes on macOS
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale / 1e6
    line = f"peak RSS (getrusage, as /usr/bin/time reports it): this process {own:,.0f} MB"
    print(line + (f", its largest child process {children:,.0f} MB" if children else ""))
