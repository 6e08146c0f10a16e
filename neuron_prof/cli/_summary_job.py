"""`neuron-prof summary` of a job: every rank as one task on Dask, a progress bar, the job summary out."""

from __future__ import annotations

import os
import shutil
from typing import Any

import click

from neuron_prof.cli._progress import steps
from neuron_prof.errors import UsageError


def job_document(
    traces: tuple[str, ...], *, warmup_steps: int | None, scheduler: str | None, workers: int | None
) -> dict[str, Any]:
    """The job summary document of `traces` (files, globs, folders), a progress bar on a terminal."""
    from neuron_prof.job import DaskRunner, InProcessRunner, TaskResult, job_summary, rank_sources

    sources = rank_sources(traces)
    runner = (
        InProcessRunner()
        if workers == 0 and scheduler is None
        else DaskRunner(scheduler, workers or None, tasks=len(sources))
    )
    # the cluster first: its workers are forked from a process with no thread of ours (the progress bar's)
    with runner, steps(len(sources)) as step:

        def on_done(phase: str, i: int, r: TaskResult) -> None:
            if phase == "rank":
                step(f"{'failed' if r.error else 'analysed'} {os.path.basename(sources[i])}")
            if r.error is not None:  # one line per rank that fails, as it fails (the report lists them too)
                where = sources[i] if phase == "rank" else "straggler cause"
                msg = r.error if r.error.startswith(where) else f"{where}: {r.error}"
                click.echo(f"neuron-prof: warning: {msg}", err=True)

        js = job_summary(sources, runner, args=list(traces), warmup_steps=warmup_steps, on_done=on_done)
    if not any(r.get("status") == "ok" for r in js.ranks):
        raise UsageError(f"no rank could be analysed ({len(sources)} failed; each said why above)")
    return js.to_dict()


def job_command(
    traces: tuple[str, ...],
    *,
    as_json: bool,
    markdown: bool,
    warmup_steps: int | None,
    scheduler: str | None,
    workers: int | None,
    color: bool,
) -> bytes:
    """The job summary of `traces` rendered as asked."""
    from neuron_prof.exporters.job_summary import job_json, job_markdown, job_text

    doc = job_document(traces, warmup_steps=warmup_steps, scheduler=scheduler, workers=workers)
    source = " ".join(traces)
    if as_json:
        return job_json(doc)
    if markdown:
        return job_markdown(doc, source=source).encode()
    return job_text(
        doc, source=source, color=color, width=shutil.get_terminal_size().columns if color else 120
    ).encode()
