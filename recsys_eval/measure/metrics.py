"""The metric registry: one :class:`MetricSpec` per metric, the single home of what a metric is.

Per-unit tables, summaries, configs and the CLI name a metric by its registry key (``ndcg``); a
summary names it at a cutoff (``ndcg@10``); tables and figures print its label (``nDCG@10``).
Everything else (the ranking kernel's column offsets, which metrics are better when lower, what
the CLI lists, which metrics the sampled-metric correction covers) is read from :data:`METRICS`.

A ranking metric is its spec and its kernel, both here: the spec's own per-unit kernel
(:attr:`MetricSpec.kernel`, which a generic driver runs on every unit's listed relevance), the closed
form of a unit with one relevant item (:attr:`MetricSpec.at_rank`: the values of 1R units and the
sampled-metric correction), the depth of list it reads (:attr:`MetricSpec.depth`,
:func:`ranking_depth`) and the numbers its formula takes (:attr:`MetricSpec.params`, keywords of
``measure()``). Adding one is adding its spec (R-precision and RBP were added so); the summary, the
report tables, the LaTeX and terminal tables and ``recsys-eval list metrics`` pick it up. The nine
metrics of the fused ranking kernel (:mod:`recsys_eval.measure.kernels`, a ``slot`` each) are
computed together in one pass instead. The formulas are in ``docs/CONVENTIONS.md#metrics``.

This module imports nothing heavy, so that the CLI can list the metrics at once.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum

from recsys_eval.errors import ConfigError, closest


class Family(StrEnum):
    """What a metric is computed from, and so which function computes it."""

    CUTOFF = "ranking@k"  # per unit, on the top k of its ranking
    WHOLE = "ranking"  # per unit, without a cutoff (AUC: over its whole target set)
    RATING = "rating"  # per user, from predicted ratings (rating_metrics)
    BEYOND = "beyond"  # over a run's top-k lists (beyond_accuracy)
    AUXILIARY = "auxiliary"  # per-unit counts other metrics' summaries need; not a metric shown

    @property
    def title(self) -> str:
        """A heading for listings and glossaries."""
        return _FAMILY_TITLES[self]


_FAMILY_TITLES = {
    Family.CUTOFF: "Ranking metrics at each cutoff k (per unit, on the top k of its ranking)",
    Family.WHOLE: "Ranking metrics without a cutoff (per unit)",
    Family.RATING: "Rating-prediction metrics (per user, over the user's test ratings)",
    Family.BEYOND: "Beyond-accuracy metrics (over a run's top-k lists)",
    Family.AUXILIARY: "Auxiliary per-unit counts",
}


class Direction(StrEnum):
    HIGHER = "higher"
    LOWER = "lower"
    NONE = "none"  # auxiliary counts


class Summary(StrEnum):
    """How per-unit values become the number a table shows (``docs/CONVENTIONS.md#averaging``)."""

    USER_MEAN = "user mean"  # units -> per-user mean -> mean over users per fold -> mean of folds
    POOLED_F = "pooled F_tp,fp"  # F of the TP, FP, FN summed over units (Forman & Scholz)
    RUN_VALUE = "run value"  # one value per fold's run, then the mean of the fold values


class Depth(StrEnum):
    """How deep a ranked list a metric reads: what a full ranking must list for it."""

    CUTOFF = "the cutoff k"
    RELEVANT = "R, the unit's relevant count"
    WHOLE = "every target"  # AUC: each target's place, which the scoring pass counts at any depth

    def reach(self, k: int | None, relevant: int) -> int | None:
        """The deepest rank read at cutoff ``k`` by a unit with ``relevant`` relevant items; None:
        every rank (``WHOLE``, or ``CUTOFF`` without a cutoff)."""
        if self is Depth.CUTOFF:
            return k
        return relevant if self is Depth.RELEVANT else None


@dataclass(frozen=True)
class MetricParam:
    """A number a metric's formula takes: a keyword of :func:`~recsys_eval.measure.measure` (and a
    key of a config's ``[metrics]``), its default, and the open interval (low, high) it lies in."""

    name: str
    default: float
    low: float
    high: float
    meaning: str

    def check(self, value: object) -> float:
        """``value`` as a float, or a ConfigError saying what was expected."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not self.low < value < self.high:
            raise ConfigError(f"{self.name} ({self.meaning}) must be a number with {self.low:g} < {self.name} < "
                              f"{self.high:g}, got {value!r}")
        return float(value)


@dataclass(frozen=True)
class MetricSpec:
    """One metric: how it is named, read, computed and summarised.

    Attributes:
        name: the key in per-unit tables, configs and the CLI (``ndcg``).
        symbol: the label of its summary as papers print it (``nDCG``; ``MAP`` for the mean of
            ``ap``, ``MRR`` for that of ``rr``).
        family: what it is computed from (:class:`Family`).
        direction: whether higher or lower values are better.
        cutoff: whether it is computed at every cutoff k (``k`` null otherwise).
        undefined: when a unit's value is undefined (NaN), or ``never``.
        summary: the summary rule (:class:`Summary`).
        convention: one line, as ``trec_eval -h`` prints it.
        slot: for the ranking metrics of the fused ranking kernel
            (:mod:`recsys_eval.measure.kernels`), its column block: the cutoff metrics' blocks of
            one column per cutoff come first, in slot order, then one column per whole-list metric
            in slot order (see :func:`kernel_column`). None for every other metric.
        depth: for ranking and beyond-accuracy metrics, how deep a list it reads (:class:`Depth`;
            :func:`ranking_depth`).
        at_rank: the closed form of the metric on a unit with one relevant item, ``at_rank(rho, k,
            n, params)``: numpy, vectorised over ``rho``, the item's 1-based ranks (float64; real
            ranks too, for the sampled-metric correction), at cutoff ``k`` (None: without one),
            among ``n`` candidates (one count or one per rank), ``params`` the values of
            :attr:`params` in order (float64 array). It must be 0 past the rank :attr:`depth`
            reaches (only those ranks are evaluated). It gives the values of 1R units
            (:func:`recsys_eval.measure.single.closed_form_values`; under ``ties="average"`` its
            mean over the relevant item's tied group; 0 when the item is not ranked) and the
            sampled-metric correction (:mod:`recsys_eval.compare.sampled`; Krichene & Rendle).
        kernel: for a ranking metric outside the fused kernel, its own per-unit kernel, a plain
            function numba compiles on first use (``njit`` with
            :data:`recsys_eval.measure.kernels.OWN_KERNEL_SIGNATURE`): ``kernel(rel, n_rel, n_non,
            k, params) -> value`` with ``rel`` the relevance of each listed position of the unit
            (float64, 1 relevant, 0 not; under ``ties="average"`` r/n at every position of a tied
            block of n items holding r relevant ones), its relevant and non-relevant target counts
            R and N, the cutoff ``k`` (0 without one) and ``params`` as for ``at_rank``
            (:func:`recsys_eval.measure.api.own_kernel_values`). NaN marks an undefined value.
            The r/n of a tied block makes the value the exact expectation over the block's
            orderings for a metric linear in each position's relevance (R-precision, RBP); a
            metric that is not would get its value at the expected relevance instead.
        params: the numbers its formula takes (:class:`MetricParam`).
    """

    name: str
    symbol: str
    family: Family
    direction: Direction
    cutoff: bool
    undefined: str
    summary: Summary
    convention: str
    slot: int | None = None
    depth: Depth | None = None
    at_rank: Callable | None = None
    kernel: Callable | None = None
    params: tuple[MetricParam, ...] = ()

    def label(self, k: int | str | None = None) -> str:
        """The printed label at cutoff ``k``: ``nDCG@10``; ``AUC`` (no cutoff); ``nDCG@k`` for
        ``k="k"``, as listings print it."""
        return self.symbol if k is None or not self.cutoff else f"{self.symbol}@{k}"

    @property
    def lower_is_better(self) -> bool:
        return self.direction is Direction.LOWER

    @property
    def sampled_correction(self) -> bool:
        """Whether a sampled value (1R+NN) can be corrected to full ranking: it has a closed form."""
        return self.at_rank is not None

    def param_values(self, values: Mapping[str, object] | None = None) -> tuple[float, ...]:
        """The values of :attr:`params` in order: those in ``values`` (checked), else the defaults."""
        values = values or {}
        return tuple(p.check(values[p.name]) if p.name in values else p.default for p in self.params)

    def as_dict(self) -> dict:
        """A JSON-ready record (``recsys-eval list metrics --json``): the fields but the functions,
        and whether the sampled-metric correction covers it."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("at_rank", "kernel")}
        record["params"] = [vars(p) for p in self.params]
        record["sampled_correction"] = self.sampled_correction
        return {key: (str(value) if isinstance(value, StrEnum) else value) for key, value in record.items()}


def _top(rho, k):
    """[rho <= k] as floats; 1 everywhere without a cutoff (k None)."""
    import numpy as np

    return np.ones(np.shape(rho)) if k is None else (rho <= k).astype(np.float64)


def _needs_cutoff(k: int | None, name: str) -> int:
    if k is None:
        raise ConfigError(f"metric {name!r} needs a cutoff k")
    return k


def _hit_at_rank(rho, k, n, params):
    """hit@k of one relevant item at rank rho: [rho <= k]."""
    return _top(rho, _needs_cutoff(k, "hit"))


def _recall_at_rank(rho, k, n, params):
    """recall@k of one relevant item (R = 1): [rho <= k]."""
    return _top(rho, k)


def _precision_at_rank(rho, k, n, params):
    """[rho <= k] / k."""
    return _top(rho, _needs_cutoff(k, "precision")) / k


def _ndcg_at_rank(rho, k, n, params):
    """[rho <= k] / log2(rho + 1): the ideal DCG of one relevant item is its gain, at rank 1."""
    import numpy as np

    return _top(rho, k) / np.log2(rho + 1.0)


def _reciprocal_rank(rho, k, n, params):
    """[rho <= k] / rho: RR, and AP of one relevant item (precision at its rank, / R = 1)."""
    return _top(rho, k) / rho


def _auc_at_rank(rho, k, n, params):
    """(n - rho) / (n - 1): the share of the n - 1 non-relevant candidates ranked below it."""
    return (n - rho) / (n - 1.0)


def _rprecision_at_rank(rho, k, n, params):
    """[rho <= 1]: R = 1, so R-precision is hit@1."""
    return _top(rho, 1)


def _rprecision_kernel(rel, n_rel, n_non, k, params):
    """Relevant items among the top R, / R (R = ``n_rel``); undefined for R = 0. Ranks past the end
    of a list shorter than R count as non-relevant."""
    if n_rel == 0:
        return math.nan
    hits = 0.0
    for i in range(min(n_rel, len(rel))):
        hits += rel[i]
    return hits / n_rel


def _rbp_at_rank(rho, k, n, params):
    """[rho <= k] (1 - p) p^(rho - 1), p = params[0]."""
    p = params[0]
    return _top(rho, k) * ((1.0 - p) * p ** (rho - 1.0))


def _rbp_kernel(rel, n_rel, n_non, k, params):
    """(1 - p) sum over listed ranks i <= k of rel_i p^(i - 1), p = params[0] (Moffat & Zobel)."""
    p = params[0]
    total = 0.0
    weight = 1.0 - p
    for i in range(min(k, len(rel))):
        total += rel[i] * weight
        weight *= p
    return total


RBP_PERSISTENCE = MetricParam("rbp_persistence", 0.8, 0.0, 1.0,
                              "RBP's persistence p: the chance that a user reads on past each item")
CALIBRATION_ALPHA = MetricParam("calibration_alpha", 0.01, 0.0, 1.0,
                                "Steck's smoothing alpha of the list's genre distribution, q~ = (1-alpha) q + alpha p")
HEAD_SHARE = MetricParam("head_share", 0.2, 0.0, 1.0,
                         "share of catalogue items, the most popular in train, that form the popular head "
                         "(the others are the long tail)")


_C, _W, _RA, _B, _AUX = Family.CUTOFF, Family.WHOLE, Family.RATING, Family.BEYOND, Family.AUXILIARY
_UP, _DOWN = Direction.HIGHER, Direction.LOWER
_MEAN, _RUN = Summary.USER_MEAN, Summary.RUN_VALUE
_NO_REL = "no relevant item (R = 0)"
_TOP = Depth.CUTOFF

METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("precision", "P", _C, _UP, True, "never", _MEAN,
                   "relevant items in the top k / k (k even when fewer items are listed)",
                   slot=0, depth=_TOP, at_rank=_precision_at_rank),
        MetricSpec("recall", "R", _C, _UP, True, _NO_REL, _MEAN,
                   "relevant items in the top k / R, the unit's relevant items",
                   slot=1, depth=_TOP, at_rank=_recall_at_rank),
        MetricSpec("f1", "F1", _C, _UP, True, _NO_REL, _MEAN,
                   "2PR/(P+R) per unit (0 without a hit), averaged like P and R; f1_pooled beside it "
                   "is the F of the summed TP, FP, FN (Forman & Scholz's F_tp,fp)",
                   slot=2, depth=_TOP),
        MetricSpec("ap", "MAP", _C, _UP, True, _NO_REL, _MEAN,
                   "sum of precision@i at relevant ranks i <= k, / R (or / min(R, k)); trec_eval map_cut",
                   slot=3, depth=_TOP, at_rank=_reciprocal_rank),
        MetricSpec("ndcg", "nDCG", _C, _UP, True, _NO_REL, _MEAN,
                   "sum of gain/log2(i+1) over the top k, / the same of the ideal order cut at k",
                   slot=4, depth=_TOP, at_rank=_ndcg_at_rank),
        MetricSpec("rr", "MRR", _C, _UP, True, _NO_REL, _MEAN,
                   "1 / rank of the first relevant item in the top k, 0 if none",
                   slot=5, depth=_TOP, at_rank=_reciprocal_rank),
        MetricSpec("hit", "HR", _C, _UP, True, "never", _MEAN,
                   "1 if a relevant item is in the top k, else 0 (0 when R = 0)",
                   slot=6, depth=_TOP, at_rank=_hit_at_rank),
        MetricSpec("half_life", "HLU", _C, _UP, True, "no target gain above the neutral d", _MEAN,
                   "sum of max(g - d, 0) / 2^((i-1)/(h-1)) over the top k, / its best value (Breese)",
                   slot=7, depth=_TOP),
        MetricSpec("auc", "AUC", _W, _UP, False, "no relevant or no non-relevant target", _MEAN,
                   "share of (relevant, non-relevant) target pairs ordered right, ties 1/2",
                   slot=0, depth=Depth.WHOLE, at_rank=_auc_at_rank),
        MetricSpec("rprecision", "R-Prec", _W, _UP, False, _NO_REL, _MEAN,
                   "relevant items in the top R / R, R the unit's relevant items (trec_eval Rprec)",
                   depth=Depth.RELEVANT, at_rank=_rprecision_at_rank, kernel=_rprecision_kernel),
        MetricSpec("rbp", "RBP", _C, _UP, True, "never", _MEAN,
                   "(1-p) sum of p^(i-1) over relevant ranks i <= k, p = rbp_persistence (Moffat & Zobel)",
                   depth=_TOP, at_rank=_rbp_at_rank, kernel=_rbp_kernel, params=(RBP_PERSISTENCE,)),
        MetricSpec("n_relevant", "R", _AUX, Direction.NONE, False, "never", _MEAN,
                   "the unit's relevant items R, beside f1 for the F-measure variants"),
        MetricSpec("sampled_rank", "rank", _AUX, Direction.NONE, False, "never", _MEAN,
                   "a 1R+NN unit's relevant item's position among its n + 1 targets (0: not ranked)"),
        MetricSpec("full_candidates", "N", _AUX, Direction.NONE, False, "never", _MEAN,
                   "a 1R+NN unit's full candidate count |C(u)| - |Rel(u)| + 1, for the correction"),
        MetricSpec("mae", "MAE", _RA, _DOWN, False, "never", _MEAN,
                   "mean |prediction - rating| per user; micro over all test ratings beside it"),
        MetricSpec("rmse", "RMSE", _RA, _DOWN, False, "never", _MEAN,
                   "sqrt of the mean squared error per user; micro over all test ratings beside it"),
        MetricSpec("kendall", "tau", _RA, _UP, False, "fewer than 2 ratings or a constant side", _MEAN,
                   "Kendall's tau-b between predicted and true ratings of the user's test items"),
        MetricSpec("spearman", "rho", _RA, _UP, False, "fewer than 2 ratings or a constant side", _MEAN,
                   "Spearman's rho (Pearson of average ranks) between predicted and true ratings"),
        MetricSpec("ndpm", "NDPM", _RA, _DOWN, False, "the user rated every item alike", _MEAN,
                   "(2 C- + Cu) / 2C over pairs rated differently: C- reversed, Cu tied (Yao)"),
        MetricSpec("catalog_coverage", "Cov", _B, _UP, True, "never", _RUN,
                   "distinct catalogue items in the top-k lists / catalogue (train items)", depth=_TOP),
        MetricSpec("user_coverage", "UCov", _B, _UP, False, "never", _MEAN,
                   "1 if the unit's list is non-empty; its mean is the share of users served"),
        MetricSpec("prediction_coverage", "PCov", _B, _UP, False, "never", _RUN,
                   "distinct items ranked anywhere in the lists / all items"),
        MetricSpec("novelty", "Nov", _B, _UP, True, "an empty list", _MEAN,
                   "mean -log2 p(i) of the top-k items, p(i) the share of train users with i", depth=_TOP),
        MetricSpec("gini", "Gini", _B, _DOWN, True, "no item listed", _RUN,
                   "Gini index of catalogue items' exposure in the top-k lists (0: equal exposure)", depth=_TOP),
        MetricSpec("entropy", "Ent", _B, _UP, True, "no item listed", _RUN,
                   "Shannon entropy (bits) of catalogue items' exposure in the top-k lists", depth=_TOP),
        MetricSpec("ild", "ILD", _B, _UP, True, "fewer than 2 listed items", _MEAN,
                   "mean Jaccard distance of genre sets over pairs of top-k items", depth=_TOP),
        MetricSpec("calibration", "C_KL", _B, _DOWN, True, "no genre data in the user's train profile or list",
                   _MEAN, "KL(p || (1-alpha) q + alpha p) of the genre mix p of the train profile and q of the "
                   "top k (Steck), alpha = calibration_alpha", depth=_TOP, params=(CALIBRATION_ALPHA,)),
        MetricSpec("arp", "ARP", _B, _DOWN, True, "an empty list", _MEAN,
                   "mean train popularity (users with the item) of the top-k items (Abdollahpouri)", depth=_TOP),
        MetricSpec("aplt", "APLT", _B, _UP, True, "an empty list", _MEAN,
                   "share of the top k in the long tail (outside the head_share most popular items)",
                   depth=_TOP, params=(HEAD_SHARE,)),
        MetricSpec("aclt", "ACLT", _B, _UP, True, "never", _MEAN,
                   "count of long-tail items in the top k (0 for an empty list)", depth=_TOP, params=(HEAD_SHARE,)),
        MetricSpec("pop_rsp", "PopRSP", _B, _DOWN, True, "a group without candidates, or no item listed", _RUN,
                   "std/mean over head and tail of P(listed in top k | group) (Zhu et al., statistical parity)",
                   depth=_TOP, params=(HEAD_SHARE,)),
        MetricSpec("pop_reo", "PopREO", _B, _DOWN, True, "a group without relevant targets, or no hit", _RUN,
                   "std/mean over head and tail of P(listed in top k | group, relevant) (Zhu et al., equal "
                   "opportunity)", depth=_TOP, params=(HEAD_SHARE,)),
        MetricSpec("epc", "EPC", _B, _UP, True, _NO_REL, _MEAN,
                   "sum of disc(r) rel(r) (1 - p(seen|i)) over the top k, / sum of disc(r) (Vargas & Castells)",
                   depth=_TOP),
        MetricSpec("efd", "EFD", _B, _UP, True, _NO_REL, _MEAN,
                   "sum of disc(r) rel(r) (-log2 p(i|seen)) over the top k, / sum of disc(r) (Vargas & Castells)",
                   depth=_TOP),
        MetricSpec("surprisal", "Surp", _B, _UP, True, "an empty list", _MEAN,
                   "mean -log2(p(i)) / log2|U| of the top-k items, p(i) the share of train users with i (RePlay)",
                   depth=_TOP),
        MetricSpec("unexpectedness", "Unexp", _B, _UP, True, "an empty list", _MEAN,
                   "share of the top k outside MostPop's top k for the user (Kaminskas & Bridge)", depth=_TOP),
        MetricSpec("serendipity", "Ser", _B, _UP, True, "an empty list", _MEAN,
                   "share of the top k both relevant and outside MostPop's top k (Kaminskas & Bridge)", depth=_TOP),
    )
}


