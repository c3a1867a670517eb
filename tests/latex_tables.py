"""pdflatex on the tables a run writes, for the tests: one place that knows the preamble tables.tex
assumes (booktabs, graphicx), so that every test compiles them alike."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def compile_tables(folder: Path, body: str, *, wide: bool = False) -> str:
    """Compile ``body`` in an article (two-column when ``wide``) in ``folder``; its log, once
    pdflatex has succeeded (a failure raises with the log's end, where LaTeX names the error)."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (Debian: texlive-latex-base texlive-latex-recommended)")
    options = "twocolumn" if wide else ""
    (folder / "paper.tex").write_text(f"\\documentclass[{options}]{{article}}\\usepackage{{booktabs,graphicx}}"
                                      f"\\begin{{document}}\n{body}\n\\end{{document}}\n")
    result = subprocess.run(["pdflatex", "-interaction=nonstopmode", "paper.tex"], cwd=folder,
                            capture_output=True, text=True, timeout=120)
    log = (folder / "paper.log").read_text(errors="replace")
    assert result.returncode == 0, log[-2000:]
    return log
