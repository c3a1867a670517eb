"""The download path against a local HTTP server: good, corrupt, truncated, checksum mismatch,
path traversal, server errors; after every failure nothing is left that a later load would trust."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from recsys_eval.data import dataset_path, fetch_dataset, load_dataset
from recsys_eval.errors import DataError, DownloadError


def _leftovers(home: Path) -> list[str]:
    """Everything in the data home except the derived folder (the cache of a good load)."""
    if not home.exists():
        return []
    return sorted(p.name for p in home.iterdir() if p.name != ".recsys-eval")


def _assert_nothing_trusted(home: Path, desc) -> None:
    assert _leftovers(home) == []
    with pytest.raises(DataError, match="not in the data home"):
        load_dataset(desc, home, download=False)


def test_good_download_loads_and_leaves_only_archive_and_folder(
    http_server, tiny_zip, make_descriptor, tmp_path
):
    http_server.routes["/tiny.zip"] = ("ok", tiny_zip)
    desc = make_descriptor(f"{http_server.url}/tiny.zip", data=tiny_zip)
    home = tmp_path / "home"
    data = load_dataset(desc, home)
    assert (len(data), data.n_users, data.n_items) == (4, 3, 3)
    assert _leftovers(home) == ["tiny", "tiny.zip"]
    assert (home / "tiny.zip").read_bytes() == tiny_zip
    assert sorted(p.name for p in (home / "tiny").iterdir()) == ["README.txt", "movies.csv", "ratings.csv"]
    # the archive is not fetched again
    http_server.routes.clear()
    assert dataset_path(desc, home) == home / "tiny"
    assert len(load_dataset(desc, home, download=False)) == 4


def test_md5_published_beside_the_archive_is_checked(http_server, tiny_zip, make_descriptor, tmp_path):
    http_server.routes["/tiny.zip"] = ("ok", tiny_zip)
    http_server.routes["/tiny.zip.md5"] = (
        "ok",
        f"MD5 (tiny.zip) = {hashlib.md5(tiny_zip).hexdigest()}\n".encode(),
    )
    desc = make_descriptor(
        f"{http_server.url}/tiny.zip",
        data=tiny_zip,
        sha256=False,
        size=False,
        md5_url=f"{http_server.url}/tiny.zip.md5",
    )
    assert fetch_dataset(desc, tmp_path) == tmp_path / "tiny"
    # a wrong published md5 refuses the same archive
    http_server.routes["/tiny.zip.md5"] = ("ok", b"0123456789abcdef0123456789abcdef  tiny.zip\n")
    home = tmp_path / "other"
    with pytest.raises(DownloadError, match="verification"):
        fetch_dataset(desc, home)
    _assert_nothing_trusted(home, desc)


def test_checksum_mismatch_is_refused(http_server, tiny_zip, zip_of, make_descriptor, tmp_path):
    other = zip_of(
        {"tiny/ratings.csv": b"userId,movieId,rating,timestamp\n9,9,1,1\n", "tiny/movies.csv": b"x"}
    )
    http_server.routes["/tiny.zip"] = ("ok", other)
    desc = make_descriptor(f"{http_server.url}/tiny.zip", data=tiny_zip, size=False)
    home = tmp_path / "home"
    with pytest.raises(DownloadError, match=hashlib.sha256(tiny_zip).hexdigest()):
        load_dataset(desc, home)
    _assert_nothing_trusted(home, desc)


def test_corrupt_archive_with_matching_md5_fails_at_extraction(
    http_server, tiny_zip, make_descriptor, tmp_path
):
    corrupt = bytearray(tiny_zip)
    corrupt[60:90] = bytes(30)  # inside the first member's compressed data: its CRC fails
    corrupt = bytes(corrupt)
    http_server.routes["/tiny.zip"] = ("ok", corrupt)
    http_server.routes["/tiny.zip.md5"] = ("ok", hashlib.md5(corrupt).hexdigest().encode())
    desc = make_descriptor(
        f"{http_server.url}/tiny.zip", sha256=False, size=False, md5_url=f"{http_server.url}/tiny.zip.md5"
    )
    home = tmp_path / "home"
    with pytest.raises(DataError, match="corrupt or truncated archive"):
        load_dataset(desc, home)
    _assert_nothing_trusted(home, desc)


def test_truncated_download_is_refused(http_server, tiny_zip, make_descriptor, tmp_path):
    http_server.routes["/tiny.zip"] = ("ok", tiny_zip[: len(tiny_zip) // 2])
    desc = make_descriptor(f"{http_server.url}/tiny.zip", data=tiny_zip)
    home = tmp_path / "home"
    with pytest.raises(DownloadError, match="tiny.zip"):
        load_dataset(desc, home)
    _assert_nothing_trusted(home, desc)


def test_size_mismatch_is_named(http_server, tiny_zip, make_descriptor, tmp_path):
    """With no checksum, the size alone catches a short archive."""
    short = tiny_zip[:-10]
    http_server.routes["/tiny.zip"] = ("ok", short)
    http_server.routes["/tiny.zip.md5"] = ("ok", hashlib.md5(short).hexdigest().encode())
    desc = make_descriptor(
        f"{http_server.url}/tiny.zip", data=tiny_zip, sha256=False, md5_url=f"{http_server.url}/tiny.zip.md5"
    )
    home = tmp_path / "home"
    with pytest.raises(DownloadError, match=f"{len(short):,} bytes; expected {len(tiny_zip):,}"):
        load_dataset(desc, home)
    _assert_nothing_trusted(home, desc)


@pytest.mark.parametrize("mode", ["drop", "500", "404"])
def test_server_error_leaves_nothing(http_server, tiny_zip, make_descriptor, tmp_path, mode):
    http_server.routes["/tiny.zip"] = (mode, tiny_zip)
    desc = make_descriptor(f"{http_server.url}/tiny.zip", data=tiny_zip)
    home = tmp_path / "home"
    with pytest.raises(DownloadError, match="cannot download"):
        load_dataset(desc, home)
    _assert_nothing_trusted(home, desc)
    # the next try, with the server well again, succeeds
    http_server.routes["/tiny.zip"] = ("ok", tiny_zip)
    assert len(load_dataset(desc, home)) == 4


@pytest.mark.parametrize("member", ["../evil.txt", "tiny/../../evil.txt", "/tmp/evil-recsys-eval.txt"])
def test_member_escaping_the_folder_is_refused(
    http_server, tiny_zip, zip_of, make_descriptor, tmp_path, member
):
    bad = zip_of(
        {
            "tiny/ratings.csv": b"userId,movieId\n1,2\n",
            "tiny/movies.csv": b"movieId,title,genres\n",
            member: b"owned\n",
        }
    )
    http_server.routes["/tiny.zip"] = ("ok", bad)
    desc = make_descriptor(f"{http_server.url}/tiny.zip", data=bad)
    home = tmp_path / "a" / "home"
    with pytest.raises(DataError, match="outside the extraction folder"):
        load_dataset(desc, home)
    _assert_nothing_trusted(home, desc)
    assert not list(tmp_path.rglob("evil*"))
    assert not Path("/tmp/evil-recsys-eval.txt").exists()


def test_archive_already_in_home_is_verified(tiny_zip, make_descriptor, tmp_path):
    desc = make_descriptor("http://127.0.0.1:9/tiny.zip", data=tiny_zip)  # never contacted
    (tmp_path / "tiny.zip").write_bytes(tiny_zip[:-1])
    with pytest.raises(DownloadError, match="size"):
        load_dataset(desc, tmp_path)
    (tmp_path / "tiny.zip").write_bytes(tiny_zip[:40] + bytes([tiny_zip[40] ^ 1]) + tiny_zip[41:])
    with pytest.raises(DownloadError, match="SHA-256"):
        load_dataset(desc, tmp_path)
    (tmp_path / "tiny.zip").write_bytes(tiny_zip)
    assert len(load_dataset(desc, tmp_path)) == 4  # read straight from the archive
    assert not (tmp_path / "tiny").exists()


def test_unwritable_data_home_is_a_clear_error(tiny_zip, make_descriptor, tmp_path):
    desc = make_descriptor("http://127.0.0.1:9/tiny.zip", data=tiny_zip)
    home = tmp_path / "ro"
    home.mkdir()
    home.chmod(0o555)
    try:
        with pytest.raises(DataError, match="not writable"):
            fetch_dataset(desc, home)
    finally:
        home.chmod(0o755)
    assert list(home.iterdir()) == []