def names_of(*families: Family) -> tuple[str, ...]:
    """The registry keys of the given families, in registry order."""
    return tuple(name for name, spec in METRICS.items() if spec.family in families)


RANKING_METRICS = names_of(Family.CUTOFF, Family.WHOLE)
RATING_METRICS = names_of(Family.RATING)
#: The protocol label of the rating metrics' rows (measured on a fold's test ratings, not on a
#: protocol's target sets).
RATINGS = "ratings"
BEYOND_METRICS = names_of(Family.BEYOND)
#: Per-unit rows that are not metrics of their own: left out of tests, agreement and reports.
AUXILIARY_METRICS = names_of(Family.AUXILIARY)
#: The relevant count R emitted beside ``f1``: F_tp,fp needs the summed TP, FP and FN.
N_RELEVANT = "n_relevant"
#: Every metric a user can ask for.
ALL_METRICS = names_of(Family.CUTOFF, Family.WHOLE, Family.RATING, Family.BEYOND)
#: The ranking metrics of the fused ranking kernel (those with a slot); the others have their own.
FUSED_METRICS = tuple(name for name in RANKING_METRICS if METRICS[name].slot is not None)
#: Every parameter a metric's formula takes, by its name (a keyword of measure()).
PARAMS: dict[str, MetricParam] = {p.name: p for spec in METRICS.values() for p in spec.params}

