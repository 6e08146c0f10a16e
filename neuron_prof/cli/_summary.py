"""`neuron-prof summary TRACE...`: totals and ranked findings as text, JSON or Markdown; a job (many ranks)
goes to _summary_job.py."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("traces", metavar="TRACE...", nargs=-1, required=True)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the stable JSON document (schema in docs/summary.md)."
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
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Job summary: use this Dask cluster (tcp://host:8786) instead of a local one.")
@click.option("--workers", type=click.IntRange(min=0), default=None,
              help="Job summary: local Dask worker processes (default: one per CPU; 0: no cluster, one rank "
                   "after another in this process).")
def command(
    traces: tuple[str, ...], as_json: bool, markdown: bool, warmup_steps: int | None, top: int,
    output: Path | None, scheduler: str | None, workers: int | None
) -> int:
    """Print totals and the ranked findings (most costly first) for a trace; for a job (several traces, a
    folder of ranks or a glob), one row per rank and the cross-rank findings, each rank analysed as one
    task on Dask.

    \b
    neuron-prof summary trace.json
    neuron-prof summary trace.json --json | jq '.findings[0]'
    neuron-prof summary trace.json --markdown >> "$GITHUB_STEP_SUMMARY"
    neuron-prof summary run/                                   # every rank of a job
    neuron-prof summary 'run/trace.rank*.json' --scheduler tcp://head:8786
    """
    import shutil
    import sys

    from neuron_prof.errors import UsageError
    from neuron_prof.job import is_job

    if as_json and markdown:
        raise UsageError("choose one of --json and --markdown")
    if is_job(traces):
        from neuron_prof.cli._summary_job import job_command

        data = job_command(traces, as_json=as_json, markdown=markdown, warmup_steps=warmup_steps,
                           scheduler=scheduler, workers=workers, color=output is None and sys.stdout.isatty())
        return _write(data, output)
    if scheduler is not None or workers is not None:
        raise UsageError("--scheduler and --workers are for a job (several traces, a folder or a glob)")
    from neuron_prof.cli._reports import trace_report
    from neuron_prof.exporters.summary import summary_json, summary_markdown, summary_text
    from neuron_prof.loaders import load

    trace_path = Path(traces[0])
    trace = load(trace_path)
    warnings = trace.metadata.get("load_warnings") or []
    for w in warnings[:5]:  # a damaged file loaded best-effort: say so, on stderr so --json stays clean
        click.echo(f"neuron-prof: warning: {trace_path}: {w}", err=True)
    if len(warnings) > 5:
        click.echo(f"neuron-prof: warning: {trace_path}: ... and {len(warnings) - 5} more", err=True)
    rep = trace_report(trace, trace_path, warmup_steps)
    from neuron_prof.history import record

    why = record(trace, trace_path, "summary", totals=rep.totals, findings=rep.findings)
    if why:  # the history never fails the summary: said on stderr
        click.echo(f"neuron-prof: warning: {why}", err=True)
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
    return _write(data, output)


def _write(data: bytes, output: Path | None) -> int:
    if output is not None:
        from neuron_prof.errors import ExportError

        try:
            output.write_bytes(data)
        except OSError as e:  # a full disk, a missing folder: one line, exit 2
            raise ExportError(f"{output}: cannot write: {e.strerror or e}") from None
    else:
        click.echo(data, nl=False)
    return 0
