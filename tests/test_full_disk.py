"""Every command that writes, on a disk that refuses the write: one line naming the path and the
reason, exit status 1, the earlier output untouched, no temporary left.

ENOSPC and EROFS are real: each command runs in a private mount namespace (``unshare -rm``) on a
small tmpfs that holds the earlier output, then filled to the last block, or remounted read-only.
EDQUOT (no quota is set up on a tmpfs) and EACCES (the tests may run as root, whom permissions do
not stop) are raised by a patched ``os.replace``, the call that puts every file in place.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config_text import config_text, ratings_file, split_table
from recsys_eval.cli import main
from recsys_eval.core.atomic import is_scratch
from recsys_eval.core.results import TUNING
from recsys_eval.data.synthetic import write_synthetic_ratings

pytestmark = pytest.mark.slow

COLUMNS = "user=userId,item=movieId,rating=rating,timestamp=timestamp"
#: Each writing command: (the earlier output it may replace or add to, relative to the disk; its
#: arguments, with {disk}, {data}, {config}, {tuned}, {test} and {run} filled in).
COMMANDS = {
    "run": ("out", "run {config} --out {disk}/out --quiet"),
    "tune": ("out", "run {tuned} --out {disk}/out --quiet"),
    "evaluate": ("mine", "evaluate --test {test} --run {run} --metrics ndcg --k 1 --out {disk}/mine --force"),
    "split": ("split", "split {data} {disk}/split -p fraction=0.5 --force --columns " + COLUMNS),
    "report": ("results", "report {disk}/results --force"),
    "compare": ("results", "compare {disk}/results --tests sign"),
    "init": ("results", "init {disk}/experiment.toml"),
    "audit": ("audit", "audit {config} --users {disk}/audit/users.csv"),
}


def recsys_eval(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "recsys_eval.cli", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """The commands' inputs, and each command's earlier output in ``earlier/`` (copied to the disk)."""
    base = tmp_path_factory.mktemp("inputs")
    data = write_synthetic_ratings(base / "ratings.csv", users=40, items=60, interactions=1000, seed=2)
    config = base / "disk.toml"
    config.write_text(config_text("disk", seed=1, dataset=ratings_file(data), split=split_table("kfold", k=2),
                                  recommenders=["popular", "random"], output={"report": False}))
    tuned = base / "tuned.toml"  # how users tune: a run with [tuning] and a recommender's search
    tuned.write_text(config_text("tuned", seed=1, dataset=ratings_file(data), split=split_table("kfold", k=2),
                                 recommenders=["popular", {"name": "user_knn", "search": {"k": [3, 10]}}],
                                 output={"report": False}, tuning={"method": "grid", "metric": "ndcg@10"}))
    test, run = base / "test.csv", base / "run.csv"
    test.write_text("user,item,rating\n1,10,5\n2,11,4\n")
    run.write_text("user,item,score\n1,10,0.9\n2,12,0.5\n")
    earlier = base / "earlier"
    recsys_eval("run", str(config), "--out", str(earlier / "out"), "--quiet")
    (finished,) = [p for p in (earlier / "out" / "disk").iterdir() if not p.name.startswith(".") and not p.is_symlink()]
    shutil.copytree(finished, earlier / "results")
    recsys_eval("report", str(earlier / "results"))
    recsys_eval("evaluate", "--test", str(test), "--run", str(run), "--metrics", "ndcg", "--k", "1",
                "--out", str(earlier / "mine"))
    recsys_eval("split", str(data), str(earlier / "split"), "-p", "fraction=0.2", "--columns", COLUMNS)
    (earlier / "audit").mkdir()
    recsys_eval("audit", str(config), "--users", str(earlier / "audit" / "users.csv"))
    return {"data": data, "config": config, "tuned": tuned, "test": test, "run": run, "earlier": earlier}


def arguments(name: str, inputs: dict[str, Path], disk: Path) -> list[str]:
    return shlex.split(COMMANDS[name][1].format(disk=disk, **inputs))


def hashes(folder: Path) -> dict[str, str]:
    """Every file's SHA-256 but the filler's and a run's work folder's (kept for ``--resume``)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "filler"
            and not any(part.startswith(".partial-") for part in p.relative_to(folder).parts[:-1])}


