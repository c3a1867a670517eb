"""The dataset descriptors in datasets/: valid, and agreeing with the official checksums."""

from __future__ import annotations

import csv

import pytest

from recsys_eval.data import get_descriptor, list_datasets
from recsys_eval.data.descriptors import descriptor_folder, read_descriptor
from recsys_eval.errors import DataError

NAMES = {"ml-100k", "ml-1m", "ml-10m", "ml-20m", "ml-25m", "ml-32m", "ml-latest-small"}


def test_every_movielens_dataset_has_a_valid_descriptor():
    descs = list_datasets()
    assert {d.name for d in descs} == NAMES
    assert {p.stem for p in descriptor_folder().glob("*.toml")} == NAMES
    for desc in descs:
        assert desc.archive.url == f"https://files.grouplens.org/datasets/movielens/{desc.name}.zip"
        assert desc.archive.sha256 or desc.archive.md5_url
        assert desc.items is not None and desc.counts is not None
    assert [d.name for d in descs][:3] == ["ml-100k", "ml-latest-small", "ml-1m"]


def test_sizes_and_sha256_agree_with_the_official_list(shared_home):
    path = shared_home / "OFFICIAL_CHECKSUMS.tsv"
    if not path.is_file():
        pytest.skip("no OFFICIAL_CHECKSUMS.tsv")
    with open(path) as stream:
        rows = list(csv.DictReader((line for line in stream if not line.startswith("#")), delimiter="\t"))
    official = {row["file"]: row for row in rows}
    assert len(official) == 5
    for desc in list_datasets():
        row = official.get(desc.archive.filename)
        if row is None:
            assert desc.archive.sha256 is None and desc.archive.md5_url.endswith(".zip.md5")
            continue
        assert desc.archive.url == row["url"]
        assert (desc.archive.size, desc.archive.sha256) == (int(row["bytes"]), row["sha256"])


def test_names_are_case_insensitive():
    assert get_descriptor("ML-100K").name == "ml-100k"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("sha256 = ", 'sha256 = "abc"\n#'), r"archive\.sha256: .*64 lowercase hexadecimal"),
        (
            ('columns = ["user", "item", "rating", "timestamp"]', 'columns = ["user", "rating"]'),
            r"ratings: .*\['item'\]",
        ),
        (("[ratings]", "[ratings]\nsepartor = 1"), r"ratings\.separtor: Extra inputs"),
        (("[ratings]", "[ratings"), "not valid TOML"),
    ],
)
def test_invalid_descriptor_names_the_file_and_field(tmp_path, change, message):
    text = (descriptor_folder() / "ml-1m.toml").read_text()
    assert change[0] in text
    path = tmp_path / "ml-1m.toml"
    path.write_text(text.replace(change[0], change[1], 1))
    with pytest.raises(DataError, match=rf"{path}.*{message}"):
        read_descriptor(path)
