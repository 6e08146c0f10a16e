"""`neuron-prof open` seen by a real browser: Chromium's own CORS checks against our headers.

A local page stands in for the Perfetto UI (no network here): the server is told to trust that page's
origin, the page fetch()es the trace the way the UI does, and the server stops by itself. A page from
an origin the server does not trust is blocked by the browser and cannot use up the download.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_prof.cli._open_server import TraceServer
from tests.browser import Chromium, find_chromium

# the trace URL comes in the fragment, as in the Perfetto UI's deep link
_PAGE = """<!DOCTYPE html><html><body><script>
fetch(decodeURIComponent(location.hash.slice(1))).then(r => r.arrayBuffer()).then(
  b => { window.__got = b.byteLength; }, e => { window.__err = String(e); });
</script></body></html>"""


class _PageServer:
    """Serves one HTML page on 127.0.0.1 (the stand-in for the Perfetto UI's origin)."""

    def __init__(self, html: str) -> None:
        body = html.encode()

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.origin = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    if find_chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    with Chromium.start() as b:
        yield b


def test_browser_fetch_from_the_trusted_origin_gets_the_trace_and_stops_the_server(
    chromium: Chromium, tmp_path: Path
) -> None:
    trace = tmp_path / "t.pftrace"
    trace.write_bytes(b"\x0a\x02\x08\x01" * 50_000)
    ready = "window.__got !== undefined || window.__err !== undefined"
    # GIVEN two pages: one from an untrusted origin, one from the origin the server trusts
    evil, ui = _PageServer(_PAGE), _PageServer(_PAGE)
    try:
        with TraceServer(trace, port=0, origin=ui.origin) as srv:
            evals = {"got": "window.__got ?? null", "err": "window.__err ?? null"}
            # WHEN the untrusted page fetches: the browser blocks it and the server keeps waiting
            page = chromium.load(f"{evil.origin}/#{srv.url}", ready=ready, evals=evals)
            assert page.values["got"] is None and "Failed to fetch" in page.values["err"]
            assert any("CORS" in e or "Access-Control" in e or "ERR_FAILED" in e for e in page.console_errors)
            assert not srv.wait(0.3)
            # WHEN the trusted page fetches: it reads every byte, and the server stops by itself
            page = chromium.load(f"{ui.origin}/#{srv.url}", ready=ready, evals=evals)
            assert page.values == {"got": trace.stat().st_size, "err": None}
            assert page.console_errors == []
            assert srv.wait(10)
            statuses = [s for _, _, s in srv.requests]
            assert statuses.count(200) == 1 and 403 in statuses
    finally:
        evil.close()
        ui.close()
