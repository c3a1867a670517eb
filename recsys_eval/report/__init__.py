"""The report of a results folder: Markdown, self-contained HTML with figures, LaTeX tables."""

from recsys_eval.report.build import write_report
from recsys_eval.report.tables import summary_blocks, to_latex, to_markdown

__all__ = ["summary_blocks", "to_latex", "to_markdown", "write_report"]
