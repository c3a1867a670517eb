"""A run killed at any of its writes resumes to the results of an uninterrupted run.

Every file a run writes passes through :func:`recsys_eval.core.atomic.atomic_path`, whose test hook
(``RECSYS_EVAL_STOP_AFTER_WRITES=n``) SIGKILLs the process when its n-th write is a fsynced
temporary not yet renamed into place. For n = 1, 2, ... until a run ends before its n-th write, a
fresh run (two folds, three chunks of users each) is killed at write n, then ``--resume`` finishes
it; its folder must hold the same files, per-unit values and summary as a run never interrupted,
and no temporary, lock note or work folder; and every chunk of users the killed run had marked done
(in a partition not done) must be reused: its per-unit file not written again (same inode and
time) and counted in the log.
Where the kill left a fold's split saved but the fold not marked complete (the state in which a
resume once failed with "splits/<fold> exists ... --force"), two resumes are started at once: one
runs, the other refuses naming the lock's holder (pid, start time, host), or, if it looked only
once the first had finished, runs anew.

A resume reuses what is finished even inside a fold: a run of one fold killed after some of its
(system, protocol) partitions were marked done resumes without writing their files again (same
inodes and times) and ends with the per-unit files, summary and side tables, byte for byte, of a
run never interrupted.

The runs are forked from a forkserver that imported the package once (the imports cost more than
a run of this size); the forkserver started no polars or numba thread, so the forks are safe.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import sys
from pathlib import Path

import pytest

import recsys_eval

from config_text import config_text, ratings_file, split_table
from recsys_eval.core.atomic import STOP_AFTER_WRITES, is_scratch
from recsys_eval.core.lock import OWNER
from recsys_eval.core.results import ResultsFolder
from recsys_eval.data.synthetic import write_synthetic_ratings


def _cli(args: list[str], stop_after: int | None, stderr: Path | None = None) -> None:
    """The forked child: ``recsys-eval ARGS``, killed at write ``stop_after`` if given, its
    standard error to the file ``stderr`` if given."""
    if stop_after is not None:
        os.environ[STOP_AFTER_WRITES] = str(stop_after)
    if stderr is not None:
        sys.stderr.flush()
        os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    from recsys_eval.cli import main

    main(args)


@pytest.fixture(scope="module")
def forks():
    """A forkserver that imported every module a local run uses (scipy.stats alone takes seconds
    where Python keeps no bytecode cache)."""
    package = Path(recsys_eval.__file__).parent
    modules = [".".join(p.relative_to(package.parent).with_suffix("").parts) for p in sorted(package.rglob("*.py"))]
    local = [m.removesuffix(".__init__") for m in modules if not any(
        spark in m for spark in ("engine", "spark", "kernel_locator", "__main__"))]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(local)
    return context


def cli_exit(forks, args: list[str], stop_after: int | None = None) -> int:
    """The exit code of ``recsys-eval ARGS`` in a forked process (-9: killed by SIGKILL)."""
    child = forks.Process(target=_cli, args=(args, stop_after))
    child.start()
    child.join(timeout=600)
    return child.exitcode


def two_resumes_at_once(forks, args: list[str], folder: Path) -> list[tuple[int, str]]:
    """Start ``recsys-eval ARGS`` twice at once; each one's exit code and standard error."""
    children = [forks.Process(target=_cli, args=(args, None, folder / f"stderr-{i}")) for i in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=600)
    return [(child.exitcode, (folder / f"stderr-{i}").read_text()) for i, child in enumerate(children)]


def split_saved_in_an_open_fold(out: Path) -> bool:
    """Whether the killed run saved a fold's split but had not marked the fold complete (where a
    resume once failed with "splits/<fold> exists ... --force")."""
    (work,) = (out / "kill").glob(".partial-*")
    layout = json.loads((work / "layout.json").read_text()) if (work / "layout.json").is_file() else {"folds": []}
    return any((work / "splits" / fold).is_dir() and not (work / "partitions" / f"f{i}" / "complete.json").is_file()
               for i, fold in enumerate(layout["folds"]))


def small_config(folder: Path) -> Path:
    """Two folds, two systems, three chunks of users per fold, pooled AUC (a fold's scratch tables),
    a run-level metric (counts carried from chunk to chunk): every kind of file a run writes but
    the report, whose writes are files like the others."""
    data = write_synthetic_ratings(folder / "ratings.csv", users=60, items=80, interactions=1500, seed=1)
    path = folder / "kill.toml"
    path.write_text(config_text("kill", seed=5, dataset=ratings_file(data), split=split_table("kfold", k=2),
                                recommenders=["popular", "random"], run={"users_per_chunk": 20},
                                metrics={"names": ["ndcg", "auc", "gini"], "k": [5]}), encoding="utf-8")
    return path


