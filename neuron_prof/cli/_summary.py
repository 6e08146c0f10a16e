"""`neuron-prof summary TRACE`: totals and ranked findings as text, JSON or Markdown."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help="Print the stable JSON document (schema in the README)."
)
@click.option("--markdown", is_flag=True, help="Print Markdown (for CI job summaries and pull requests).")
@click.option(
    "--warmup-steps",
    type=click.IntRange(min=0),
    default=None,
    help="Leading steps to treat as warm-up (default: the first step and slow steps after it).",
)
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True, help="Top ops to list.")
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), default=None, help="Write to a file instead."
)
def command(
    trace_path: Path, as_json: bool, markdown: bool, warmup_steps: int | None, top: int, output: Path | None
) -> int:
    """Print totals and the ranked findings (most costly first) for a trace.

    \b
    neuron-prof summary trace.json
    neuron-prof summary trace.json --json | jq '.findings[0]'
    neuron-prof summary trace.json --markdown >> "$GITHUB_STEP_SUMMARY"
    """
    import shutil
    import sys

    from neuron_prof.analysis import report
    from neuron_prof.errors import UsageError
    from neuron_prof.exporters.summary import summary_json, summary_markdown, summary_text
    from neuron_prof.loaders import load

    if as_json and markdown:
        raise UsageError("choose one of --json and --markdown")
    trace = load(trace_path)
    warnings = trace.metadata.get("load_warnings") or []
    for w in warnings[:5]:  # a damaged file loaded best-effort: say so, on stderr so --json stays clean
        click.echo(f"neuron-prof: warning: {trace_path}: {w}", err=True)
    if len(warnings) > 5:
        click.echo(f"neuron-prof: warning: {trace_path}: ... and {len(warnings) - 5} more", err=True)
    rep = report(trace, warmup_steps=warmup_steps)
    if as_json:
        data = summary_json(rep)
    elif markdown:
        data = summary_markdown(rep, source=str(trace_path), top=top).encode()
    else:
        color = output is None and sys.stdout.isatty()
        data = summary_text(
            rep,
            source=str(trace_path),
            color=color,
            top=top,
            width=shutil.get_terminal_size().columns if color else 120,
        ).encode()
    if output is not None:
        from neuron_prof.errors import ExportError

        try:
            output.write_bytes(data)
        except OSError as e:  # a full disk, a missing folder: one line, exit 2
            raise ExportError(f"{output}: cannot write: {e.strerror or e}") from None
    else:
        click.echo(data, nl=False)
    return 0
