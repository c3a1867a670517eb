"""Fixtures of the data tests: isolated derived folders, the shared MovieLens copy, a tiny dataset
and its archives, and a local HTTP server on 127.0.0.1 that serves what a test gives it."""

from __future__ import annotations

import hashlib
import io
import os
import socket
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from recsys_eval.data.descriptors import Descriptor

TINY_RATINGS = b"userId,movieId,rating,timestamp\n1,10,4.0,100\n1,20,3.5,200\n2,10,5.0,300\n3,30,1.0,400\n"
TINY_MOVIES = (
    b'movieId,title,genres\n10,"Heat, The (1995)",Action|Crime\n20,Solo (2018),(no genres listed)\n'
    b"30,Untitled,Drama\n"
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """Derived files of read-only homes go to a fresh folder; no proxy between us and 127.0.0.1."""
    monkeypatch.setenv("RECSYS_EVAL_CACHE", str(tmp_path / "derived-root"))
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def shared_home() -> Path:
    """The shared MovieLens folder named by RECSYS_EVAL_DATA (skip when it is not there)."""
    value = os.environ.get("RECSYS_EVAL_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("RECSYS_EVAL_DATA does not name a folder of MovieLens data")
    return Path(value)


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def tiny_zip() -> bytes:
    """A good archive of the tiny dataset: folder tiny/ with ratings.csv and movies.csv."""
    return zip_bytes(
        {
            "tiny/ratings.csv": TINY_RATINGS,
            "tiny/movies.csv": TINY_MOVIES,
            "tiny/README.txt": b"tiny test dataset\n",
        }
    )


@pytest.fixture
def make_descriptor():
    """Build the tiny dataset's descriptor for an archive URL and the checks to apply."""

    def make(
        url: str,
        *,
        data: bytes | None = None,
        sha256: bool = True,
        size: bool = True,
        md5_url: str | None = None,
        name: str = "tiny",
    ) -> Descriptor:
        archive = {"url": url, "folder": "tiny", "files": ["ratings.csv", "movies.csv"]}
        if data is not None and sha256:
            archive["sha256"] = hashlib.sha256(data).hexdigest()
        if data is not None and size:
            archive["size"] = len(data)
        if md5_url:
            archive["md5_url"] = md5_url
        return Descriptor.model_validate(
            {
                "name": name,
                "title": "Tiny",
                "archive": archive,
                "ratings": {
                    "file": "ratings.csv",
                    "separator": ",",
                    "header": True,
                    "columns": ["user", "item", "rating", "timestamp"],
                },
                "items": {
                    "file": "movies.csv",
                    "separator": ",",
                    "header": True,
                    "columns": ["item", "title", "genres"],
                    "genres": "pipe",
                },
                "counts": {"ratings": 4, "users": 3, "items": 3},
            }
        )

    return make


class _Handler(BaseHTTPRequestHandler):
    timeout = 5  # seconds a connection may stay idle

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        mode, body = self.server.routes.get(self.path, ("404", b""))
        if mode in ("404", "500"):
            self.send_error(int(mode))
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if mode == "drop":  # promise the whole body, send half, cut the connection
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def http_server():
    """A threaded HTTP server on 127.0.0.1 (random port). ``server.routes[path] = (mode, body)``
    with mode "ok", "drop" (connection cut mid-body), "404" or "500". It stops at the end of the
    test, or by itself after 60 seconds at the latest."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.routes = {}
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    deadline = threading.Timer(60, server.shutdown)
    deadline.daemon = True
    deadline.start()
    try:
        yield server
    finally:
        deadline.cancel()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def zip_of():
    """``zip_of({member: bytes})``: the bytes of a zip archive with those members."""
    return zip_bytes
