"""`neuron-prof merge`: several ranks' traces onto one timeline."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from neuron_prof.cli._progress import steps
from neuron_prof.errors import UsageError
from neuron_prof.formats import format_for, suffix_list

if TYPE_CHECKING:
    from neuron_prof.job import DaskRunner
    from neuron_prof.merge import RankInfo

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "": 1}
_DUR = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|)\s*$")


def parse_rank_durations(items: tuple[str, ...], option: str) -> dict[int, int]:
    """["1=5s", "2=-250ms"] -> {1: 5_000_000_000, 2: -250_000_000} (plain numbers are ns)."""
    out: dict[int, int] = {}
    for item in items:
        rank, sep, dur = item.partition("=")
        m = _DUR.match(dur)
        if not sep or not rank.strip().isdigit() or not m:
            raise UsageError(f"{option} {item!r}: expected RANK=DURATION, e.g. 1=250ms, 2=-3s, 0=1500ns")
        out[int(rank)] = round(float(m.group(1)) * _UNITS[m.group(2)])
    return out


def parse_ranks(text: str) -> set[int]:
    """"0,5,7" or "0-3,8" -> {0, 5, 7} / {0, 1, 2, 3, 8}."""
    out: set[int] = set()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise UsageError(f"--ranks {text!r}: expected rank numbers and ranges, e.g. 0,5,7 or 0-3,8")
        out.update(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    return out


def _first_pass_on_dask(traces: tuple[str, ...], skew: dict[int, int], run: DaskRunner,
                        tick: Callable[[int], None]) -> list[RankInfo]:
    """Every input's first pass (`neuron_prof.merge.first_pass`) as one Dask task; a failure stops the merge."""
    from neuron_prof.job import TaskResult, load_any
    from neuron_prof.merge import first_pass, rank_of

    def done(i: int, r: TaskResult) -> None:
        tick(i)

    results = run.map(first_pass, [(t, i, load_any, rank_of, skew) for i, t in enumerate(traces)], done)
    for t, r in zip(traces, results):
        if r.error is not None:
            raise UsageError(r.error if r.error.startswith(t) else f"{t}: {r.error}")
    return [r.value for r in results]


@click.command("merge")
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help=f"The merged trace file ({suffix_list()}).")
@click.option("--offset", "offsets", multiple=True, metavar="RANK=DURATION",
              help="Use this clock offset for a rank instead of the estimate (e.g. 1=-2.5ms). Repeatable.")
@click.option("--skew", "skews", multiple=True, metavar="RANK=DURATION",
              help="Testing aid: shift a rank's clock by this much before alignment (an artificial clock "
                   "offset that the alignment must then recover). Repeatable.")
@click.option("--ranks", "only", metavar="LIST", default=None,
              help="Merge only these ranks (e.g. 0,5,7 or 0-3), clocks aligned from every rank's collectives "
                   "(the ranks `neuron-prof summary run/` points at).")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Read the inputs' first pass as tasks on this Dask cluster (tcp://host:8786).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Read the inputs' first pass as tasks on a local Dask cluster of this many processes.")
def command(traces: tuple[str, ...], output: str, offsets: tuple[str, ...], skews: tuple[str, ...],
            only: str | None, scheduler: str | None, workers: int | None) -> int:
    """Merge one trace per rank onto one timeline, aligning clocks from the collectives.

    TRACES are files, folders of rank files (run/) or globs ('run/trace.rank*.json').
    Ranks come from each trace's metadata (distributedInfo) or its file name (trace.rank3.json).
    With --scheduler or --workers, the first pass (every input read for its collectives) runs as one Dask
    task per input: what `merge --ranks` of a big job needs; the chosen ranks are then read here.
    Prints the offset applied to each rank and its uncertainty, and the stragglers found. Each input is
    read twice and one rank is held in memory at a time, so memory grows with the largest rank.
    """
    from neuron_prof.analysis import Kind, info_of
    from neuron_prof.exporters.merged import write_merged
    from neuron_prof.job import DaskRunner, load_any, rank_sources
    from neuron_prof.merge import StreamingMerge, rank_of

    fmt = format_for(output)
    traces = tuple(rank_sources(traces))
    keep = parse_ranks(only) if only is not None else None
    user = parse_rank_durations(offsets, "--offset")
    skew = parse_rank_durations(skews, "--skew")
    # Two passes over the inputs with one rank in memory at a time: the first finds the collectives and
    # the clock offsets, the second writes each rank aligned (memory grows with the largest rank).
    # the cluster before the progress bar: its workers are forked from a process with no thread of ours
    run = None if scheduler is None and workers is None else DaskRunner(scheduler, workers, tasks=len(traces))
    with run or contextlib.nullcontext(), steps(len(traces) + (len(keep) if keep is not None else len(traces))) as step:
        def on_rank(phase: str, i: int) -> None:
            what = "reading" if phase == "read" else "aligning and writing"
            step(f"{what} {os.path.basename(traces[i])}")

        infos = None if run is None else _first_pass_on_dask(traces, skew, run, lambda i: on_rank("read", i))
        merge = StreamingMerge(list(traces), load=load_any, rank_of=rank_of, offsets_ns=user, skew_ns=skew,
                               on_rank=on_rank, ranks=keep, infos=infos)
        write_merged(merge, output, fmt)
    alignment = merge.alignment
    n_slices = sum(i.n_slices for i in merge.plan.infos)
    stragglers = [f for f in merge.findings if f.get("kind") == Kind.STRAGGLER]
    click.echo(f"merged {len(merge.plan.infos)} rank(s) -> {output}  ({n_slices:,} slices)"
               + (f"; clocks aligned from all {len(traces)} ranks" if keep is not None else ""))
    click.echo(f"clock offsets against rank {alignment.reference_rank}:")
    for r, o in sorted(alignment.offsets.items()):
        if keep is not None and r not in keep and r != alignment.reference_rank:
            continue
        unc = "unknown" if o.uncertainty_ns is None else f"±{o.uncertainty_ns / 1e3:.1f} µs"
        note = f"  ({o.note})" if o.note else ""
        click.echo(f"  rank {r}: {o.offset_ns / 1e6:+.3f} ms  [{o.method}, {o.matched} collectives, {unc}]{note}")
    for f in stragglers:
        click.echo(f"{Kind.STRAGGLER.info.label}: {f['title']}")
    for c in merge.coverage:  # a rank with no trace, a rank that stopped early: said on every merge
        info = info_of(c.kind)
        click.echo(f"{info.label if info is not None else c.kind}: {c.title}")
    return 0
