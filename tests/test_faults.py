"""Fault injection: interrupted runs, full disks, concurrent runs and bad configs.

Each case asserts the message, the exit code, and that nothing is lost or half-written: a killed and
resumed run ends with every file an uninterrupted run writes and the same per-unit values; a write
that fails leaves the previous file intact and no scratch file. The data are a small synthetic CSV
written here, so no MovieLens file is needed.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import config_text, split_table
from recsys_eval.cli import main
from recsys_eval.core import atomic
from recsys_eval.core.atomic import is_scratch
from recsys_eval.core.lock import OWNER, FolderLock
from recsys_eval.errors import BusyError, OutputError
from recsys_eval.pipeline.config import identity_hash, load_config
from recsys_eval.core.results import ResultsFolder

@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    """user,item,rating,timestamp: 80 users, 120 items, 25 distinct items per user."""
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(1, 81), 25)
    items = np.concatenate([rng.choice(120, 25, replace=False) + 1 for _ in range(80)])
    path = tmp_path_factory.mktemp("data") / "ratings.csv"
    pl.DataFrame({
        "user": users, "item": items, "rating": rng.integers(1, 6, users.size),
        "timestamp": rng.integers(10**9, 10**9 + 10**6, users.size),
    }).write_csv(path)
    return path


def write_config(folder: Path, data: Path, *, report: bool = True) -> Path:
    path = folder / "faults.toml"
    text = config_text("faults", seed=3, dataset={"path": str(data)}, split=split_table("kfold", k=2),
                       recommenders=["popular", "random"],
                       metrics={"names": ["precision", "ndcg", "auc"], "k": [5]}, output={"report": report})
    path.write_text(text, encoding="utf-8")
    return path


def cli(*args: str) -> int:
    """Run the CLI in this process; return its exit status."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    return exit_info.value.code or 0


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "recsys_eval.cli", *args]


def finished(out: Path) -> list[Path]:
    root = out / "faults"
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and not p.is_symlink()) if root.is_dir() else []


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def scratch_files(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if is_scratch(p) or p.name == OWNER]


def per_unit(folder: Path) -> pl.DataFrame:
    frame = ResultsFolder.open(folder).scan_per_unit().collect()
    return frame.sort(frame.columns, nulls_last=True)


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count("error:") == 1, err
    return " ".join(err.split())


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data_file) -> tuple[Path, float]:
    """An uninterrupted run (its folder, and its wall time to choose kill points from)."""
    base = tmp_path_factory.mktemp("reference")
    config = write_config(base, data_file)
    start = time.monotonic()
    subprocess.run(command("run", str(config), "--out", str(base / "out"), "--quiet"), check=True)
    (folder,) = finished(base / "out")
    return folder, time.monotonic() - start


# -- killed and resumed --------------------------------------------------------------------------