#: Blocks of the ranking kernel's matrix: one per cutoff metric, then one column per whole metric.
KERNEL_CUTOFF_SLOTS = sum(METRICS[name].family is Family.CUTOFF for name in FUSED_METRICS)
KERNEL_WHOLE_SLOTS = sum(METRICS[name].family is Family.WHOLE for name in FUSED_METRICS)

GAINS = ("graded", "binary", "exp")
TIES = ("first", "average")
AP_DENOMINATORS = ("relevant", "min_rk")
UNDEFINED_POLICIES = ("skip", "zero")


def kernel_column(name: str, c: int, n_cut: int) -> int:
    """The ranking kernel's column of metric ``name`` at cutoff index ``c`` of ``n_cut``:
    ``slot * n_cut + c`` for a cutoff metric, ``KERNEL_CUTOFF_SLOTS * n_cut + slot`` for a
    whole-list one."""
    spec = METRICS[name]
    if spec.slot is None:
        raise ConfigError(f"metric {name!r} is not computed by the ranking kernel")
    return spec.slot * n_cut + c if spec.family is Family.CUTOFF else KERNEL_CUTOFF_SLOTS * n_cut + spec.slot


def kernel_width(n_cut: int) -> int:
    """Columns of the ranking kernel's matrix for ``n_cut`` cutoffs."""
    return KERNEL_CUTOFF_SLOTS * n_cut + KERNEL_WHOLE_SLOTS


