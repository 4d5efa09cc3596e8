"""A local Maven-layout repository over real HTTP, for the jar fetch tests.

:class:`JarServer` serves small generated jar files from memory with Python's
``http.server`` in a thread, honours ``Range: bytes=N-`` requests (206), records every
request, and can be told to misbehave on the next request for a path:

- ``"cut:N"``: announce the whole length, send N bytes, close the connection;
- ``"corrupt"``: send the right length with one byte changed;
- ``"ignore-range"``: answer a range request with the whole file (200);
- ``"404"`` / ``"500"``: answer with that status.
"""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

from spanguard.streams.localbroker.jars import JarLock, LockedJar

__all__ = ["JarServer", "ServedRequest", "make_jars", "write_lock"]


@dataclass(frozen=True)
class ServedRequest:
    """One request the server answered."""

    path: str
    range: str | None
    status: int
    bytes_sent: int


def make_jars(sizes: dict[str, int], seed: int = 7) -> tuple[JarLock, dict[str, bytes]]:
    """A lock of fake jars ``org/example/<name>/1.0/<name>-1.0.jar`` and their contents."""
    jars: list[LockedJar] = []
    contents: dict[str, bytes] = {}
    for index, (name, size) in enumerate(sorted(sizes.items())):
        block = hashlib.sha256(f"{seed}-{name}".encode()).digest()
        data = (block * (size // len(block) + 1))[:size]
        data = bytes((byte + index * 31 + position) % 256 for position, byte in enumerate(data))
        path = f"org/example/{name}/1.0/{name}-1.0.jar"
        contents[path] = data
        jars.append(
            LockedJar(
                group="org.example",
                artifact=name,
                version="1.0",
                path=path,
                size=size,
                sha256=hashlib.sha256(data).hexdigest(),
            )
        )
    return JarLock(kafka_version="0.0-test", jars=tuple(jars)), contents


class JarServer:
    """Serve ``contents`` (repository path -> bytes) under ``<url>``; see the module doc."""

    def __init__(self, contents: dict[str, bytes]) -> None:
        self.contents = dict(contents)
        self.requests: list[ServedRequest] = []
        self._faults: dict[str, deque[str]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """The repository's base URL."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/repo/"

    def fail_next(self, path: str, *faults: str) -> None:
        """Misbehave on the next requests for ``path``, one fault per request, in order."""
        with self._lock:
            self._faults[path].extend(faults)

    def requests_for(self, path: str) -> list[ServedRequest]:
        """The requests answered for one repository path."""
        with self._lock:
            return [request for request in self.requests if request.path == path]

    def _next_fault(self, path: str) -> str | None:
        with self._lock:
            queue = self._faults.get(path)
            return queue.popleft() if queue else None

    def _record(self, request: ServedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the tests read :attr:`JarServer.requests` instead."""

            def do_GET(self) -> None:
                path = self.path.removeprefix("/repo/")
                ranged = self.headers.get("Range")
                fault = server._next_fault(path)
                data = server.contents.get(path)
                if data is None or fault in ("404", "500"):
                    status = 404 if data is None or fault == "404" else 500
                    server._record(ServedRequest(path, ranged, status, 0))
                    self.send_error(status)
                    return
                if fault == "corrupt":
                    data = data[:-1] + bytes([(data[-1] + 1) % 256])
                start = 0
                if ranged and fault != "ignore-range":
                    start = int(ranged.removeprefix("bytes=").split("-", 1)[0])
                if start >= len(data):
                    server._record(ServedRequest(path, ranged, 416, 0))
                    self.send_error(416)
                    return
                body = data[start:]
                status = 206 if start else 200
                self.send_response(status)
                self.send_header("Content-Type", "application/java-archive")
                self.send_header("Content-Length", str(len(body)))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if fault is not None and fault.startswith("cut:"):
                    body = body[: int(fault.removeprefix("cut:"))]
                    self.close_connection = True
                # recorded before the body goes out: the client may be done right after it
                server._record(ServedRequest(path, ranged, status, len(body)))
                self.wfile.write(body)
                self.wfile.flush()

        return Handler

    def __enter__(self) -> JarServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def write_lock(lock: JarLock, path: Path) -> Path:
    """Write ``lock`` as a lock file at ``path`` and return it."""
    path.write_text(lock.to_json())
    return path
