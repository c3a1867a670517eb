"""numba's kernel cache stays whole when several cold processes save into it at once.

Four processes, started together on an empty cache folder, each compile and save one signature
(dtype) of the same ``cache=True`` kernel; each save reads the index, sleeps, then writes, so that
without the lock of :func:`recsys_eval.core.kernel_cache.lock_cache_saves` the four saves overlap
and take the same data file (shown by the test that removes the lock). A fifth process must then
load all four signatures from the cache without compiling one (numba's ``stats.cache_hits`` and
``cache_misses``) and get the values of the kernel run as plain Python (``NUMBA_DISABLE_JIT``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


DTYPES = ("int32", "int64", "float32", "float64")

KERNEL = '''
import numba


@numba.njit(cache=True)
def weighted_sum(x):
    total = 0.0
    for i in range(x.size):
        total += (i + 1) * x[i]
    return total
'''

CHILD = '''
import json, os, sys, time
from pathlib import Path

import numpy as np

import recsys_eval  # makes numba's cache saves hold their lock
from numba.core import caching

if os.environ.get("UNLOCKED"):  # the counter-test: numba's own save, without the lock
    caching.IndexDataCacheFile.save = caching.IndexDataCacheFile.save.__wrapped__
load_index = caching.IndexDataCacheFile._load_index


def slow_load_index(self):  # widens the window between reading the index and writing it
    found = load_index(self)
    time.sleep(0.5)
    return found


caching.IndexDataCacheFile._load_index = slow_load_index
import kernel

print("ready", flush=True)
while not Path(sys.argv[1]).exists():
    time.sleep(0.01)
values = {dtype: float(kernel.weighted_sum((np.arange(40) % 7).astype(dtype))) for dtype in sys.argv[2:]}
stats = kernel.weighted_sum.stats if hasattr(kernel.weighted_sum, "stats") else None
print(json.dumps({"values": values,
                  "hits": sum(stats.cache_hits.values()) if stats else None,
                  "misses": sum(stats.cache_misses.values()) if stats else None}))
'''


def start(folder: Path, name: str, dtypes: tuple[str, ...], **env: str) -> subprocess.Popen:
    """The child script as process ``name``, its standard output and error going to the files
    ``<name>.out`` and ``<name>.err``: files, not pipes, so that no line can be lost in a reader's
    buffer (a ``readline`` on a pipe may buffer the next line too, which ``communicate`` then never
    sees: the cause of an IndexError on an empty output when a child answered quickly)."""
    with open(folder / f"{name}.out", "w") as out, open(folder / f"{name}.err", "w") as err:
        return subprocess.Popen([sys.executable, str(folder / "child.py"), str(folder / "go"), *dtypes],
                                cwd=folder, stdout=out, stderr=err,
                                env={**os.environ, "NUMBA_CACHE_DIR": str(folder / "cache"), **env})


def lines(folder: Path, name: str) -> list[str]:
    return (folder / f"{name}.out").read_text().splitlines()


def described(folder: Path, name: str, child: subprocess.Popen) -> str:
    """What a child that failed said, for the assertion's message."""
    return (f"child {name} (exit {child.poll()}): stdout {lines(folder, name)!r}, "
            f"stderr {(folder / f'{name}.err').read_text()[-3000:]}")


def wait_until_ready(folder: Path, children: dict[str, subprocess.Popen]) -> None:
    """Wait for every child to say ``ready`` (all imports done); fail naming one that died first."""
    deadline = time.monotonic() + 600
    for name, child in children.items():
        while lines(folder, name)[:1] != ["ready"]:
            assert child.poll() is None and time.monotonic() < deadline, described(folder, name, child)
            time.sleep(0.02)


def outcome(folder: Path, name: str, child: subprocess.Popen, *, crash: bool = False) -> dict | None:
    """The JSON line the child printed last; with ``crash``, None if it failed."""
    child.wait(timeout=600)
    if crash and child.returncode != 0:
        return None
    assert child.returncode == 0, described(folder, name, child)
    return json.loads(lines(folder, name)[-1])


def cold_then_warm(folder: Path, **env: str) -> tuple[list[dict], dict | None]:
    """Four cold processes at once, one dtype each; then one process calling every dtype (None if
    it crashed, which only a cache without the lock can make it do)."""
    (folder / "kernel.py").write_text(KERNEL)
    (folder / "child.py").write_text(CHILD)
    cold = {dtype: start(folder, dtype, (dtype,), **env) for dtype in DTYPES}
    wait_until_ready(folder, cold)  # every one has imported everything: the compilations start together
    (folder / "go").touch()
    first = [outcome(folder, dtype, child) for dtype, child in cold.items()]
    later = start(folder, "later", DTYPES)
    return first, outcome(folder, "later", later, crash=env.get("UNLOCKED") is not None)


def plain_python(folder: Path) -> dict:
    return outcome(folder, "plain", start(folder, "plain", DTYPES, NUMBA_DISABLE_JIT="1"))["values"]


def test_four_cold_processes_then_a_fifth_loads_every_signature(tmp_path):
    first, later = cold_then_warm(tmp_path)
    assert [(run["hits"], run["misses"]) for run in first] == [(0, 1)] * 4
    assert (later["hits"], later["misses"]) == (4, 0)
    expected = plain_python(tmp_path)
    assert later["values"] == expected
    assert {dtype: run["values"][dtype] for dtype, run in zip(DTYPES, first, strict=True)} == expected


def test_without_the_lock_the_saves_collide(tmp_path):
    """The counter-test: numba's own save loses signatures (or crosses them) in the same setting,
    so the test above can fail."""
    first, later = cold_then_warm(tmp_path, UNLOCKED="1")
    assert [(run["hits"], run["misses"]) for run in first] == [(0, 1)] * 4
    crashed = later is None  # the index pointed a signature at another's machine code
    assert crashed or later["misses"] > 0 or later["values"] != plain_python(tmp_path)
