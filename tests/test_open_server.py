"""`neuron-prof open`: the one-file server, tested over real HTTP on loopback (no mocks, bounded waits)."""

from __future__ import annotations

import gzip
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_prof.cli import main
from neuron_prof.cli._open import JSON_WARN_BYTES, choose_file, size_warning
from neuron_prof.cli._open_server import PERFETTO_ORIGIN, PERFETTO_PORT, TraceServer, json_size_estimate

T = 5.0  # seconds: every socket operation and wait in this file is bounded by this


def _request(
    port: int, method: str, path: str, headers: dict[str, str] | None = None, host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP request (http.client sends the path exactly as given, no normalisation)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=T)
    try:
        c.putrequest(method, path, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            c.putheader("Host", host)
        for k, v in (headers or {}).items():
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        c.close()


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    # a body larger than one send chunk, with every byte value, so truncation or re-encoding shows; it
    # starts as a Perfetto trace does (field 1 `packet`, length-delimited: 0x0a), or `open` refuses it
    p = tmp_path / "my trace.pftrace"
    p.write_bytes(b"\x0a\x02\x08\x01" + bytes(range(256)) * 9000 + b"end")
    (tmp_path / "secret.txt").write_text("not for the browser")
    return p


def test_serves_the_file_once_to_the_perfetto_origin_then_stops(trace_file: Path) -> None:
    # GIVEN a server on a free port
    with TraceServer(trace_file, port=0) as srv:
        assert srv.url == f"http://127.0.0.1:{srv.port}/my_trace.pftrace"
        assert srv.deep_link == f"https://ui.perfetto.dev/#!/?url={srv.url}"
        # WHEN the Perfetto UI preflights and fetches it
        st, h, _ = _request(
            srv.port,
            "OPTIONS",
            "/my_trace.pftrace",
            {
                "Origin": PERFETTO_ORIGIN,
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Private-Network": "true",
            },
        )
        assert st == 204
        assert h["access-control-allow-origin"] == PERFETTO_ORIGIN
        assert "GET" in h["access-control-allow-methods"]
        assert h["access-control-allow-private-network"] == "true"
        assert not srv.wait(0.3)  # a preflight is not a download
        st, h, body = _request(
            srv.port,
            "GET",
            "/my_trace.pftrace",
            {"Origin": PERFETTO_ORIGIN, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"},
        )
        # THEN it gets the exact bytes with the headers the UI needs, and the server stops by itself
        assert st == 200
        assert body == trace_file.read_bytes()
        assert h["content-length"] == str(trace_file.stat().st_size)
        assert h["content-type"] == "application/octet-stream"
        assert h["access-control-allow-origin"] == PERFETTO_ORIGIN
        assert srv.wait(T)
        assert srv.bytes_sent == trace_file.stat().st_size
        thread = srv._thread
    assert thread is not None and not thread.is_alive()
    with pytest.raises(OSError):  # the port is released: nothing listens any more
        socket.create_connection(("127.0.0.1", srv.port), timeout=T).close()


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/secret.txt",
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/my_trace.pftrace/..",
        "/my_trace.pftrace/../secret.txt",
        "//my_trace.pftrace",
        "/MY_TRACE.PFTRACE",
        "/my%20trace.pftrace",
        "/my%5Ftrace.pftrace",
    ],
)
def test_other_paths_and_traversal_are_refused(trace_file: Path, path: str) -> None:
    with TraceServer(trace_file, port=0) as srv:
        st, h, body = _request(srv.port, "GET", path)
        assert st == 404
        assert b"not for the browser" not in body and b"\x00\x01\x02" not in body
        assert not srv.wait(0.2)


