"""``recsys-eval datasets``: list, info, fetch; every bad input is one message and exit 1."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from recsys_eval.cli import main
from recsys_eval.data import descriptors


def run(args: list[str], capsys) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def fails(args: list[str], capsys, message: str) -> str:
    code, out, err = run(args, capsys)
    assert code == 1, (out, err)
    assert "Traceback" not in out + err
    assert message in " ".join(err.split()), err  # rich may wrap long lines
    return err


@pytest.fixture
def tiny_registry(monkeypatch, make_descriptor):
    """Make `tiny` the only known dataset; returns a setter for its descriptor."""

    def use(desc):
        monkeypatch.setattr(descriptors, "_registry", lambda: {desc.name: desc})
        return desc

    return use


@pytest.mark.parametrize(
    "args", [[], ["datasets"], ["datasets", "list"], ["datasets", "info"], ["datasets", "fetch"]]
)
def test_help_on_every_command(capsys, args):
    code, out, _ = run([*args, "--help"], capsys)
    assert code == 0 and "Usage" in out


def test_list(capsys, tmp_path):
    code, out, _ = run(["datasets", "list", "--json", "--data-home", str(tmp_path)], capsys)
    assert code == 0
    listed = json.loads(out)
    assert listed["data_home"] == str(tmp_path)
    rows = {row["name"]: row for row in listed["datasets"]}
    assert rows["ml-100k"]["archive_bytes"] == 4_924_029 and rows["ml-100k"]["in_data_home"] == "absent"
    assert len(rows) == 7
    code, out, _ = run(["datasets", "list", "--data-home", str(tmp_path)], capsys)
    assert code == 0 and "ml-latest-small" in out and "1,000,209" in out


def test_info_ml100k_against_an_independent_count(capsys, shared_home):
    path = shared_home / "ml-100k" / "u.data"
    if not path.is_file():
        pytest.skip("no ml-100k in the shared data")
    rows = [line.split("\t") for line in path.read_text().splitlines()]
    code, out, _ = run(["datasets", "info", "ml-100k", "--json", "--no-download"], capsys)
    assert code == 0
    info = json.loads(out)
    assert (info["interactions"], info["users"], info["items"]) == (100_000, 943, 1_682)
    assert info["density"] == pytest.approx(100_000 / (943 * 1_682))
    ratings = Counter(float(r[2]) for r in rows)
    assert {d["rating"]: d["count"] for d in info["ratings"]["distribution"]} == ratings
    per_user = np.array(list(Counter(r[0] for r in rows).values()))
    assert info["user_counts"]["median"] == np.median(per_user) and info["user_counts"]["min"] == 20
    times = [int(r[3]) for r in rows]
    assert info["time"]["days"] == round((max(times) - min(times)) / 86400, 1)
    code, out, _ = run(["datasets", "info", "ml-100k"], capsys)
    assert code == 0 and "100,000" in out and "Rating distribution" in out


def test_info_prints_what_each_step_removed(capsys, tmp_path):
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    # users 1, 2 rate items 10, 20; user 3 rates item 30 only (and low)
    (folder / "u.data").write_text(
        "1\t10\t5\t1\n1\t20\t4\t2\n2\t10\t4\t3\n2\t20\t5\t4\n3\t30\t2\t5\n3\t10\t5\t6\n"
    )
    (folder / "u.item").write_text(
        "".join(f"{i}|T{i} (1990)|||x|{'|'.join('0' * 19)}\n" for i in (10, 20, 30))
    )
    args = ["datasets", "info", "ml-100k", "--data-home", str(tmp_path), "--no-download"]
    code, out, _ = run([*args, "--threshold", "4", "--k-core", "2", "--json"], capsys)
    assert code == 0
    info = json.loads(out)
    assert info["steps"] == [
        {"step": "threshold rating >= 4", "users": 0, "items": 1, "interactions": 1},
        {"step": "2-core", "users": 1, "items": 0, "interactions": 1},
    ]
    assert (info["interactions"], info["users"], info["items"]) == (4, 2, 2)
    code, out, _ = run([*args, "--min-user", "2", "--binarize", "--threshold", "5"], capsys)
    assert code == 0 and "Preparation: removed" in out and "min counts: users >= 2" in out


def test_fetch_through_the_local_server(
    capsys, tmp_path, http_server, tiny_zip, make_descriptor, tiny_registry
):
    http_server.routes["/tiny.zip"] = ("ok", tiny_zip)
    tiny_registry(make_descriptor(f"{http_server.url}/tiny.zip", data=tiny_zip))
    code, out, _ = run(["datasets", "fetch", "tiny", "--data-home", str(tmp_path), "--json"], capsys)
    assert code == 0 and json.loads(out) == {"dataset": "tiny", "folder": str(tmp_path / "tiny")}
    code, out, _ = run(["datasets", "list", "--json", "--data-home", str(tmp_path)], capsys)
    assert json.loads(out)["datasets"][0]["in_data_home"] == "extracted"


# -- bad input -----------------------------------------------------------------------------------------
def test_unknown_dataset(capsys):
    fails(["datasets", "info", "ml-10k"], capsys, "unknown dataset 'ml-10k': expected one of 'ml-100k'")
    fails(["datasets", "fetch", "movielens"], capsys, "unknown dataset 'movielens'")


def test_absent_dataset_without_download(capsys, tmp_path):
    fails(
        ["datasets", "info", "ml-1m", "--no-download", "--data-home", str(tmp_path)],
        capsys,
        "dataset ml-1m is not in the data home",
    )


def test_unwritable_data_home(capsys, tmp_path):
    home = tmp_path / "ro"
    home.mkdir()
    home.chmod(0o555)
    try:
        fails(["datasets", "fetch", "ml-1m", "--data-home", str(home)], capsys, "is not writable")
    finally:
        home.chmod(0o755)


def test_unparseable_line(capsys, tmp_path):
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    (folder / "u.data").write_text("1\t10\t5\t1\n1\t20\tfour\t2\n")
    (folder / "u.item").write_text(f"10|A|||x|{'|'.join('0' * 19)}\n")
    fails(
        ["datasets", "info", "ml-100k", "--data-home", str(tmp_path)],
        capsys,
        "u.data, line 2: column 'rating' has 'four'; expected a number",
    )


@pytest.mark.parametrize(
    ("checked", "archive", "message"),
    [
        (True, "short", "size"),
        (True, "flipped", "SHA-256"),
        (False, "corrupt", "corrupt or truncated archive"),
        (False, "truncated", "corrupt or truncated archive"),
        (False, "escaping", "is a path outside the extraction folder"),
    ],
)
def test_bad_archive_in_the_data_home(
    capsys, tmp_path, tiny_zip, zip_of, make_descriptor, tiny_registry, checked, archive, message
):
    tiny_registry(
        make_descriptor(
            "http://127.0.0.1:9/tiny.zip",
            data=tiny_zip,
            sha256=checked,
            size=checked,
            md5_url=None if checked else "http://127.0.0.1:9/tiny.zip.md5",
        )
    )
    data = {
        "short": tiny_zip[:-5],
        "flipped": tiny_zip[:40] + bytes([tiny_zip[40] ^ 1]) + tiny_zip[41:],
        "corrupt": tiny_zip[:60] + bytes(30) + tiny_zip[90:],
        "truncated": tiny_zip[: len(tiny_zip) // 2],
        "escaping": zip_of(
            {"tiny/ratings.csv": b"userId,movieId\n", "tiny/movies.csv": b"m\n", "../x": b"!"}
        ),
    }[archive]
    (tmp_path / "tiny.zip").write_bytes(data)
    command = "fetch" if archive == "escaping" else "info"
    fails(["datasets", command, "tiny", "--data-home", str(tmp_path)], capsys, message)
    assert not (tmp_path / "tiny").exists() and not (tmp_path / "x").exists()
