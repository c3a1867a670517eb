"""What one fold of a run is, built once from the config: :class:`RunOptions` (what every fold
shares: protocols, recommenders, measure and rank options, seeds, interval and memory settings) and
:class:`FoldPlan` (one fold: its split, its target sets and its recommenders with their seeds).

The local fold (recsys_eval.pipeline.local), the Spark fold (recsys_eval.engine.fold) and the tuner
execute plans; none of them reads the config.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from recsys_eval.core import Interactions, Split
from recsys_eval.core.memory import parse_size
from recsys_eval.measure.metrics import RATINGS
from recsys_eval.pipeline.config import ExperimentConfig, ProtocolConfig, RecommenderConfig
from recsys_eval.pipeline.options import MeasureOptions, RankOptions
from recsys_eval.pipeline.progress import Progress
from recsys_eval.pipeline.seeds import Seeds
from recsys_eval.pipeline.summary import Summarising
from recsys_eval.pipeline.targets import TargetSet, label_definitions, protocol_labels, target_sets
from recsys_eval.pipeline.timings import Timings
from recsys_eval.targets.negatives import Negatives
from recsys_eval.targets.totals import ItemTotals


@dataclass(frozen=True)
class RunOptions:
    """What every fold of a run shares, validated once from the config."""

    protocols: tuple[ProtocolConfig, ...]
    recommenders: tuple[RecommenderConfig, ...]
    measure: MeasureOptions
    rank: RankOptions
    seeds: Seeds
    #: ``t`` or ``bootstrap`` intervals over users, and the bootstrap's resamples.
    interval: str = "t"
    resamples: int = 1000
    #: Bins of the exposure analysis: those of the first percentile design, else 5.
    exposure_bins: int = 5
    #: The memory budget in bytes, or fixed users per chunk.
    memory: int = 4 * 10**9
    users_per_chunk: int | None = None
    threads: int | None = None
    #: The folder of the config file, which a protocol's ``negatives`` file is relative to.
    config_dir: str = "."

    @classmethod
    def from_config(cls, config: ExperimentConfig) -> RunOptions:
        return cls(
            tuple(config.protocols), tuple(config.recommenders), MeasureOptions.from_config(config.metrics),
            RankOptions.from_config(config), Seeds(config.seed), config.compare.interval, config.compare.resamples,
            next((p.bins for p in config.protocols if p.design == "percentiles"), 5),
            parse_size(config.run.memory), config.run.users_per_chunk, config.run.threads,
            str(Path(config.source).parent),
        )

    @property
    def summarising(self) -> Summarising:
        """How each partition of the run is summarised."""
        return Summarising(self.measure.undefined, self.interval, self.resamples, self.interval_seed)

    @property
    def labels(self) -> list[str]:
        """Every protocol label the results carry, in config order (bins expanded), ``ratings``
        last when rating metrics are measured."""
        labels = [label for p in self.protocols for label in protocol_labels(p)]
        return labels + [RATINGS] if self.measure.rating else labels

    @property
    def systems(self) -> list[str]:
        return [r.display for r in self.recommenders]

    def interval_seed(self, fold: str, label: str) -> int:
        """The bootstrap seed of a (fold, label): keyed on the label's protocol definition (the label
        itself for ``ratings``)."""
        return self.seeds.intervals(fold, label_definitions(self.protocols).get(label, label))

    def model_job(self, fold: str, rec: RecommenderConfig, tuned: RecommenderConfig | None = None) -> ModelJob:
        """A recommender of a fold with its seed: the ``tuned`` entry in place of ``rec`` if given."""
        fitted = tuned or rec
        return ModelJob(fitted, self.seeds.recommender(fold, fitted.definition), rec)

    def model_jobs(self, fold: str, tuned: dict[str, RecommenderConfig] | None = None) -> list[ModelJob]:
        """Every recommender of a fold with its seed, the ``tuned`` entries (by system) in place of
        the configured ones."""
        return [self.model_job(fold, rec, (tuned or {}).get(rec.display)) for rec in self.recommenders]

    def rank_for(self, split: Split, largest_relevant: LargestRelevant | None = None) -> RankOptions:
        """The rank options of a fold: deep enough for its units' relevant counts where a metric
        reads the top R (R-precision), else :attr:`rank` as it is; ``largest_relevant`` counts
        the split's largest (default: from its qrels, the split's rows)."""
        from recsys_eval.measure.metrics import METRICS, Depth

        if not any(METRICS[m].depth is Depth.RELEVANT for m in self.measure.ranking):
            return self.rank
        return self.rank.deep_enough(self.measure, (largest_relevant or _largest_relevant)(
            split, self.measure.relevance_threshold))

    def target_sets(self, protocol: ProtocolConfig, split: Split, totals: ItemTotals | None = None,
                    designed: bool = False, fixed: Negatives | None = None) -> list[TargetSet]:
        """The target sets of one protocol entry on ``split``, seeded by its definition; ``totals``,
        ``designed`` and ``fixed`` (negatives read already) for a ``split`` of some of the fold's
        users (:func:`~recsys_eval.pipeline.targets.target_sets`)."""
        return target_sets(protocol, split, seed=self.target_seed(split.name, protocol),
                           threshold=self.measure.relevance_threshold, chunk_size=self.rank.chunk_size,
                           negatives=self.negatives_file(protocol), totals=totals, designed=designed, fixed=fixed)

    def negatives_file(self, protocol: ProtocolConfig) -> Path | None:
        """The file of a protocol entry's fixed negatives (relative to the config's folder), if any."""
        return None if protocol.negatives is None else Path(self.config_dir) / protocol.negatives

    def target_seed(self, fold: str, protocol: ProtocolConfig) -> int:
        """The seed of a protocol entry's samples (and uniform-test choice) on ``fold``."""
        return self.seeds.targets(fold, protocol.definition)