def test_foreign_origins_methods_and_hosts_are_refused(trace_file: Path) -> None:
    with TraceServer(trace_file, port=0) as srv:
        p = "/my_trace.pftrace"
        # another web page reading it with CORS: refused, and no CORS grant
        st, h, _ = _request(srv.port, "GET", p, {"Origin": "https://evil.example"})
        assert st == 403 and "access-control-allow-origin" not in h
        st, h, _ = _request(
            srv.port, "OPTIONS", p, {"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}
        )
        assert st == 403 and "access-control-allow-origin" not in h
        st, h, _ = _request(srv.port, "GET", p, {"Origin": "null"})
        assert st == 403
        # another page's <img src=...> (no Origin, cross-site) would otherwise use up the one download
        st, _, _ = _request(srv.port, "GET", p, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})
        assert st == 403
        # DNS rebinding: a name that resolves to 127.0.0.1 but is not loopback's
        st, _, _ = _request(srv.port, "GET", p, host=f"evil.example:{srv.port}")
        assert st == 403
        for method in ("POST", "PUT", "DELETE"):
            st, _, _ = _request(srv.port, method, p)
            assert st == 405
        # the Perfetto UI's own probe for a trace_processor (POST /status) gets a readable 404
        st, h, _ = _request(srv.port, "POST", "/status", {"Origin": PERFETTO_ORIGIN})
        assert st == 404 and h["access-control-allow-origin"] == PERFETTO_ORIGIN
        # a local client without Origin gets no CORS header; HEAD does not count as the download
        st, h, body = _request(srv.port, "HEAD", p)
        assert st == 200 and body == b"" and "access-control-allow-origin" not in h
        assert not srv.wait(0.2)
        statuses = [s for _, _, s in srv.requests]
        assert statuses.count(403) == 5 and statuses.count(405) == 3 and 200 in statuses
        # and the file is still served after all of that
        st, _, body = _request(srv.port, "GET", p, host=f"localhost:{srv.port}")
        assert st == 200 and body == trace_file.read_bytes()
        assert srv.wait(T)


def test_binds_loopback_only(trace_file: Path) -> None:
    with TraceServer(trace_file, port=0) as srv:
        assert srv._srv.server_address[0] == "127.0.0.1"
        other = [a for a in _non_loopback_addresses()]
        for addr in other:
            with pytest.raises(OSError):
                socket.create_connection((addr, srv.port), timeout=1).close()


def _non_loopback_addresses() -> list[str]:
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return []
    return sorted({i[4][0] for i in infos if not i[4][0].startswith("127.")})


