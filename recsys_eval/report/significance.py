"""Significance against the baseline as one compact matrix per protocol: systems as rows, the
report's columns (``metric@k``) as columns, a mark where the difference is significant after the
run's multiple-testing correction (docs/CONVENTIONS.md#comparing-systems).

A cell of a one-fold test (or the paired t over fold means) holds the difference system - baseline
with ▲ (significantly better) or ▼ (significantly worse), better meaning higher or lower as the
metric says; its effect size (Cohen's d), interval and p-values are the cell's hover title in HTML
and, per system, a footnote in Markdown. A cell of per-fold tests counts the folds where the
system is significantly better and worse. The matrix shows one test (the first the config lists);
where another test decides a cell differently, a note names the cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from recsys_eval.measure.metrics import MetricKey, display_label, lower_is_better
from recsys_eval.report.tables import format_p

BETTER, WORSE = "▲", "▼"


@dataclass(frozen=True)
class MatrixCell:
    text: str
    title: str
    d: float | None


@dataclass(frozen=True)
class Matrix:
    """One protocol's matrix for one test: ``rows[system][label]``, and the notes under it."""

    protocol: str
    test: str
    columns: list[str]
    rows: dict[str, dict[str, MatrixCell]]
    notes: list[str]


def _decisions(paired: pl.DataFrame, alpha: float) -> pl.DataFrame:
    """``paired`` with its label and decision: 1 significantly better, -1 worse, 0 neither."""
    lower = pl.col("metric").map_elements(lower_is_better, return_dtype=pl.Boolean)
    better = pl.when(lower).then(pl.col("mean_diff") < 0).otherwise(pl.col("mean_diff") > 0)
    return paired.with_columns(
        MetricKey.label_column().alias("label"),
        pl.when(pl.col("p_adjusted") < alpha).then(pl.when(better).then(1).otherwise(-1)).otherwise(0)
        .alias("decision"),
    )


def _cell(rows: list[dict]) -> MatrixCell:
    """One cell from its rows (one per fold)."""
    if len(rows) > 1:
        up = sum(r["decision"] == 1 for r in rows)
        down = sum(r["decision"] == -1 for r in rows)
        text = " ".join(part for part in (f"{up}{BETTER}" if up else "", f"{down}{WORSE}" if down else "") if part)
        return MatrixCell(f"{text or '·'} /{len(rows)}", f"significant in {up + down} of {len(rows)} folds", None)
    r = rows[0]
    mark = {1: f" {BETTER}", -1: f" {WORSE}", 0: ""}[r["decision"]]
    d = r.get("cohens_d")
    title = (f"difference {r['mean_diff']:+.4f} [{r['diff_lower']:+.4f}, {r['diff_upper']:+.4f}], "
             f"Cohen's d {d:+.2f}, p {format_p(r['p_value'])}, adjusted {format_p(r['p_adjusted'])}, n {r['n']}"
             if d is not None and d == d else f"difference {r['mean_diff']:+.4f}, p adjusted {format_p(r['p_adjusted'])}")
    return MatrixCell(f"{r['mean_diff']:+.4f}{mark}", title, d if d is not None and d == d else None)


def matrices(paired: pl.DataFrame, *, columns: list[str], alpha: float, tests: list[str],
             protocols: list[str] | None = None, systems: list[str] | None = None) -> list[Matrix]:
    """One :class:`Matrix` per protocol (config order) of ``paired`` (``paired_tests`` rows), over
    the ``columns`` it has, systems in config order, for the first of ``tests`` it holds."""
    data = _decisions(paired.filter(MetricKey.label_column().is_in(columns)), alpha)
    held = data.get_column("test").unique(maintain_order=True).to_list()
    order = [t for t in tests if t in held] + [t for t in held if t not in tests]
    if not order:
        return []
    shown_test, others = order[0], order[1:]
    present = data.get_column("protocol").unique(maintain_order=True).to_list()
    out = []
    for protocol in [p for p in protocols or present if p in present]:
        part = data.filter(pl.col("protocol") == protocol)
        labels = [c for c in columns if c in set(part.get_column("label"))]
        names = part.get_column("system").unique(maintain_order=True).to_list()
        names = [s for s in systems or names if s in names]
        rows: dict[str, dict[str, MatrixCell]] = {}
        decided: dict[tuple, list[int]] = {}
        for (system, label, test), group in part.group_by(["system", "label", "test"], maintain_order=True):
            records = group.sort("fold").to_dicts()
            decided[(system, label, test)] = [r["decision"] for r in records]
            if test == shown_test:
                rows.setdefault(system, {})[label] = _cell(records)
        notes = _disagreements(decided, shown_test, others)
        out.append(Matrix(protocol, shown_test, labels, {s: rows[s] for s in names if s in rows}, notes))
    return out


def _disagreements(decided: dict[tuple, list[int]], shown: str, others: list[str]) -> list[str]:
    """A note per other test: the cells it decides unlike the shown test, or that it agrees."""
    notes = []
    for test in others:
        differ = [f"{system} {display_label(label)}" for (system, label, t), values in decided.items()
                  if t == test and decided.get((system, label, shown)) not in (None, values)]
        notes.append(f"{test}: decides every cell alike" if not differ else
                     f"{test}: decides {len(differ)} cell(s) differently: {', '.join(differ)}")
    return notes


def effect_note(matrix: Matrix) -> str:
    """Per system, the range of Cohen's d (mean difference over the sd of the differences) over the
    matrix's columns: the Markdown footnote of the effect sizes."""
    parts = []
    for system, cells in matrix.rows.items():
        ds = [c.d for c in cells.values() if c.d is not None]
        if ds:
            parts.append(f"{system} {min(ds):+.2f}" + (f" to {max(ds):+.2f}" if len(ds) > 1 else ""))
    return "Cohen's d over the columns: " + "; ".join(parts) + "." if parts else ""
