"""What a PDF written by matplotlib prints at: its page size (MediaBox, in points) and the sizes of
the fonts its text is set in (the ``Tf`` operators of its content streams), read with the standard
library alone (the streams are Flate-compressed)."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

_STREAM_START = re.compile(rb">>\s*stream\r?\n")


def _streams(data: bytes):
    """Every Flate-compressed stream of a PDF, decompressed: each ``stream`` keyword's bytes read up
    to where its zlib data end (so compressed bytes that happen to spell ``endstream`` cannot cut
    one short); other streams are skipped."""
    for start in _STREAM_START.finditer(data):
        try:
            yield zlib.decompressobj().decompress(data[start.end():])
        except zlib.error:
            continue


def page_size(pdf: Path) -> tuple[float, float]:
    """The (width, height) of the first page, in points (1/72 in)."""
    box = re.search(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]", pdf.read_bytes())
    x0, y0, x1, y1 = (float(v) for v in box.groups())
    return x1 - x0, y1 - y0


def font_sizes(pdf: Path) -> set[float]:
    """Every font size (points) the page's text is set in."""
    sizes = set()
    for text in _streams(pdf.read_bytes()):
        sizes |= {float(v) for v in re.findall(rb"/\w+\s+([\d.]+)\s+Tf", text)}
    return sizes
