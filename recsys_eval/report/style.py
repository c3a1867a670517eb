"""One style for every figure of the report, sized for print.

A figure is drawn at the width it is printed at, so that its fonts are their stated size on paper:
:data:`COLUMN` (3.3 in, one column of a two-column paper) or :data:`PAGE` (7 in, the full text
width), never scaled by ``\\includegraphics``. Text is 8 pt (ticks, legends, cell values) or 9 pt
(axis labels, titles). Fonts are embedded as TrueType (``pdf.fonttype = 42``), which publishers
accept and Type 3 fonts are not. The same figure gives the same files, byte for byte (no dates, no
random ids: :data:`RC`, :func:`recsys_eval.report.figures.save`). The layout is matplotlib's constrained layout, so the saved page
is exactly the figure's size.

Colour: the :data:`SYSTEM_PALETTE` is reserved for systems, each keeping its colour (by config
order) in every figure; anything that is not a system (estimates, folds) draws from
:data:`OTHER_PALETTE`, greys that never collide with a system's colour.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

#: Print widths in inches: one column of a two-column paper, and the full text width.
COLUMN, PAGE = 3.3, 7.0
#: Font sizes in points at print size.
SMALL, NORMAL = 8, 9
#: Panels per row of a small-multiples grid at page width.
GRID_COLUMNS = 4

RC = {
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    "font.size": SMALL,
    "axes.titlesize": NORMAL,
    "axes.labelsize": NORMAL,
    "xtick.labelsize": SMALL,
    "ytick.labelsize": SMALL,
    "legend.fontsize": SMALL,
    "legend.title_fontsize": SMALL,
    "figure.titlesize": NORMAL,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 3,
    "legend.frameon": False,
    "pdf.fonttype": 42,
    "svg.fonttype": "none",
    "svg.hashsalt": "recsys_eval",  # the SVG's element ids from the figure alone, not a random salt
}

SYSTEM_PALETTE = plt.get_cmap("tab10").colors
#: Colours for series that are not systems: greys, light to dark.
OTHER_PALETTE = ("#cccccc", "#a3a3a3", "#7a7a7a", "#525252", "#292929", "#000000")


def system_colors(systems: list[str]) -> dict[str, tuple]:
    """A colour per system in the given order (the manifest's), the same in every figure."""
    return {s: SYSTEM_PALETTE[i % len(SYSTEM_PALETTE)] for i, s in enumerate(systems)}


def other_colors(names: list[str]) -> dict[str, str]:
    """A grey per name that is not a system (an estimate, a fold), in the given order."""
    return {n: OTHER_PALETTE[i % len(OTHER_PALETTE)] for i, n in enumerate(names)}


def grid(panels: int, *, width: float = PAGE, panel_height: float = 1.9, extra: float = 0.5,
         **subplots) -> tuple:
    """A small-multiples grid of ``panels`` axes at ``width``, at most :data:`GRID_COLUMNS` a row,
    unused axes hidden; ``extra`` inches of height for a legend below."""
    ncols = min(GRID_COLUMNS, panels)
    nrows = -(-panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, panel_height * nrows + extra), squeeze=False, **subplots)
    for ax in axes.flat[panels:]:
        ax.set_visible(False)
    for ax in bottom_axes(axes, panels):  # shared x: the lowest visible panel of a column keeps its ticks
        ax.xaxis.set_tick_params(labelbottom=True)
    return fig, axes


def bottom_axes(axes, panels: int) -> list:
    """The lowest visible axes of each column of a :func:`grid` of ``panels``."""
    nrows, ncols = axes.shape
    return [axes[max(r for r in range(nrows) if r * ncols + c < panels), c] for c in range(min(ncols, panels))]


def legend_below(fig, handles_from=None, *, ncols: int = 5, title: str | None = None) -> None:
    """One legend for the whole figure, centred below its panels, in at most ``ncols`` columns
    and in fewer when that row would be wider than the figure (long system names at column
    width): a legend is never cut at the figure's edges."""
    ax = handles_from if handles_from is not None else fig.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    renderer = fig.canvas.get_renderer()
    for columns in range(min(ncols, len(labels)), 0, -1):
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=columns, title=title)
        if columns == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width:
            return
        legend.remove()