#: What counts a split's largest number of relevant test items of one user under a threshold.
LargestRelevant = Callable[[Split, float | None], int]


def _largest_relevant(split: Split, threshold: float | None) -> int:
    from recsys_eval.targets.relevance import qrels

    counts = qrels(split, threshold).relevant_counts()
    return int(counts.max()) if len(counts) else 0


@dataclass(frozen=True)
class ModelJob:
    """One recommender of a fold: its entry with tuned hyperparameters merged in (``rec``, what is
    fitted and what its seed derives from), and the entry as configured (``configured``, what
    the samples drawn from its rankings derive from, so that tuning never moves them)."""

    rec: RecommenderConfig
    seed: int
    configured: RecommenderConfig

    @property
    def system(self) -> str:
        return self.rec.display

    def make(self, data: Interactions, threads: int | None):
        """A fresh, unfitted model."""
        from recsys_eval.pipeline.jobs import make_model

        return make_model(self.rec, data, seed=self.seed, threads=threads)


@dataclass
class FoldPlan:
    """One fold: its split, its target sets (every protocol, bins expanded, in config order), its
    recommenders, and its rank options (:meth:`RunOptions.rank_for`); ``pool_auc``: whether scored
    targets are sampled for AUC pooled over folds."""

    options: RunOptions
    data: Interactions
    split: Split
    sets: list[TargetSet]
    models: list[ModelJob]
    rank: RankOptions
    pool_auc: bool

    @property
    def fold(self) -> str:
        return self.split.name

    @classmethod
    def build(cls, options: RunOptions, data: Interactions, split: Split, *, n_folds: int,
              tuned: dict[str, RecommenderConfig] | None = None, progress: Progress | None = None,
              timings: Timings | None = None, targets: bool = True,
              largest_relevant: LargestRelevant | None = None) -> FoldPlan:
        """The plan of ``split``: every protocol's target sets built (a step each in ``timings``;
        none with ``targets=False``, for an engine whose tasks build their users' own), every
        recommender with its seed, the ``tuned`` entries in place of the config's; its rank
        options by :meth:`RunOptions.rank_for` (with ``largest_relevant``)."""
        sets: list[TargetSet] = []
        protocols = options.protocols if targets else ()
        with (progress or Progress.silent()).step(f"[{split.name}] targets", total=len(protocols)) as advance:
            for protocol in protocols:
                start = time.perf_counter()
                sets += options.target_sets(protocol, split)
                if timings is not None:
                    timings.add(split.name, "", f"plan targets {protocol.display}", start)
                advance()
        pool_auc = "auc" in options.measure.ranking and n_folds >= 2
        return cls(options, data, split, sets, options.model_jobs(split.name, tuned),
                   options.rank_for(split, largest_relevant), pool_auc)