def finished(out: Path, experiment: str = "kill") -> list[Path]:
    return [p for p in (out / experiment).iterdir() if not p.name.startswith(".") and not p.is_symlink()]


def contents(folder: Path) -> dict[str, object]:
    """What must not depend on interruptions: the file names, the per-unit values, the summary."""
    results = ResultsFolder.open(folder)
    per_unit = results.scan_per_unit().collect()
    return {
        "files": sorted(str(p.relative_to(folder)) for p in folder.rglob("*")),
        "per_unit": per_unit.sort(per_unit.columns, nulls_last=True).to_dicts(),
        "summary": results.table("summary").to_dicts(),
    }


def chunks_done(out: Path) -> dict[str, dict[str, tuple[int, int]]]:
    """Per fold not complete in the killed run's work folder, the per-unit file of every chunk of
    users marked done in a partition not marked done, with its (inode, modification time)."""
    (work,) = (out / "kill").glob(".partial-*")
    layout = json.loads((work / "layout.json").read_text()) if (work / "layout.json").is_file() else {"folds": []}
    done: dict[str, dict[str, tuple[int, int]]] = {}
    for i, fold in enumerate(layout["folds"]):
        notes = work / "partitions" / f"f{i}"
        if (work / "partitions" / f"f{i}" / "complete.json").is_file():
            continue
        files = [json.loads(note.read_text())["per_unit"] for note in notes.glob("s*-p*-c*.json")
                 if not (notes / f"{note.stem.rsplit('-', 1)[0]}.json").is_file()]
        done[fold] = {name: ((work / name).stat().st_ino, (work / name).stat().st_mtime_ns) for name in files}
    return done


def reused_chunks(folder: Path, done: dict[str, dict[str, tuple[int, int]]]) -> bool:
    """Whether the finished ``folder`` kept the per-unit files of the chunks ``done`` as they were
    and its log counts them as reused, fold by fold."""
    log = (folder / "log.txt").read_text()
    for fold, files in done.items():
        line = re.search(rf"^fold {re.escape(fold)}: .*$", log, re.M).group(0)
        counted = re.search(r"(\d+) chunks? of users reused", line)
        if (int(counted.group(1)) if counted else 0) != len(files):
            return False
        for name, before in files.items():
            after = (folder / name).stat()
            if (after.st_ino, after.st_mtime_ns) != before:
                return False
    return True


def leftovers(out: Path) -> list[str]:
    return [str(p) for p in out.rglob("*") if is_scratch(p) or p.name == OWNER or p.name.startswith(".partial-")]


@pytest.mark.slow
def test_a_run_killed_at_each_of_its_writes_resumes_to_the_uninterrupted_result(tmp_path, forks):
    config = small_config(tmp_path)
    run = ["run", str(config), "--quiet", "--out"]
    assert cli_exit(forks, [*run, str(tmp_path / "reference")]) == 0
    expected = contents(*finished(tmp_path / "reference"))
    n, races, chunks = 1, 0, 0
    while (code := cli_exit(forks, [*run, str(tmp_path / f"killed-at-{n}")], stop_after=n)) != 0:
        out = tmp_path / f"killed-at-{n}"
        assert code == -signal.SIGKILL, f"write {n}: exit {code}"
        done = chunks_done(out)
        chunks = max(chunks, sum(map(len, done.values())))
        if split_saved_in_an_open_fold(out):
            races += 1
            outcomes = two_resumes_at_once(forks, [*run, str(out), "--resume"], tmp_path)
            assert sorted(code for code, _ in outcomes)[0] == 0, outcomes
            for code, err in outcomes:  # one runs; the other refuses, naming the holder
                holder = r"another run is writing .*\.partial-.* \(pid \d+ since 20\S+ on host \S+\)"
                assert code == 0 or (code == 1 and re.search(holder, " ".join(err.split()))), outcomes
        else:
            assert cli_exit(forks, [*run, str(out), "--resume"]) == 0, f"resume after write {n}"
        for folder in finished(out):  # two when the second resume started after the first ended
            assert contents(folder) == expected, f"killed at write {n}"
        # the one that resumed the work folder (a second one may have run anew) reused the chunks done
        assert any(reused_chunks(folder, done) for folder in finished(out)), f"killed at write {n}: {done}"
        assert leftovers(out) == [], f"killed at write {n}"
        n += 1
    assert n > 20, f"only {n - 1} writes: the hook did not stop the runs"
    assert races >= 2, "no kill left a saved split in an open fold"
    assert chunks >= 4, "no kill left several chunks of users done in an open fold"
    print(f"{n - 1} interruption points resumed", file=sys.stderr)


