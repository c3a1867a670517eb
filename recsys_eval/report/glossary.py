"""What the report says about each metric and protocol it shows, generated from their definitions.

Metric labels, directions and one-line conventions come from the metric registry
(:data:`recsys_eval.measure.metrics.METRICS`); protocol explanations are composed from the axis
meanings of :mod:`recsys_eval.targets.protocol` and the designs of :mod:`recsys_eval.targets.designs`,
applied to a protocol's definition as the manifest records it (``protocol_definitions``: candidates,
relevant, non-relevant, n, design, bin). The conventions are those of ``docs/CONVENTIONS.md``.
"""

from __future__ import annotations

from recsys_eval.measure.metrics import METRICS, MetricKey
from recsys_eval.targets.designs import DESIGNS
from recsys_eval.targets.protocol import MEANINGS


def protocol_text(definition: dict) -> str:
    """One sentence explaining a protocol from its manifest definition (axes, n, design, bin)."""
    parts = [MEANINGS[definition["candidates"]], MEANINGS[definition["relevant"]]]
    if definition["nonrelevant"] == "AN":
        parts.append(MEANINGS["AN"] + " (full ranking)")
    else:
        parts.append(f"non-relevant items: a seeded uniform sample of n = {definition.get('n')} per "
                     "ranking (sampled ranking)")
    text = "; ".join(parts)
    design = definition.get("design", "standard")
    if design in DESIGNS:
        text += f"; design {design}: {DESIGNS[design]}"
        if definition.get("bin") is not None:
            text += f" (this is bin {definition['bin']} of {definition.get('bins')}, 1 = least popular)"
    return text[0].upper() + text[1:] + "."


def glossary(definitions: dict[str, dict], labels: list[str]) -> list[tuple[str, str]]:
    """``(term, explanation)`` for every protocol label and every metric of ``labels`` (``ndcg@10``).

    ``f1_pooled`` has no entry of its own: the ``f1`` entry explains it.
    """
    terms = [(name, protocol_text(definition)) for name, definition in definitions.items()]
    for metric in dict.fromkeys(MetricKey.parse(label).name for label in labels):
        spec = METRICS.get(metric)
        if spec is not None:
            explanation = f"{spec.convention[0].upper()}{spec.convention[1:]}; {spec.direction} is better."
            terms.append((f"{spec.symbol} ({metric})", explanation))
    return terms
