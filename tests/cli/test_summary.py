"""The summary printed after a run: one table per protocol in config order, systems in config
order, the chosen columns in paper labels (default: every metric asked for, at one cutoff), never
wider than the terminal (columns that do not fit continue in a second table, never cut or dropped)."""

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
    assert "continued" not in text
    table = text[text.index("TI+AR+AN"):text.index("AI+1R+NN100")]
    header = next(line for line in table.splitlines() if "system" in line)
    # every metric measured, at the smallest-but-one cutoff (10 of 5, 10, 20), as papers label them
    assert header.split() == ["system", "P@10", "R@10", "nDCG@10", "MAP@10", "MRR@10", "HR@10", "AUC"]
    body = [line.split() for line in table.splitlines() if line.split() and line.split()[0] in SYSTEMS]
    assert [row[0] for row in body] == SYSTEMS
    assert body[1][1] == f"{0.1 + 0.01 * 0 + 10 / 1000:.4f}"  # popular, P@10


def test_default_columns_follow_the_config_and_the_tuning_cutoff():
    from recsys_eval.report.tables import default_columns, main_label, table_cutoff

    assert table_cutoff([1, 5, 10, 20, 50]) == 5 and table_cutoff([10]) == 10 and table_cutoff([]) is None
    assert table_cutoff([1, 5, 10, 20, 50], tuned=10) == 10 and table_cutoff([5, 20], tuned=10) == 20
    columns = default_columns(_summary(), metrics=["ndcg", "auc", "precision"], tuned="ndcg@20")
    assert columns == ["ndcg@20", "auc", "precision@20", "recall@20", "ap@20", "rr@20", "hit@20"]
    assert main_label(columns) == "ndcg@20" and main_label(["auc", "ndcg@5"], tuned="rr@10") == "rr@10"
    assert main_label(["auc", "precision@5"]) == "auc"


def test_columns_that_do_not_fit_continue_in_another_table():
    text = _print(50)
    assert max(map(len, text.splitlines())) <= 50
    assert "not shown" not in text and "TI+AR+AN (fold all, continued)" in text
    block = text[text.index("TI+AR+AN (fold all)"):text.index("AI+1R+NN100 (fold all)")]
    headers = [line.split()[1:] for line in block.splitlines() if line.lstrip().startswith("system")]
    assert len(headers) > 1 and sum(headers, []) == ["P@10", "R@10", "nDCG@10", "MAP@10", "MRR@10", "HR@10", "AUC"]


def test_chosen_columns_keep_their_order():
    text = _print(80, columns=["auc", "ndcg@5", "rr@10"])
    header = next(line for line in text.splitlines() if line.lstrip().startswith("system"))
    assert header.split() == ["system", "AUC", "nDCG@5", "MRR@10"]
