"""The report's figures, drawn with matplotlib in one consistent style.

Each function takes tidy polars frames from a results folder and returns a Figure, or None when the
run has nothing to show for it (e.g. a single protocol has no agreement matrix). Systems keep one
colour in every figure: :func:`system_colors` keys a fixed palette on the manifest's system order.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from recsys_eval.core import atomic  # noqa: E402
from recsys_eval.measure.metrics import MetricKey, display_label, lower_is_better  # noqa: E402

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
    "legend.fontsize": 9,
}
PALETTE = plt.get_cmap("tab10").colors
PNG_DPI = 200


def system_colors(systems: list[str]) -> dict[str, tuple]:
    """A colour per name in the given order (the manifest's systems), the same in every figure."""
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(systems)}


def _colors(names: list[str], colors: dict[str, tuple] | None) -> dict[str, tuple]:
    """``colors`` extended to names it lacks (series that are not systems), in a stable order."""
    known = dict(colors or {})
    spare = [c for c in PALETTE if c not in known.values()] or list(PALETTE)
    for i, name in enumerate(n for n in names if n not in known):
        known[name] = spare[i % len(spare)]
    return known


def save(fig: Figure, folder: Path, name: str) -> str:
    """Write ``name.pdf``, ``name.svg`` and a 200-dpi ``name.png`` into ``folder``; close the figure
    and return the PNG as base64, to embed in a self-contained page."""
    png = b""
    # the tight bounding box once, from one draw, for all three files: bbox_inches="tight" would
    # draw the figure twice per file (once to measure it), a third of the report's time
    fig.canvas.draw()
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(plt.rcParams["savefig.pad_inches"])
    for ext in ("pdf", "svg", "png"):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=ext, dpi=PNG_DPI, bbox_inches=bbox)
        atomic.write_bytes(folder / f"{name}.{ext}", buffer.getvalue())
        png = buffer.getvalue()
    plt.close(fig)
    return base64.b64encode(png).decode("ascii")


def metric_against_k(summary: pl.DataFrame, metric: str, fold: str = "all", *,
                     colors: dict[str, tuple] | None = None, ylabel: str | None = None) -> Figure | None:
    """One panel per protocol: the metric's mean against the cutoff k, a line per system."""
    data = summary.filter(
        (pl.col("metric") == metric) & (pl.col("fold") == fold) & pl.col("k").is_not_null()
    )
    if data.get_column("k").n_unique() < 2:
        return None
    protocols = data.get_column("protocol").unique(maintain_order=True).to_list()
    systems = data.get_column("system").unique(maintain_order=True).to_list()
    colors = _colors(systems, colors)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1, len(protocols), figsize=(3.6 * len(protocols), 3.2), squeeze=False, sharey=False
        )
        for ax, protocol in zip(axes[0], protocols, strict=True):
            for system in systems:
                part = data.filter((pl.col("protocol") == protocol) & (pl.col("system") == system)).sort("k")
                ax.plot(part["k"], part["mean"], marker="o", ms=3, label=system, color=colors[system])
            ax.set_title(protocol)
            ax.set_xlabel("cutoff k")
            ax.set_ylabel(ylabel or display_label(metric))
        axes[0][-1].legend(loc="center left", bbox_to_anchor=(1, 0.5))
        fig.tight_layout()
    return fig


def systems_with_intervals(summary: pl.DataFrame, label: str, fold: str = "all", *,
                           colors: dict[str, tuple] | None = None) -> Figure | None:
    """One panel per protocol: every system's mean of ``metric@k`` with its confidence interval."""
    data = summary.filter(MetricKey.parse(label).rows() & (pl.col("fold") == fold))
    if data.is_empty():
        return None
    protocols = data.get_column("protocol").unique(maintain_order=True).to_list()
    systems = data.get_column("system").unique(maintain_order=True).to_list()
    colors = _colors(systems, colors)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1, len(protocols), figsize=(3.2 * len(protocols), 0.35 * len(systems) + 1.4),
            squeeze=False,
        )
        for ax, protocol in zip(axes[0], protocols, strict=True):
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
                    ax.errorbar(m, y, xerr=err, color="black", capsize=3, lw=1)
            ax.set_yticks(range(len(systems)), systems)
            ax.invert_yaxis()
            ax.set_title(protocol)
            ax.set_xlabel(display_label(label))
        fig.tight_layout()
    return fig