@pytest.mark.parametrize(("sig", "seed"), [(signal.SIGINT, 1), (signal.SIGKILL, 2), (signal.SIGKILL, 3)])
def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path, data_file, reference, sig, seed):
    folder, wall = reference
    config = write_config(tmp_path, data_file)
    out = tmp_path / "out"
    victim = subprocess.Popen(command("run", str(config), "--out", str(out), "--quiet"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(random.Random(seed).uniform(0.2, 1.0) * wall)
    victim.send_signal(sig)
    _, err = victim.communicate(timeout=120)
    if sig == signal.SIGINT and victim.returncode != 0:
        # Once the command is done, the interpreter's teardown gives SIGINT its default action back:
        # a signal there ends the process by SIGINT, after every file was written.
        after_the_end = victim.returncode == -signal.SIGINT and bool(finished(out))
        assert victim.returncode == 130 or after_the_end, (victim.returncode, err.decode())
        assert b"Traceback" not in err, err.decode()
    subprocess.run(command("run", str(config), "--out", str(out), "--quiet", "--resume"), check=True)
    resumed = finished(out)[-1]
    assert listing(resumed) == listing(folder)
    assert scratch_files(out) == []
    assert not list((out / "faults").glob(".partial-*"))
    assert per_unit(resumed).equals(per_unit(folder))


def test_ctrl_c_inside_code_run_from_a_string_still_exits_130(tmp_path):
    """A KeyboardInterrupt that leaves ``exec``'d code (scipy.stats and namedtuple build code so in
    lazy imports) makes CPython end a ``python -m`` process by SIGINT even once it was handled."""
    (tmp_path / "interrupted_command.py").write_text(
        "from recsys_eval.cli import app, main\n\n"
        "@app.command('boom')\n"
        "def boom() -> None:\n"
        "    exec('raise KeyboardInterrupt')\n\n"
        "main()\n", encoding="utf-8")

    def default_sigint() -> None:  # whatever the test runner's own disposition is
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    done = subprocess.run([sys.executable, "-m", "interrupted_command", "boom"], cwd=tmp_path,
                          capture_output=True, preexec_fn=default_sigint)
    assert (done.returncode, done.stderr) == (130, b"interrupted\n")


def test_run_interrupted_between_fold_and_split_keeps_its_splits(tmp_path, data_file, monkeypatch):
    import recsys_eval.split as split_package

    config = write_config(tmp_path, data_file, report=False)
    out = tmp_path / "out"
    real = split_package.save_split

    def interrupted(*args, **kwargs):
        monkeypatch.setattr(split_package, "save_split", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(split_package, "save_split", interrupted)
    assert cli("run", str(config), "--out", str(out), "--quiet") == 130
    assert cli("run", str(config), "--out", str(out), "--quiet", "--resume") == 0
    (folder,) = finished(out)
    assert {p.name for p in (folder / "splits").iterdir()} == {"fold1", "fold2"}


# -- concurrent runs -----------------------------------------------------------------------------

@contextmanager
def held_elsewhere(folder: Path) -> Iterator[int]:
    """Hold the lock of ``folder`` in another process for the block; yield that process's pid."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from recsys_eval.core.lock import FolderLock; "
         f"FolderLock({str(folder)!r}).acquire(); print('held', flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_second_resume_of_a_running_run_refuses(tmp_path, data_file, capsys):
    config = write_config(tmp_path, data_file, report=False)
    out = tmp_path / "out"
    work = ResultsFolder.create(out, "faults", identity_hash(load_config(config)), resume=False)
    work.lock.release()
    with held_elsewhere(work.path) as pid:
        assert cli("run", str(config), "--out", str(out), "--quiet", "--resume") == 1
        message = error_line(capsys)
        assert f"another run is writing {work.path} (pid {pid} since 20" in message
    assert cli("run", str(config), "--out", str(out), "--quiet", "--resume") == 0
    (folder,) = finished(out)
    assert (folder / "splits" / "fold1" / "split.json").is_file()
    assert scratch_files(out) == []


def test_two_concurrent_resumes_never_race(tmp_path, data_file, reference):
    """Two ``--resume`` started together on an interrupted run: one refuses with the lock message
    (or, if it looked only after the other finished, runs anew); every finished folder is whole."""
    folder, _ = reference
    config = write_config(tmp_path, data_file)
    out = tmp_path / "out"
    first = subprocess.Popen(command("run", str(config), "--out", str(out), "--quiet"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not list((out / "faults").glob(".partial-*/folds/*.parquet")) and first.poll() is None:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    runs = [subprocess.Popen(command("run", str(config), "--out", str(out), "--quiet", "--resume"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    outcomes = [(run.wait(timeout=300), run.stderr.read().decode()) for run in runs]
    for code, err in outcomes:
        assert code == 0 or (code == 1 and "another run is writing" in err and "Traceback" not in err), err
    assert 0 in [code for code, _ in outcomes]
    for done in finished(out):
        assert listing(done) == listing(folder)
        assert per_unit(done).equals(per_unit(folder))
    assert scratch_files(out) == []


def test_lock_refuses_another_process_until_it_dies(tmp_path):
    with held_elsewhere(tmp_path) as pid:
        with pytest.raises(BusyError, match=rf"another run is writing {tmp_path} \(pid {pid} since 20"):
            FolderLock(tmp_path).acquire()
    with FolderLock(tmp_path):  # the holder was killed: free again
        assert (tmp_path / OWNER).read_text().split()[0] == str(os.getpid())
    assert not (tmp_path / OWNER).exists()


def test_lock_left_by_a_failed_run_of_this_process_is_taken_over(tmp_path):
    forgotten = FolderLock(tmp_path).acquire()
    with FolderLock(tmp_path) as lock:
        assert lock.held and not forgotten.held
        assert "another run is writing" in lock_elsewhere(tmp_path)


def lock_elsewhere(folder: Path) -> str:
    """The error another process gets when it asks for the lock of ``folder`` ("" if it got it)."""
    done = subprocess.run([sys.executable, "-c", "from recsys_eval.core.lock import FolderLock; "
                           f"FolderLock({str(folder)!r}).acquire()"], capture_output=True, text=True)
    return done.stderr


def test_lock_follows_its_folder_through_a_rename(tmp_path):
    before, after = tmp_path / "partial", tmp_path / "final"
    before.mkdir()
    lock = FolderLock(before).acquire()
    contender = FolderLock(before)
    os.rename(before, after)
    assert "another run is writing" in lock_elsewhere(after)
    lock.release()
    assert list(after.iterdir()) == []
    with pytest.raises(OutputError, match="cannot lock"):
        contender.acquire()  # its path no longer exists


# -- full disks and unwritable folders -----------------------------------------------------------

def test_atomic_write_replaces_whole_files_with_the_umask_mode(tmp_path):
    target = tmp_path / "sub" / "a.txt"
    atomic.write_text(target, "old")
    atomic.write_json(target, {"new": 1})
    assert json.loads(target.read_text()) == {"new": 1}
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    assert os.listdir(target.parent) == ["a.txt"]


def test_writes_in_a_block_sync_each_folder_once_after_the_last_rename(tmp_path, monkeypatch):
    """Every rename into a folder precedes that folder's one fsync, which comes before the block ends
    (what a note written after the block relies on); outside a block, each write syncs its own."""
    events: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(source, target):
        events.append(("rename", Path(target).parent.name))
        real_replace(source, target)

    monkeypatch.setattr(atomic.os, "replace", replace)
    monkeypatch.setattr(atomic, "fsync_folder", lambda folder: events.append(("sync", folder.name)))
    with atomic.folders_synced_once():
        atomic.write_text(tmp_path / "a" / "1.txt", "x")
        with atomic.folders_synced_once():  # inner blocks sync at the outer block's end
            atomic.write_text(tmp_path / "b" / "2.txt", "x")
        atomic.write_text(tmp_path / "a" / "3.txt", "x")
        assert [kind for kind, _ in events] == ["rename"] * 3
    assert events[3:] == [("sync", "a"), ("sync", "b")]
    atomic.write_text(tmp_path / "a" / "4.txt", "x")
    assert events[5:] == [("rename", "a"), ("sync", "a")]


def test_writes_in_a_block_are_fsynced_together_at_its_end(tmp_path, monkeypatch):
    """Inside a block each file is renamed at once but fsynced only when the block ends, every file
    before any folder; outside a block each write fsyncs its own temporary before the rename."""
    events: list[tuple[str, str]] = []
    real_replace = os.replace
    monkeypatch.setattr(atomic.os, "replace", lambda s, t: (events.append(("rename", Path(t).name)), real_replace(s, t)))
    monkeypatch.setattr(atomic, "_fsync_file", lambda path: events.append(("fsync", Path(path).name)))
    monkeypatch.setattr(atomic, "fsync_folder", lambda folder: events.append(("sync", folder.name)))
    with atomic.folders_synced_once():
        for name in ("1.txt", "2.txt", "3.txt"):
            atomic.write_text(tmp_path / "a" / name, name)
        assert events == [("rename", "1.txt"), ("rename", "2.txt"), ("rename", "3.txt")]
    assert sorted(events[3:6]) == [("fsync", "1.txt"), ("fsync", "2.txt"), ("fsync", "3.txt")]
    assert events[6:] == [("sync", "a")]
    assert [p.read_text() for p in sorted((tmp_path / "a").iterdir())] == ["1.txt", "2.txt", "3.txt"]
    events.clear()
    atomic.write_text(tmp_path / "a" / "4.txt", "x")
    assert [kind for kind, _ in events] == ["fsync", "rename", "sync"] and events[0][1].startswith(".4.txt.")


def test_a_refused_fsync_at_the_end_of_a_block_names_its_file(tmp_path, monkeypatch):
    def refuse(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(atomic, "_fsync_file", refuse)
    with pytest.raises(OutputError, match=r"cannot write .*2\.txt: the disk is full"):
        with atomic.folders_synced_once():
            atomic.write_text(tmp_path / "2.txt", "x")


@pytest.mark.parametrize("failure", [KeyboardInterrupt(), ValueError("a bug")])
def test_atomic_write_interrupted_keeps_the_old_file(tmp_path, failure):
    target = tmp_path / "a.txt"
    target.write_text("old")
    with pytest.raises(type(failure)), atomic.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise failure
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.txt"]


@pytest.mark.parametrize("raised", [
    OSError(errno.ENOSPC, "No space left on device"),
    pl.exceptions.ComputeError("parquet: File out of specification: underlying IO error: "
                               "No space left on device (os error 28)"),
    OSError("No space left on device (os error 28)"),  # polars' write_csv: no errno attribute
])
def test_full_disk_is_one_output_error_naming_the_path(tmp_path, monkeypatch, raised):
    target = tmp_path / "t.parquet"
    atomic.write_parquet(pl.DataFrame({"a": [1]}), target)

    def full(self, *args, **kwargs):
        raise raised

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    with pytest.raises(OutputError, match=rf"cannot write {target}: the disk is full \(ENOSPC\)"):
        atomic.write_parquet(pl.DataFrame({"a": [2]}), target)
    monkeypatch.undo()
    assert pl.read_parquet(target)["a"].to_list() == [1]
    assert os.listdir(tmp_path) == ["t.parquet"]


def test_read_only_folder_is_an_output_error(tmp_path, monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(OutputError, match="read-only"):
        atomic.write_text(tmp_path / "a.txt", "x")


def _full_on(monkeypatch, name: str) -> None:
    """Make every atomic write of a file called ``name`` fail as on a full disk."""
    real = atomic.os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name == name:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(atomic.os, "replace", replace)


def test_report_force_on_a_full_disk_keeps_the_old_report(tmp_path, reference, monkeypatch, capsys):
    folder = tmp_path / "copy"
    shutil.copytree(reference[0], folder)
    before = {name: (folder / name).read_bytes() for name in ("report.html", "report.md")}
    _full_on(monkeypatch, "report.html")
    assert cli("report", str(folder), "--force") == 1
    assert f"cannot write {folder / 'report.html'}: the disk is full" in error_line(capsys)
    assert {name: (folder / name).read_bytes() for name in before} == before
    assert scratch_files(folder) == []


@pytest.mark.parametrize("name", ["part-00000.parquet", "summary.parquet", "manifest.json"])
def test_evaluate_on_a_full_disk_is_one_line_and_keeps_the_earlier_folder(tmp_path, monkeypatch, capsys, name):
    """evaluate --out --force on a full disk: one line naming the file, nothing half-written beside
    the output, and the earlier results untouched."""
    files = {}
    for kind, text in (("test", "user,item,rating\n1,10,5\n2,11,4\n"), ("run", "user,item,score\n1,10,0.9\n2,12,0.5\n")):
        files[kind] = tmp_path / f"{kind}.csv"
        files[kind].write_text(text)
    out = tmp_path / "results" / "mine"
    args = ("evaluate", "--test", str(files["test"]), "--run", str(files["run"]), "--metrics", "ndcg", "--k", "1",
            "--out", str(out))
    assert cli(*args) == 0
    capsys.readouterr()
    before = {f: f.read_bytes() for f in out.rglob("*") if f.is_file()}
    _full_on(monkeypatch, name)
    assert cli(*args, "--force") == 1
    assert f"{name}: the disk is full (ENOSPC)" in error_line(capsys)
    assert {f: f.read_bytes() for f in out.rglob("*") if f.is_file()} == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["mine"]  # no work folder left


@pytest.mark.parametrize("name", ["part-00000.parquet", "summary.csv", "config.toml", "train.parquet"])
def test_run_on_a_full_disk_fails_cleanly_and_resumes(tmp_path, data_file, monkeypatch, capsys, name):
    config = write_config(tmp_path, data_file, report=False)
    out = tmp_path / "out"
    _full_on(monkeypatch, name)
    assert cli("run", str(config), "--out", str(out), "--quiet") == 1
    assert "the disk is full (ENOSPC)" in error_line(capsys)
    assert finished(out) == []
    monkeypatch.undo()
    assert cli("run", str(config), "--out", str(out), "--quiet", "--resume") == 0
    assert scratch_files(out) == []


def test_split_on_a_full_disk_keeps_the_previous_split(tmp_path, data_file, monkeypatch, capsys):
    out = tmp_path / "split"
    assert cli("split", str(data_file), str(out), "-p", "fraction=0.2") == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    _full_on(monkeypatch, "test.parquet")
    assert cli("split", str(data_file), str(out), "-p", "fraction=0.5", "--force") == 1
    assert "the disk is full" in error_line(capsys)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["split"]


def _tiny_tmpfs(tmp_path: Path, size: str, script: str) -> subprocess.CompletedProcess:
    """Run ``script`` (sh) with a tmpfs of ``size`` mounted at ``tmp_path/disk``, in a private
    mount namespace; skip where that is not permitted."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = f"mount -t tmpfs -o size={size} tmpfs {disk}"
    if subprocess.run(["unshare", "-rm", "sh", "-c", mount], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (unshare -rm)")
    return subprocess.run(["unshare", "-rm", "sh", "-c", f"{mount} && {script}"], capture_output=True, text=True)


def test_run_on_a_real_full_disk(tmp_path, data_file):
    config = write_config(tmp_path, data_file, report=False)
    py = sys.executable
    done = _tiny_tmpfs(tmp_path, "64k", f"{py} -m recsys_eval.cli run {config} --out {tmp_path / 'disk'} --quiet; "
                       f"echo status=$?; ls -aR {tmp_path / 'disk'}")
    assert "status=1" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "the disk is full (ENOSPC)" in " ".join(done.stderr.split())
    assert ".tmp" not in done.stdout.split("status=1")[1]


def test_split_on_a_real_full_disk(tmp_path, data_file):
    py = sys.executable
    done = _tiny_tmpfs(tmp_path, "16k", f"{py} -m recsys_eval.cli split {data_file} {tmp_path / 'disk' / 'split'} "
                       "-p fraction=0.2; "
                       f"echo status=$?; ls -A {tmp_path / 'disk'}")
    assert "status=1" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "the disk is full" in " ".join(done.stderr.split())
    assert done.stdout.split("status=1")[1].split() == []


# -- bad configs ---------------------------------------------------------------------------------

def test_config_that_is_not_utf8_names_file_and_offset(tmp_path, data_file, capsys):
    config = write_config(tmp_path, data_file)
    raw = config.read_bytes().replace(b'"popular"', b'"popul\xe9r"')  # a byte past the first line
    config.write_bytes(raw)
    for verb in ("run", "validate"):
        assert cli(verb, str(config)) == 1
        message = error_line(capsys)
        offset = raw.index(b"\xe9")
        line = raw.count(b"\n", 0, offset) + 1
        assert f"{config}: not UTF-8 text: byte 0xe9 at offset {offset} (line {line})" in message


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("params = { k = 2 }", "params = { kk = 2 }",
     "split.params.kk: split method 'kfold' has no parameter 'kk'"),
    ('name = "random"', 'name = "als"\nparams = { factorz = 8 }',
     "recommenders[1].params.factorz: recommender 'als': unknown parameter 'factorz'"),
    ('name = "random"', 'name = "als"\nparams = { factors = 0 }',
     "recommenders[1].params.factors: recommender 'als': parameter 'factors' must be >= 1"),
    ('name = "random"', 'name = "randm"', "recommenders[1].name: unknown recommender 'randm'"),
    ('name = "AI+AR+AN"', 'name = "AI+AR+NX"', "protocols[0].name:"),
    ('method = "kfold"', 'method = "kfould"', "split.method: unknown split method 'kfould'"),
])
def test_config_typo_names_file_and_key_path(tmp_path, data_file, capsys, old, new, expected):
    config = write_config(tmp_path, data_file)
    config.write_text(config.read_text().replace(old, new, 1))
    assert cli("validate", str(config)) == 1
    message = error_line(capsys)
    assert f"{config}: {expected}" in message
    if "factorz" in expected:
        assert "did you mean 'factors'" in message
