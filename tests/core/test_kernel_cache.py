"""Kernel cache folders of other versions and sources are removed once no process used them for a month."""

from __future__ import annotations

import os
import time

from recsys_eval.core.kernel_cache import (
    STALE_DAYS,
    USED_STAMP,
    remove_stale,
    use_cache_folder,
)

DAY = 86400.0


def _folder(parent, name, used_days_ago=None, modified_days_ago=0.0, now=0.0):
    folder = parent / name
    (folder / "split").mkdir(parents=True)
    (folder / "split" / "order._group_order-30.py311.nbi").write_bytes(b"index")
    if used_days_ago is not None:
        (folder / USED_STAMP).touch()
        os.utime(folder / USED_STAMP, (now - used_days_ago * DAY,) * 2)
    os.utime(folder, (now - modified_days_ago * DAY,) * 2)
    return folder


def test_siblings_unused_for_longer_than_the_limit_are_removed(tmp_path):
    now = time.time()
    current = _folder(tmp_path, "0.2.0-bbb", used_days_ago=400, now=now)  # never the current one
    stale = _folder(tmp_path, "0.1.0-aaa", used_days_ago=STALE_DAYS + 1, now=now)
    recent = _folder(tmp_path, "0.1.0-ccc", used_days_ago=STALE_DAYS - 1, now=now)
    # no stamp (a cache written before stamps existed): the folder's own time counts
    old_unstamped = _folder(tmp_path, "0.0.9", modified_days_ago=STALE_DAYS + 5, now=now)
    new_unstamped = _folder(tmp_path, "0.0.8", modified_days_ago=1, now=now)
    (tmp_path / "notes.txt").write_text("a file, not a cache")
    assert sorted(remove_stale(current, now)) == sorted([stale, old_unstamped])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [current.name, recent.name, new_unstamped.name, "notes.txt"])


def test_a_new_folder_is_stamped_and_clears_stale_siblings_once(tmp_path):
    now = time.time()
    stale = _folder(tmp_path, "0.1.0-aaa", used_days_ago=STALE_DAYS + 1, now=now)
    current = tmp_path / "0.2.0-bbb"
    use_cache_folder(current)
    assert (current / USED_STAMP).is_file() and not stale.exists()
    # a folder in use again is stamped again (the cache of use_cache_folder is per process)
    os.utime(current / USED_STAMP, (now - 5 * DAY,) * 2)
    use_cache_folder.cache_clear()
    use_cache_folder(current)
    assert now - (current / USED_STAMP).stat().st_mtime < DAY
