"""`neuron-prof export`: a trace out to another format (Parquet for fleet queries, or json/pftrace)."""

from __future__ import annotations

import click


@click.command("export")
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(),
              help="A folder for --format parquet; a .json/.json.gz/.pftrace file otherwise.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "chrome_json", "pftrace"]), default=None,
              help="Default: from the output name (a name without a trace suffix means parquet).")
def command(trace: str, output: str, fmt: str | None) -> int:
    """Export a trace: Parquet tables (slices, instants, counters, flows, tracks, metadata) or json/pftrace.

    The Parquet schema is documented in neuron_prof.exporters.parquet and in the README.
    """
    from neuron_prof.exporters import JSON_SUFFIXES, PFTRACE_SUFFIXES, write_trace
    from neuron_prof.loaders import load

    t = load(trace)
    if fmt is None:
        fmt = "parquet" if not output.lower().endswith(JSON_SUFFIXES + PFTRACE_SUFFIXES) else None
    if fmt == "parquet":
        from neuron_prof.exporters.parquet import write_parquet

        out = write_parquet(t, output)
        click.echo(f"wrote Parquet tables for {t.n_events:,} events to {out}/ "
                   f"(query: duckdb -c \"SELECT name, sum(dur_ns) FROM '{out}/slices.parquet' GROUP BY 1\")")
    else:
        write_trace(t, output, fmt)
        click.echo(f"wrote {output}")
    return 0
