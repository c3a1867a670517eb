"""Download, verify and safely extract a dataset archive.

Downloading is pooch's job: it streams to a temporary file, checks the hash and only then moves the
file to its name. Around it: the download goes to a private staging folder, the size is checked as
well, and only a verified archive is moved to its final name; the staging folder is removed whatever
happens. So a failed or interrupted download leaves nothing that a later load would take for good.

Extraction refuses the whole archive if any member's path would land outside the target folder
(absolute paths, ``..``, links), extracts into a staging folder and renames the dataset folder into
place only when every member was read intact (zip CRCs) and the expected files are there.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from recsys_eval.core.atomic import fsync_folder, output_error
from recsys_eval.data.descriptors import ArchiveSpec, Descriptor
from recsys_eval.data.home import writable_folder
from recsys_eval.errors import DataError, DownloadError

ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError)
DEFAULT_TIMEOUT = 60.0


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def verify_archive(path: Path, archive: ArchiveSpec) -> None:
    """Check an archive's size and SHA-256 against the descriptor (where it gives them)."""
    hint = "delete it to download the official archive again"
    actual = path.stat().st_size
    if archive.size is not None and actual != archive.size:
        raise DownloadError(
            f"{path}: size {actual:,} bytes; expected {archive.size:,} bytes (the official archive); {hint}"
        )
    if archive.sha256 is not None:
        digest = file_sha256(path)
        if digest != archive.sha256:
            raise DownloadError(
                f"{path}: SHA-256 {digest}; expected {archive.sha256} (the official archive); {hint}"
            )


def fetch_md5(url: str, timeout: float = DEFAULT_TIMEOUT) -> str:
    """The MD5 published at ``url`` (a ``.md5`` file: 32 hex digits, with or without a file name)."""
    import requests

    try:
        response = requests.get(url, timeout=timeout)
        response.raise_for_status()
    except requests.RequestException as exc:
        raise DownloadError(f"cannot fetch the checksum {url}: {exc}") from None
    match = re.search(r"\b[0-9a-fA-F]{32}\b", response.text)
    if match is None:
        raise DownloadError(f"{url} holds no MD5 checksum (32 hexadecimal digits)")
    return match.group(0).lower()


def download_archive(
    desc: Descriptor,
    folder: Path,
    *,
    progressbar: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> Path:
    """Download the official archive of ``desc`` into ``folder``, verified; return its path."""
    import pooch
    import requests

    archive = desc.archive
    writable_folder(folder, f"the {desc.name} archive")
    if archive.sha256:
        known_hash = f"sha256:{archive.sha256}"
    elif archive.md5_url:
        known_hash = f"md5:{fetch_md5(archive.md5_url, timeout)}"
    else:
        raise DownloadError(
            f"{desc.name}: the descriptor gives neither sha256 nor md5_url to verify a download"
        )
    target = folder / archive.filename
    staging = Path(tempfile.mkdtemp(prefix=f".download-{desc.name}-", dir=folder))
    try:
        downloader = pooch.HTTPDownloader(progressbar=progressbar, timeout=timeout)
        try:
            fetched = Path(
                pooch.retrieve(
                    archive.url,
                    known_hash,
                    fname=archive.filename,
                    path=staging,
                    downloader=downloader,
                    progressbar=progressbar,
                )
            )
        except requests.RequestException as exc:
            raise DownloadError(f"cannot download {archive.url}: {exc}") from None
        except ValueError as exc:  # pooch: the hash does not match
            raise DownloadError(f"download of {archive.url} failed verification: {exc}") from None
        except OSError as exc:  # full disk, folder made read-only meanwhile
            raise output_error(exc, target) from None
        size = fetched.stat().st_size
        if archive.size is not None and size != archive.size:
            raise DownloadError(f"download of {archive.url} has {size:,} bytes; expected {archive.size:,}")
        os.replace(fetched, target)
        fsync_folder(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def open_archive(path: Path) -> zipfile.ZipFile:
    """Open a zip archive, with a clear error for a corrupt or truncated one."""
    try:
        return zipfile.ZipFile(path)
    except ZIP_ERRORS as exc:
        raise DataError(
            f"{path}: corrupt or truncated archive ({exc}); delete it to download it again"
        ) from None
    except OSError as exc:
        raise DataError(f"cannot read archive {path}: {exc.strerror or exc}") from None


def _member_target(root: Path, info: zipfile.ZipInfo, archive: Path) -> Path:
    """Where ``info`` extracts to under ``root``; refuse a member that would land outside it."""
    name = info.filename
    parts = PurePosixPath(name.replace("\\", "/")).parts
    is_link = stat.S_ISLNK(info.external_attr >> 16)
    target = (root / name).resolve()
    if (
        "\x00" in name
        or name.startswith(("/", "\\"))
        or (parts and re.match(r"^[A-Za-z]:", parts[0]))
        or ".." in parts
        or is_link
        or not target.is_relative_to(root.resolve())
    ):
        what = "a link" if is_link else "a path outside the extraction folder"
        raise DataError(f"{archive}: member {name!r} is {what}; the archive is refused")
    return target


def extract_archive(path: Path, desc: Descriptor, parent: Path) -> Path:
    """Extract archive ``path`` of ``desc`` safely; return ``parent / desc.archive.folder``."""
    dest = parent / desc.archive.folder
    writable_folder(parent, f"the extracted {desc.name} files")
    staging = Path(tempfile.mkdtemp(prefix=f".extract-{desc.name}-", dir=parent))
    try:
        with open_archive(path) as zf:
            members = [(info, _member_target(staging, info, path)) for info in zf.infolist()]
            try:
                for info, target in members:
                    if info.is_dir():
                        target.mkdir(parents=True, exist_ok=True)
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
            except OSError as exc:  # writing the extracted files: full disk, read-only folder
                raise output_error(exc, dest) from None
            except ZIP_ERRORS as exc:
                raise DataError(
                    f"{path}: corrupt or truncated archive ({exc}); delete it to download it again"
                ) from None
        extracted = staging / desc.archive.folder
        missing = [f for f in desc.archive.files if not (extracted / f).is_file()]
        if missing:
            raise DataError(
                f"{path}: no {', '.join(missing)} under {desc.archive.folder}/; not the {desc.name} archive?"
            )
        try:
            extracted.rename(dest)
        except OSError:
            if not dest.is_dir():  # not a concurrent extraction that finished first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest
