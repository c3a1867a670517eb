"""The report's first screen: what was run (dataset, split, relevance threshold, protocols) and who
won under each protocol by the headline metric, with its 95% interval, as plain lines that
report.md, report.html and the terminal all print.

A winner is every system within ``TIE_TOLERANCE`` of the best mean (a tie is named as one); the
interval is the summary's (``lower``, ``upper``), absent for runs without intervals.
"""

from __future__ import annotations

import polars as pl

from recsys_eval.compare.agreement import TIE_TOLERANCE
from recsys_eval.core.results import Manifest
from recsys_eval.measure.metrics import MetricKey, display_label, lower_is_better


def _params(params: dict) -> str:
    """``fraction = 0.2, per_user = true`` (lists shortened to their ends: ``u1..u5``)."""
    def value(v: object) -> str:
        if isinstance(v, list):
            return f"{v[0]}..{v[-1]}" if len(v) > 3 else ", ".join(map(str, v))
        return str(v).lower() if isinstance(v, bool) else str(v)
    return ", ".join(f"{k} = {value(v)}" for k, v in params.items())


def split_text(split: dict, folds: list[str]) -> str:
    """The config's ``[split]`` in words: its method, parameters and the folds it made."""
    method = split.get("method", "?")
    params = _params(split.get("params") or {})
    fold_text = f"{len(folds)} folds" if len(folds) > 1 else "one fold"
    return f"{method}" + (f" ({params})" if params else "") + f", {fold_text}"


def winners(summary: pl.DataFrame, label: str, fold: str, protocols: list[str]) -> list[tuple[str, str]]:
    """Per protocol (in the given order): the winner(s) by ``label`` with mean and interval, as
    ``(protocol, text)``; a protocol without the metric is left out."""
    key = MetricKey.parse(label)
    data = summary.filter(key.rows() & (pl.col("fold") == fold) & pl.col("mean").is_not_nan())
    lower = lower_is_better(key.name)
    out = []
    for protocol in protocols:
        part = data.filter(pl.col("protocol") == protocol)
        if part.is_empty():
            continue
        best = part.get_column("mean").min() if lower else part.get_column("mean").max()
        top = part.filter((pl.col("mean") - best).abs() <= TIE_TOLERANCE)
        texts = []
        for row in top.iter_rows(named=True):
            text = f"{row['system']} {row['mean']:.4f}"
            if row.get("lower") is not None and row["lower"] == row["lower"]:
                text += f" [{row['lower']:.4f}, {row['upper']:.4f}]"
            texts.append(text)
        tie = f" (tied: {top.height} systems)" if top.height > 1 else ""
        out.append((protocol, " = ".join(texts) + tie))
    return out


def first_screen(manifest: Manifest, config: dict, summary: pl.DataFrame, headline: str,
                 fold: str) -> list[tuple[str, str]]:
    """The first screen as ``(term, text)`` lines: dataset, split, relevance, protocols, then the
    winner under each protocol by ``headline``."""
    data = manifest.dataset or "?"
    counts = [f"{n:,} {what}" for n, what in ((manifest.users, "users"), (manifest.items, "items"),
                                               (manifest.interactions, "interactions")) if n is not None]
    if counts:  # an evaluated run file knows its users and items, not the interactions of a dataset
        data += f" ({', '.join(counts)})"
    threshold = manifest.relevance_threshold
    lines = [
        ("dataset", data),
        ("split", split_text(config.get("split", {}), manifest.folds)),
        ("relevant", f"rating >= {threshold:g}" if threshold is not None else "every interaction"),
        ("protocols", ", ".join(manifest.protocols)),
        ("systems", ", ".join(manifest.systems) + (f" (baseline {manifest.baseline})" if manifest.baseline else "")),
    ]
    where = "mean of fold means, 95% interval" if fold == "all" else f"fold {fold}, mean with 95% interval"
    lines.append(("winner", f"by {display_label(headline)} ({where})"))
    lines += [(f"  {protocol}", text) for protocol, text in winners(summary, headline, fold, manifest.protocols)]
    return lines


def print_first_screen(console, folder, summary: pl.DataFrame, headline: str) -> None:
    """The first screen of a results folder on a rich console, after a run's tables."""
    from recsys_eval.core.results import ResultsFolder
    from recsys_eval.report.choice import config_table

    manifest = ResultsFolder(folder).manifest
    folds = summary.get_column("fold").unique().to_list()
    fold = "all" if "all" in folds else folds[0]
    for term, text in first_screen(manifest, {"split": config_table(folder, "split")}, summary, headline, fold):
        console.print(f"{term + ':':<12} {text}" if not term.startswith(" ") else f"{term}: {text}", highlight=False,
                      markup=False, soft_wrap=True)
