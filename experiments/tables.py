"""The tables of experiments/README.md, generated from a results folder, so that every number there
can be regenerated and checked:

    uv run python experiments/tables.py RESULTS_FOLDER [--metric ndcg@10] [--sampled AI+1R+NN100]

prints, in Markdown: the metric for every system under every protocol (fold ``all``, the mean of
the fold means; best per column in bold), the sampled-metric correction table, the protocol
agreement of every protocol with full ranking, the exposure of each system's recommendations in the
most popular bin, and the aggregation audit (F-measure and AUC variants). Each table is printed with
the command that made it, for the README to quote beside it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from recsys_eval.compare.study import run_rows
from recsys_eval.core.results import ResultsFolder


def _cell(value: float | None, best: bool = False, digits: int = 3) -> str:
    if value is None or value != value:
        return "–"
    text = f"{value:.{digits}f}"
    return f"**{text}**" if best else text


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def design_table(folder: ResultsFolder, label: str) -> str:
    """``label`` (``metric@k``) for every system (rows, by the first protocol) and protocol (columns)."""
    summary = folder.table("summary")
    run = run_rows(summary, folder.manifest.folds).filter(pl.col("name") == label)
    protocols = [p for p in folder.manifest.protocols if p in set(run["protocol"])]
    wide = run.pivot(on="protocol", index="system", values="mean")
    wide = wide.sort(protocols[0], descending=True, nulls_last=True)
    best = {p: wide[p].max() for p in protocols}
    rows = [[system, *(_cell(row[p], row[p] == best[p]) for p in protocols)]
            for system, row in zip(wide["system"], wide.iter_rows(named=True), strict=True)]
    return _markdown(["system", *protocols], rows)


def sampled_table(folder: ResultsFolder, protocol: str, label: str) -> str:
    """Sampled, rank-rescaled, corrected and full values of ``label`` under a 1R+NN protocol."""
    table = folder.table("sampled_correction")
    if table is None:
        return "(no 1R+NN protocol in this run)"
    metric, _, k = label.partition("@")
    part = table.filter((pl.col("protocol") == protocol) & (pl.col("metric") == metric)
                        & (pl.col("k") == int(k) if k else pl.col("k").is_null()))
    wide = part.pivot(on="estimate", index="system", values="value")
    order = [c for c in ("sampled", "rescale", "bias_variance", "full") if c in wide.columns]
    wide = wide.sort(order[-1], descending=True, nulls_last=True)
    return _markdown([f"{label} under {protocol}", *order],
                     [[r["system"], *(_cell(r[c]) for c in order)] for r in wide.iter_rows(named=True)])


def agreement_table(folder: ResultsFolder, label: str, reference: str = "AI+AR+AN") -> str:
    """Kendall's tau of each protocol's system ordering against ``reference``, and the pairs swapped."""
    table = folder.table("agreement")
    if table is None:
        return "(one protocol only)"
    metric, _, k = label.partition("@")
    part = table.filter((pl.col("metric") == metric) & (pl.col("k") == int(k) if k else pl.col("k").is_null())
                        & ((pl.col("protocol_a") == reference) | (pl.col("protocol_b") == reference)))
    rows = []
    for row in part.iter_rows(named=True):
        other = row["protocol_b"] if row["protocol_a"] == reference else row["protocol_a"]
        rows.append([other, _cell(row["tau"], digits=2), str(len(row["swaps"]))])
    return _markdown([f"against {reference} ({label})", "Kendall's tau", "pairs swapped"], rows)


def exposure_table(folder: ResultsFolder) -> str:
    table = folder.table("exposure")
    if table is None:
        return "(no full-ranking protocol)"
    top = table.filter(pl.col("bin") == pl.col("bin").max())
    first = top["protocol"][0]
    top = top.filter(pl.col("protocol") == first).sort("share", descending=True)
    return _markdown([f"share of top-k in the most popular bin ({first})", "share"],
                     [[s, f"{v:.0%}"] for s, v in top.select("system", "share").iter_rows()])


def audit_tables(folder: ResultsFolder, label: str) -> str:
    out = []
    f = folder.table("aggregation_f")
    if f is not None:
        metric, _, k = label.partition("@")
        part = f.filter((pl.col("protocol") == "AI+AR+AN") & (pl.col("k") == (int(k) if k else 10)))
        columns = ["F_tp_fp", "F_avg", "F_avg_skip", "F_pr_re", "F_pr_re_skip"]
        out.append(_markdown(["F1 over folds, AI+AR+AN", *columns],
                             [[r["system"], *(_cell(r[c], digits=4) for c in columns)]
                              for r in part.sort("F_tp_fp", descending=True).iter_rows(named=True)]))
    auc = folder.table("aggregation_auc")
    if auc is not None:
        part = auc.filter(pl.col("protocol") == "AI+1R+AN") if "AI+1R+AN" in set(auc["protocol"]) else auc
        out.append(_markdown([f"AUC, {part['protocol'][0]}", "per user (reported)", "AUC_avg", "AUC_merge"],
                             [[r["system"], _cell(r["auc"]), _cell(r["auc_avg"]), _cell(r["auc_merge"])]
                              for r in part.sort("auc", descending=True).iter_rows(named=True)]))
        gap = (auc["auc_merge"] - auc["auc_avg"]).abs().max()
        out.append(f"largest |AUC_merge - AUC_avg| over every system and protocol: {gap:.4f}")
    return "\n\n".join(out) or "(not cross-validated)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--metric", default="ndcg@10")
    parser.add_argument("--sampled", default="AI+1R+NN100")
    args = parser.parse_args()
    folder = ResultsFolder.open(args.folder)
    command = f"uv run python experiments/tables.py {args.folder} --metric {args.metric}"
    m = folder.manifest
    print(f"<!-- generated by: {command} -->")
    print(f"Run of {(m.created or '')[:10]} (seed {m.seed}, recsys_eval {m.versions.get('recsys-eval', '?')}), "
          f"folds {', '.join(m.folds)}.\n")
    for title, table in (
        (f"{args.metric} by protocol", design_table(folder, args.metric)),
        ("sampled-metric correction", sampled_table(folder, args.sampled, args.metric)),
        ("protocol agreement", agreement_table(folder, args.metric)),
        ("exposure", exposure_table(folder)),
        ("aggregation audit", audit_tables(folder, args.metric)),
    ):
        print(f"#### {title}\n\n{table}\n")


if __name__ == "__main__":
    main()
