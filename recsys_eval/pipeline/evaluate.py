"""``recsys-eval evaluate``: a run file scored as a run of one fold, one system and one protocol,
written through the same :class:`~recsys_eval.pipeline.sink.RunSink` as an experiment, so that its
folder opens with ``recsys-eval report``, ``recsys-eval compare`` and
:class:`~recsys_eval.core.results.ResultsFolder` like any results folder."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from recsys_eval.core.results import Manifest
from recsys_eval.errors import DataError
from recsys_eval.measure.aggregate import PartitionState, SummaryState
from recsys_eval.pipeline.sink import RunSink
from recsys_eval.pipeline.summary import FoldSummary, Summarising, combine_folds, partition_rows

if TYPE_CHECKING:
    from recsys_eval.data.runs import RunInput
    from recsys_eval.pipeline.options import MeasureOptions

#: The fold label of an evaluated run's rows.
FOLD = "0"


def summary_of(state: PartitionState | SummaryState, undefined: str) -> pl.DataFrame:
    """The summary of one (system, protocol) from its users' state: fold rows with t-intervals,
    pooled F, as a run's summary of one fold (the Spark engine's evaluate shares it, with the
    summed state of its partitions)."""
    out = FoldSummary()
    out.add(partition_rows(Summarising(undefined), state))
    return combine_folds([out])


def evaluate_run(data: RunInput, measure: MeasureOptions, *, system: str, out: Path, force: bool,
                 source: str, genres=None) -> tuple[Path, pl.DataFrame]:
    """Per-unit values of the run's ranking and rating metrics written as one partition, with the
    summary, the manifest, and the folder moved into place at ``out``. Returns the folder and the
    summary."""
    per_unit = measure_run(data, measure, system, genres)
    protocol = data.targets.protocol
    sink = RunSink.create_at(out, force=force)
    try:
        sink.set_layout([FOLD], [system], [protocol])
        with ThreadPoolExecutor(max_workers=1) as pool:  # polars writes without the GIL: summarise meanwhile
            written = pool.submit(sink.write_partition, per_unit)
            summary = summary_of(PartitionState.of(per_unit, undefined=measure.undefined), measure.undefined)
            partition = written.result()
        sink.write_summary(summary)
        manifest = _manifest(data, measure, system, Path(out).name, source, sink.relative([partition]))
        return sink.finish(manifest), summary
    except BaseException:  # a full disk, an interrupt: nothing half-written stays, ``out`` untouched
        sink.discard()
        raise


def _manifest(data: RunInput, measure: MeasureOptions, system: str, name: str, source: str,
              partitions: list[str]) -> Manifest:
    protocol = data.targets.protocol
    return Manifest(
        experiment=name, kind="evaluate", created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        dataset=source, users=data.targets.n_units, items=data.targets.n_items, folds=[FOLD], systems=[system],
        protocols=[protocol], partitions=partitions, metrics=[*measure.ranking, *measure.rating],
        k=list(measure.k), metric_params=measure.params, relevance_threshold=measure.relevance_threshold,
        undefined=measure.undefined, tests=[],
    )


def measure_run(data: RunInput, measure: MeasureOptions, system: str, genres=None) -> pl.DataFrame:
    """The run's per-unit rows: its ranking metrics, and its rating metrics on the judged pairs
    it scores."""
    from recsys_eval.measure import measure as measure_rankings
    from recsys_eval.measure import rating_metrics
    from recsys_eval.measure.frames import concat_per_unit

    frames = []
    if measure.ranking:
        frames.append(measure_rankings(
            data.rankings, data.targets, **measure.kwargs(), system=system, fold=FOLD, user_ids=data.user_ids,
            train=data.train, genres=genres,
        ))
    if measure.rating:
        if data.predictions is None:
            raise DataError("rating metrics need a 'rating' column in TEST and a 'score' column in RUN")
        if not data.predictions.height:
            raise DataError("rating metrics: RUN scores none of the (user, item) pairs of TEST")
        frames.append(rating_metrics(data.predictions, metrics=list(measure.rating), system=system,
                                     protocol=data.targets.protocol, fold=FOLD))
    return concat_per_unit(frames)
