"""The summary printed after a run: one table per protocol in config order, systems in config
order, the chosen columns in paper labels, never wider than the terminal (columns that do not fit
are named below the table, never cut or split into parts)."""

from __future__ import annotations

import itertools

import polars as pl
from rich.console import Console

from recsys_eval.core.results import Manifest
from recsys_eval.experiment.summary_table import print_summary

PROTOCOLS = ["TI+AR+AN", "AI+1R+NN100", "AI+AR+AN"]  # config order, not alphabetical
SYSTEMS = ["random", "popular", "item_knn", "als"]


def _summary() -> pl.DataFrame:
    rows = []
    for (p, protocol), (s, system), fold in itertools.product(enumerate(PROTOCOLS), enumerate(SYSTEMS), ["all"]):
        for metric, k in [(m, k) for m in ("precision", "recall", "ndcg", "ap", "rr", "hit") for k in (5, 10, 20)]:
            rows.append((system, protocol, fold, metric, k, 0.1 * s + 0.01 * p + k / 1000))
        rows.append((system, protocol, fold, "auc", None, 0.5 + 0.1 * s))
    return pl.DataFrame(rows, schema=["system", "protocol", "fold", "metric", "k", "mean"], orient="row")


def _print(width: int, columns: list[str] | None = None) -> str:
    console = Console(width=width, record=True, color_system=None)
    print_summary(console, _summary(), manifest=Manifest(protocols=PROTOCOLS, systems=SYSTEMS), columns=columns)
    return console.export_text()


def test_default_columns_fit_80_columns_in_config_order():
    text = _print(80)
    assert max(map(len, text.splitlines())) <= 80
    titles = [line.split(" (fold")[0] for line in text.splitlines() if "(fold all)" in line]
    assert titles == PROTOCOLS
    assert "part" not in text and "MRR" not in text and "HR" not in text
    table = text[text.index("TI+AR+AN"):text.index("AI+1R+NN100")]
    header = next(line for line in table.splitlines() if "system" in line)
    # the main metrics at the two largest cutoffs, as papers label them
    assert header.split() == ["system", "P@10", "P@20", "R@10", "R@20", "nDCG@10", "nDCG@20", "MAP@10", "MAP@20"]
    body = [line.split() for line in table.splitlines() if line.split() and line.split()[0] in SYSTEMS]
    assert [row[0] for row in body] == SYSTEMS
    assert body[1][1] == f"{0.1 + 0.01 * 0 + 10 / 1000:.4f}"  # popular, P@10


def test_columns_that_do_not_fit_are_named_not_cut():
    text = _print(50)
    assert max(map(len, text.splitlines())) <= 50
    assert "not shown at this width: " in text and "MAP@20" in text.split("not shown at this width: ")[1]


def test_chosen_columns_keep_their_order():
    text = _print(80, columns=["auc", "ndcg@5", "rr@10"])
    header = next(line for line in text.splitlines() if line.lstrip().startswith("system"))
    assert header.split() == ["system", "AUC", "nDCG@5", "MRR@10"]
