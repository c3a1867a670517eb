"""The report of a results folder: Markdown, self-contained HTML with figures, LaTeX tables."""

from recsys_eval._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "recsys_eval.report.build": ["write_report"],
    "recsys_eval.report.tables": ["summary_blocks", "to_latex", "to_markdown"],
})
