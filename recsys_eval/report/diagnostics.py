"""The report's diagnostics of the evaluation itself (issue 31): the leakage audit of the splits.

Each function returns a :class:`~recsys_eval.report.build.Section`, or None when the results folder
has nothing for it; :func:`diagnostic_sections` is the one hook :mod:`recsys_eval.report.build` calls.
"""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from recsys_eval.core.results import LEAKAGE, ResultsFolder
from recsys_eval.report.build import Section, _html_table, _md_table

#: The leakage shares as the report names them (docs/CONVENTIONS.md#leakage).
LEAKAGE_COLUMNS = {
    "share_after_test_start": "train after test start",
    "share_after_user_test": "train after the user's test",
    "share_future_items": "test items first trained on later",
    "share_users_leaking": "test users with later training",
}


def diagnostic_sections(folder: Path) -> list[Section]:
    """Every diagnostic section the folder has data for."""
    return [s for s in (leakage_section(folder),) if s is not None]


def leakage_section(folder: Path) -> Section | None:
    """The leakage audit per fold, the shares above the threshold named in the verdict."""
    audit = ResultsFolder(folder).table(LEAKAGE)
    if audit is None or audit.is_empty():
        return None
    threshold = audit.get_column("threshold")[0]
    flagged = audit.filter(pl.col("flagged").list.len() > 0)
    if flagged.height:
        names = sorted({LEAKAGE_COLUMNS[s] for s in flagged.get_column("flagged").explode().to_list()})
        verdict = (f"**Leakage flagged** in {flagged.height} of {audit.height} fold(s): {', '.join(names)} above "
                   f"{threshold:.0%}. The models were trained on interactions from after the moments they are "
                   "tested at; values and even the ordering of systems may differ under a split that follows "
                   "the global timeline (a `time` split).")
    else:
        verdict = f"No share is above {threshold:.0%}: the folds respect the global timeline."
    note = ("Ji, Sun, Zhang & Li (TOIS 2023): with T0 the earliest test time of a fold and tau_u a user's "
            "earliest test time, the shares of training interactions later than T0 and later than their "
            "user's tau_u, of test interactions whose item was first trained on after tau_u, and of test "
            "users with any training interaction after tau_u. Per user: leakage_users.parquet.")
    table = audit.select("fold", *[pl.col(s).round(4).alias(t) for s, t in LEAKAGE_COLUMNS.items()])
    return Section("leakage", "Leakage audit",
                   markdown=f"{verdict}\n\n{note}\n\n{_md_table(table)}",
                   html=f"<p>{html.escape(verdict.replace('**', '').replace('`', ''))}</p><p class=\"note\">{html.escape(note)}</p>"
                   + _html_table(table))
