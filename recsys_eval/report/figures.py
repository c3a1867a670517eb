"""The report's figures, drawn with matplotlib in the one style of :mod:`recsys_eval.report.style`.

Each function takes tidy polars frames from a results folder and returns a Figure, or None when the
run has nothing to show for it (e.g. a single protocol has no agreement matrix). Each is drawn at a
print width (one column, 3.3 in, or the page, 7 in) and saved at exactly that size. Systems keep
one colour in every figure (:func:`recsys_eval.report.style.system_colors`, by the manifest's
order); protocols and systems come in the config's order everywhere.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from recsys_eval.compare.agreement import TIE_TOLERANCE  # noqa: E402
from recsys_eval.core import atomic  # noqa: E402
from recsys_eval.measure.metrics import MetricKey, display_label, lower_is_better  # noqa: E402
from recsys_eval.report import style  # noqa: E402

#: Kept for callers of this module: the style, palette and colours live in recsys_eval.report.style.
STYLE = style.RC
PALETTE = style.SYSTEM_PALETTE
PNG_DPI = 200
system_colors = style.system_colors


def _colors(names: list[str], colors: dict[str, tuple] | None) -> dict[str, tuple]:
    """``colors`` (the systems') extended to names it lacks with greys (series that are not
    systems never take a system's colour)."""
    known = dict(colors or {})
    return known | style.other_colors([n for n in names if n not in known])


#: The vector formats every figure is also written in (PDF for LaTeX, and SVG), each without the
#: creation date its metadata would carry: a rerun writes the same bytes.
VECTOR_FORMATS = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}


def save(fig: Figure, folder: Path, name: str) -> str:
    """Write a 200-dpi ``name.png``, ``name.pdf`` and ``name.svg`` into ``folder``; close the figure
    and return the PNG as base64, to embed in a self-contained page.

    The figure is laid out once and drawn once per format. ``savefig`` on a figure with a
    constrained layout lays it out and draws it twice for every format (a draw that places the
    panels, then the draw that renders): six layouts and six draws for three files. Here the PNG
    is rendered by one draw of the canvas, which lays the figure out on the way (at the PNG's
    resolution); the layout is then fixed (the engine removed: every position stays) and each
    vector format is rendered from it by one draw. A figure is saved at its own size (no tight
    bounding box): drawn at print width, it stays that wide, its fonts at their print size."""
    with plt.rc_context(style.RC):
        fig.set_dpi(PNG_DPI)
        fig.canvas.draw()
        buffer = io.BytesIO()
        matplotlib.image.imsave(buffer, np.asarray(fig.canvas.buffer_rgba()), format="png", dpi=PNG_DPI)
    png = buffer.getvalue()
    atomic.write_bytes(folder / f"{name}.png", png)
    # without constrained layout in the rc, the removed engine stays removed (savefig restores
    # the figure's engine after saving, and None would otherwise mean the rc's constrained one)
    with plt.rc_context(style.RC | {"figure.constrained_layout.use": False, "figure.autolayout": False}):
        fig.set_layout_engine(None)
        for ext, metadata in VECTOR_FORMATS.items():
            buffer = io.BytesIO()
            fig.savefig(buffer, format=ext, metadata=metadata)
            atomic.write_bytes(folder / f"{name}.{ext}", buffer.getvalue())
    plt.close(fig)
    return base64.b64encode(png).decode("ascii")


def _order(names: list[str], order: list[str] | None) -> list[str]:
    """``names`` in the config's ``order`` (names it lacks last, as found)."""
    if not order:
        return names
    return [n for n in order if n in names] + [n for n in names if n not in order]


def metric_against_k(summary: pl.DataFrame, metric: str, fold: str = "all", *,
                     colors: dict[str, tuple] | None = None, ylabel: str | None = None,
                     protocols: list[str] | None = None, systems: list[str] | None = None) -> Figure | None:
    """Small multiples at page width, a panel per protocol: the metric's mean against the cutoff
    k, a line per system, one legend below."""
    data = summary.filter((pl.col("metric") == metric) & (pl.col("fold") == fold) & pl.col("k").is_not_null())
    panels = _order(data.get_column("protocol").unique(maintain_order=True).to_list(), protocols)
    return _against_k(data, "protocol", panels, dict(zip(panels, panels, strict=True)),
                      ylabel or display_label(metric), colors, systems, share_y=False)


