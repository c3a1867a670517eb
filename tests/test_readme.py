"""Every fenced shell, Python and TOML block of README.md and docs/*.md runs as written.

The blocks run in document order in one temporary copy of the repository (so that a block may use
what an earlier one wrote, e.g. ``results/quickstart/latest``): shell blocks with ``bash -e``,
Python blocks as scripts, TOML blocks written to a file and checked with ``recsys-eval validate``.
``uv run X`` is run as ``X`` with this interpreter's environment first on the PATH: the
environment ``uv run`` would give, without a second ``uv sync`` in the copy.

A block that cannot run as written (it needs the reader's own files, or downloads) is marked by an
HTML comment on the line before it, ``<!-- skip: the reason -->``, and is reported as skipped with
that reason; a skip without a reason is an error. The blocks read MovieLens 100K from
``RECSYS_EVAL_DATA`` and are skipped when it is not there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"bash": "shell", "sh": "shell", "shell": "shell", "python": "python", "toml": "toml"}
_FENCE = re.compile(r"^```(\w*)\s*$")
_SKIP = re.compile(r"^<!--\s*skip(?::\s*(.*?))?\s*-->$")
_COPY_IGNORE = shutil.ignore_patterns(".venv*", ".git", ".numba_cache", "results", "__pycache__", ".pytest_cache",
                                      ".hypothesis", "*.egg-info")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    kind: str  # shell, python or toml
    code: str
    skip: str | None  # the reason given, "" for a skip marker without one

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The runnable fenced blocks of a Markdown page, with the skip marker before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        assert end is not None, f"{path.name}:{i + 1}: a fenced block is never closed"
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _SKIP.match(before)
        if fence.group(1) in RUN:
            page = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
            out.append(Block(page, i + 1, RUN[fence.group(1)],
                             "\n".join(lines[i + 1:end]) + "\n", (marker.group(1) or "") if marker else None))
        i = end + 1
    return out


ALL = [b for page in PAGES for b in blocks(page)]


def test_the_pages_have_blocks_and_every_skip_says_why():
    assert {b.kind for b in ALL} == {"shell", "python", "toml"}
    assert [str(b) for b in ALL if b.skip == ""] == []


def test_the_block_reader_sees_kinds_and_skip_markers(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```bash\necho hi\n```\n\n<!-- skip: needs your own file -->\n```python\nx = 1\n"
                    "```\n```text\nnot run\n```\n<!-- skip -->\n\n```toml\na = 1\n```\n")
    found = [(b.kind, b.line, b.code, b.skip) for b in blocks(page)]
    assert found == [("shell", 3, "echo hi\n", None), ("python", 8, "x = 1\n", "needs your own file"),
                     ("toml", 16, "a = 1\n", "")]


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    data = Path(os.environ.get("RECSYS_EVAL_DATA", ""))
    if not (data / "ml-100k" / "u.data").is_file():
        pytest.skip("the README's examples read MovieLens 100K (ml-100k/u.data) from RECSYS_EVAL_DATA")
    target = tmp_path_factory.mktemp("readme") / "repo"
    shutil.copytree(ROOT, target, ignore=_COPY_IGNORE)
    return target


def _shell(code: str) -> str:
    """``uv run`` as the environment it would give: this interpreter's, first on the PATH."""
    return re.sub(r"\buv run (--group \w+ )?", "", code)


@pytest.mark.parametrize("block", ALL, ids=str)
def test_block_runs_as_written(block: Block, copy: Path):
    if block.skip is not None:
        pytest.skip(block.skip or "skip marker without a reason")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONDONTWRITEBYTECODE": "1"}
    if block.kind == "shell":
        command = ["bash", "-e", "-o", "pipefail", "-c", _shell(block.code)]
    elif block.kind == "python":
        script = copy / f"readme_block_{block.line}.py"
        script.write_text(block.code)
        command = [sys.executable, script.name]
    else:
        config = copy / f"readme_block_{block.line}.toml"
        config.write_text(block.code)
        command = [sys.executable, "-m", "recsys_eval.cli", "validate", config.name]
    result = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (
        f"{block} ({block.kind}) failed with exit code {result.returncode}\n--- block\n{block.code}"
        f"--- stdout (end)\n{result.stdout[-3000:]}\n--- stderr (end)\n{result.stderr[-3000:]}"
    )
