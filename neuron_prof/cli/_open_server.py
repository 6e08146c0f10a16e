"""A one-file HTTP server that hands a trace to the Perfetto UI (`neuron-prof open`).

    with TraceServer(Path("run/trace.pftrace")) as srv:   # binds 127.0.0.1:9001
        print(srv.deep_link)                               # https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/trace.pftrace
        srv.wait()                                         # True once the file was sent completely

What it promises (tests/test_open_server.py checks each over real HTTP):
- binds 127.0.0.1 only and serves exactly one path, `/<file name>` (see url_name); every other path, traversal
  (`/../x`, `%2e%2e`) and method is refused (404/405); nothing else on disk is reachable;
- cross-origin reads are allowed only for the Perfetto UI origin (`Access-Control-Allow-Origin` is sent
  only to it, preflights from other origins get 403); a request another web page makes (cross-site, not
  the Perfetto origin) or one whose Host is not loopback (DNS rebinding) is refused with 403;
- it stops by itself once the whole file has been sent once (a HEAD, a refused request or a client that
  hangs up half-way does not count).
"""

from __future__ import annotations

import http.server
import re
import threading
from http import HTTPStatus
from pathlib import Path
from typing import Any, Final

from neuron_prof.formats import gzipped, named_format

PERFETTO_ORIGIN: Final = "https://ui.perfetto.dev"
PERFETTO_PORT: Final = 9001
"""The only loopback port the Perfetto UI's Content-Security-Policy lets it fetch from
(`connect-src ... http://127.0.0.1:9001`, ui/src/frontend/index.ts); a trace on any other port is blocked."""
HOST: Final = "127.0.0.1"
_CHUNK: Final = 1 << 20


def content_type_for(path: Path) -> str:
    """MIME type sent for a trace file (gzip stays gzip: the UI decompresses it itself)."""
    if gzipped(path):
        return "application/gzip"
    fmt = named_format(path)
    return fmt.mime if fmt is not None else "application/octet-stream"


