"""`neuron-prof check TRACE [limits]`: a CI gate. Exit 0 when every limit holds, 1 with the violations, 2 on
a file that is no trace or a bad option, 3 on a trace that was cut short or damaged (unless --allow-partial)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

SEVERITIES = ("info", "warning", "critical")

EXIT_OK, EXIT_VIOLATIONS, EXIT_BAD_INPUT, EXIT_PARTIAL = 0, 1, 2, 3
"""The exit codes (docs/check.md): 2 is every command's code for bad input or usage (NeuronProfError)."""


def violations(
    rep: Any,
    *,
    max_fallback_share: float | None = None,
    max_compile_seconds: float | None = None,
    max_recompiles: int | None = None,
    forbid_fallback: tuple[str, ...] = (),
    fail_on: str | None = None,
) -> list[str]:
    """One readable line per broken limit of Report `rep` (empty when all hold)."""
    from neuron_prof.analysis import Kind, fallback_names, norm_op, strip_site

    t = rep.totals
    out = []
    wall = t["wall_ns"] or 0
    if max_fallback_share is not None:
        share = t["fallback_ns"] / wall if wall else 0.0
        if share > max_fallback_share:
            out.append(
                f"CPU fallback took {share:.2%} of the profiled time ({t['fallback_ns'] / 1e6:.1f} ms in "
                f"{t['fallback_count']} calls), above --max-fallback-share {max_fallback_share:g}"
            )
    if max_compile_seconds is not None:
        s = t["compile_ns"] / 1e9
        if s > max_compile_seconds:
            out.append(
                f"compiling took {s:.3f} s ({t['compile_miss_count']} cache misses), above "
                f"--max-compile-seconds {max_compile_seconds:g}"
            )
    if max_recompiles is not None:
        rec = [f for f in rep.findings if f.kind == Kind.RECOMPILE]
        n = sum(f.count for f in rec)
        if n > max_recompiles:
            where = "; ".join(f"{strip_site(f.title, f.call_site)} at {f.call_site or '?'}" for f in rec[:3])
            out.append(f"{n} recompiles, above --max-recompiles {max_recompiles}: {where}")
    if forbid_fallback:
        banned = {norm_op(o) for spec in forbid_fallback for o in spec.split(",") if o.strip()}
        for f in rep.findings:
            op = str(f.evidence.get("op", ""))
            hit = fallback_names(f) & banned if f.kind == Kind.CPU_FALLBACK else set()
            if hit:
                via = "" if norm_op(op) in hit else f" (called as {', '.join(sorted(hit))})"
                out.append(
                    f"forbidden fallback {op}{via} ran on the host {f.count} times at {f.call_site or '?'} "
                    f"({f.cost_ns / 1e6:.1f} ms)"
                )
    if fail_on is not None and fail_on != "none":
        lvl = SEVERITIES.index(fail_on)
        out += [
            f"{f.severity} finding [{f.kind}] {strip_site(f.title, f.call_site)}"
            + (f" at {f.call_site}" if f.call_site else "")
            for f in rep.findings
            if SEVERITIES.index(f.severity) >= lvl and f.after_warmup is not False
        ]
    return out


def warmup_only(rep: Any, fail_on: str | None) -> int:
    """Findings at or above `fail_on` that happen only in warm-up (not counted by the severity gate)."""
    if fail_on is None or fail_on == "none":
        return 0
    lvl = SEVERITIES.index(fail_on)
    return sum(SEVERITIES.index(f.severity) >= lvl and f.after_warmup is False for f in rep.findings)


def unmatched_forbidden(rep: Any, trace: Any, forbid_fallback: tuple[str, ...]) -> list[str]:
    """A note for each forbidden name no fallback answered to: a typo or an op that did not fall back must
    not pass silently."""
    from neuron_prof.analysis import Kind, fallback_names, norm_op

    specs = [o.strip() for spec in forbid_fallback for o in spec.split(",") if o.strip()]
    seen = set().union(*(fallback_names(f) for f in rep.findings if f.kind == Kind.CPU_FALLBACK))
    ran = {norm_op(n) for n in trace.strings.as_list() if "::" in n}
    fell = sorted({str(f.evidence.get("op", "")) for f in rep.findings if f.kind == Kind.CPU_FALLBACK})
    out = []
    for spec in specs:
        if norm_op(spec) in seen:
            continue
        if norm_op(spec) in ran:
            out.append(f"--forbid-fallback {spec}: it ran, on the device (no fallback)")
        else:
            out.append(f"--forbid-fallback {spec}: no op of that name ran; ops that fell back: "
                       f"{', '.join(fell) or 'none'}")
    return out


def against_baseline(trace: Any, rep: Any, base_path: Path, warmup_steps: int | None,
                     memory_growth: float | None) -> tuple[list[str], list[str]]:
    """`check --baseline`: the violations and notes of `trace` against the trace at `base_path`."""
    from neuron_prof.analysis import MEMORY_GROWTH, baseline_violations
    from neuron_prof.loaders import load

    bad, notes = baseline_violations(load(base_path), trace, warmup_steps=warmup_steps, new_report=rep,
                                     memory_growth=MEMORY_GROWTH if memory_growth is None else memory_growth)
    return bad, [f"baseline {base_path}", *notes]


