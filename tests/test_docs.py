"""Every link to a section of docs/CONVENTIONS.md, from a docstring or a Markdown page, lands on a
heading of that page: a renamed heading otherwise leaves links that open the page at its top."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONVENTIONS = ROOT / "docs" / "CONVENTIONS.md"
_LINK = re.compile(r"CONVENTIONS\.md#([\w-]+)")
_OWN_LINK = re.compile(r"\]\(#([\w-]+)\)")  # the page's links to itself (its contents)


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings: lower case, punctuation dropped, spaces to hyphens,
    ``-1``, ``-2`` ... after a repeated one."""
    found: set[str] = set()
    for line in markdown.splitlines():
        if heading := re.match(r"#+\s+(.*)", line):
            slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
            repeats = sum(1 for a in found if a == slug or re.fullmatch(rf"{re.escape(slug)}-\d+", a))
            found.add(f"{slug}-{repeats}" if repeats else slug)
    return found


def broken_links(files: Iterable[Path], known: set[str]) -> list[str]:
    """``file:line: #anchor`` of every CONVENTIONS.md link (and the page's own ``(#...)`` links)
    whose anchor is not in ``known``."""
    broken = []
    for path in files:
        pattern = _OWN_LINK if path == CONVENTIONS else _LINK
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            broken += [f"{path}:{number}: #{anchor}" for anchor in pattern.findall(line) if anchor not in known]
    return broken


def linking_files() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "experiments" / "README.md"]
    return [*sorted((ROOT / "recsys_eval").rglob("*.py")), *pages]


def test_every_link_to_the_conventions_names_one_of_its_headings():
    files = linking_files()
    links = sum(len(_LINK.findall(path.read_text(encoding="utf-8"))) for path in files)
    assert links > 20  # the scan reads the files that link
    broken = broken_links(files, anchors(CONVENTIONS.read_text(encoding="utf-8")))
    assert not broken, "links to no heading of docs/CONVENTIONS.md:\n" + "\n".join(broken)


def test_a_broken_anchor_is_named_with_its_file_and_line(tmp_path):
    source = tmp_path / "module.py"
    source.write_text('"""Seeds.\n\n(docs/CONVENTIONS.md#seeds-and-reproducibility; docs/CONVENTIONS.md#seeds)."""\n')
    known = anchors("# Conventions\n## Seeds and reproducibility\n### F-measure\n## Ties\n## Ties\n")
    assert known == {"conventions", "seeds-and-reproducibility", "f-measure", "ties", "ties-1"}
    assert broken_links([source], known) == [f"{source}:3: #seeds"]