def metrics_against_k(summary: pl.DataFrame, protocol: str, fold: str = "all", *,
                      metrics: list[str] | None = None, colors: dict[str, tuple] | None = None,
                      systems: list[str] | None = None) -> Figure | None:
    """Small multiples at page width, a panel per cutoff metric (``metrics`` order): its mean
    under ``protocol`` against the cutoff k, a line per system."""
    data = summary.filter((pl.col("protocol") == protocol) & (pl.col("fold") == fold) & pl.col("k").is_not_null())
    panels = _order(data.get_column("metric").unique(maintain_order=True).to_list(), metrics)
    return _against_k(data, "metric", panels, {m: display_label(m) for m in panels}, "mean", colors, systems,
                      share_y=False)


def _against_k(data: pl.DataFrame, panel: str, panels: list[str], titles: dict[str, str], ylabel: str,
               colors: dict[str, tuple] | None, systems: list[str] | None, *, share_y: bool) -> Figure | None:
    """A panel per value of ``panel``: the mean against the cutoff k (log axis), a line per system."""
    if data.is_empty() or data.get_column("k").n_unique() < 2:
        return None
    systems = _order(data.get_column("system").unique(maintain_order=True).to_list(), systems)
    colors = _colors(systems, colors)
    ks = sorted(data.get_column("k").unique().to_list())
    with plt.rc_context(style.RC):
        fig, axes = style.grid(len(panels), sharex=True, sharey=share_y)
        for ax, value in zip(axes.flat, panels):
            for system in systems:
                part = data.filter((pl.col(panel) == value) & (pl.col("system") == system)).sort("k")
                ax.plot(part["k"], part["mean"], marker="o", label=system, color=colors[system])
            ax.set_title(titles[value])
            ax.set_xscale("log")
            ax.set_xticks(ks, [str(k) for k in ks])
            ax.minorticks_off()
        for ax in style.bottom_axes(axes, len(panels)):
            ax.set_xlabel("cutoff k")
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel)
        style.legend_below(fig, axes.flat[0])
    return fig


def systems_with_intervals(summary: pl.DataFrame, label: str, fold: str = "all", *,
                           colors: dict[str, tuple] | None = None, protocols: list[str] | None = None,
                           systems: list[str] | None = None) -> Figure | None:
    """Small multiples at page width, a panel per protocol: every system's mean of ``metric@k``
    with its confidence interval."""
    data = summary.filter(MetricKey.parse(label).rows() & (pl.col("fold") == fold))
    if data.is_empty():
        return None
    protocols = _order(data.get_column("protocol").unique(maintain_order=True).to_list(), protocols)
    systems = _order(data.get_column("system").unique(maintain_order=True).to_list(), systems)
    colors = _colors(systems, colors)
    with plt.rc_context(style.RC):
        fig, axes = style.grid(len(protocols), panel_height=0.16 * len(systems) + 0.9, extra=0.0, sharey=True)
        for ax, protocol in zip(axes.flat, protocols):
            part = data.filter(pl.col("protocol") == protocol)
            means = dict(zip(part["system"], part["mean"], strict=True))
            has_ci = "lower" in part.columns and part["lower"].is_not_null().any()
            for y, system in enumerate(systems):
                m = means.get(system)
                if m is None:
                    continue
                row = part.filter(pl.col("system") == system)
                ax.barh(y, m, color=colors[system], alpha=0.85)
                if has_ci and row["lower"][0] is not None:
                    err = [[m - row["lower"][0]], [row["upper"][0] - m]]
                    ax.errorbar(m, y, xerr=err, color="black", capsize=2, lw=0.8)
            ax.set_yticks(range(len(systems)), systems)
            ax.set_title(protocol)
            ax.set_xlabel(display_label(label))
        axes.flat[0].invert_yaxis()
    return fig


