"""How a report figure becomes files (recsys_eval.report.figures.save): laid out once and drawn once
per format (counted on matplotlib's own layout engine and Figure.draw), the same bytes when drawn
again, and a legend below it never wider than the figure."""

from __future__ import annotations

import base64

import polars as pl
import pytest
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from recsys_eval.report import figures, style

#: System names as long as a real study's, enough of them to overflow one row at column width.
SYSTEMS = ["random", "popular", "item_knn_cosine", "item_knn_bm25", "user_knn", "als", "bpr", "user_knn_rating"]


def _ranks_figure():
    summary = pl.DataFrame({"system": SYSTEMS * 2, "protocol": ["AI+AR+AN"] * 8 + ["AI+1R+NN100"] * 8,
                            "fold": "all", "metric": "ndcg", "k": 10, "mean": [i / 10 for i in range(16)]})
    return figures.ranks_across_protocols(summary, "ndcg@10", colors=style.system_colors(SYSTEMS))


def test_a_figure_is_laid_out_once_and_drawn_once_per_format(tmp_path, monkeypatch):
    counts = {"draws": 0, "layouts": 0}
    draw, layout = Figure.draw, ConstrainedLayoutEngine.execute

    def counted_draw(self, renderer):
        counts["draws"] += 1
        return draw(self, renderer)

    def counted_layout(self, fig):
        counts["layouts"] += 1
        return layout(self, fig)

    monkeypatch.setattr(Figure, "draw", counted_draw)
    monkeypatch.setattr(ConstrainedLayoutEngine, "execute", counted_layout)
    png = figures.save(_ranks_figure(), tmp_path, "ranks")
    assert counts == {"draws": 3, "layouts": 1}  # PNG, PDF, SVG; savefig alone: 6 draws, 6 layouts
    assert base64.b64decode(png) == (tmp_path / "ranks.png").read_bytes()
    assert {p.name for p in tmp_path.iterdir()} == {"ranks.png", "ranks.pdf", "ranks.svg"}


def test_the_same_figure_gives_the_same_bytes(tmp_path):
    for name in ("a", "b"):
        figures.save(_ranks_figure(), tmp_path, name)
    for ext in ("png", "pdf", "svg"):
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes(), ext


@pytest.mark.parametrize("ncols", [3, 5])
def test_a_legend_below_a_column_wide_figure_stays_inside_it(ncols):
    fig = _ranks_figure()
    for legend in list(fig.legends):
        legend.remove()
    style.legend_below(fig, fig.axes[0], ncols=ncols)
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width
    assert len(legend.get_texts()) == len(SYSTEMS)
