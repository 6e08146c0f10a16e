"""`neuron-prof convert IN OUT`: a trace between Chrome/Kineto JSON (.json, .json.gz) and Perfetto .pftrace."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("dst", type=click.Path(path_type=Path))
@click.option("-q", "--quiet", is_flag=True, default=False, help="Print nothing on success.")
def command(src: Path, dst: Path, quiet: bool) -> int:
    """Convert a trace between .json(.gz) and .pftrace (the format follows each file's extension).

    \b
    neuron-prof convert trace.json trace.pftrace     # open in ui.perfetto.dev
    neuron-prof convert trace.pftrace trace.json.gz  # for chrome://tracing, HTA
    """
    import time

    from neuron_prof.errors import ExportError
    from neuron_prof.exporters import write_trace
    from neuron_prof.formats import format_for
    from neuron_prof.loaders import load

    fmt = format_for(dst)  # a bad output name fails before the (possibly long) load
    t0 = time.perf_counter()
    trace = load(src)
    try:
        write_trace(trace, dst, fmt=fmt)
    except OSError as e:
        raise ExportError(f"{dst}: cannot write: {e.strerror or e}") from None
    if not quiet:
        click.echo(f"{src} -> {dst}: {trace.n_events:,} events in {time.perf_counter() - t0:.2f} s", err=True)
    return 0