def agreement_matrix(agreement: pl.DataFrame, label: str, protocols: list[str] | None = None) -> Figure | None:
    """Kendall's tau between the system orderings of every pair of protocols, at column width,
    protocols in the config's order (as in the tables)."""
    if agreement.is_empty():
        return None
    found = list(dict.fromkeys(agreement["protocol_a"].to_list() + agreement["protocol_b"].to_list()))
    protocols = _order(found, protocols) if protocols else found
    protocols = [p for p in protocols if p in found]
    index = {p: i for i, p in enumerate(protocols)}
    tau = np.eye(len(protocols))
    for r in agreement.iter_rows(named=True):
        i, j = index[r["protocol_a"]], index[r["protocol_b"]]
        tau[i, j] = tau[j, i] = r["tau"]
    with plt.rc_context({**style.RC, "axes.grid": False}):
        fig, ax = plt.subplots(figsize=(style.COLUMN, min(style.COLUMN, 1.2 + 0.45 * len(protocols))))
        image = ax.imshow(tau, vmin=-1, vmax=1, cmap="RdBu")
        ax.set_xticks(range(len(protocols)), protocols, rotation=35, ha="right")
        ax.set_yticks(range(len(protocols)), protocols)
        for i in range(len(protocols)):
            for j in range(len(protocols)):
                ax.text(j, i, f"{tau[i, j]:.2f}", ha="center", va="center", fontsize=style.SMALL,
                        color="white" if abs(tau[i, j]) > 0.6 else "black")
        ax.set_title(f"Kendall's τ by {display_label(label)}")
        fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def tie_ranks(values: list[float], *, lower: bool) -> list[int]:
    """Competition ranks (1 = best) where values within TIE_TOLERANCE share a rank: 1, 1, 3."""
    sign = 1 if lower else -1
    return [1 + sum(sign * (w - v) < -TIE_TOLERANCE for w in values) for v in values]


def ranks_across_protocols(summary: pl.DataFrame, label: str, fold: str = "all", *,
                           colors: dict[str, tuple] | None = None, protocols: list[str] | None = None,
                           systems: list[str] | None = None) -> Figure | None:
    """Each system's rank (1 = best; tied means share a rank) under every protocol, as lines
    across protocols, at column width."""
    data = summary.filter(MetricKey.parse(label).rows() & (pl.col("fold") == fold))
    protocols = _order(data.get_column("protocol").unique(maintain_order=True).to_list(), protocols)
    if len(protocols) < 2:
        return None
    lower = lower_is_better(MetricKey.parse(label).name)
    systems = _order(data.get_column("system").unique(maintain_order=True).to_list(), systems)
    colors = _colors(systems, colors)
    ranks: dict[str, dict[str, int]] = {}
    for protocol in protocols:
        part = data.filter(pl.col("protocol") == protocol).drop_nans("mean").drop_nulls("mean")
        for system, rank in zip(part["system"], tie_ranks(part["mean"].to_list(), lower=lower), strict=True):
            ranks.setdefault(system, {})[protocol] = rank
    with plt.rc_context(style.RC):
        fig, ax = plt.subplots(figsize=(style.COLUMN, 1.6 + 0.12 * len(systems) + 0.15 * len(systems) / 3))
        for system in systems:
            xs = [i for i, p in enumerate(protocols) if p in ranks.get(system, {})]
            ax.plot(xs, [ranks[system][protocols[i]] for i in xs], marker="o", label=system, color=colors[system])
        ax.set_xticks(range(len(protocols)), protocols, rotation=30, ha="right")
        ax.set_yticks(range(1, len(systems) + 1))
        ax.invert_yaxis()
        ax.set_ylabel(f"rank by {display_label(label)}")
        style.legend_below(fig, ax, ncols=3)
    return fig


