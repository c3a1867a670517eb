"""Beyond-accuracy and rating metrics on Spark: per user in each task, the whole run's values from
counts summed on the driver.

Per user (calibration, ARP, APLT, ACLT, novelty, ILD, EPC, EFD, surprisal, unexpectedness,
serendipity, user coverage; MAE, RMSE, Kendall, Spearman, NDPM): a task measures its users with the
local engine's functions (:func:`recsys_eval.pipeline.jobs.measure_ranking`,
:func:`recsys_eval.pipeline.jobs.rating_predictions` and
:func:`recsys_eval.measure.rating_metrics`). What those read of every train user, the item side
(each item's train popularity, the most-popular order, the catalogue;
:data:`recsys_eval.measure.lists.ITEM_SIDE`), is computed once on the driver
(:func:`~recsys_eval.measure.beyond.whole_item_side`, a few arrays over items) and broadcast; a
user's own train profile (calibration's genre mix, MostPop's items the user has not seen, PopRSP's
head and tail counts) is read from the user's rows, which its partition holds whole. Item genres
come with the dataset's item metadata, which every task has. So the per-user values are the local
engine's.

Per run (catalogue and prediction coverage, Gini, entropy, PopRSP, PopREO; the micro MAE and RMSE):
each task hands back, per (system, protocol) and chunk of users, the counts they are functions of:
exposure per cutoff and item, the items ranked, the head and tail counts of PopRSP and PopREO
(:meth:`~recsys_eval.measure.beyond.RunExposure.state`), the exact error sums of the ratings
(:class:`~recsys_eval.measure.rating.ErrorSums`). The driver adds them up (:class:`RunLevel`;
integers, or integers held in floats: the same sums in any order), so it holds arrays over items and
groups, never a per-user row, and the values are the local engine's bit for bit. It writes them as
the (system, protocol)'s last per-unit file and adds them to its summary, as the local fold does.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from recsys_eval.core.results import PER_UNIT_SCHEMA

if TYPE_CHECKING:
    from recsys_eval.core import Interactions, Split
    from recsys_eval.measure.beyond import RunExposure
    from recsys_eval.measure.rating import ErrorSums
    from recsys_eval.pipeline.options import MeasureOptions

#: The kind of a task's table that holds one (system, protocol)'s run-level counts (pickled).
RUN_COUNTS = "run_counts"
_EXPOSURE, _ERRORS = "exposure", "errors"


def chunk_exposure(measure: MeasureOptions, n_items: int, train: Interactions | None) -> RunExposure:
    """An empty exposure for a chunk's lists of one (system, protocol), to which
    :func:`recsys_eval.measure.measure` (through :func:`recsys_eval.pipeline.jobs.measure_ranking`
    in a fold) adds them from its own list pass, as the local fold does. ``train``: the chunk's
    users' train rows reading the whole train's item side
    (:func:`~recsys_eval.measure.lists.with_item_side`), None without a train."""
    from recsys_eval.measure.beyond import run_exposure

    return run_exposure(n_items, list(measure.k), train, measure.run_level, measure.params)


def run_counts(exposure: RunExposure, label: str, system: str) -> bytes:
    """A chunk's run-level counts of one (system, protocol ``label``) (its :func:`chunk_exposure`,
    its lists added), pickled for the driver (:data:`RUN_COUNTS`)."""
    return pickle.dumps((system, label, _EXPOSURE, exposure.state()))


def rating_tables(measure: MeasureOptions, split: Split, models: dict, template: Interactions, fold: str,
                  units: Callable[[np.ndarray], np.ndarray]) -> Iterator[tuple[str, pl.DataFrame | bytes]]:
    """Per system of ``models`` (made ready for the chunk), the chunk's rating rows per user with the
    fold's unit numbers (``units`` of the user indices: a user's rank among the fold's users with
    test rows, as :func:`recsys_eval.measure.rating_metrics` numbers them), and its ratings' error
    sums (:data:`RUN_COUNTS`) for the micro MAE and RMSE."""
    from recsys_eval.engine.fold import PER_UNIT
    from recsys_eval.measure import rating_metrics
    from recsys_eval.measure.metrics import RATINGS
    from recsys_eval.measure.rating import ErrorSums
    from recsys_eval.pipeline import jobs

    for system, model in models.items():
        predicted = jobs.rating_predictions(model, split.test, list(measure.rating))
        if predicted is None:
            continue
        names, frame = predicted
        rows = rating_metrics(frame, metrics=names, system=system, protocol=RATINGS, fold=fold)
        rows = rows.filter(pl.col("user").is_not_null())
        users = rows.get_column("user").cast(pl.Int64).to_numpy()
        yield PER_UNIT, rows.with_columns(pl.Series("unit", units(users), dtype=pl.Int64),
                                          template.user_ids.gather(users).alias("user"))
        errors = ErrorSums.of(frame.get_column("prediction").to_numpy() - frame.get_column("rating").cast(
            pl.Float64).to_numpy())
        yield RUN_COUNTS, pickle.dumps((system, RATINGS, _ERRORS, (tuple(names), errors)))


class RunLevel:
    """The run-level counts of a Spark fold's tasks, summed per (system, protocol) on the driver as
    they arrive, and the run-level rows they give.

    ``template``: the dataset without rows (its item index, its user ids' type); ``trains``: per
    target-set label, an Interactions without rows that reads the whole item side (the catalogue,
    the head) of the train side its lists were made on, which the values need (a label it lacks:
    lists made without a train); no user's rows are read."""

    def __init__(self, measure: MeasureOptions, template: Interactions, trains: dict[str, Interactions]) -> None:
        self.measure, self.template, self.trains = measure, template, trains
        self.exposure: dict[tuple[str, str], RunExposure] = {}
        self.errors: dict[tuple[str, str], tuple[tuple[str, ...], list[ErrorSums]]] = {}

    def add(self, payload: bytes) -> None:
        """One chunk's counts (:func:`run_counts`, :func:`rating_tables`)."""
        from recsys_eval.measure.beyond import run_exposure

        system, label, kind, state = pickle.loads(payload)
        if kind == _ERRORS:
            names, sums = state
            self.errors.setdefault((system, label), (names, []))[1].append(sums)
            return
        if (system, label) not in self.exposure:
            m = self.measure
            self.exposure[system, label] = run_exposure(self.template.n_items, list(m.k), self.trains.get(label),
                                                        m.run_level, m.params)
        self.exposure[system, label].add_state(state)

    def frames(self, fold: str) -> list[pl.DataFrame]:
        """The run-level rows of every (system, protocol) counted so far (:meth:`frame`), in the
        order first counted."""
        keys = dict.fromkeys([*self.exposure, *self.errors])
        return [frame for key in keys if (frame := self.frame(*key, fold)) is not None]

    def frame(self, system: str, label: str, fold: str) -> pl.DataFrame | None:
        """The run-level rows of a (system, protocol), as the local fold writes them; None without any."""
        from recsys_eval.measure.beyond import run_frame
        from recsys_eval.measure.rating import ErrorSums

        labels = {"system": system, "protocol": label, "fold": fold}
        user_ids = self.template.user_ids
        if (system, label) in self.exposure:
            user_type = pl.Int64 if user_ids.dtype.is_integer() else pl.String  # as the local fold's
            return run_frame(self.exposure.pop((system, label)).values(self.measure.run_level), labels, user_type)
        if (system, label) in self.errors:
            names, sums = self.errors.pop((system, label))
            rows = ErrorSums.merge(sums).rows(names, labels, {**PER_UNIT_SCHEMA, "user": user_ids.dtype})
            return rows if rows.height else None  # rank correlations alone: no run-level value
        return None
