"""``recsys-eval list metrics|protocols|recommenders|splitters|datasets|formats``: what a config can name.

Every listing is read from the registry that checks the name in a config (the metric registry, the
protocol axes, the recommender registry, the splitters, the dataset descriptors), so it cannot drift
from what a run accepts. Imports happen inside the command, so that ``recsys-eval --help`` stays fast.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import typer

from recsys_eval.cli import app


class Catalog(StrEnum):
    metrics = "metrics"
    protocols = "protocols"
    recommenders = "recommenders"
    splitters = "splitters"
    datasets = "datasets"
    formats = "formats"


@app.command("list")
def list_command(
    what: Catalog = typer.Argument(..., help="What to list.", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts instead of text."),
) -> None:
    """List the metrics, protocols, recommenders, splitters, datasets or run formats a config can name."""
    records = _LISTINGS[what]()
    if as_json:
        typer.echo(json.dumps({what.value: records}, indent=2))
        return
    for line in _TEXT[what](records):
        typer.echo(line)


# -- records (JSON) ---------------------------------------------------------------------------------
def metric_records() -> list[dict[str, Any]]:
    from recsys_eval.measure.metrics import METRICS, Family

    return [spec.as_dict() for spec in METRICS.values() if spec.family is not Family.AUXILIARY]


def protocol_records() -> list[dict[str, Any]]:
    from recsys_eval.targets.designs import DESIGNS
    from recsys_eval.targets.protocol import CANDIDATES, MEANINGS, NONRELEVANT, RELEVANT

    axes = [("candidates", CANDIDATES), ("relevant", RELEVANT), ("nonrelevant", NONRELEVANT)]
    return [
        *({"kind": "axis", "axis": axis, "name": value, "meaning": MEANINGS[value]}
          for axis, values in axes for value in values),
        *({"kind": "design", "name": name, "meaning": meaning} for name, meaning in DESIGNS.items()),
    ]


def recommender_records() -> list[dict[str, Any]]:
    from recsys_eval.recommend.registry import REGISTRY

    records = []
    for name, entry in REGISTRY.items():
        defaults = _defaults(name)
        params = [
            {"name": key, "type": param.kind.__name__, "minimum": param.minimum,
             "choices": list(param.choices) or None, "default": defaults.get(key)}
            for key, param in entry.params.items()
        ]
        records.append({"name": name, "description": entry.description, "params": params})
    return records


def splitter_records() -> list[dict[str, Any]]:
    import inspect

    from recsys_eval.split.make import SPLITTERS, split_parameters

    records = []
    for name, function in SPLITTERS.items():
        params = [
            {"name": p.name, "required": p.default is inspect.Parameter.empty,
             "default": None if p.default is inspect.Parameter.empty else _plain(p.default),
             "type": str(p.annotation)}
            for p in split_parameters(name).values()
        ]
        records.append({"name": name, "description": _first_sentence(function), "params": params})
    return records


def dataset_records() -> list[dict[str, Any]]:
    from recsys_eval.data import list_datasets

    return [
        {"name": d.name, "title": d.title, "summary": d.summary,
         "ratings": d.counts.ratings if d.counts else None,
         "users": d.counts.users if d.counts else None,
         "items": d.counts.items if d.counts else None}
        for d in list_datasets()
    ]


def format_records() -> list[dict[str, Any]]:
    from recsys_eval.data.run_formats import FORMAT_MEANINGS

    return [{"name": name, "layout": layout} for name, layout in FORMAT_MEANINGS.items()]


# -- text ---------------------------------------------------------------------------------------------
def metric_lines(records: list[dict]) -> list[str]:
    """trec_eval -h style: per family, one line per metric with its label, direction and convention."""
    from recsys_eval.measure.metrics import METRICS, Family

    width = max(len(r["name"]) for r in records)
    lines = []
    for family in dict.fromkeys(r["family"] for r in records):
        lines.append(f"{Family(family).title}:")
        for r in (r for r in records if r["family"] == family):
            label = METRICS[r["name"]].label("k")
            better = "higher" if r["direction"] == "higher" else "lower "
            lines.append(f"  {r['name']:<{width}}  {label:<7} {better}  {r['convention']}")
        lines.append("")
    lines.append("undefined values, summary rules: --json; formulas: docs/CONVENTIONS.md#metrics")
    return lines


def protocol_lines(records: list[dict]) -> list[str]:
    lines = ["A protocol is <candidates>+<relevant>+<non-relevant>, e.g. AI+AR+AN (full ranking) or "
             "AI+1R+NN100 (the sampled protocol common in papers)."]
    for r in records:
        if r["kind"] == "axis":
            lines.append(f"  {r['name']:<4} {r['meaning']}")
    lines.append("Designs (a protocol's `design` in a config):")
    lines += [f"  {r['name']:<13} {r['meaning']}" for r in records if r["kind"] == "design"]
    return lines


def recommender_lines(records: list[dict]) -> list[str]:
    lines = []
    for r in records:
        lines.append(f"{r['name']}: {r['description']}")
        for p in r["params"]:
            kind = "|".join(p["choices"]) if p["choices"] else p["type"]
            if p["minimum"] is not None:
                kind += f" >= {p['minimum']:g}"
            default = "" if p["default"] is None else f" (default {p['default']})"
            lines.append(f"    {p['name']}: {kind}{default}")
    lines.append("Or a plugin 'module:Class' implementing recsys_eval.recommend.Recommender.")
    return lines


def splitter_lines(records: list[dict]) -> list[str]:
    lines = []
    for r in records:
        lines.append(f"{r['name']}: {r['description']}")
        for p in r["params"]:
            value = "required" if p["required"] else f"default {p['default']}"
            lines.append(f"    {p['name']}: {value}")
    return lines


def dataset_lines(records: list[dict]) -> list[str]:
    return [f"{r['name']:<16} {r['summary'] or r['title']}" for r in records]


def format_lines(records: list[dict]) -> list[str]:
    width = max(len(r["name"]) for r in records)
    return [f"{r['name']:<{width}}  {r['layout']}" for r in records] + [
        "Without a format: from the extension, or detected from the columns or the first line "
        "(docs/CONVENTIONS.md#interchange-layouts)."]


_LISTINGS = {Catalog.metrics: metric_records, Catalog.protocols: protocol_records,
             Catalog.recommenders: recommender_records, Catalog.splitters: splitter_records,
             Catalog.datasets: dataset_records, Catalog.formats: format_records}
_TEXT = {Catalog.metrics: metric_lines, Catalog.protocols: protocol_lines,
         Catalog.recommenders: recommender_lines, Catalog.splitters: splitter_lines,
         Catalog.datasets: dataset_lines, Catalog.formats: format_lines}


# -- helpers ------------------------------------------------------------------------------------------
def _defaults(name: str) -> dict[str, Any]:
    """The hyperparameters a recommender takes when a config sets none, read off the constructors
    of the model classes it can build (implicit's classes for the implicit models; names matched
    ignoring case, so item_knn's k is implicit's K). A parameter that selects the class (item_knn's
    similarity) gets the choice that builds the default class; a parameter of another choice's
    class only (item_knn's K1 for bm25) gets that class's default."""
    import inspect

    from recsys_eval.recommend.registry import REGISTRY, make_recommender

    def model_class(params: dict) -> type:
        built = make_recommender(name, params, threads=1)
        inner = getattr(built, "model", None)  # a wrapper's library model (None before fit: the wrapper)
        return type(built if inner is None else inner)

    choices = {key: p.choices for key, p in REGISTRY[name].params.items() if p.choices}
    default_class = model_class({})
    classes = [default_class, *(model_class({key: c}) for key, values in choices.items() for c in values)]
    defaults: dict[str, Any] = {}
    for cls in classes:  # the default class first: its defaults win
        for p, v in inspect.signature(cls).parameters.items():
            if v.default is not inspect.Parameter.empty:
                defaults.setdefault(p.lower(), _plain(v.default))
    for key, values in choices.items():
        defaults[key.lower()] = next((c for c in values if model_class({key: c}) is default_class), None)
    return {key: defaults.get(key.lower()) for key in REGISTRY[name].params}


def _plain(value: Any) -> Any:
    """A default as JSON can hold it."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return str(value)


def _first_sentence(function) -> str:
    import inspect

    paragraph = (inspect.getdoc(function) or "").split("\n\n")[0]
    return " ".join(paragraph.split())
