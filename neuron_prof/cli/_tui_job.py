"""`neuron-prof tui run/` on a job (a folder of ranks or a glob): the job summary's ranks view, then the chosen
rank's full trace in the single-trace UI, then back to the ranks."""

from __future__ import annotations

import click

from neuron_prof.errors import UsageError


def run_job_tui(traces: tuple[str, ...], serve: bool) -> int | None:
    """Run the job UI when `traces` is one folder of ranks or one glob; None otherwise (several files keep
    the multi-trace UI). The summary is computed first, on Dask, with a progress bar."""
    from neuron_prof.job import is_job

    if len(traces) != 1 or not is_job(traces):
        return None
    if serve:
        raise UsageError(
            "--serve opens trace files; for a job, serve one rank or run `neuron-prof tui` on the job"
        )
    from neuron_prof.cli._summary_job import job_document
    from neuron_prof.tui.app import NeuronProfApp
    from neuron_prof.tui.job_app import JobApp

    doc = job_document(traces, warmup_steps=None, scheduler=None, workers=None)
    cursor: int | None = None
    while True:
        app = JobApp(doc, source=traces[0], cursor_rank=cursor)
        chosen = app.run()
        if not chosen:
            return 0
        cursor = next(r["rank"] for r in doc["ranks"] if r.get("source") == chosen)
        rank_app = NeuronProfApp([chosen])  # the rank's full trace: loaded now, dropped when it closes
        rank_app.run()
        if rank_app.error:
            click.echo(f"neuron-prof: error: {rank_app.error}", err=True)
