"""The TOML writer against Python's own TOML reader: whatever it writes, tomllib reads back equal."""

from __future__ import annotations

import math
import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core.toml_text import dumps

keys = st.text(min_size=1, max_size=8)
scalars = (st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=12)
           | st.floats(allow_nan=False))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
                      max_leaves=12)
documents = st.dictionaries(keys, values | st.lists(st.dictionaries(keys, values, max_size=3), min_size=1, max_size=3),
                            max_size=6)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_what_is_written_reads_back_equal(document):
    assert tomllib.loads(dumps(document)) == document


def test_a_config_shaped_document_reads_as_written_by_hand():
    """Tables under headers after their plain keys, arrays of tables as [[...]], the rest inline."""
    text = dumps({"name": "x", "dataset": {"path": "a b.csv", "columns": {"user": "u"}},
                  "recommenders": [{"name": "als", "params": {"factors": 8}}, {"name": "popular", "params": {}}],
                  "seed": 3})
    assert text == ('name = "x"\nseed = 3\n\n[dataset]\npath = "a b.csv"\n\n[dataset.columns]\nuser = "u"\n\n'
                    '[[recommenders]]\nname = "als"\n\n[recommenders.params]\nfactors = 8\n\n'
                    '[[recommenders]]\nname = "popular"\nparams = {}\n')


def test_none_is_left_out_and_special_floats_and_escapes_read_back():
    document = {"a": None, "b": [1.5, math.inf, -math.inf], "c": 'q"\\\n\t\x01\x7fé', "d e": {"f": None, "g": 1}}
    assert tomllib.loads(dumps(document)) == {"b": [1.5, math.inf, -math.inf], "c": 'q"\\\n\t\x01\x7fé',
                                              "d e": {"g": 1}}
    assert math.isnan(tomllib.loads(dumps({"x": math.nan}))["x"])


def test_a_value_without_a_toml_form_is_refused():
    with pytest.raises(TypeError, match="no TOML form for object"):
        dumps({"x": object()})