def refused_write(tmp_path: Path, name: str, inputs: dict[str, Path], refuse: str) -> tuple[str, str]:
    """Run command ``name`` on a tmpfs holding its earlier output, made to ``refuse`` writes
    (``full``: filled to the last block; ``read-only``: remounted so); return its status line and
    standard error. Checks that the earlier output is unchanged and no temporary is left."""
    disk = tmp_path / "disk"
    disk.mkdir()
    earlier = inputs["earlier"] / COMMANDS[name][0]
    mount = f"mount -t tmpfs -o size=8m tmpfs {disk}"
    if subprocess.run(["unshare", "-rm", "sh", "-c", mount], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (unshare -rm)")
    refusal = (f"dd if=/dev/zero of={disk}/filler bs=4k 2>/dev/null; sync" if refuse == "full"
               else f"mount -o remount,ro {disk}")
    command = shlex.join([sys.executable, "-m", "recsys_eval.cli", *arguments(name, inputs, disk)])
    after = tmp_path / "after"
    script = (f"{mount} && cp -a {earlier} {disk}/ && {refusal}; {command}; echo status=$?; "
              f"cp -a {disk} {after}")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True)
    assert hashes(after / earlier.name) == hashes(earlier), f"{name}: the earlier output changed"
    new = [p for p in after.rglob("*") if not (p == after / earlier.name or after / earlier.name in p.parents)
           and p.name != "filler"]
    assert new == [], f"{name} left {new}"
    assert [str(p) for p in after.rglob("*") if is_scratch(p)] == []
    return done.stdout.strip().splitlines()[-1], " ".join(done.stderr.split())


def assert_one_line(err: str, disk: Path, reason: str) -> None:
    assert "Traceback" not in err and err.count("error:") == 1, err
    assert f"{disk}" in err and reason in err, err


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_full_disk(tmp_path, inputs, name):
    status, err = refused_write(tmp_path, name, inputs, "full")
    assert status == "status=1"
    assert_one_line(err, tmp_path / "disk", "the disk is full (ENOSPC)")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_read_only_disk(tmp_path, inputs, name):
    status, err = refused_write(tmp_path, name, inputs, "read-only")
    assert status == "status=1"
    assert_one_line(err, tmp_path / "disk", "the file system is read-only (EROFS)")


@pytest.mark.parametrize("code", [errno.EDQUOT, errno.EACCES])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_quota_and_permission(tmp_path, inputs, monkeypatch, capsys, name, code):
    disk = tmp_path / "disk"
    earlier = inputs["earlier"] / COMMANDS[name][0]
    shutil.copytree(earlier, disk / earlier.name, symlinks=True)
    before = hashes(disk)
    real = os.replace

    def refused(src, dst, *args, **kwargs):
        if disk in Path(dst).parents:
            raise OSError(code, os.strerror(code), str(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(SystemExit) as exit_info:
        main(arguments(name, inputs, disk))
    assert exit_info.value.code == 1
    reason = {errno.EDQUOT: "the disk quota is exceeded (EDQUOT)", errno.EACCES: "permission denied (EACCES)"}[code]
    assert_one_line(capsys.readouterr().err, disk, reason)
    assert hashes(disk) == before
    assert [str(p) for p in disk.rglob("*") if is_scratch(p)] == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_tuning_run_whose_trial_log_is_refused(tmp_path, inputs, monkeypatch, capsys, code):
    """The disk fills while the tuner records a trial (the one write the other cases never reach:
    they refuse the run's first): one line naming the trial log, the earlier output untouched."""
    disk = tmp_path / "disk"
    earlier = inputs["earlier"] / COMMANDS["tune"][0]
    shutil.copytree(earlier, disk / earlier.name, symlinks=True)
    before = hashes(disk)
    real = os.replace

    def refused(src, dst, *args, **kwargs):
        if Path(dst).name == TUNING:
            raise OSError(code, os.strerror(code), str(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(SystemExit) as exit_info:
        main(arguments("tune", inputs, disk))
    assert exit_info.value.code == 1
    err = " ".join(capsys.readouterr().err.split())
    reason = {errno.ENOSPC: "the disk is full (ENOSPC)", errno.EDQUOT: "the disk quota is exceeded (EDQUOT)"}[code]
    assert_one_line(err, disk, reason)
    assert f"/{TUNING}:" in err, err
    assert hashes(disk) == before
    assert [str(p) for p in disk.rglob("*") if is_scratch(p)] == []
