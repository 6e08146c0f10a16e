"""`neuron-prof open`: serve one trace on 127.0.0.1 and print the link that opens it in the Perfetto UI."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import click

from neuron_prof.errors import TraceLoadError, UsageError
from neuron_prof.formats import PFTRACE

if TYPE_CHECKING:
    from neuron_prof.cli._open_server import TraceServer

JSON_WARN_BYTES = 256 * 1024 * 1024
"""Above this much JSON the browser tab (2-4x the file in memory, ~2 GB cap) is likely to fail."""


def choose_file(trace: Path, exact: bool) -> tuple[Path, str | None]:
    """The file to serve and a note saying why, preferring the native trace beside a JSON trace."""
    from neuron_prof.formats import companion_pftrace

    if not trace.exists():
        raise TraceLoadError(trace, "no such file")
    if not trace.is_file():
        raise TraceLoadError(trace, "is not a regular file")
    pf = None if exact else companion_pftrace(trace)
    if pf is None or not pf.is_file() or pf.stat().st_size == 0:
        return trace, None
    if pf.stat().st_mtime + 2 < trace.stat().st_mtime:
        # written by an earlier run: serving it would show an old profile under the new one's name
        return trace, f"ignoring {pf.name}: it is older than {trace.name}; serving the JSON"
    return pf, (
        f"serving {pf.name} (the native Perfetto trace beside {trace.name}: smaller and faster "
        f"to open; --exact serves the JSON)"
    )


_SNIFF = 1 << 20
"""Bytes `check_is_trace` reads: enough to find a Kineto JSON's ``traceEvents`` key after its device properties."""


def check_is_trace(file: Path) -> None:
    """Raise TraceLoadError unless `file` starts like a trace the Perfetto UI opens: JSON (plain or gzip) with
    ``traceEvents`` or a list of events, or a Perfetto protobuf. Only the first MiB is read: a big trace is
    served, not parsed."""
    import gzip
    import zlib

    from neuron_prof.formats import CHROME_JSON, GZIP_MAGIC, PFTRACE, named_format, sniff

    try:
        with open(file, "rb") as f:
            head = f.read(_SNIFF)
    except OSError as e:
        raise TraceLoadError.from_os_error(file, e) from None
    if not head:
        raise TraceLoadError(file, "empty file")
    if head[:2] == GZIP_MAGIC:
        try:
            with gzip.open(file, "rb") as g:
                head = g.read(_SNIFF)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceLoadError(file, f"a broken gzip file ({e}); not a trace") from None
        what = "gzip holding no JSON"
    else:
        what = "not JSON nor a Perfetto protobuf"
    fmt = sniff(head) if head[:2] != GZIP_MAGIC else None  # gzip in gzip is no trace
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if fmt is CHROME_JSON and body[:1] == b"{" and (b'"traceEvents"' in head or len(head) == _SNIFF):
        return  # a Chrome/Kineto JSON object (its traceEvents may lie beyond the first MiB of a big one)
    if fmt is CHROME_JSON and body[:1] == b"[":
        return  # Chrome's array form: a list of event objects (`sniff` saw one start)
    if fmt is PFTRACE and named_format(file) is not CHROME_JSON:
        return
    if head[:2] != GZIP_MAGIC and body[:1] in (b"{", b"["):
        raise TraceLoadError(file, "JSON without traceEvents; not a trace the Perfetto UI opens")
    raise TraceLoadError(file, f"{what} (starts with byte 0x{head[0]:02x}); not a trace the Perfetto UI opens")


def size_warning(file: Path) -> str | None:
    """A warning when a JSON trace is too large for a browser tab."""
    from neuron_prof.cli._open_server import json_size_estimate
    from neuron_prof.formats import companion_pftrace

    pf = companion_pftrace(file)
    if pf is None:
        return None
    n = json_size_estimate(file)
    if n < JSON_WARN_BYTES:
        return None
    return (
        f"{file.name} holds about {n / 1e6:,.0f} MB of JSON: the Perfetto UI keeps 2-4x that in browser "
        f"memory and may fail. Convert it first (`neuron-prof convert {file.name} {pf.name}`, about 0.3x the "
        f"size) or open it with `trace_processor_shell --httpd`."
    )