def ranking_depth(names: Iterable[str], cutoffs: Iterable[int], max_relevant: int, at_least: int) -> int:
    """How many items a full ranking must list for metrics ``names`` at ``cutoffs``: the largest
    cutoff (a run's top-k lists are read at it), at least ``at_least`` (``run.depth``), and
    ``max_relevant``, the most relevant items of any unit, when a metric reads the top R
    (R-precision). AUC needs no depth: the scoring pass places every target."""
    deepest = max(check_cutoffs(cutoffs))
    reaches = (METRICS[name].depth.reach(deepest, max_relevant) for name in check_metrics(names)
               if METRICS[name].depth is not None)
    return max([deepest, at_least, *(reach for reach in reaches if reach is not None)])


def metric_params(given: Mapping[str, object]) -> dict[str, float]:
    """Every metric parameter's value (:data:`PARAMS`): those ``given``, checked, and the defaults
    of the others; a name no metric takes raises with the closest one."""
    for name in given:
        if name not in PARAMS:
            raise ConfigError(f"unknown metric parameter {name!r}: {closest(name, PARAMS)}")
    return {name: param.check(given[name]) if name in given else param.default for name, param in PARAMS.items()}


#: The summary row of F_tp,fp beside the per-user mean F1 (``docs/CONVENTIONS.md#f-measure``).
F1_POOLED = "f1_pooled"


