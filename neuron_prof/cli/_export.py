"""`neuron-prof export`: a trace out to another format (Parquet for fleet queries, or json/pftrace); a job of
many ranks to one Parquet dataset partitioned by rank, each rank written by one Dask task."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

from neuron_prof.cli._progress import steps
from neuron_prof.errors import ExportError, UsageError
from neuron_prof.formats import FORMATS, suffix_list


def export_rank(source: str, index: int, root: str) -> tuple[int, int, str]:
    """One rank as a Dask task: loaded and written to `root/.rank-part-<index>` (renamed to rank=R by the
    client once every rank is known). Returns (rank, events, folder written)."""
    from neuron_prof.exporters.parquet import write_parquet
    from neuron_prof.job import load_any
    from neuron_prof.merge import rank_of

    trace = load_any(source)
    rank = rank_of(trace, index)
    part = Path(root) / f".rank-part-{index}"
    write_parquet(trace, part, rank=rank)
    return rank, trace.n_events, str(part)


def _export_job(traces: tuple[str, ...], output: str, scheduler: str | None, workers: int | None) -> int:
    from neuron_prof.job import DaskRunner, InProcessRunner, TaskResult, rank_sources

    sources = rank_sources(traces)
    root = Path(output)
    if root.exists() and any(root.glob("rank=*")):
        raise UsageError(f"{root}: already holds a dataset (rank=... folders); choose a new folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(f"{root}: cannot create folder: {e.strerror or e}") from None
    runner = (
        InProcessRunner()
        if workers == 0 and scheduler is None
        else DaskRunner(scheduler, workers or None, tasks=len(sources))
    )
    with runner, steps(len(sources)) as step:  # workers forked before the progress bar's thread starts

        def on_done(i: int, r: TaskResult) -> None:
            step(f"{'failed' if r.error else 'wrote'} {os.path.basename(sources[i])}")

        results = runner.map(
            export_rank, [(s, i, str(root.resolve())) for i, s in enumerate(sources)], on_done
        )
    done: dict[int, str] = {}
    events = 0
    for src, res in zip(sources, results):
        if res.error is not None:
            click.echo(
                f"neuron-prof: warning: {res.error if res.error.startswith(src) else src + ': ' + res.error}",
                err=True,
            )
            continue
        rank, n, part = res.value
        if rank in done:
            click.echo(
                f"neuron-prof: warning: {src}: rank {rank} again (already {done[rank]}); left out", err=True
            )
            shutil.rmtree(part, ignore_errors=True)
            continue
        os.replace(part, root / f"rank={rank}")
        done[rank] = src
        events += n
    for left in root.glob(".rank-part-*"):  # what a failed task had started
        shutil.rmtree(left, ignore_errors=True)
    if not done:
        raise ExportError(f"{root}: no rank could be exported")
    click.echo(
        f"wrote a Parquet dataset of {len(done)} rank(s), {events:,} events, partitioned by rank to {root}/ "
        f"(query: duckdb -c \"SELECT rank, name, sum(dur_ns) FROM '{root}/*/slices.parquet' "
        'GROUP BY ALL ORDER BY 3 DESC LIMIT 10")'
    )
    return 0 if len(done) == len(sources) else 1


@click.command("export")
@click.argument("traces", metavar="TRACE...", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(),
    help=f"A folder for --format parquet; a {suffix_list()} file otherwise.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([f.id for f in FORMATS.values() if f.writer]),
    default=None,
    help="Default: from the output name (a name without a trace suffix means parquet).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    default=None,
    help="Many ranks: write them on this Dask cluster (tcp://host:8786; the output on shared storage).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=None,
    help="Many ranks: local Dask worker processes (default: one per CPU; 0: in this process).",
)
def command(
    traces: tuple[str, ...], output: str, fmt: str | None, scheduler: str | None, workers: int | None
) -> int:
    """Export a trace: Parquet tables (slices, instants, counters, flows, tracks, metadata) or json/pftrace.

    Several traces, a folder of ranks or a glob: one Parquet dataset partitioned by rank
    (OUTPUT/rank=R/slices.parquet ...), each rank written as one Dask task. Exit 1 when a rank failed.
    The Parquet schema is documented in neuron_prof.exporters.parquet and in docs/formats.md.
    """
    from neuron_prof.exporters import write_trace
    from neuron_prof.formats import PARQUET, named_format
    from neuron_prof.job import is_job
    from neuron_prof.loaders import load

    if is_job(traces):
        if fmt not in (None, PARQUET.id) or named_format(output) is not None:
            raise UsageError(
                "several ranks export to a Parquet dataset only (for one file: neuron-prof merge)"
            )
        return _export_job(traces, output, scheduler, workers)
    if scheduler is not None or workers is not None:
        raise UsageError(
            "--scheduler and --workers are for several ranks (several traces, a folder or a glob)"
        )
    t = load(traces[0])
    fmt = fmt or (named_format(output) or PARQUET).id
    out = write_trace(t, output, fmt)
    if fmt == PARQUET.id:
        click.echo(
            f"wrote Parquet tables for {t.n_events:,} events to {out}/ "
            f"(query: duckdb -c \"SELECT name, sum(dur_ns) FROM '{out}/slices.parquet' GROUP BY 1\")"
        )
    else:
        click.echo(f"wrote {out}")
    return 0