def _bind(file: Path, port: int | None) -> tuple[TraceServer, str | None]:
    """A TraceServer on `port`, or on 9001 falling back to a free port (with a note) when 9001 is busy."""
    from neuron_prof.cli._open_server import PERFETTO_PORT, TraceServer

    try:
        return TraceServer(file, port=PERFETTO_PORT if port is None else port), None
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise UsageError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from None
        if port is not None:
            raise UsageError(
                f"port {port} on 127.0.0.1 is already in use (try --port 0 for a free one)"
            ) from None
    srv = TraceServer(file, port=0)
    return srv, f"127.0.0.1:{PERFETTO_PORT} is in use (a trace_processor_shell --httpd?); serving on port {srv.port}"


def _instructions(srv: TraceServer, file: Path) -> list[str]:
    """What to do with the server: the Perfetto UI link when it can fetch from it (port 9001 only), else the
    three ways that work."""
    from neuron_prof.cli._open_server import PERFETTO_PORT, deep_link

    host = socket.gethostname()
    if srv.port == PERFETTO_PORT:
        return [
            f"Open in the Perfetto UI:\n  {srv.deep_link}",
            f"On a remote machine, forward the port first: ssh -L {srv.port}:127.0.0.1:{srv.port} {host}",
        ]
    # the UI's Content-Security-Policy lets it fetch from 127.0.0.1:9001 only: a link to this port cannot work
    via_9001 = deep_link(srv.url.replace(f":{srv.port}/", f":{PERFETTO_PORT}/", 1))
    return [
        f"The Perfetto UI fetches only from 127.0.0.1:{PERFETTO_PORT}, so it cannot open port {srv.port} "
        "directly. Either:",
        f"  - free port {PERFETTO_PORT} (stop what listens there) and run `neuron-prof open {file}` again, "
        "without --port;",
        f"  - or forward port {PERFETTO_PORT} to this one, from the machine with the browser: "
        f"ssh -L {PERFETTO_PORT}:127.0.0.1:{srv.port} {host}  (or on this machine: "
        f"socat TCP-LISTEN:{PERFETTO_PORT},bind=127.0.0.1 TCP:127.0.0.1:{srv.port}), then open\n    {via_9001}",
        f"  - or open https://ui.perfetto.dev, choose 'Open trace file' and pick {file} (a copy of it where "
        "the browser runs).",
    ]


@click.command("open")
@click.argument("trace", type=click.Path(path_type=Path))
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port on 127.0.0.1 (default 9001, the only one the Perfetto UI may fetch from; 0 = any free).",
)
@click.option("--exact", is_flag=True, help=f"Serve TRACE as given even when a {PFTRACE.suffixes[0]} lies beside it.")
@click.option(
    "--timeout",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Give up after this many seconds without a complete download (default: wait).",
)
@click.option("--browser", is_flag=True, help="Also open the link in the default web browser.")
def command(trace: Path, port: int | None, exact: bool, timeout: float | None, browser: bool) -> int:
    """Serve TRACE once on 127.0.0.1 and print the link that opens it in the Perfetto UI.

    Only that one file is served, only to the Perfetto UI (https://ui.perfetto.dev) or a local
    client; the server stops by itself once the UI has fetched the whole file (or on Ctrl-C).
    """
    from neuron_prof.cli._open_server import PERFETTO_PORT

    file, note = choose_file(trace, exact)
    check_is_trace(file)
    if note:
        click.echo(note)
    warning = size_warning(file)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    srv, busy = _bind(file, port)
    if busy:
        click.echo(f"warning: {busy}", err=True)
    with srv:
        size = file.stat().st_size
        click.echo(f"Serving {file.name} ({size / 1e6:,.1f} MB) at {srv.url}")
        for line in _instructions(srv, file):
            click.echo(line)
        click.echo("Waiting for the download (Ctrl-C to stop)...")
        if browser and srv.port == PERFETTO_PORT:
            import webbrowser

            webbrowser.open_new_tab(srv.deep_link)
        fetched = srv.wait(timeout)
    if not fetched:
        click.echo(f"No complete download within {timeout:g} s; stopped.", err=True)
        return 1
    click.echo(f"Sent {srv.bytes_sent:,} bytes; server stopped.")
    return 0
