"""The per-unit layout is Spark's own: Spark's ``partitionBy`` names the folders of every label a
user can give as the results folder does (checked against a real Spark write, not a copy of its
rules), Spark's reader gives the labels of a folder the local engine wrote back as text, and the
local reader gives those of a folder Spark wrote."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from recsys_eval.core.results import (
    PER_UNIT_COLUMNS,
    PER_UNIT_LABELS,
    PER_UNIT_SCHEMA,
    PartitionFiles,
    per_unit_folder,
    read_per_unit,
)

#: (fold, protocol, system) labels a user can give: spaces, '+', '=', parentheses, '/', '%', ':',
#: glob and quote characters, a tab, non-ASCII, names that read as numbers.
TRICKY = [("1", "AI+1R+NN100", "2024"), ("2024-01 é/x", "pop 0.5 (Ω=1) %2F", "als (k=64, 50%)/v2"),
          ("0", "AI+AR+AN", "C:\\x #?*[]{}^'\"\t日本")]


def _rows(labels: tuple[str, str, str], first: int) -> pl.DataFrame:
    fold, protocol, system = labels
    return pl.DataFrame({"system": system, "protocol": protocol, "fold": fold, "user": [first, first + 1],
                         "unit": [0, 1], "metric": "ndcg", "k": [10, 10], "value": [0.25, 0.5]}, schema=PER_UNIT_SCHEMA)


@pytest.mark.spark
def test_spark_partition_by_names_the_folders_as_the_results_folder_does(spark, tmp_path):
    frame = pl.concat([_rows(labels, 2 * i) for i, labels in enumerate(TRICKY)])
    out = tmp_path / "spark"
    spark.createDataFrame(frame.to_arrow()).write.partitionBy(*PER_UNIT_LABELS).parquet(str(out))
    files = sorted(out.rglob("*.parquet"))
    folders = {str(f.parent.relative_to(out)) for f in files}
    assert folders == {per_unit_folder(dict(zip(("fold", "protocol", "system"), labels, strict=True)))
                       .removeprefix("per_unit/") for labels in TRICKY}
    back = read_per_unit(files).collect()  # the local reader, on Spark's folders
    assert back.sort("user").equals(frame)


@pytest.mark.spark
def test_spark_reads_the_labels_of_a_local_folder_back_as_text(spark, tmp_path):
    from recsys_eval.engine.stats import read_per_unit_spark

    layout = {"folds": [f for f, _, _ in TRICKY], "systems": [s for _, _, s in TRICKY],
              "protocols": [p for _, p, _ in TRICKY]}
    files = PartitionFiles(tmp_path, layout)
    frame = pl.concat([_rows(labels, 2 * i) for i, labels in enumerate(TRICKY)])
    written = [str(files.write(_rows(labels, 2 * i))) for i, labels in enumerate(TRICKY)]
    back = pl.from_arrow(read_per_unit_spark(spark, written).toArrow())
    assert back.columns == list(PER_UNIT_COLUMNS)
    assert back.cast(PER_UNIT_SCHEMA).sort("user").equals(frame)
    assert all(back.schema[c] == pl.String for c in PER_UNIT_LABELS)  # "1", "0", "2024": text
    assert Path(written[0]).parts[-4:-1] == ("fold=1", "protocol=AI+1R+NN100", "system=2024")
