"""Files named by URI (``hdfs://``, ``s3a://``, ``file://``, ``viewfs://``: any file system Spark's
Hadoop client reaches) beside local paths: which is which, a URI given back its slashes after a
trip through ``pathlib``, and a local path as Hadoop names it.

Spark reads a path given without a scheme against the cluster's default file system (HDFS on most
clusters), not the driver's disk: what is the driver's file is given to Spark qualified
(:func:`file_uri`).
"""

from __future__ import annotations

import re
from pathlib import Path

#: A scheme of two characters or more (not a drive letter), then ``:/`` (``://``, or its slash lost in a Path).
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/(?P<second>/?)")


def is_uri(path: str | Path) -> bool:
    """Whether ``path`` is a URI with a scheme (``file:///``, ``hdfs://``, ``s3a://``), not a
    local path."""
    return bool(_SCHEME.match(str(path)))


def uri(path: str | Path) -> str:
    """A file name or URI as Spark takes it. A URI that went through ``pathlib.Path`` (as CLI options
    do) lost a slash, ``s3a://bucket/key`` -> ``s3a:/bucket/key``: it is given back for every scheme
    but ``file`` (``file:/path`` is a whole URI, without an authority); a URI of another scheme
    without an authority, ``hdfs:/path``, must then be written in full, ``hdfs://namenode/path``."""
    text = str(path)
    found = _SCHEME.match(text)
    if found is None or found["second"] or found["scheme"].lower() == "file":
        return text
    return f"{found['scheme']}://{text[found.end():]}"


def file_uri(path: str | Path) -> str:
    """The local ``path`` as Hadoop names a local file: ``file://`` and the absolute path, not
    percent-encoded (Hadoop's ``Path`` would keep a ``%20`` as three characters)."""
    return f"file://{Path(path).absolute()}"