def url_name(name: str) -> str:
    """The file's name as served: only [A-Za-z0-9._-], so the link needs no escaping.

    The Perfetto UI decodes its `url=` argument once before fetching, so a "%20" or "%23" in a served
    name would come back as a space or a fragment and miss; a plain name survives any decoding.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
    return safe or "trace"


def deep_link(file_url: str, origin: str = PERFETTO_ORIGIN) -> str:
    """The Perfetto UI link that makes the UI fetch `file_url`."""
    return f"{origin}/#!/?url={file_url}"


def json_size_estimate(path: Path) -> int:
    """Bytes of JSON the browser will hold: the file size, or gzip's recorded uncompressed size."""
    size = path.stat().st_size
    if gzipped(path) and size >= 18:
        with open(path, "rb") as f:
            f.seek(-4, 2)
            isize = int.from_bytes(f.read(4), "little")  # uncompressed size mod 2**32 (RFC 1952)
        # ISIZE wraps at 4 GiB; a ratio below 1 means it wrapped, so use the usual JSON ratio instead.
        return isize if isize >= size else size * 10
    return size


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # a second `open` right after the first must not fail on TIME_WAIT
    block_on_close = False

    def __init__(self, port: int, file: Path, origin: str) -> None:
        super().__init__((HOST, port), _Handler)
        self.file = file
        self.origin = origin
        self.url_path = "/" + url_name(file.name)
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, int]] = []
        """(method, path, status) of every request, for tests and the final message."""
        self.bytes_sent = 0


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    server_version = "neuron-prof"
    sys_version = ""
    timeout = 30  # an idle connection (a browser's preconnect) must not pin a thread forever

    def log_message(self, format: str, *args: Any) -> None:  # the base class's name
        pass  # the CLI prints one line at the end instead of a log line per request

    def _record(self, status: int) -> None:
        with self.server.lock:
            self.server.log.append((self.command, self.path, status))

    # ---- checks -----------------------------------------------------------------------------
    def _origin_ok(self) -> bool:
        return self.headers.get("Origin") == self.server.origin

    def _refusal(self) -> int | None:
        """The status to refuse this request with, or None when it may be served."""
        host = self.headers.get("Host")
        # our port, or 9001 forwarded to it (`neuron-prof open` says how when 9001 is taken)
        ports = {self.server.server_address[1], PERFETTO_PORT}
        if host is not None and host not in {f"{h}:{p}" for h in (HOST, "localhost") for p in ports}:
            return HTTPStatus.FORBIDDEN  # DNS rebinding: a page on evil.example resolving to 127.0.0.1
        origin = self.headers.get("Origin")
        if origin is not None and origin != self.server.origin:
            return HTTPStatus.FORBIDDEN
        site = self.headers.get("Sec-Fetch-Site")
        if site not in (None, "none", "same-origin") and not self._origin_ok():
            # another web page (e.g. <img src=...>) must not fetch, and so use up, the one download
            return HTTPStatus.FORBIDDEN
        # the path as sent: the base class folds a leading "//" into "/", and we serve one spelling only
        parts = self.requestline.split()
        raw = parts[1] if len(parts) >= 2 else ""
        if raw.split("?", 1)[0] != self.server.url_path:
            return HTTPStatus.NOT_FOUND
        return None

    def _cors_headers(self) -> None:
        if self._origin_ok():
            self.send_header("Access-Control-Allow-Origin", self.server.origin)
        self.send_header("Vary", "Origin")

    def _refuse(self, status: int) -> None:
        self._record(status)
        body = f"{int(status)} {HTTPStatus(status).phrase}\n".encode()
        self.send_response(status)
        self._cors_headers()  # lets the Perfetto UI read the 404 of its POST /status probe cleanly
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    # ---- methods ----------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._serve(send_body=True)

    def do_HEAD(self) -> None:
        self._serve(send_body=False)

    def do_OPTIONS(self) -> None:
        """CORS preflight: answered for the Perfetto origin only."""
        status = self._refusal()
        if status is not None or not self._origin_ok():
            self._refuse(status or HTTPStatus.FORBIDDEN)
            return
        self._record(HTTPStatus.NO_CONTENT)
        self.send_response(HTTPStatus.NO_CONTENT)
        self._cors_headers()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "Range, Cache-Control, Pragma")
        self.send_header("Access-Control-Max-Age", "600")
        if self.headers.get("Access-Control-Request-Private-Network") == "true":
            # Chrome's Private Network Access preflight for a public page reading from loopback
            self.send_header("Access-Control-Allow-Private-Network", "true")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _not_allowed(self) -> None:
        status = self._refusal()
        self._refuse(status if status is not None else HTTPStatus.METHOD_NOT_ALLOWED)

    do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed

    def _serve(self, send_body: bool) -> None:
        status = self._refusal()
        if status is not None:
            self._refuse(status)
            return
        try:
            f = open(self.server.file, "rb")  # closed below; the file may vanish meanwhile
        except OSError:
            self._refuse(HTTPStatus.NOT_FOUND)
            return
        with f:
            size = f.seek(0, 2)
            f.seek(0)
            self.send_response(HTTPStatus.OK)
            self._cors_headers()
            self.send_header("Content-Type", content_type_for(self.server.file))
            self.send_header("Content-Length", str(size))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if not send_body:
                self._record(HTTPStatus.OK)
                return
            sent = 0
            try:
                while chunk := f.read(_CHUNK):
                    self.wfile.write(chunk)
                    sent += len(chunk)
                self.wfile.flush()
            except OSError:  # the client hung up: it did not get the trace, keep serving
                self._record(499)
                return
        self._record(HTTPStatus.OK)
        if sent == size:
            with self.server.lock:
                self.server.bytes_sent = sent
            self.server.done.set()


class TraceServer:
    """Serves one trace file on 127.0.0.1 until it has been fetched once.

    Args:
        file: the trace to serve.
        port: 0 for a free port; by default the port the Perfetto UI may fetch from.
        origin: the one web origin allowed to read the file cross-origin.

    Raises:
        OSError: the port cannot be bound (in use).
    """

    def __init__(self, file: Path, port: int = PERFETTO_PORT, origin: str = PERFETTO_ORIGIN) -> None:
        self.file = Path(file)
        self._srv = _Server(port, self.file, origin)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._srv.server_address[1])

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT/<name>: the one URL this server answers."""
        return f"http://{HOST}:{self.port}{self._srv.url_path}"

    @property
    def deep_link(self) -> str:
        return deep_link(self.url, self._srv.origin)

    @property
    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of the requests answered so far."""
        with self._srv.lock:
            return list(self._srv.log)

    @property
    def bytes_sent(self) -> int:
        return self._srv.bytes_sent

    def start(self) -> TraceServer:
        """Serve in a daemon thread (returns at once)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._srv.serve_forever,
                kwargs={"poll_interval": 0.1},
                name="neuron-prof-open",
                daemon=True,
            )
            self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the file was fetched completely (True) or `timeout` seconds passed (False).

        Waits in short steps so that Ctrl-C interrupts it at once.
        """
        step = 0.25
        waited = 0.0
        while not self._srv.done.wait(step):
            waited += step
            if timeout is not None and waited >= timeout:
                return False
        return True

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._srv.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._srv.server_close()

    def __enter__(self) -> TraceServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "HOST",
    "PERFETTO_ORIGIN",
    "PERFETTO_PORT",
    "TraceServer",
    "content_type_for",
    "deep_link",
    "url_name",
    "json_size_estimate",
]