def grouped_bars(frame: pl.DataFrame, *, group: str, series: str, value: str, title: str,
                 ylabel: str, xlabel: str, colors: dict[str, tuple] | None = None,
                 names: dict[str, str] | None = None) -> Figure | None:
    """Bars of ``value`` for every ``group`` (x axis), one bar per ``series`` value, at column
    width (page width for more than 24 bars); rows without a value (e.g. the full-ranking value
    of a run without AI+1R+AN) are left out. ``names`` gives the legend's words for series values."""
    frame = frame.drop_nulls(value)
    if frame.is_empty():
        return None
    groups = frame.get_column(group).unique(maintain_order=True).to_list()
    series_values = frame.get_column(series).unique(maintain_order=True).to_list()
    colors = _colors(series_values, colors)
    width = 0.8 / len(series_values)
    wide = len(groups) * len(series_values) > 24
    with plt.rc_context(style.RC):
        fig, ax = plt.subplots(figsize=(style.PAGE if wide else style.COLUMN, 2.6))
        for j, name in enumerate(series_values):
            part = frame.filter(pl.col(series) == name)
            values = dict(zip(part[group], part[value], strict=True))
            xs = np.arange(len(groups)) + (j - (len(series_values) - 1) / 2) * width
            ax.bar(xs, [values.get(g, np.nan) for g in groups], width, label=(names or {}).get(name, str(name)),
                   color=colors[name], edgecolor="black", linewidth=0.3)
        ax.set_xticks(range(len(groups)), [str(g) for g in groups], rotation=30 if len(groups) > 4 else 0,
                      ha="right" if len(groups) > 4 else "center")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        style.legend_below(fig, ax, ncols=2 if not wide else 5)
    return fig


def lines(frame: pl.DataFrame, *, x: str, series: str, value: str, title: str, xlabel: str,
          ylabel: str, colors: dict[str, tuple] | None = None) -> Figure | None:
    """``value`` against ``x``, one line per ``series`` value (learning curves), at column width."""
    if frame.is_empty() or frame.get_column(x).n_unique() < 2:
        return None
    names = frame.get_column(series).unique(maintain_order=True).to_list()
    if colors:
        names = _order(names, list(colors))
    colors = _colors(names, colors)
    with plt.rc_context(style.RC):
        fig, ax = plt.subplots(figsize=(style.COLUMN, 2.8))
        for name in names:
            part = frame.filter(pl.col(series) == name).sort(x)
            ax.plot(part[x], part[value], marker="o", label=str(name), color=colors[name])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        style.legend_below(fig, ax, ncols=3)
    return fig


#: Axis labels of the averaged curves (recsys_eval.report.curves).
CURVE_AXES = {"roc": ("false positive rate", "true positive rate"),
              "pr": ("recall", "interpolated precision")}


def curves_by_protocol(curves: pl.DataFrame, curve: str, fold: str = "all", *,
                       colors: dict[str, tuple] | None = None, protocols: list[str] | None = None,
                       systems: list[str] | None = None) -> Figure | None:
    """Small multiples at page width with shared axes, a panel per protocol: each system's
    averaged ``curve`` (``"roc"`` or ``"pr"``, means over units), with the chance diagonal on ROC
    panels."""
    data = curves.filter((pl.col("curve") == curve) & (pl.col("fold") == fold)).drop_nulls("y")
    if data.is_empty():
        return None
    protocols = _order(data.get_column("protocol").unique(maintain_order=True).to_list(), protocols)
    systems = _order(data.get_column("system").unique(maintain_order=True).to_list(), systems)
    colors = _colors(systems, colors)
    xlabel, ylabel = CURVE_AXES[curve]
    with plt.rc_context(style.RC):
        fig, axes = style.grid(len(protocols), sharex=True, sharey=True)
        for ax, protocol in zip(axes.flat, protocols):
            if curve == "roc":
                ax.plot([0, 1], [0, 1], color="0.7", lw=0.8, ls="--")
            for system in systems:
                part = data.filter((pl.col("protocol") == protocol) & (pl.col("system") == system)).sort("x")
                if part.height:
                    ax.plot(part["x"], part["y"], label=system, color=colors[system],
                            marker="o" if curve == "pr" else None)
            ax.set_title(protocol)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.02)
        for ax in style.bottom_axes(axes, len(protocols)):
            ax.set_xlabel(xlabel)
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel)
        style.legend_below(fig, axes.flat[0])
    return fig
