"""`neuron-prof tui`: the terminal UI over one or more traces, in the terminal or served to a browser."""

from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

import click

from neuron_prof.cli._tui_job import run_job_tui
from neuron_prof.errors import TraceLoadError


def check_paths(traces: tuple[str, ...]) -> list[Path]:
    """The traces as paths; a missing or unreadable one raises TraceLoadError before the UI starts."""
    out = []
    for t in traces:
        p = Path(t)
        if not p.exists():
            raise TraceLoadError(p, "no such file")
        if not p.is_file():
            raise TraceLoadError(p, "is not a regular file")
        try:
            with open(p, "rb"):
                pass
        except OSError as e:
            raise TraceLoadError.from_os_error(p, e) from None
        out.append(p)
    return out


def serve_command(paths: list[Path]) -> str:
    """The shell command textual-serve runs once per browser connection."""
    return " ".join(
        [
            shlex.quote(sys.executable),
            "-m",
            "neuron_prof",
            "tui",
            *(shlex.quote(str(p.resolve())) for p in paths),
        ]
    )


@click.command(name="tui")
@click.argument("traces", nargs=-1, required=True, metavar="TRACE...")
@click.option(
    "--serve", is_flag=True, help="Serve the UI to a web browser (textual-serve) instead of the terminal."
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="Port for --serve."
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address for --serve. The default is reachable only from this machine (use an SSH tunnel).",
)
def command(traces: tuple[str, ...], serve: bool, port: int, host: str) -> int:
    """Open the terminal UI on TRACE (.json, .json.gz or .pftrace; several files: one per rank).

    Views: 1 overview, 2 compile stalls, 3 fallback hot spots, 4 ops, 5 timeline, 6 memory,
    7 collectives, 8 ranks. Keys: / filter, enter drill in, t timeline jump, o Perfetto UI, ? help, q quit.
    """
    if (rc := run_job_tui(traces, serve)) is not None:  # a job folder or glob: its ranks view first
        return rc
    paths = check_paths(traces)
    if serve:
        from textual_serve.server import Server

        click.echo(f"neuron-prof: serving the TUI on http://{host}:{port} (Ctrl+C stops)", err=True)
        if host == "127.0.0.1":
            click.echo(
                f"  from your laptop: ssh -L {port}:127.0.0.1:{port} THIS_HOST, then open "
                f"http://127.0.0.1:{port}",
                err=True,
            )
        # the page tells the browser where the websocket is: a wildcard address is no place to connect to
        public = f"http://{socket.getfqdn()}:{port}" if host in ("0.0.0.0", "::", "") else None
        Server(serve_command(paths), host=host, port=port, title="neuron-prof", public_url=public).serve()
        return 0
    from neuron_prof.tui.app import NeuronProfApp

    app = NeuronProfApp(paths)
    app.run()
    if app.error:
        click.echo(f"neuron-prof: error: {app.error}", err=True)
    return int(app.return_code or 0)
