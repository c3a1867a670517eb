"""The results folder through its public methods: a work folder created or resumed, its layout, one
file per (fold, system, protocol) partition, folds marked done, the rename to a timestamped folder
that never overwrites another, and a complete folder opened, scanned and read, with the errors a
missing or foreign folder gives."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recsys_eval.core.atomic import scratch_path
from recsys_eval.core.results import (
    FORMAT_VERSION,
    PER_UNIT_COLUMNS,
    PER_UNIT_FILE_COLUMNS,
    PER_UNIT_HIVE_SCHEMA,
    PER_UNIT_SCHEMA,
    FinishedChunk,
    FinishedPartition,
    Manifest,
    ResultsFolder,
    UnfinishedFold,
    labels_of,
    read_counts,
    read_per_unit,
)
from recsys_eval.errors import ConfigError, DataError

LAYOUT = (["f1", "f2"], ["popular", "random"], ["AI+AR+AN"])
#: Labels a user can give (protocol labels, system names, fold names of a splitter): what a folder
#: name must escape ('/', '%', '=', ':', control characters, glob characters), what it keeps
#: (spaces, '+', parentheses, non-ASCII), and names polars or Spark would read as numbers.
TRICKY = (["1", "2024-01 é/x"],
          ["2024", "als (k=64, 50%)/v2", "C:\\x #?*[]{}^'\"\t"],
          ["AI+1R+NN100", "pop 0.5 (Ω=1) %2F", "..", "AI+AR+AN\n"])
STAMP = re.compile(r"^\d{8}T\d{6}Z$")


def rows(fold: str, system: str, protocol: str = "AI+AR+AN", users: range = range(3)) -> pl.DataFrame:
    """Per-unit rows of one partition: ndcg@10 of ``users``, one unit each."""
    n = len(users)
    return pl.DataFrame({
        "system": [system] * n, "protocol": [protocol] * n, "fold": [fold] * n, "user": list(users),
        "unit": list(range(n)), "metric": ["ndcg"] * n, "k": [10] * n, "value": [0.5 + u / 100 for u in users],
    }, schema=PER_UNIT_SCHEMA)


@pytest.fixture
def work(tmp_path):
    """A new work folder with LAYOUT set; its lock released at the end whatever happened."""
    folder = ResultsFolder.create(tmp_path / "out", "exp", "abc123", resume=False)
    folder.set_layout(*LAYOUT)
    yield folder
    folder.lock.release()


def finish_run(work: ResultsFolder) -> Path:
    """Write every partition of LAYOUT, the config and a summary, and finish: a complete folder."""
    written = []
    folds, systems, protocols = LAYOUT
    for fold in folds:
        parts = [work.write_partition(rows(fold, s, p)) for s in systems for p in protocols]
        work.mark_fold_done(fold, parts)
        written += parts
    work.write_text("config.toml", 'name = "exp"\n')
    work.write_table("summary", pl.DataFrame({"system": systems}))
    manifest = Manifest(folds=folds, systems=systems, protocols=protocols,
                        partitions=[str(p.relative_to(work.path)) for p in written])
    return work.finish(manifest)


# -- create and resume ----------------------------------------------------------------------------
def test_create_makes_a_new_hidden_work_folder_each_time(tmp_path):
    first = ResultsFolder.create(tmp_path, "exp", "abc123", resume=False)
    second = ResultsFolder.create(tmp_path, "exp", "abc123", resume=False)
    try:
        assert first.path != second.path
        for work in (first, second):
            assert work.path.is_dir() and work.path.parent == tmp_path / "exp"
            assert work.path.name.startswith(".partial-abc123-")
    finally:
        first.lock.release()
        second.lock.release()


def test_resume_takes_the_newest_work_folder_of_the_config_and_drops_leftover_scratch(tmp_path):
    root = tmp_path / "exp"
    older = root / ".partial-abc123-20240101T000000Z-aaaa"
    newest = root / ".partial-abc123-20250101T000000Z-bbbb"
    other_config = root / ".partial-fff999-20260101T000000Z-cccc"
    for folder in (older, newest, other_config):
        (folder / "per_unit" / "f0").mkdir(parents=True)
    kept = [newest / "layout.json", newest / "per_unit" / "f0" / "s0-p0-00000.parquet"]  # any file of a work folder
    scratch = [scratch_path(newest / "summary.parquet"), scratch_path(kept[1])]
    for path in kept + scratch:
        path.write_text("x")
    (scratch_dir := scratch_path(newest / "figures")).mkdir()
    resumed = ResultsFolder.create(tmp_path, "exp", "abc123", resume=True)
    try:
        assert resumed.path == newest
        assert all(p.exists() for p in kept)
        assert not any(p.exists() for p in [*scratch, scratch_dir])
    finally:
        resumed.lock.release()


def test_resume_without_a_work_folder_of_the_config_starts_a_new_one(tmp_path):
    (tmp_path / "exp" / ".partial-fff999-20260101T000000Z-cccc").mkdir(parents=True)
    work = ResultsFolder.create(tmp_path, "exp", "abc123", resume=True)
    try:
        assert work.path.name.startswith(".partial-abc123-")
    finally:
        work.lock.release()


def test_a_resumed_folder_refuses_another_layout(work):
    again = ResultsFolder(work.path)
    again.set_layout(*LAYOUT)  # the same folds, systems and protocols: accepted
    for other in ((["f1"], LAYOUT[1], LAYOUT[2]), (LAYOUT[0], ["popular", "als"], LAYOUT[2]),
                  (LAYOUT[0], LAYOUT[1], ["AI+1R+NN50"])):
        with pytest.raises(ConfigError, match="written for other folds, systems or protocols"):
            ResultsFolder(work.path).set_layout(*other)


# -- partitions ---------------------------------------------------------------------------------
def test_each_partition_and_part_has_its_own_file_holding_its_rows(work):
    paths = {(f, s, p, part): work.partition_file(f, s, p, part)
             for f in LAYOUT[0] for s in LAYOUT[1] for p in LAYOUT[2] for part in (0, 1)}
    assert len(set(paths.values())) == len(paths)
    frame = rows("f2", "random")
    written = work.write_partition(frame, part=1)
    assert written == paths["f2", "random", "AI+AR+AN", 1] and written.is_file()
    assert written == work.path / "per_unit" / "fold=f2" / "protocol=AI+AR+AN" / "system=random" / "part-00001.parquet"
    assert pl.read_parquet(written).equals(frame.select(PER_UNIT_FILE_COLUMNS))  # no label column in the file
    assert read_per_unit([written]).collect().equals(frame)


def test_a_partition_of_mixed_or_missing_keys_is_refused_with_the_keys_it_holds(work):
    mixed = pl.concat([rows("f1", "popular"), rows("f1", "random")])
    with pytest.raises(DataError, match=r"one fold, system and protocol.*got 2 \(fold, system, protocol\)"):
        work.write_partition(mixed)
    with pytest.raises(DataError, match="none of them null"):
        work.write_partition(rows("f1", "popular").with_columns(pl.lit(None, pl.String).alias("system")))
    with pytest.raises(DataError, match="no partition for fold 'f9', system 'popular'"):
        work.write_partition(rows("f9", "popular"))
    assert not list(work.path.rglob("*.parquet"))


def test_a_fold_marked_done_lists_its_partitions_also_after_a_resume(work, tmp_path):
    parts = [work.write_partition(rows("f1", s)) for s in reversed(LAYOUT[1])]
    assert not work.fold_done("f1")
    work.mark_fold_done("f1", parts)
    assert work.fold_done("f1") and not work.fold_done("f2")
    assert work.fold_partitions("f1") == parts
    work.lock.release()
    resumed = ResultsFolder.create(tmp_path / "out", "exp", "abc123", resume=True)
    resumed.set_layout(*LAYOUT)
    assert resumed.path == work.path and resumed.fold_done("f1") and resumed.fold_partitions("f1") == parts
    resumed.lock.release()


def chunk_done(work: ResultsFolder, system: str, chunk: int, *, noted: bool = True) -> FinishedChunk:
    """Chunk ``chunk`` of users of fold f1's (system, AI+AR+AN) written, with a scratch table and
    counts, and (``noted``) marked done."""
    protocol = LAYOUT[2][0]
    done = FinishedChunk(work.write_partition(rows("f1", system, users=range(3 * chunk, 3 * chunk + 3)), part=chunk),
                         {"curve_chunks": work.write_partition_scratch("f1", system, protocol, chunk, "curve_chunks",
                                                                       pl.DataFrame({"chunk": [chunk]}))},
                         work.write_chunk_counts("f1", system, protocol, chunk, {"counts": np.arange(3) + chunk}))
    if noted:
        work.mark_chunk_done("f1", system, protocol, chunk, done)
    return done


def test_a_resume_reads_back_the_chunks_done_from_the_first_and_deletes_what_else_was_written(work):
    work.record_ranges("f1", 3)
    popular = [chunk_done(work, "popular", c) for c in range(2)]
    unnoted = chunk_done(work, "popular", 2, noted=False)  # killed before its note
    random = chunk_done(work, "random", 0)
    after_a_gap = chunk_done(work, "random", 2)
    earlier = work.unfinished_fold("f1")
    assert earlier.users_per_range == 3 and earlier.partitions == {}
    assert earlier.chunks == {("popular", "AI+AR+AN"): popular, ("random", "AI+AR+AN"): [random]}
    assert read_counts(popular[-1].counts)["counts"].tolist() == [1, 2, 3]  # the last chunk's counts only
    assert not popular[0].counts.exists()
    assert all(p.is_file() for c in [*popular, random] for p in (c.per_unit, *c.scratch.values()))
    gone = [p for c in (unnoted, after_a_gap) for p in (c.per_unit, *c.scratch.values(), c.counts)]
    assert not any(p.exists() for p in gone)
    assert sorted(p.name for p in (work.path / "partitions" / "f0").glob("*.json")) == [
        "ranges.json", "s0-p0-c00000.json", "s0-p0-c00001.json", "s1-p0-c00000.json"]
    # the partition done: its note, not its chunks', is read; no counts are kept for it
    files = [c.per_unit for c in popular] + [work.write_partition(rows("f1", "popular", users=range(9, 10)), part=2)]
    work.mark_partition_done("f1", "popular", "AI+AR+AN", FinishedPartition(
        files, {"curve_chunks": [p for c in popular for p in c.scratch.values()]}))
    again = work.unfinished_fold("f1")
    assert again.partitions == {("popular", "AI+AR+AN"): FinishedPartition(
        files, {"curve_chunks": [p for c in popular for p in c.scratch.values()]})}
    assert again.chunks == {("random", "AI+AR+AN"): [random]} and again.n_chunks == 1
    assert all(p.is_file() for p in files) and not popular[-1].counts.exists()
    # an engine that redoes the fold whole (Spark) keeps nothing of it but its ranges
    assert work.unfinished_fold("f1", reuse=False) == UnfinishedFold(users_per_range=3)
    assert [p.name for p in (work.path / "partitions" / "f0").iterdir()] == ["ranges.json"]
    assert not (work.path / "per_unit" / "fold=f1").exists()  # its emptied folders too


# -- finish ---------------------------------------------------------------------------------------
def test_finish_drops_scratch_and_renames_the_folder_to_its_time(work):
    for name in ("folds", "exposure", "auc_scores", "curve_chunks"):
        (work.path / name / "x").mkdir(parents=True)
    work_path = work.path
    final = finish_run(work)
    assert final.parent == work_path.parent and STAMP.match(final.name) and not work_path.exists()
    assert not any((final / name).exists() for name in ("folds", "exposure", "auc_scores", "curve_chunks"))
    assert json.loads((final / "manifest.json").read_text())["format"] == FORMAT_VERSION
    assert ResultsFolder.open(final).scan_per_unit().collect().height == 2 * 2 * 3


def test_finish_never_overwrites_a_folder_of_the_same_time(work):
    """Folders named for every second around the finish already hold results: it takes ``-2``."""
    now = datetime.now(timezone.utc)
    taken = [work.root / (now + timedelta(seconds=s)).strftime("%Y%m%dT%H%M%SZ") for s in range(-1, 30)]
    for folder in taken:
        folder.mkdir()
        (folder / "manifest.json").write_text("earlier run")
    final = finish_run(work)
    assert re.match(r"^\d{8}T\d{6}Z-2$", final.name) and final.with_name(final.name[:-2]) in taken
    assert all((f / "manifest.json").read_text() == "earlier run" for f in taken)


# -- a complete folder ----------------------------------------------------------------------------
def test_open_names_a_missing_folder_missing_files_and_another_format(work, tmp_path):
    final = finish_run(work)
    with pytest.raises(DataError, match="no such results folder"):
        ResultsFolder.open(tmp_path / "nowhere")
    (final / "config.toml").unlink()
    (final / "summary.parquet").unlink()
    with pytest.raises(DataError, match=r"not a complete results folder \(missing config.toml, summary.parquet\).*--resume"):
        ResultsFolder.open(final)
    (final / "config.toml").write_text("")
    (final / "summary.parquet").write_text("")
    manifest = json.loads((final / "manifest.json").read_text())
    (final / "manifest.json").write_text(json.dumps({**manifest, "format": FORMAT_VERSION - 1}))
    with pytest.raises(DataError, match=f"results format {FORMAT_VERSION - 1}, this version reads format {FORMAT_VERSION}"
                                        r"; rerun.*still read as one table with pl\.scan_parquet"):
        ResultsFolder.open(final)
    (final / "manifest.json").write_text(json.dumps({**manifest, "format": FORMAT_VERSION + 1}))
    with pytest.raises(DataError, match=f"results format {FORMAT_VERSION + 1}, .*this version$"):
        ResultsFolder.open(final)


def test_a_partition_missing_from_the_folder_is_an_error_naming_it(work):
    folder = ResultsFolder.open(finish_run(work))
    missing = folder.partitions()[1]
    missing.unlink()
    name = re.escape(str(missing.relative_to(folder.path)))
    for read in (folder.partitions, lambda: folder.scan_per_unit().collect()):
        with pytest.raises(DataError, match=rf"partition {name} is missing \(1 of 4 missing\)"):
            read()


def test_scan_per_unit_reads_every_partition_or_one_folds(work):
    folder = ResultsFolder.open(finish_run(work))
    everything = folder.scan_per_unit().collect()
    assert everything.columns == list(PER_UNIT_COLUMNS) and everything.height == 12
    second = folder.scan_per_unit(fold="f2").collect()
    assert set(second.get_column("fold")) == {"f2"} and second.height == 6
    assert second.sort("system", "user").equals(everything.filter(pl.col("fold") == "f2").sort("system", "user"))


def test_tables_are_written_as_parquet_with_a_csv_beside_and_read_by_name(work):
    frame = pl.DataFrame({"system": ["a", "b"], "pairs": [["x", "y"], []], "p": [0.01, 0.5]})
    work.write_table("agreement", frame)
    work.write_table("curves", frame, csv=False)
    assert work.table("agreement").equals(frame) and work.table("exposure") is None
    assert (work.path / "agreement.csv").read_text().splitlines() == ["system,pairs,p", "a,x; y,0.01", 'b,"",0.5']
    assert work.table("curves").equals(frame) and not (work.path / "curves.csv").exists()


def test_a_table_the_folder_does_not_hold_is_refused_by_name(work):
    """The folder owns its file names: a misspelt table is an error, not a stray file."""
    with pytest.raises(DataError, match="'sumary' is not a table of a results folder"):
        work.write_table("sumary", pl.DataFrame({"a": [1]}))
    with pytest.raises(DataError, match="'absent' is not a table"):
        work.table("absent")


# -- labels in folder names -----------------------------------------------------------------------
def test_every_label_a_user_can_give_names_its_folder_and_reads_back_as_text(tmp_path):
    """Each (fold, protocol, system) of TRICKY its own folder, one level per label; read back, by
    the folder's reader, by its manifest's fold and protocol and by the documented polars glob, with
    the labels as given, as text (a fold "1" and a system "2024" stay strings)."""
    work = ResultsFolder.create(tmp_path / "out", "exp", "abc123", resume=False)
    work.set_layout(*TRICKY)
    written, frames = [], []
    for fold in TRICKY[0]:
        parts = []
        for protocol in TRICKY[2]:
            for system in TRICKY[1]:
                frames.append(rows(fold, system, protocol, users=range(2 * len(frames), 2 * len(frames) + 2)))
                parts.append(work.write_partition(frames[-1]))
                assert labels_of(parts[-1]) == {"fold": fold, "protocol": protocol, "system": system}
                assert len(parts[-1].relative_to(work.path).parts) == 5  # per_unit, 3 labels, the file
        work.mark_fold_done(fold, parts)
        written += parts
    assert len({p.parent for p in written}) == len(written)
    work.write_text("config.toml", "")
    work.write_table("summary", pl.DataFrame({"system": TRICKY[1]}))
    folder = ResultsFolder.open(work.finish(Manifest(folds=TRICKY[0], systems=TRICKY[1], protocols=TRICKY[2],
                                                     partitions=[str(p.relative_to(work.path)) for p in written])))
    expected = pl.concat(frames)
    assert folder.scan_per_unit().collect().equals(expected)  # in the manifest's order, the columns in order
    one = folder.scan_per_unit(fold="2024-01 é/x", protocol="pop 0.5 (Ω=1) %2F").collect()
    assert one.equals(expected.filter((pl.col("fold") == "2024-01 é/x") & (pl.col("protocol") == "pop 0.5 (Ω=1) %2F")))
    glob = pl.scan_parquet(folder.path / "per_unit" / "**" / "*.parquet", hive_schema=PER_UNIT_HIVE_SCHEMA).collect()
    assert glob.select(PER_UNIT_COLUMNS).sort("user").equals(expected.sort("user"))


def test_a_folder_name_escapes_what_spark_escapes_and_nothing_else(work):
    """The folder of a label escapes as %XX (upper-case hex) the characters Spark's escapePathName
    does on a POSIX system, written out here from its source, and keeps every other one."""
    spark_escapes = {*map(chr, range(1, 0x20)), '"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[",
                     "]", "^"}
    from recsys_eval.core.results import label_folder

    for code in [*range(1, 0x80), 0xE9, 0x65E5, 0x1F600]:
        char = chr(code)
        expected = f"%{code:02X}" if char in spark_escapes else char
        assert label_folder("system", f"a{char}b") == f"system=a{expected}b", repr(char)
    with pytest.raises(DataError, match="system label must be a non-empty string"):
        label_folder("system", "")


def test_a_path_outside_the_layout_is_an_error_naming_it(tmp_path):
    with pytest.raises(DataError, match=r"f0/s0-p0-00000.parquet: not a per-unit file of a results folder"):
        labels_of(tmp_path / "per_unit" / "f0" / "s0-p0-00000.parquet")


def test_a_work_folder_of_another_results_format_is_not_resumed(work):
    layout = json.loads((work.path / "layout.json").read_text())
    (work.path / "layout.json").write_text(json.dumps({k: v for k, v in layout.items() if k != "format"}))
    with pytest.raises(ConfigError, match=f"results format 2, this version writes format {FORMAT_VERSION}; run again without --resume"):
        ResultsFolder(work.path).set_layout(*LAYOUT)