def _recorded_cli(args: list[str], writes: Path) -> None:
    """The forked child: ``recsys-eval ARGS``, uninterrupted, each of its writes' target appended to
    the file ``writes`` in the order the kill hook counts them (a write's fsync of its temporary
    comes just before the hook)."""
    from recsys_eval.core import atomic

    fsync = atomic._fsync_file

    def recorded(tmp: Path) -> None:
        with open(writes, "a", encoding="utf-8") as out:
            out.write(f"{tmp.parent / tmp.name[1:].rsplit('.', 2)[0]}\n")
        fsync(tmp)

    atomic._fsync_file = recorded
    _cli(args, None)


def one_fold_config(folder: Path) -> Path:
    """One fold, three systems, two protocols, three chunks of users, a run-level metric (a file of
    its own per partition) and RMSE (a ``ratings`` partition per system, without rows but for the
    rating predictor): nine (system, protocol) partitions, finished one after another."""
    data = write_synthetic_ratings(folder / "ratings.csv", users=60, items=80, interactions=1500, seed=3)
    path = folder / "fold.toml"
    path.write_text(config_text("fold", seed=2, dataset=ratings_file(data), protocols=["AI+AR+AN", "AI+1R+NN50"],
                                recommenders=["popular", "random", "bias"], run={"users_per_chunk": 25},
                                metrics={"names": ["ndcg", "catalog_coverage", "rmse"], "k": [5],
                                         "relevance_threshold": 4}), encoding="utf-8")
    return path


def finished_notes(work: Path) -> dict[str, list[str]]:
    """The per-unit files of each partition marked done in the work folder, by its note."""
    return {str(note.relative_to(work)): json.loads(note.read_text())["per_unit"]
            for note in sorted((work / "partitions").glob("f*/*.json")) if re.fullmatch(r"s\d+-p\d+\.json", note.name)}


def file_bytes(folder: Path) -> dict[str, bytes]:
    """The per-unit files and the tables made from them, byte for byte."""
    names = [p for p in folder.rglob("*") if p.is_file() and (p.relative_to(folder).parts[0] == "per_unit"
             or p.name in ("summary.csv", "summary.parquet", "exposure_bins.parquet", "curves.parquet"))]
    return {str(p.relative_to(folder)): p.read_bytes() for p in names}


@pytest.mark.slow
def test_a_resume_reuses_the_finished_partitions_of_an_unfinished_fold(tmp_path, forks):
    config = one_fold_config(tmp_path)
    run = ["run", str(config), "--quiet", "--out"]
    writes = tmp_path / "writes.txt"
    child = forks.Process(target=_recorded_cli, args=([*run, str(tmp_path / "reference")], writes))
    child.start()
    child.join(timeout=600)
    assert child.exitcode == 0
    (reference,) = finished(tmp_path / "reference", "fold")
    expected = file_bytes(reference)
    notes = [n for n, target in enumerate(writes.read_text().splitlines(), start=1)
             if re.search(r"/partitions/f0/s\d+-p\d+\.json$", target)]
    assert len(notes) == 9, "nine (system, protocol) partitions, each marked done"
    for done in (1, 5, 8):  # killed at the write after the done-th note: that many partitions finished
        out = tmp_path / f"after-{done}"
        assert cli_exit(forks, [*run, str(out)], stop_after=notes[done - 1] + 1) == -signal.SIGKILL
        (work,) = (out / "fold").glob(".partial-*")
        listed = finished_notes(work)
        assert len(listed) == done and not (work / "partitions" / "f0" / "complete.json").exists()
        kept = {name: (work / name).stat() for files in listed.values() for name in files}
        assert kept, "a finished partition lists its per-unit files"
        assert cli_exit(forks, [*run, str(out), "--resume"]) == 0, f"resume after {done} partitions"
        (folder,) = finished(out, "fold")
        # (a) the finished partitions' files were not written again: the same inodes, untouched
        for name, before in kept.items():
            after = (folder / name).stat()
            assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), name
        assert f"{done} (system, protocol) reused from an earlier attempt" in (folder / "log.txt").read_text()
        # (b) the same per-unit files, summary and side tables, byte for byte, as a run never interrupted
        assert file_bytes(folder) == expected, f"resumed after {done} partitions"
        assert contents(folder)["files"] == contents(reference)["files"]
        assert leftovers(out) == []