def test_a_client_that_hangs_up_early_does_not_stop_the_server(trace_file: Path) -> None:
    with TraceServer(trace_file, port=0) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=T)
        s.sendall(b"GET /my_trace.pftrace HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        s.recv(100)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
        s.close()
        assert not srv.wait(0.5)
        st, _, body = _request(srv.port, "GET", "/my_trace.pftrace")
        assert st == 200 and len(body) == trace_file.stat().st_size
        assert srv.wait(T)


def test_content_types(tmp_path: Path) -> None:
    for name, ctype in (("t.json", "application/json"), ("t.json.gz", "application/gzip")):
        p = tmp_path / name
        p.write_bytes(gzip.compress(b"[]") if name.endswith(".gz") else b"[]")
        with TraceServer(p, port=0) as srv:
            st, h, body = _request(srv.port, "GET", "/" + name)
            assert (st, h["content-type"], body) == (200, ctype, p.read_bytes())


def test_prefers_the_pftrace_beside_a_json_and_warns_on_huge_json(tmp_path: Path) -> None:
    j = tmp_path / "run.json.gz"
    j.write_bytes(gzip.compress(b"[]"))
    assert choose_file(j, exact=False) == (j, None)
    pf = tmp_path / "run.pftrace"
    pf.write_bytes(b"\x0a\x00")
    chosen, note = choose_file(j, exact=False)
    assert chosen == pf and note is not None and "run.pftrace" in note
    assert choose_file(j, exact=True) == (j, None)
    # a .pftrace left by an earlier run (older than the JSON) is not served in its place
    os.utime(pf, (j.stat().st_mtime - 60, j.stat().st_mtime - 60))
    chosen, note = choose_file(j, exact=False)
    assert chosen == j and note is not None and "older" in note
    # the size estimate of a .gz is its uncompressed size, read from the gzip trailer
    big = tmp_path / "big.json.gz"
    payload = b" " * (JSON_WARN_BYTES + 10)
    big.write_bytes(gzip.compress(payload, compresslevel=1))
    assert json_size_estimate(big) == len(payload)
    w = size_warning(big)
    assert w is not None and "big.pftrace" in w and "MB" in w
    assert size_warning(j) is None and size_warning(pf) is None


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["open", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "missing.json: no such file" in err and "Traceback" not in err
    assert main(["open", str(tmp_path)]) == 2
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        f = tmp_path / "t.pftrace"
        f.write_bytes(b"\x0a\x00")
        assert main(["open", str(f), "--port", str(busy.getsockname()[1])]) == 2
        assert "already in use" in capsys.readouterr().err


def _start_open(trace_file: Path) -> tuple[subprocess.Popen[str], re.Match[str]]:
    """`neuron-prof open` as a real process on a free port, and the URL it serves at."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_prof", "open", str(trace_file), "--port", "0", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"^Serving .* at (http://127\.0\.0\.1:(\d+)(/\S+))$", line)
        if m:
            return proc, m
    proc.kill()
    out, err = proc.communicate(timeout=T)
    raise AssertionError("".join(lines) + out + err)


def test_cli_process_stops_on_ctrl_c(trace_file: Path) -> None:
    proc, link = _start_open(trace_file)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 130 and "Traceback" not in err
        with pytest.raises(OSError):  # and the port is free again
            socket.create_connection(("127.0.0.1", int(link.group(2))), timeout=T).close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=T)


def test_cli_process_prints_the_link_serves_once_and_exits_by_itself(trace_file: Path) -> None:
    # GIVEN `neuron-prof open` as a real process on a free port
    proc, link = _start_open(trace_file)
    try:
        # WHEN the UI fetches the URL from the link
        st, _, body = _request(int(link.group(2)), "GET", link.group(3), {"Origin": PERFETTO_ORIGIN})
        assert st == 200 and body == trace_file.read_bytes()
        # THEN the process exits on its own, successfully
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert f"Sent {len(body):,} bytes" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=T)


def test_open_refuses_what_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    cases = {
        "empty.json": (b"", "empty file"),
        "photo.json": (png, "not JSON nor a Perfetto protobuf (starts with byte 0x89)"),
        "picture.pftrace": (png, "not JSON nor a Perfetto protobuf (starts with byte 0x89)"),
        "zipped.json.gz": (gzip.compress(png), "gzip holding no JSON (starts with byte 0x89)"),
        "config.json": (b'{"lr": 0.1, "layers": [1, 2]}', "JSON without traceEvents"),  # issue 34
        "numbers.json": (b"[1, 2, 3]", "JSON without traceEvents"),
    }
    for name, (body, says) in cases.items():
        (tmp_path / name).write_bytes(body)
        # GIVEN a file that is not a trace THEN one line, as every command says it, and exit 2: nothing served
        assert main(["open", str(tmp_path / name), "--port", "0", "--timeout", "0.1"]) == 2
        out = capsys.readouterr()
        tail = "" if not body else "; not a trace the Perfetto UI opens"
        assert out.err == f"neuron-prof: error: {tmp_path / name}: {says}{tail}\n", out
        assert "Serving" not in out.out


def test_a_port_the_ui_cannot_fetch_from_gets_no_ui_link(trace_file: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN --port 0 (any port but 9001, which the Perfetto UI's CSP alone allows)
    assert main(["open", str(trace_file), "--port", "0", "--timeout", "0.2"]) == 1
    out = capsys.readouterr().out
    port = int(re.search(r"at http://127\.0\.0\.1:(\d+)/", out).group(1))  # type: ignore[union-attr]
    # THEN no ui.perfetto.dev link to that port, but what to do: free 9001, forward it, or open the file by hand
    assert f"url=http://127.0.0.1:{port}" not in out and port != PERFETTO_PORT
    assert "free port 9001" in out and f"ssh -L 9001:127.0.0.1:{port}" in out and "Open trace file" in out
    assert "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/my_trace.pftrace" in out


def test_a_forwarded_9001_is_served(trace_file: Path) -> None:
    # GIVEN the server on another port, reached through a forward of 9001 (the Host the browser sends)
    with TraceServer(trace_file, port=0) as srv:
        st, _, body = _request(srv.port, "GET", "/my_trace.pftrace", {"Origin": PERFETTO_ORIGIN},
                               host=f"127.0.0.1:{PERFETTO_PORT}")
        assert st == 200 and body == trace_file.read_bytes()