@dataclass(frozen=True)
class MetricKey:
    """A metric at a cutoff, the one way summaries, configs and tables name it: its ``label``
    (``ndcg@10``; ``auc`` without a cutoff) and its ``display`` (``nDCG@10``)."""

    name: str
    k: int | None = None

    @property
    def label(self) -> str:
        """``ndcg@10``; the name alone without a cutoff."""
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def display(self) -> str:
        """The label as tables print it: the spec's symbol (``nDCG@10``, ``MAP@5``, ``AUC``),
        ``F1pool`` for the pooled F1, a name the registry does not know as it is."""
        if self.name == F1_POOLED:
            return "F1pool" if self.k is None else f"F1pool@{self.k}"
        spec = METRICS.get(self.name)
        return self.label if spec is None else spec.label(self.k)

    @classmethod
    def parse(cls, label: str, *, known: Iterable[str] | None = None, where: str = "metric") -> MetricKey:
        """``"ndcg@10"`` as ``MetricKey("ndcg", 10)``, ``"auc"`` as ``MetricKey("auc")``. A
        malformed label (no name, a k that is not a positive integer) raises a ConfigError naming
        ``where``; so does a name outside ``known``, when given, with the closest one."""
        name, at, k = label.partition("@") if isinstance(label, str) else ("", "", "")
        if not name or (at and not (k.isdigit() and int(k) > 0)):
            raise ConfigError(f"{where}: expected 'metric@k' with a positive integer k (e.g. 'ndcg@10') "
                              f"or a metric without a cutoff (e.g. 'auc'), got {label!r}")
        if known is not None and name not in known:
            raise ConfigError(f"{where} {label!r}: unknown metric {name!r}: {closest(name, known)}")
        return cls(name, int(k) if at else None)

    @staticmethod
    def label_column(metric: str = "metric", k: str = "k"):
        """A polars expression: every row's label, from its ``metric`` and ``k`` columns."""
        import polars as pl

        return (pl.when(pl.col(k).is_null()).then(pl.col(metric))
                .otherwise(pl.format("{}@{}", pl.col(metric), pl.col(k))))

    def rows(self):
        """A polars expression selecting the rows of this metric at this k (k null without one)."""
        import polars as pl

        at = pl.col("k").is_null() if self.k is None else pl.col("k") == self.k
        return (pl.col("metric") == self.name) & at


