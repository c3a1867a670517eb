"""recsys_eval sets polars' jemalloc options when it is imported before polars, and only then
(recsys_eval.core.allocator)."""

from __future__ import annotations

import os
import subprocess
import sys

from recsys_eval.core.allocator import DIRTY_DECAY_MS

SHOW = "import os; print(os.environ.get('_RJEM_MALLOC_CONF'))"


def _child(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"} | env
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_importing_recsys_eval_first_keeps_freed_pages_for_a_while():
    assert _child(f"import recsys_eval; {SHOW}") == f"dirty_decay_ms:{DIRTY_DECAY_MS}"


def test_a_users_own_options_are_kept():
    assert _child(f"import recsys_eval; {SHOW}", _RJEM_MALLOC_CONF="narenas:2") == "narenas:2"


def test_nothing_is_set_once_polars_is_loaded():
    """jemalloc has read its options by then (polars' own): setting them would only mislead a child
    process."""
    assert f"dirty_decay_ms:{DIRTY_DECAY_MS}" not in _child(f"import polars, recsys_eval; {SHOW}")


def test_polars_takes_them_over_its_own():
    """polars appends ``_RJEM_MALLOC_CONF`` to its options, so the later value is the one jemalloc keeps."""
    assert _child(f"import recsys_eval, polars; {SHOW}").endswith(f",dirty_decay_ms:{DIRTY_DECAY_MS}")
