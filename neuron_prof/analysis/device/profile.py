"""What a Neuron Explorer device profile says about the run: hardware errors (a finding) and its whole-profile
metrics (the ``neuron_explorer`` object of `summary --json` totals).

Both read only the trace: Error rows are instants of category ``neuron_explorer.error`` (loaders.explorer);
the metrics are ``metadata["neuron_explorer"]`` as the loader wrote them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.ops import EXECUTION_NAMES, launching_ops
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.sites.callsites import sites_of
from neuron_prof.model import Cat, Trace, TrackKind

EXPLORER_KEY = "neuron_explorer"
"""Metadata key the Neuron Explorer loader fills (loaders.explorer.EXPLORER_KEY)."""
_KEYS = ("schema", "profile_schema_version", "instance_type", "runtime_version", "compiler_version",
         "device_clock", "summary", "opcodes", "framework_ops", "source_lines", "host_ops", "executions",
         "views_left_out", "bandwidth_peak_Bps")
LACKING = {
    "system profile": ("none captured, or processed with --ignore-system-profile: no runtime calls, host/device "
                       "copies, links to the framework's ops nor HBM usage by kind; the device profile's times "
                       "have no host executions to be placed by"),
    "device profile": ("none captured, or processed with --ignore-device-profile: no engine time, instructions, "
                       "collectives nor MFU/HFU/MBU (capture one: neuron-prof run --device-profile, or "
                       "profile(device_profile=True))"),
}
"""What a profile without each part cannot show (loaders.explorer ``lacks``; how-to-profile-workload.rst, "Skip
system or device profiles"): said in the summary, never shown as zero."""
TOP = 10


def explorer_totals(trace: Trace, ctx: Context) -> dict[str, Any] | None:
    """The device profile's own view of the run (schema version read, Summary metrics, OpcodeSummary, device
    time per framework op, source line and host op) and the executions' device time per line of the user's
    code (`device_lines`); None for a trace without Neuron Explorer tables."""
    ex = trace.metadata.get(EXPLORER_KEY)
    if not isinstance(ex, dict):
        return None
    out = {k: ex[k] for k in _KEYS if k in ex}
    lacks = ex.get("lacks")
    if isinstance(lacks, list) and lacks:
        out["lacks"] = {str(part): LACKING.get(str(part), "not in this profile") for part in lacks}
    out["device_lines"] = device_lines(trace, ctx)
    for k in ("opcodes", "framework_ops", "source_lines", "host_ops"):
        if isinstance(out.get(k), list):
            out[k] = out[k][:TOP]
    errs = ex.get("errors")
    out["errors"] = len(errs) if isinstance(errs, list) else 0
    return out


def device_lines(trace: Trace, ctx: Context) -> list[dict[str, Any]]:
    """Device time of the NEFF executions per call site of the host op that launched each (the one call-site
    rule, `sites_of`), most first: ``[{site, device_ns, executions}]``; executions no op launched are left out."""
    ids = trace.name_ids(*EXECUTION_NAMES)
    rows = ctx.rows(TrackKind.DEVICE)
    rows = rows[np.isin(trace.slices.name[rows], ids)] if len(ids) else rows[:0]
    if not len(rows):
        return []
    ops = launching_ops(trace, rows)
    sites = sites_of(ctx)
    acc: dict[str, list[int]] = {}
    sites.of_rows(ops[ops >= 0].tolist())  # worked out together
    for r, op in zip(rows.tolist(), ops.tolist()):
        if op < 0:
            continue
        s = sites.of_row(op)
        key = s.call_site or s.function or trace.slice_name(op)
        a = acc.setdefault(key, [0, 0])
        a[0] += int(trace.slices.dur_ns[r])
        a[1] += 1
    out: list[dict[str, Any]] = [{"site": k, "device_ns": ns, "executions": n} for k, (ns, n) in acc.items()]
    return sorted(out, key=lambda d: -d["device_ns"])[:TOP]


@register(Kind.DEVICE_ERROR)
def device_error(trace: Trace, ctx: Context) -> list[Finding]:
    """One critical finding per kind of hardware error (type, description, logical core) the device recorded."""
    cat = trace.strings.get(Cat.DEVICE_ERROR)
    if cat is None or not len(trace.instants):
        return []
    rows = np.flatnonzero(trace.instants.cat == cat)
    groups: dict[tuple[str, str, Any], list[int]] = {}
    for r in rows.tolist():
        a = ctx.instant_args(r)
        key = (str(a.get("type") or "error"), str(a.get("description") or trace.s(int(trace.instants.name[r]))),
               a.get("logical_core"))
        groups.setdefault(key, []).append(r)
    out = []
    for (typ, desc, core), rs in groups.items():
        rs.sort(key=lambda r: int(trace.instants.ts_ns[r]))
        ts = [int(trace.instants.ts_ns[r]) for r in rs]
        pcores = sorted({p for r in rs if (p := ctx.instant_args(r).get("pcore_idx")) is not None})
        where = f"NeuronCore {core}" if core is not None else "the device"
        out.append(Finding(
            kind=Kind.DEVICE_ERROR, severity="critical",
            title=f"Hardware error on {where}: {desc} ({typ}){f', {len(rs)} times' if len(rs) > 1 else ''}",
            cost_ns=0, share=0.0, count=len(rs), ts_ns=ts[0],
            advice=("The device recorded this error while running the profiled code (Neuron Explorer's Error "
                    "table: NaN, out-of-bounds access...). Results computed from that point are suspect: find the "
                    "op running at that time on the timeline, check its indices and inputs for out-of-range "
                    "values or NaN, and run it on CPU to compare."),
            evidence={"type": typ, "description": desc, "logical_core": core, "physical_cores": pcores,
                      "times_ns": ts[:20]}))
    return out
