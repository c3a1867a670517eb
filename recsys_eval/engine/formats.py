"""Which run and judgment formats ``evaluate --engine spark`` reads, and how Spark reads them
(docs/SPARK.md#evaluate).

The format is the one given (``--format``, ``--test-format``) or the one the extension tells, as
the local reader's (:data:`recsys_eval.data.runs.SUFFIX_FORMATS`); Spark does not sniff a file's
first line (the file may be on HDFS or S3), so a file whose extension tells nothing is CSV with a
header. Spark reads:

- ``parquet`` (a file or a folder), ``tsv``, ``csv``: tables with a header naming ``user``, ``item``
  and the values (``score``/``rank``, ``rating``);
- ``trec`` (runs ``qid Q0 docid rank score [tag]``, qrels ``qid 0 docid rel``) and ``elliot``
  (tab-separated ``user item score``, judgments ``user item rating [timestamp]``): header-less lines,
  whose fields are named by the local reader's layouts (:data:`recsys_eval.data.runs.LAYOUTS`);
  TREC fields are separated by any run of blanks, as the local reader takes them.

The others are one JSON object (ranx), typed headers and item sequences (RecBole) or nested lists
(LensKit's native layout), read by the local engine only: :func:`spark_format` refuses them,
naming what Spark reads.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from recsys_eval.errors import ConfigError, DataError, check_choice

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The formats Spark reads (module docstring), and those of them read as header-less lines.
SPARK_FORMATS = ("csv", "tsv", "parquet", "trec", "elliot")
LINE_FORMATS = ("trec", "elliot")
_SEPARATORS = {"trec": r"[ \t]+", "elliot": "\t"}


def spark_format(path: str, given: str | None, kind: str, name: str) -> str:
    """The format of the file at ``path`` (a local path or a URI) as Spark reads it: ``given``, or
    the extension's (CSV when it tells none); a ConfigError for a format Spark does not read."""
    from recsys_eval.data.run_formats import RECBOLE_SUFFIX
    from recsys_eval.data.runs import FORMATS, SUFFIX_FORMATS

    if given is not None:
        fmt = check_choice("format", given, FORMATS)
    else:
        suffix = PurePosixPath(path.rstrip("/")).suffix.lower()
        fmt = "recbole" if suffix == RECBOLE_SUFFIX else SUFFIX_FORMATS.get(suffix, "csv")
    if fmt not in SPARK_FORMATS:
        raise ConfigError(
            f"{name}: a {fmt} {kind} file is read by the local engine only; the Spark engine reads "
            f"{', '.join(SPARK_FORMATS)} (convert it, e.g. with the local `recsys_eval.data.runs.read_run`, "
            "to Parquet, or use --engine local)"
        )
    return fmt


def read_lines(spark: SparkSession, path: str, fmt: str, kind: str, name: str) -> DataFrame:
    """A header-less ``trec`` or ``elliot`` file as a table of the layout's named fields (text; the
    caller types them), blank lines skipped; an optional trailing field is a column when some line
    has it (its value missing on the lines without it). A DataError names an empty file, or a line
    whose number of fields the layout does not take."""
    from pyspark.sql import functions as F

    from recsys_eval.data.runs import LAYOUTS, layout_width

    layout = LAYOUTS[fmt, kind]
    least, most = layout_width(layout, fmt, kind)
    shown = " ".join(c if not c.startswith("_") else "(ignored)" for c in layout)
    lines = spark.read.text(path).select(F.trim(F.col("value")).alias("line")).filter(F.col("line") != "")
    fields = lines.select("line", F.split("line", _SEPARATORS[fmt]).alias("fields"))
    widths = fields.agg(F.min(F.size("fields")).alias("least"), F.max(F.size("fields")).alias("most")).first()
    if widths["least"] is None:
        raise DataError(f"{name}: is empty; expected lines of {len(layout)} fields ({shown})")
    if widths["least"] < least or widths["most"] > most:
        bad = fields.filter((F.size("fields") < least) | (F.size("fields") > most)).select("line").first()["line"]
        raise DataError(f"{name}: a line of {len(bad.split())} fields ({bad[:60]!r}); expected {len(layout)} ({shown})")
    named = [(i, c) for i, c in enumerate(layout[:widths["most"]]) if not c.startswith("_")]
    return fields.select(*(F.get("fields", i).alias(c) for i, c in named))
