"""`neuron-prof report`: one self-contained HTML page of findings and plots for a trace."""

from __future__ import annotations

from pathlib import Path

import click


def default_output(trace_path: Path) -> Path:
    """`run/t.json.gz` -> `run/t.html` (the trace suffix, any of `neuron_prof.formats`, replaced)."""
    from neuron_prof.formats import split_suffix

    return trace_path.with_name(split_suffix(trace_path)[0] + ".html")


@click.command("report")
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The HTML file to write (default: beside TRACE, named like it with .html).",
)
@click.option(
    "--warmup-steps",
    type=click.IntRange(min=0),
    default=None,
    help="Leading steps to treat as warm-up (default: the steps with compile-cache misses).",
)
@click.option("--title", default=None, help="Page title (default: from the trace's file name).")
def command(trace_path: Path, output: Path | None, warmup_steps: int | None, title: str | None) -> int:
    """Write a self-contained HTML report: findings, compile waterfall, fallback hot spots, device
    utilisation, memory over time and collective bandwidth.

    The page embeds plotly.js, fetches nothing and works offline; it also prints.

    \b
    neuron-prof report trace.json -o report.html
    """
    import time

    from neuron_prof.cli._reports import trace_report
    from neuron_prof.exporters.html_report import write_html_report
    from neuron_prof.history import trend_of
    from neuron_prof.loaders import load

    t = time.perf_counter()
    trace = load(trace_path)
    rep = trace_report(trace, trace_path, warmup_steps)
    out = output or default_output(trace_path)
    write_html_report(trace, out, findings=rep.findings, totals=rep.totals, title=title, lines=rep.lines,
                      steps=rep.steps, trend=trend_of(trace_path))
    click.echo(
        f"wrote {out} ({out.stat().st_size / 1e6:,.1f} MB, {len(rep.findings)} findings, "
        f"{time.perf_counter() - t:.1f} s); open it in any browser, it works offline."
    )
    return 0
