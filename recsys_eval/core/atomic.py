"""Atomic file writes: a reader sees a file's old content or its new content, never half of it.

Every file the package writes goes through :func:`atomic_path`: the content is written to a
temporary file in the target's own folder (same file system, so the rename is atomic), flushed and
fsynced, then renamed over the target with :func:`os.replace`, and the folder is fsynced so that
the rename survives a crash. A block of writes that a later note marks done
(:func:`folders_synced_once`) renames each file at once and makes them all durable together at its
end. On any failure, an interruption included, the temporary is removed and the previous file is
left as it was. A process killed outright (SIGKILL, power loss) can leave a
temporary behind: its name matches :func:`is_scratch`, so a resumed run can delete it.

A write that fails for a reason of the environment (full disk or quota, read-only file system,
permission denied, missing folder...), whether raised as :class:`OSError` or as a polars error
wrapping one (``... (os error 28)``), becomes one :class:`~recsys_eval.errors.OutputError` naming
the path and the reason. Other errors (a bug, a frame polars cannot write) pass through unchanged.

``write_bytes``, ``write_text``, ``write_json``, ``write_parquet``, ``write_csv`` and
``sink_parquet`` cover the package's writes; :func:`atomic_path` serves any other writer (a zip
member, a figure): write to the path it yields, and the file appears at ``target`` on exit.

Because every write passes here, this is also where the fault tests stop a process at a chosen
write: with ``RECSYS_EVAL_STOP_AFTER_WRITES=n`` in the environment, the process SIGKILLs itself
when its n-th write has its temporary written (and fsynced, outside a block) but not yet renamed, so that n - 1 files
are complete and the n-th is a hidden temporary, the state a crash at any moment can leave.
"""

from __future__ import annotations

import errno
import functools
import itertools
import json
import os
import re
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recsys_eval.errors import OutputError

if TYPE_CHECKING:
    import polars as pl

SCRATCH_SUFFIX = ".tmp"
#: The fault tests' hook (see the module docstring): SIGKILL at the n-th write.
STOP_AFTER_WRITES = "RECSYS_EVAL_STOP_AFTER_WRITES"
_writes = itertools.count(1)
_SCRATCH = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file is too large for the file system",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "a folder on the way does not exist",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "the target is a folder",
}


def scratch_path(target: Path) -> Path:
    """A fresh temporary name beside ``target``: ``.<name>.<12 hex digits>.tmp``."""
    return target.with_name(f".{target.name}.{os.urandom(6).hex()}{SCRATCH_SUFFIX}")


def is_scratch(path: Path) -> bool:
    """Whether ``path`` is a temporary left by an interrupted write of this module."""
    return bool(_SCRATCH.match(path.name))


def output_error(exc: BaseException, path: Path) -> OutputError | None:
    """The OutputError for ``exc`` raised while writing ``path``, or None if ``exc`` is not an
    error of the environment (an OSError, or a polars error whose message carries an OS error)."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code is None:
        found = _OS_ERROR.search(str(exc))
        if found is None:
            return None if not isinstance(exc, OSError) else OutputError(f"cannot write {path}: {exc}")
        code = int(found.group(1))
    detail = f" ({str(exc).strip().splitlines()[0]})" if code == errno.ENOENT and str(exc).strip() else ""
    # (with ENOENT the missing path may be an input the writer was reading: its message says which)
    return OutputError(f"cannot write {path}: {reason(code, detail)}; any previous version of it is unchanged")


def reason(code: int, detail: str = "") -> str:
    """Why the environment refused a write, in words and by name: ``the disk is full (ENOSPC)``."""
    return f"{_REASONS.get(code) or os.strerror(code)}{detail} ({errno.errorcode.get(code, code)})"


#: The refusals of a write by the environment, as opposed to a missing input file.
REFUSALS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})


def refused_write(exc: OSError) -> OutputError | None:
    """The OutputError of an OSError that refused a write (:data:`REFUSALS`) and names its path,
    however far from this module it was raised (a folder made by ``mkdir``, a library's own
    write): the one message every command gives for a full disk, a quota, a read-only file system or
    a permission; None for any other error."""
    if exc.errno in REFUSALS and exc.filename:
        return output_error(exc, Path(os.fsdecode(exc.filename)))
    return None


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder: Path) -> None:
    """Make the entries of ``folder`` (a rename into it) durable; a no-op where folders cannot be
    opened or fsynced (some file systems refuse with EINVAL)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _stop_here_if_asked() -> None:
    """SIGKILL this process at the write ``RECSYS_EVAL_STOP_AFTER_WRITES`` names (tests only)."""
    stop = os.environ.get(STOP_AFTER_WRITES)
    if stop and next(_writes) == int(stop):
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; when the block ends normally, the file written
    there is fsynced and renamed over ``target`` (inside :func:`folders_synced_once`: renamed at
    once, fsynced when that block ends). The folder is created if needed."""
    target = Path(target)
    tmp = scratch_path(target)
    deferred = getattr(_deferred, "files", None)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Created here with the umask's permissions (polars and others then open it again).
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        yield tmp
        if deferred is None:
            _fsync_file(tmp)
        _stop_here_if_asked()
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # a read-only file system refuses even to unlink what is not there
            pass
        error = output_error(exc, target) if isinstance(exc, Exception) else None
        if error is not None:
            raise error from None
        raise
    if deferred is None:
        fsync_folder(target.parent)
    else:
        deferred.append(target)
        _deferred.folders.add(target.parent)


_deferred = threading.local()


@contextmanager
def folders_synced_once() -> Iterator[None]:
    """Within the block, the writes of this thread are made durable together when the block ends
    instead of one after the other: each file is renamed into place as it is written, and at the
    end the block's files are fsynced side by side (concurrent fsyncs share the file system's
    journal commits, about 4 ms each on a virtual disk, and a chunk of a run writes up to six
    files), then each folder once. Until then a crash may leave a renamed file whose content is
    not durable: a caller marks the files done (a note) after the block, so that the mark is never
    durable before them, and trusts no file without its mark (a resume writes it again). A block
    inside another syncs at the outer one's end."""
    if getattr(_deferred, "folders", None) is not None:
        yield
        return
    _deferred.folders, _deferred.files = pending, files = set(), []
    try:
        yield
    finally:
        _deferred.folders = _deferred.files = None
        for synced in [_syncer().submit(_fsync_written, path) for path in files]:
            synced.result()
        for folder in sorted(pending):
            fsync_folder(folder)


@functools.cache
def _syncer() -> ThreadPoolExecutor:
    """The threads that fsync a block's files side by side (:func:`folders_synced_once`)."""
    return ThreadPoolExecutor(max_workers=8, thread_name_prefix="recsys-fsync")


def _fsync_written(path: Path) -> None:
    """fsync a file a block wrote; a refusal becomes the OutputError naming it."""
    try:
        _fsync_file(path)
    except OSError as exc:
        raise output_error(exc, path) from None


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        out.write(data)
    return Path(path)


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically; return the path."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, data: Any) -> Path:
    """Write ``data`` as indented JSON (values JSON does not know as strings) atomically."""
    return write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def write_parquet(frame: pl.DataFrame, path: str | Path, **options: Any) -> Path:
    """Write ``frame`` to a Parquet file atomically (``options`` go to ``DataFrame.write_parquet``)."""
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp, **options)
    return Path(path)


def write_csv(frame: pl.DataFrame, path: str | Path, **options: Any) -> Path:
    """Write ``frame`` to a CSV file atomically (``options`` go to ``DataFrame.write_csv``)."""
    with atomic_path(path) as tmp:
        frame.write_csv(tmp, **options)
    return Path(path)


def sink_parquet(frame: pl.LazyFrame, path: str | Path, **options: Any) -> Path:
    """Stream a lazy frame into a Parquet file atomically, never holding it whole in memory."""
    with atomic_path(path) as tmp:
        frame.sink_parquet(tmp, **options)
    return Path(path)