def agreement_matrix(agreement: pl.DataFrame, label: str) -> Figure | None:
    """Kendall's tau between the system orderings of every pair of protocols."""
    if agreement.is_empty():
        return None
    protocols = list(dict.fromkeys(agreement["protocol_a"].to_list() + agreement["protocol_b"].to_list()))
    index = {p: i for i, p in enumerate(protocols)}
    tau = np.eye(len(protocols))
    for r in agreement.iter_rows(named=True):
        i, j = index[r["protocol_a"]], index[r["protocol_b"]]
        tau[i, j] = tau[j, i] = r["tau"]
    with plt.rc_context({**STYLE, "axes.grid": False}):
        size = 1.0 + 0.8 * len(protocols)
        fig, ax = plt.subplots(figsize=(size + 1.2, size))
        image = ax.imshow(tau, vmin=-1, vmax=1, cmap="RdBu")
        ax.set_xticks(range(len(protocols)), protocols, rotation=45, ha="right")
        ax.set_yticks(range(len(protocols)), protocols)
        for i in range(len(protocols)):
            for j in range(len(protocols)):
                ax.text(j, i, f"{tau[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if abs(tau[i, j]) > 0.6 else "black")
        ax.set_title(f"Kendall's tau of system orderings ({display_label(label)})")
        fig.colorbar(image, ax=ax, shrink=0.8)
        fig.tight_layout()
    return fig


def ranks_across_protocols(summary: pl.DataFrame, label: str, fold: str = "all", *,
                           colors: dict[str, tuple] | None = None) -> Figure | None:
    """Each system's rank (1 = best) under every protocol, as lines across protocols."""
    data = summary.filter(MetricKey.parse(label).rows() & (pl.col("fold") == fold))
    protocols = data.get_column("protocol").unique(maintain_order=True).to_list()
    if len(protocols) < 2:
        return None
    data = data.with_columns(
        pl.col("mean").rank("ordinal", descending=not lower_is_better(MetricKey.parse(label).name))
        .over("protocol").alias("rank")
    )
    systems = data.get_column("system").unique(maintain_order=True).to_list()
    colors = _colors(systems, colors)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(1.3 * len(protocols) + 2.5, 0.35 * len(systems) + 1.8))
        for system in systems:
            part = data.filter(pl.col("system") == system)
            ranks = dict(zip(part["protocol"], part["rank"], strict=True))
            xs = [i for i, p in enumerate(protocols) if p in ranks]
            ax.plot(xs, [ranks[protocols[i]] for i in xs], marker="o", label=system, color=colors[system])
        ax.set_xticks(range(len(protocols)), protocols, rotation=30, ha="right")
        ax.set_xlabel("protocol")
        ax.set_yticks(range(1, len(systems) + 1))
        ax.invert_yaxis()
        ax.set_ylabel(f"rank by {display_label(label)}")
        ax.legend(loc="center left", bbox_to_anchor=(1, 0.5))
        fig.tight_layout()
    return fig


def grouped_bars(frame: pl.DataFrame, *, group: str, series: str, value: str, title: str,
                 ylabel: str, xlabel: str, colors: dict[str, tuple] | None = None) -> Figure | None:
    """Bars of ``value`` for every ``group`` (x axis), one bar per ``series`` value; rows without a
    value (e.g. the full-ranking value of a run without AI+1R+AN) are left out."""
    frame = frame.drop_nulls(value)
    if frame.is_empty():
        return None
    groups = frame.get_column(group).unique(maintain_order=True).to_list()
    names = frame.get_column(series).unique(maintain_order=True).to_list()
    colors = _colors(names, colors)
    width = 0.8 / len(names)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(groups) * max(1, len(names) / 3)), 3.4))
        for j, name in enumerate(names):
            part = frame.filter(pl.col(series) == name)
            values = dict(zip(part[group], part[value], strict=True))
            xs = np.arange(len(groups)) + (j - (len(names) - 1) / 2) * width
            ax.bar(xs, [values.get(g, np.nan) for g in groups], width, label=str(name), color=colors[name])
        ax.set_xticks(range(len(groups)), [str(g) for g in groups], rotation=20, ha="right")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(loc="center left", bbox_to_anchor=(1, 0.5))
        fig.tight_layout()
    return fig


def lines(frame: pl.DataFrame, *, x: str, series: str, value: str, title: str, xlabel: str,
          ylabel: str, colors: dict[str, tuple] | None = None) -> Figure | None:
    """``value`` against ``x``, one line per ``series`` value (learning curves)."""
    if frame.is_empty() or frame.get_column(x).n_unique() < 2:
        return None
    names = frame.get_column(series).unique(maintain_order=True).to_list()
    colors = _colors(names, colors)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(5.5, 3.4))
        for name in names:
            part = frame.filter(pl.col(series) == name).sort(x)
            ax.plot(part[x], part[value], marker="o", ms=3, label=str(name), color=colors[name])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(loc="center left", bbox_to_anchor=(1, 0.5))
        fig.tight_layout()
    return fig


#: Axis labels of the averaged curves (recsys_eval.report.curves).
CURVE_AXES = {"roc": ("false positive rate", "true positive rate (mean over units)"),
              "pr": ("recall", "interpolated precision (mean over units)")}


def curves_by_protocol(curves: pl.DataFrame, curve: str, fold: str = "all", *,
                       colors: dict[str, tuple] | None = None) -> Figure | None:
    """One panel per protocol: each system's averaged ``curve`` (``"roc"`` or ``"pr"``), with the
    chance diagonal on ROC panels."""
    data = curves.filter((pl.col("curve") == curve) & (pl.col("fold") == fold)).drop_nulls("y")
    if data.is_empty():
        return None
    protocols = data.get_column("protocol").unique(maintain_order=True).to_list()
    systems = data.get_column("system").unique(maintain_order=True).to_list()
    colors = _colors(systems, colors)
    xlabel, ylabel = CURVE_AXES[curve]
    with plt.rc_context(STYLE):
        ncols = min(3, len(protocols))
        nrows = -(-len(protocols) // ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols + 1.5, 3.1 * nrows), squeeze=False)
        for ax in axes.flat[len(protocols):]:
            ax.set_visible(False)
        for ax, protocol in zip(axes.flat, protocols):
            if curve == "roc":
                ax.plot([0, 1], [0, 1], color="0.7", lw=0.8, ls="--")
            for system in systems:
                part = data.filter((pl.col("protocol") == protocol) & (pl.col("system") == system)).sort("x")
                if part.height:
                    ax.plot(part["x"], part["y"], label=system, color=colors[system],
                            marker="o" if curve == "pr" else None, ms=3)
            ax.set_title(protocol)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.02)
        axes[0][ncols - 1].legend(loc="center left", bbox_to_anchor=(1, 0.5))
        fig.tight_layout()
    return fig
