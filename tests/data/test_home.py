"""Data home resolution and where derived files go."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest

from recsys_eval.data import data_home
from recsys_eval.data.home import derived_folder, is_writable, writable_folder
from recsys_eval.errors import DataError


def test_explicit_then_environment_then_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RECSYS_EVAL_DATA", str(tmp_path / "env"))
    assert data_home(tmp_path / "explicit") == tmp_path / "explicit"
    assert data_home(str(tmp_path / "explicit")) == tmp_path / "explicit"
    assert data_home() == tmp_path / "env"
    monkeypatch.delenv("RECSYS_EVAL_DATA")
    assert data_home() == Path(platformdirs.user_cache_dir("recsys-eval"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert data_home("~/data") == tmp_path / "data"


def test_read_only_folder_is_not_writable_even_for_root(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert not is_writable(folder)
        assert not is_writable(folder / "not" / "yet")
        with pytest.raises(DataError, match=r"ro.*not writable.*RECSYS_EVAL_DATA"):
            writable_folder(folder / "sub", "a test file")
    finally:
        folder.chmod(0o755)
    assert is_writable(tmp_path / "new" / "nested")
    assert writable_folder(tmp_path / "new" / "nested", "x").is_dir()


def test_derived_files_beside_the_data_or_in_the_derived_root(monkeypatch, tmp_path):
    monkeypatch.setenv("RECSYS_EVAL_CACHE", str(tmp_path / "derived"))
    assert derived_folder(tmp_path / "home", "ml-1m") == tmp_path / "home" / ".recsys-eval" / "ml-1m"
    homes = [tmp_path / "ro1", tmp_path / "ro2"]
    for home in homes:
        home.mkdir()
        home.chmod(0o555)
    try:
        a, b = (derived_folder(home, "ml-1m") for home in homes)
    finally:
        for home in homes:
            home.chmod(0o755)
    assert a.parent == b.parent == tmp_path / "derived"
    assert a != b and a.name.startswith("ml-1m-")
