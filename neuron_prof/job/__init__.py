"""A whole job of many ranks: the job summary, each rank analysed as one task (Dask or in this process).

    from neuron_prof.job import DaskRunner, job_summary, rank_sources
    paths = rank_sources(["run/"])                     # one trace per rank (files, globs, folders)
    with DaskRunner(tasks=len(paths)) as run:          # LocalCluster; DaskRunner("tcp://head:8786") for a cluster
        js = job_summary(paths, run, args=["run/"])
    js.ranks, js.findings, js.to_dict()

A worker loads a rank, analyses it and sends back its piece (`rank_piece`: kilobytes, pure, no torch or
dask); the client aligns clocks from every rank's collectives and computes the cross-rank findings.
"""

from __future__ import annotations

from neuron_prof.job._cluster import DaskRunner, InProcessRunner, TaskResult, error_line
from neuron_prof.job._piece import RankPiece, rank_cause, rank_piece
from neuron_prof.job._remote import is_url, load_any
from neuron_prof.job._sources import is_job, rank_sources
from neuron_prof.job._summary import SCHEMA, VERSION, JobSummary, Runner, job_summary
from neuron_prof.job._table import COLUMNS, failed_lines, head_line, rank_cells

__all__ = [
    "COLUMNS",
    "SCHEMA",
    "VERSION",
    "DaskRunner",
    "InProcessRunner",
    "JobSummary",
    "RankPiece",
    "Runner",
    "TaskResult",
    "error_line",
    "failed_lines",
    "head_line",
    "is_job",
    "is_url",
    "load_any",
    "job_summary",
    "rank_cause",
    "rank_cells",
    "rank_piece",
    "rank_sources",
]
