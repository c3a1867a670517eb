"""``recsys-eval list``: every registry entry listed, in text and in JSON that parses."""

from __future__ import annotations

import json

import pytest

from recsys_eval.cli import main
from recsys_eval.data import list_datasets
from recsys_eval.measure.metrics import ALL_METRICS, METRICS
from recsys_eval.recommend.registry import REGISTRY, make_recommender
from recsys_eval.split.make import SPLITTERS, split_parameters
from recsys_eval.targets.designs import DESIGNS
from recsys_eval.targets.protocol import CANDIDATES, NONRELEVANT, RELEVANT


def _list(args, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(["list", *args])
    assert exit_info.value.code in (0, None)
    return capsys.readouterr().out


def _json(what, capsys) -> list[dict]:
    return json.loads(_list([what, "--json"], capsys))[what]


def test_metrics_text_lists_every_metric_with_label_and_direction(capsys):
    out = _list(["metrics"], capsys)
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert len(rows) >= 15
    assert set(rows) == set(ALL_METRICS)
    for name in ALL_METRICS:
        spec = METRICS[name]
        assert spec.label("k") in rows[name] and str(spec.direction) in rows[name]
        assert spec.convention in rows[name]


def test_metrics_json(capsys):
    records = _json("metrics", capsys)
    assert [r["name"] for r in records] == list(ALL_METRICS)
    ndcg = next(r for r in records if r["name"] == "ndcg")
    assert ndcg["symbol"] == "nDCG" and ndcg["direction"] == "higher" and ndcg["cutoff"] is True
    assert ndcg["sampled_correction"] is True and ndcg["summary"] == "user mean"


def test_protocols(capsys):
    records = _json("protocols", capsys)
    assert {r["name"] for r in records if r["kind"] == "axis"} == {*CANDIDATES, *RELEVANT, *NONRELEVANT}
    assert {r["name"] for r in records if r["kind"] == "design"} == set(DESIGNS)
    out = _list(["protocols"], capsys)
    assert "AI+1R+NN100" in out and "uniform_test" in out


def test_recommenders_with_their_defaults(capsys):
    records = {r["name"]: r for r in _json("recommenders", capsys)}
    assert set(records) == set(REGISTRY)
    for name, record in records.items():
        assert [p["name"] for p in record["params"]] == list(REGISTRY[name].params)
    defaults = {r["name"]: {p["name"]: p["default"] for p in r["params"]} for r in records.values()}
    # Against the values the built models hold.
    als = make_recommender("als", threads=1).model
    assert defaults["als"]["factors"] == als.factors and defaults["als"]["iterations"] == als.iterations
    knn = make_recommender("item_knn", threads=1).model
    assert defaults["item_knn"]["k"] == knn.K and defaults["item_knn"]["similarity"] == "cosine"
    bm25 = make_recommender("item_knn", {"similarity": "bm25"}, threads=1).model
    assert defaults["item_knn"]["K1"] == bm25.K1
    assert defaults["user_knn"]["k"] == make_recommender("user_knn").k
    assert "item_knn" in _list(["recommenders"], capsys)


def test_splitters(capsys):
    records = {r["name"]: r for r in _json("splitters", capsys)}
    assert set(records) == set(SPLITTERS)
    assert [p["name"] for p in records["kfold"]["params"]] == list(split_parameters("kfold"))
    fraction = next(p for p in records["holdout"]["params"] if p["name"] == "fraction")
    assert fraction["required"] is True


def test_datasets(capsys):
    records = _json("datasets", capsys)
    assert [r["name"] for r in records] == [d.name for d in list_datasets()]
    assert "ml-100k" in _list(["datasets"], capsys)


def test_formats_are_those_the_readers_take(capsys):
    from recsys_eval.data.runs import FORMATS

    assert [r["name"] for r in _json("formats", capsys)] == list(FORMATS)
    out = _list(["formats"], capsys)
    assert all(line.split()[0] in FORMATS for line in out.splitlines()[:-1]) and "recbole" in out


def test_unknown_listing_fails(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["list", "metric"])
    assert exit_info.value.code != 0
