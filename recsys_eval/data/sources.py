"""Where a dataset's files are found in the data home, fetching the archive when they are not.

Looked for in order: the extracted folder (``<home>/<folder>``, or the extraction made in the
derived folder when the home is read-only), then the archive (``<home>/<name>.zip``, read member by
member without extracting), then, if allowed, the official archive is downloaded and extracted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from recsys_eval.data import home as _home
from recsys_eval.data.descriptors import Descriptor, get_descriptor
from recsys_eval.data.fetch import (
    ZIP_ERRORS,
    download_archive,
    extract_archive,
    open_archive,
    verify_archive,
)
from recsys_eval.errors import DataError


@dataclass(frozen=True)
class Source:
    """A dataset's files: an extracted folder, or the archive itself."""

    desc: Descriptor
    path: Path
    is_archive: bool

    def member(self, file: str) -> str:
        return f"{self.desc.archive.folder}/{file}"

    def describe(self, file: str) -> str:
        """The file for messages: a path, or ``archive:member``."""
        return f"{self.path}:{self.member(file)}" if self.is_archive else str(self.path / file)

    def read(self, file: str) -> Path | bytes:
        """A file's path (extracted folder) or its bytes (archive member)."""
        if not self.is_archive:
            path = self.path / file
            if not path.is_file():
                raise DataError(f"missing file {path} of dataset {self.desc.name}")
            return path
        with open_archive(self.path) as zf:
            try:
                return zf.read(self.member(file))
            except KeyError:
                raise DataError(f"{self.path}: no member {self.member(file)}") from None
            except ZIP_ERRORS as exc:
                raise DataError(f"{self.path}: corrupt or truncated archive ({exc})") from None

    def stamp_paths(self) -> list[Path]:
        """The files whose change makes anything derived from this source stale."""
        if self.is_archive:
            return [self.path]
        tables = [t for t in (self.desc.ratings, self.desc.items) if t is not None]
        return [self.path / t.file for t in tables]

    def verify(self) -> None:
        """Check an archive against the descriptor's size and SHA-256 (a folder is trusted)."""
        if self.is_archive:
            verify_archive(self.path, self.desc.archive)


def _complete(folder: Path, desc: Descriptor) -> bool:
    tables = [t for t in (desc.ratings, desc.items) if t is not None]
    return folder.is_dir() and all((folder / t.file).is_file() for t in tables)


def _extracted_folders(desc: Descriptor, home: Path) -> list[Path]:
    derived = _home.derived_folder(home, desc.name) / "extracted" / desc.archive.folder
    return [home / desc.archive.folder, derived]


def presence(name: str | Descriptor, data_home: str | Path | None = None) -> str:
    """``"extracted"``, ``"archive"`` or ``"absent"``: what of the dataset the data home holds."""
    desc = get_descriptor(name)
    home = _home.data_home(data_home)
    if any(_complete(f, desc) for f in _extracted_folders(desc, home)):
        return "extracted"
    return "archive" if (home / desc.archive.filename).is_file() else "absent"


def locate(desc: Descriptor, home: Path, *, download: bool = True, progressbar: bool = True) -> Source:
    """The source of ``desc``'s files in ``home``; downloads and extracts when allowed and needed."""
    for folder in _extracted_folders(desc, home):
        if _complete(folder, desc):
            return Source(desc, folder, is_archive=False)
    archive = home / desc.archive.filename
    if archive.is_file():
        return Source(desc, archive, is_archive=True)
    if not download:
        folder = home / desc.archive.folder
        tables = [t.file for t in (desc.ratings, desc.items) if t is not None]
        missing = [f for f in tables if not (folder / f).is_file()]
        found = f"folder {folder} lacks {', '.join(missing)}" if folder.is_dir() else f"no folder {folder}"
        raise DataError(
            f"dataset {desc.name} is not in the data home {home} ({found}, no archive "
            f"{desc.archive.filename}); fetch it with `recsys-eval datasets fetch {desc.name}` or "
            "load it with download=True"
        )
    archive = download_archive(desc, home, progressbar=progressbar)
    try:
        return Source(desc, extract_archive(archive, desc, home), is_archive=False)
    except DataError:
        archive.unlink(missing_ok=True)  # downloaded just now and unusable: never trust it later
        raise


def dataset_path(
    name: str | Descriptor,
    data_home: str | Path | None = None,
    *,
    download: bool = True,
) -> Path:
    """The extracted folder of dataset ``name`` (e.g. the ML-100K folds u1.base ... ub.test).

    An archive without its folder is extracted: into the data home, or into the derived folder
    when the data home is read-only.
    """
    desc = get_descriptor(name)
    home = _home.data_home(data_home)
    source = locate(desc, home, download=download)
    if not source.is_archive:
        return source.path
    source.verify()
    parent = home if _home.is_writable(home) else _home.derived_folder(home, desc.name) / "extracted"
    return extract_archive(source.path, desc, parent)


def fetch_dataset(name: str | Descriptor, data_home: str | Path | None = None) -> Path:
    """Make dataset ``name`` present in the data home (download, verify, extract); its folder."""
    return dataset_path(name, data_home, download=True)
