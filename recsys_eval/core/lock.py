"""An advisory lock on a folder, so that two processes never write the same results at once.

The lock is ``flock`` on the folder itself (an open file descriptor of the directory), taken without
waiting: a second process asking for it gets a :class:`~recsys_eval.errors.BusyError` at once,
naming the folder and the holder's pid, host and start time (kept in the file ``.lock`` inside the
folder; a holder that has the lock but has not yet replaced the note of a killed predecessor is
waited for a moment, so that the message names the live holder). The kernel releases ``flock`` when the holder's descriptor closes, so a process that dies,
even by SIGKILL, never leaves a stale lock. Because the lock belongs to the directory and not to a
path, the holder may rename the folder while holding it (a results folder moved into place); a
process that obtained the lock checks that the path still names the same folder.

The lock keeps other processes out. Within one process, a new holder takes the lock over from an
earlier one that never released it: a run that failed in a notebook or a test still holds its work
folder through the traceback, and resuming it in the same process must not refuse.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

from recsys_eval.core.atomic import write_text
from recsys_eval.errors import BusyError, OutputError

OWNER = ".lock"
_HELD: dict[tuple[int, int], FolderLock] = {}  # (device, inode) of each folder this process holds


class FolderLock:
    """Exclusive, non-blocking lock on ``folder``; a context manager, or ``acquire``/``release``."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FolderLock:
        """Take the lock, or raise BusyError if another process holds it."""
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise OutputError(f"cannot lock {self.folder}: {exc.strerror}") from None
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino)
        earlier = _HELD.pop(key, None)
        if earlier is not None and earlier._fd is not None:  # held by this process: take it over
            os.close(fd)
            fd, earlier._fd = earlier._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise BusyError(f"another run is writing {self.folder} ({self._holder()}); "
                                "wait for it to finish or stop it") from None
            raise OutputError(f"cannot lock {self.folder}: {exc.strerror}") from None
        try:
            same = os.stat(self.folder).st_ino == info.st_ino
        except OSError:
            same = False
        if not same:  # renamed or removed by the previous holder between our open and our lock
            os.close(fd)
            raise BusyError(f"{self.folder} was finished or removed by another run while this one waited")
        self._fd = fd
        _HELD[key] = self
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        write_text(self.folder / OWNER, f"{os.getpid()} {stamp} {socket.gethostname()}\n")
        return self

    def release(self) -> None:
        """Remove the owner note and release the lock (wherever the folder was renamed since)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        info = os.fstat(fd)
        if _HELD.get((info.st_dev, info.st_ino)) is self:
            del _HELD[(info.st_dev, info.st_ino)]
        try:
            os.unlink(OWNER, dir_fd=fd)
        except OSError:
            pass
        os.close(fd)  # closing the last descriptor releases the flock

    def _holder(self, patience: float = 2.0) -> str:
        """``pid P since T on host H`` from the owner note; re-read for up to ``patience`` seconds
        while it is absent or names a process of this host that is no longer alive (the note of a
        killed run, not yet replaced by the process that holds the lock now)."""
        deadline = time.monotonic() + patience
        while True:
            try:
                pid, since, host = (self.folder / OWNER).read_text(encoding="utf-8").split()
                if host != socket.gethostname() or _alive(int(pid)):
                    return f"pid {pid} since {since} on host {host}"
            except (OSError, ValueError, UnicodeDecodeError):
                pass
            if time.monotonic() > deadline:
                return "holder unknown"
            time.sleep(0.05)

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
