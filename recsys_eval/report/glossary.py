"""What the report says about each metric and protocol it shows, generated from their definitions.

Every label, direction and one-line convention the report, the LaTeX tables and the terminal summary
print is read through :func:`metric_info`, the one place to re-point when the metric registry
(``recsys_eval.measure.metrics``) provides them. Protocol explanations are composed from a protocol's
definition as the manifest records it (``protocol_definitions``: candidates, relevant, non-relevant,
n, design, bin); the conventions are those of ``docs/CONVENTIONS.md``.
"""

from __future__ import annotations

from recsys_eval.errors import ConfigError, closest

HIGHER, LOWER = "higher", "lower"

# name: (paper label, better direction, convention in one line)
_METRICS: dict[str, tuple[str, str, str]] = {
    "precision": ("P", HIGHER, "relevant items in the top k divided by k (even for shorter lists)"),
    "recall": ("R", HIGHER, "relevant items in the top k divided by the unit's relevant count R"),
    "f1": ("F1", HIGHER, "harmonic mean of P@k and R@k per unit, averaged over users"),
    "f1_pooled": ("F1 pooled", HIGHER, "F of TP, FP and FN summed over units (Forman & Scholz F_tp,fp)"),
    "ap": ("MAP", HIGHER, "average precision over the top k divided by R (trec_eval map_cut), mean over users"),
    "ndcg": ("nDCG", HIGHER, "DCG of the graded gains, log2(rank + 1) discount, over the ideal DCG at k"),
    "rr": ("MRR", HIGHER, "1 / rank of the first relevant item within the top k, 0 if none"),
    "hit": ("HR", HIGHER, "1 if a relevant item is in the top k, else 0"),
    "half_life": ("HLU", HIGHER, "Breese's half-life utility: gains discounted by 2^((rank - 1) / (h - 1))"),
    "auc": ("AUC", HIGHER, "share of relevant/non-relevant pairs of the target set ordered right, ties 1/2"),
    "mae": ("MAE", LOWER, "mean absolute error of predicted against test ratings"),
    "rmse": ("RMSE", LOWER, "root mean squared error of predicted against test ratings"),
    "kendall": ("Kendall tau", HIGHER, "Kendall's tau-b between predicted and test ratings per user"),
    "spearman": ("Spearman rho", HIGHER, "Spearman's rank correlation of predicted and test ratings per user"),
    "ndpm": ("NDPM", LOWER, "Yao's normalized distance-based performance measure per user"),
    "catalog_coverage": ("Coverage", HIGHER, "share of the catalogue recommended in some top k list"),
    "user_coverage": ("User coverage", HIGHER, "share of users given at least one recommendation"),
    "prediction_coverage": ("Prediction coverage", HIGHER, "share of items the system can score"),
    "novelty": ("Novelty", HIGHER, "mean -log2 of the recommended items' train popularity"),
    "gini": ("Gini", LOWER, "Gini index of how often each item is recommended (0 = even exposure)"),
    "entropy": ("Entropy", HIGHER, "Shannon entropy of the recommended items' exposure"),
    "ild": ("ILD", HIGHER, "intra-list diversity: mean pairwise genre distance in a top k list"),
}


def metric_info(name: str) -> tuple[str, str, str]:
    """``(label, direction, convention)`` of a metric: ``("nDCG", "higher", "DCG of the graded...")``.

    The direction is ``"higher"`` or ``"lower"`` (which values are better).
    """
    try:
        return _METRICS[name]
    except KeyError:
        raise ConfigError(f"unknown metric {name!r}: {closest(name, list(_METRICS))}") from None


def lower_is_better(name: str) -> bool:
    """Whether a lower value of the metric is better (errors, NDPM, Gini)."""
    return metric_info(name)[1] == LOWER


def human_label(label: str) -> str:
    """``ndcg@10`` -> ``nDCG@10``, ``ap@10`` -> ``MAP@10``, ``auc`` -> ``AUC``; unknown names unchanged."""
    metric, at, k = label.partition("@")
    short = _METRICS[metric][0] if metric in _METRICS else metric
    return f"{short}{at}{k}"


_CANDIDATES = {
    "AI": "all items the user has not rated in train are candidates",
    "TI": "candidates are the items with a test rating by some user",
    "UT": "candidates are the user's own test items",
}
_RELEVANT = {
    "AR": "all of the user's relevant test items are ranked in one list",
    "1R": "one list per relevant test item (that item is the only relevant one in it)",
}


def protocol_text(definition: dict) -> str:
    """One sentence explaining a protocol from its manifest definition (axes, n, design, bin)."""
    parts = [_CANDIDATES.get(definition["candidates"], definition["candidates"]),
             _RELEVANT.get(definition["relevant"], definition["relevant"])]
    n = definition.get("n")
    if definition["nonrelevant"] == "AN":
        parts.append("every non-relevant candidate is ranked (full ranking)")
    else:
        parts.append(f"{n} non-relevant candidates are sampled per list (sampled ranking)")
    text = "; ".join(parts)
    design = definition.get("design", "standard")
    if design == "percentiles":
        text += (f"; items split into {definition['bins']} popularity bins by train ratings, "
                 f"bin {definition['bin']} of {definition['bins']} (1 = least popular)")
    elif design == "uniform_test":
        text += "; uniform test: the same number of relevant test ratings for every test item"
    return text[0].upper() + text[1:] + "."


def glossary(definitions: dict[str, dict], labels: list[str]) -> list[tuple[str, str]]:
    """``(term, explanation)`` for every protocol label and every metric of ``labels`` (``ndcg@10``)."""
    terms = [(name, protocol_text(definition)) for name, definition in definitions.items()]
    seen = dict.fromkeys(label.partition("@")[0] for label in labels)
    for metric in seen:
        if metric in _METRICS:
            label, direction, convention = metric_info(metric)
            terms.append((f"{label} ({metric})", f"{convention[0].upper()}{convention[1:]}; {direction} is better."))
    return terms