@click.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=Path))
@click.option(
    "--max-fallback-share",
    type=click.FloatRange(0, 1),
    default=None,
    metavar="FRACTION",
    help="Fail if CPU fallbacks take more than this fraction (0-1) of the profiled time.",
)
@click.option(
    "--max-compile-seconds",
    type=click.FloatRange(min=0),
    default=None,
    metavar="S",
    help="Fail if compiling takes more than S seconds in total.",
)
@click.option(
    "--max-recompiles",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Fail if torch.compile recompiles more than N times in total.",
)
@click.option(
    "--forbid-fallback",
    multiple=True,
    metavar="OP",
    help="Fail if OP falls back to the CPU at all (repeat, or comma-separate; 'nonzero' = 'aten::nonzero').",
)
@click.option(
    "--fail-on",
    type=click.Choice(["warning", "critical", "none"]),
    default=None,
    help="Fail on any finding after warm-up of this severity or worse ('none': no severity gate). Default "
    "when no limit is given: warning.",
)
@click.option(
    "--warmup-steps", type=click.IntRange(min=0), default=None, help="Leading steps to treat as warm-up."
)
@click.option(
    "--baseline",
    default=None,
    metavar="BASE",
    help="Also fail on what BASE did not have: new compiles, fallbacks and sync points (each at its line), a "
    "memory peak grown beyond --max-memory-growth, a steady step slower beyond the noise bound. BASE: a trace, "
    "'last' (the previous run of the same script in `neuron-prof history`) or 'main' (the latest run on branch "
    "main).",
)
@click.option(
    "--max-memory-growth",
    type=click.FloatRange(min=0),
    default=None,
    metavar="FRACTION",
    help="With --baseline: how much each memory peak may grow over the baseline's (default 0.10).",
)
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Check a trace that was cut short or damaged (exit 3 otherwise) on what it still holds.",
)
def command(
    trace_path: Path,
    max_fallback_share: float | None,
    max_compile_seconds: float | None,
    max_recompiles: int | None,
    forbid_fallback: tuple[str, ...],
    fail_on: str | None,
    warmup_steps: int | None,
    baseline: str | None,
    max_memory_growth: float | None,
    allow_partial: bool,
) -> int:
    """Check a trace against limits for CI. Exit 0 when all hold, 1 listing every violation, 2 when the file
    is no trace (or an option is wrong), 3 when the trace was cut short or damaged (--allow-partial checks
    what it holds). With no limit given, any warning or critical finding after warm-up fails; with --baseline
    and no limit, only what the baseline did not have (docs/check.md, "check --baseline").

    \b
    neuron-prof check trace.json                        # any warning or critical after warm-up
    neuron-prof check trace.json --max-fallback-share 0.01 --max-compile-seconds 60 \\
        --max-recompiles 0 --forbid-fallback nonzero --forbid-fallback aten::unique
    neuron-prof check trace.json --baseline main.json   # only what the baseline did not have
    neuron-prof check trace.json --baseline last        # against the previous run of the same script
    """
    from neuron_prof.analysis import partial_line
    from neuron_prof.cli._reports import trace_report
    from neuron_prof.errors import UsageError
    from neuron_prof.history import resolve_baseline
    from neuron_prof.loaders import load

    limits = (max_fallback_share, max_compile_seconds, max_recompiles)
    if all(v is None for v in limits) and not forbid_fallback and fail_on is None and baseline is None:
        fail_on = "warning"
    if max_memory_growth is not None and baseline is None:
        raise UsageError("--max-memory-growth compares with a baseline: give --baseline BASE")
    base_path = resolve_baseline(baseline, trace_path) if baseline is not None else None
    trace = load(trace_path)
    rep = trace_report(trace, trace_path, warmup_steps)
    partial = rep.totals.get("partial")
    if partial:
        click.echo(f"neuron-prof check: {trace_path}: {partial_line(partial)}")
        if not allow_partial:
            click.echo(f"  FAIL the trace is partial: findings and limits cannot be trusted (exit {EXIT_PARTIAL}; "
                       "--allow-partial checks what it holds)")
            return EXIT_PARTIAL
    bad = violations(
        rep,
        max_fallback_share=max_fallback_share,
        max_compile_seconds=max_compile_seconds,
        max_recompiles=max_recompiles,
        forbid_fallback=forbid_fallback,
        fail_on=fail_on,
    )
    notes = unmatched_forbidden(rep, trace, forbid_fallback) if forbid_fallback else []
    if base_path is not None:
        bad_b, notes_b = against_baseline(trace, rep, base_path, warmup_steps, max_memory_growth)
        bad += bad_b
        notes += notes_b
    if fail_on not in (None, "none") and rep.findings and all(f.after_warmup is None for f in rep.findings):
        notes.append("no steady steps to tell warm-up by: every finding counts (--warmup-steps N sets the split "
                     "when the trace has steps)")
    if (n_warm := warmup_only(rep, fail_on)):
        notes.append(f"{n_warm} {fail_on}-or-worse finding{'s' if n_warm != 1 else ''} only in warm-up, not counted "
                     "(see `neuron-prof summary`)")
    if bad:
        click.echo(f"neuron-prof check: {trace_path}: {len(bad)} violation{'s' if len(bad) != 1 else ''}")
        for line in bad:
            click.echo(f"  FAIL {line}")
    else:
        click.echo(f"neuron-prof check: {trace_path}: all limits hold")
    for line in notes:
        click.echo(f"  note {line}")
    return EXIT_VIOLATIONS if bad else EXIT_OK