def display_label(label: str) -> str:
    """A label as tables print it: ``ndcg@10`` -> ``nDCG@10`` (:attr:`MetricKey.display`)."""
    return MetricKey.parse(label).display


def lower_is_better(metric: str) -> bool:
    """True for metrics whose lower values are better (errors, NDPM, Gini); unknown names: False."""
    spec = METRICS.get(metric)
    return spec is not None and spec.lower_is_better


def check_metrics(metrics: str | Iterable[str], allowed: Sequence[str] = ALL_METRICS) -> list[str]:
    """The metric names as a list without repeats; an unknown name raises with the closest one."""
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise ConfigError("no metric given: " + closest("", allowed))
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or name not in allowed:
            raise ConfigError(f"unknown metric {name!r}: {closest(str(name), allowed)}")
        if name not in out:
            out.append(name)
    return out


def check_cutoffs(k: int | Iterable[int]) -> list[int]:
    """Cutoffs as a sorted list of distinct positive ints; k <= 0 or a non-integer raises."""
    values = [k] if hasattr(k, "__index__") else list(k)
    if not values:
        raise ConfigError("no cutoff k given: expected positive integers such as 1, 5, 10")
    out = set()
    for value in values:
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise ConfigError(f"cutoff k must be a positive integer, got {value!r}")
        if int(value) <= 0:
            raise ConfigError(f"cutoff k must be a positive integer, got {int(value)}")
        out.add(int(value))
    return sorted(out)
