"""Fixtures shared by every test folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from recsys_eval.data.synthetic import write_synthetic_ratings


@pytest.fixture(scope="session")
def synthetic_ratings(tmp_path_factory) -> Path:
    """A small seeded MovieLens-like ratings CSV (300 users, 400 items, 12,000 ratings with
    timestamps), so that end-to-end tests need no MovieLens copy and never skip."""
    return write_synthetic_ratings(tmp_path_factory.mktemp("data") / "ratings.csv")
