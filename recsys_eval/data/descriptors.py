"""Dataset descriptors: one small TOML file per dataset in the top-level ``datasets/`` folder.

A descriptor says where the official archive is (URL, size, SHA-256 or the URL of the ``.md5``
GroupLens serves beside it), which folder and files it holds, and how to read its ratings and item
files (separator, header, encoding, column order). Adding a dataset means adding a descriptor, not
code.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from recsys_eval.errors import DataError, closest

ROLES = ("user", "item", "rating", "timestamp")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArchiveSpec(_Spec):
    """The official archive and what it holds."""

    url: str
    size: int | None = Field(default=None, gt=0)
    sha256: str | None = None
    md5_url: str | None = None
    format: Literal["zip"] = "zip"
    folder: str
    files: list[str]

    @field_validator("url", "md5_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^/]+/", value):
            raise ValueError(f"expected an http(s) URL, got {value!r}")
        return value

    @field_validator("sha256")
    @classmethod
    def _hex64(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9a-f]{64}", value):
            raise ValueError("expected 64 lowercase hexadecimal digits")
        return value

    @property
    def filename(self) -> str:
        """File name of the archive, the last part of its URL."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]


class TableSpec(_Spec):
    """A delimited text file: how to split it into named columns."""

    file: str
    separator: str = Field(min_length=1)
    header: bool = False
    encoding: str = "utf-8"
    quoting: bool = True
    columns: list[str] = Field(min_length=1)

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        import codecs

        try:
            codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown text encoding {value!r}") from None
        return value


class RatingsSpec(TableSpec):
    """The ratings file; ``columns`` names every field in order, roles among them."""

    @model_validator(mode="after")
    def _roles(self) -> RatingsSpec:
        missing = [r for r in ("user", "item") if r not in self.columns]
        if missing:
            raise ValueError(f"columns must name {missing}; roles are {list(ROLES)}")
        return self


class ItemsSpec(TableSpec):
    """The item metadata file: title (with the year in parentheses) and genres.

    ``genres = "pipe"``: a ``genres`` column of names separated by ``|``; ``"flags"``: one 0/1 field
    per name of ``genre_names``, after the named ``columns``.
    """

    genres: Literal["pipe", "flags", "none"] = "none"
    genre_names: list[str] = []

    @model_validator(mode="after")
    def _consistent(self) -> ItemsSpec:
        missing = [c for c in ("item", "title") if c not in self.columns]
        if missing:
            raise ValueError(f"items columns must name {missing}")
        if self.genres == "flags" and not self.genre_names:
            raise ValueError("genres = 'flags' needs genre_names")
        if self.genres == "pipe" and "genres" not in self.columns:
            raise ValueError("genres = 'pipe' needs a 'genres' column")
        return self


class Counts(_Spec):
    """Published sizes: ratings, and distinct users and items that have ratings."""

    ratings: int
    users: int
    items: int


class Descriptor(_Spec):
    """Everything needed to fetch, verify and read one dataset."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    title: str
    summary: str = ""
    archive: ArchiveSpec
    ratings: RatingsSpec
    items: ItemsSpec | None = None
    counts: Counts | None = None

    @model_validator(mode="after")
    def _files_listed(self) -> Descriptor:
        for table in (self.ratings, self.items):
            if table is not None and table.file not in self.archive.files:
                raise ValueError(f"{table.file!r} is not among archive.files")
        return self

    @property
    def digest(self) -> str:
        """A hash of the descriptor's content: a cache built under another descriptor is stale."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


def descriptor_folder() -> Path:
    """The ``datasets/`` folder: inside the installed package (wheel) or at the repository top."""
    package = Path(__file__).resolve().parent.parent
    for folder in (package / "datasets", package.parent / "datasets"):
        if folder.is_dir():
            return folder
    raise DataError(f"no datasets/ folder of descriptors beside {package}")


def read_descriptor(path: str | Path) -> Descriptor:
    """Read and validate one descriptor file."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"cannot read dataset descriptor {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"dataset descriptor {path} is not valid TOML: {exc}") from exc
    try:
        return Descriptor.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'top level'}: {e['msg']}" for e in exc.errors()
        )
        raise DataError(f"dataset descriptor {path} is invalid: {problems}") from None


@functools.cache
def _registry() -> dict[str, Descriptor]:
    registry: dict[str, Descriptor] = {}
    for path in sorted(descriptor_folder().glob("*.toml")):
        desc = read_descriptor(path)
        if desc.name != path.stem:
            raise DataError(f"dataset descriptor {path} names itself {desc.name!r}; expected {path.stem!r}")
        registry[desc.name] = desc
    return registry


def list_datasets() -> list[Descriptor]:
    """Every known dataset, smallest first (by published ratings count)."""
    return sorted(
        _registry().values(),
        key=lambda d: (d.counts.ratings if d.counts else float("inf"), d.name),
    )


def get_descriptor(name: str | Descriptor) -> Descriptor:
    """The descriptor of dataset ``name`` (case-insensitive); a Descriptor is returned as is."""
    if isinstance(name, Descriptor):
        return name
    registry = _registry()
    key = str(name).strip().lower()
    if key not in registry:
        raise DataError(f"unknown dataset {name!r}: {closest(key, registry)}")
    return registry[key]
