"""CPU-fallback hot spots: per call site, the ops that ran on the host instead of the device.

Reads the ``fallback`` track (one slice per fallen-back call; args shapes, dtypes, copy_bytes,
call_site, module, stack).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from neuron_prof.analysis.context import Context, as_int, severity_for
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.sites.callsites import sites_of
from neuron_prof.analysis.sites.host import enclosing_ops
from neuron_prof.model import Arg, Trace, TrackKind

# Known replacements for ops that commonly fall back (names without "aten::" and overload).
ALTERNATIVES: dict[str, str] = {
    "nonzero": "use a mask with torch.where instead of data-dependent indices",
    "masked_select": "use torch.where(mask, x, 0) and reduce, keeping shapes static",
    "unique": "avoid data-dependent output shapes in the step; precompute on CPU outside the loop",
    "bincount": "use a one-hot sum or scatter_add_ into a fixed-size tensor",
    "histc": "use bucketize + scatter_add_ into a fixed-size tensor",
    "index_put": "use scatter_ / index_copy_ with static shapes",
    "_linalg_svd": "compute SVD deliberately on CPU outside the step, or avoid it",
    "linalg_qr": "compute QR deliberately on CPU outside the step, or avoid it",
    "_linalg_eigh": "compute eigh deliberately on CPU outside the step, or avoid it",
    "sort": "use topk with a fixed k where possible",
    "argsort": "use topk with a fixed k where possible",
    "cumsum": "express the prefix sum as a matmul with a triangular ones matrix for short sequences",
    "repeat_interleave": "use expand + reshape with static repeat counts",
    "multinomial": "sample with torch.rand and cumsum/searchsorted comparisons on device",
    "_local_scalar_dense": "keep the value on device instead of calling .item()",
    "std_mean": "compute mean and var separately (x.mean(), ((x - m)**2).mean())",
    "embedding_dense_backward": "use a dense one-hot matmul for small vocabularies",
}


_NAMESPACES = ("linalg", "fft", "special")
"""torch.linalg.svdvals is aten::linalg_svdvals: these namespaces join the op name with "_"."""


def norm_op(op: str) -> str:
    """An op as users and traces write it, compared: "aten::nonzero.default", "nonzero", "torch.nonzero",
    "Tensor.nonzero" are "nonzero"; "torch.linalg.svdvals" is "linalg_svdvals"; fused "a|b" is its last op."""
    s = op.strip().split("|")[-1].lower()
    for prefix in ("aten::", "torch.", "tensor.", "nn.functional.", "f."):
        s = s.removeprefix(prefix)
    parts = s.split(".")
    if len(parts) > 1 and parts[0] in _NAMESPACES:
        return f"{parts[0]}_{parts[1]}"
    return parts[0]


def fallback_names(f: Finding) -> set[str]:
    """Every name a cpu_fallback finding answers to: the op that fell back, the backend's name for it, and
    the ops the user's call went through (torch.linalg.svdvals -> aten::linalg_svdvals -> aten::_linalg_svd)."""
    ev = f.evidence
    names = [str(ev.get("op", ""))] + [str(x) for x in ev.get("called_as", []) or []]
    names += [str(x) for x in ev.get("reported_as", []) or []]
    return {norm_op(n) for n in names if n}


def alternative_for(op: str) -> str:
    """A known alternative for a fallen-back op, "" when none is known."""
    base = op.split("|")[-1].removeprefix("aten::").split(".")[0]
    return ALTERNATIVES.get(base, "")


@register(Kind.CPU_FALLBACK)
def cpu_fallback(trace: Trace, ctx: Context) -> list[Finding]:
    """One finding per (call site, op) whose fallbacks cost host time."""
    rows = ctx.rows(TrackKind.FALLBACK)
    if not len(rows):
        return []
    sl = trace.slices
    sites = sites_of(ctx)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    meta: dict[tuple[str, str], dict[str, Any]] = {}
    copies: dict[tuple[str, str], int] = defaultdict(int)
    for r, site in zip(rows.tolist(), sites.of_rows(rows.tolist()), strict=True):
        a = ctx.slice_args(int(r))
        key = (site.call_site or site.function, trace.slice_name(int(r)))
        groups[key].append(int(r))
        copies[key] += as_int(a.get(Arg.COPY_BYTES))
        m = meta.setdefault(key, {"module": site.module or ctx.module(a), "shapes": set(), "dtypes": set(),
                                  "site": site, "called_as": {}, "reported_as": set(), "found_by": set(),
                                  "unreported": 0})
        m["called_as"].update(dict.fromkeys(enclosing_ops(ctx, int(r))))
        if a.get(Arg.REPORTED_AS):
            m["reported_as"].add(str(a[Arg.REPORTED_AS]))
        if a.get(Arg.SILENT):
            m["unreported"] += 1
            m["found_by"].add(str(a.get(Arg.FOUND_BY) or "host work the device waited for"))
        elif a.get(Arg.DEEP):
            m["found_by"].add("the dispatch-level recorder: no kernel for the device")
        else:
            m["found_by"].add("named by the backend's fallback report (get_fallback_ops())")
        if len(m["shapes"]) < 10 and a.get(Arg.SHAPES) is not None:
            m["shapes"].add(str(a.get(Arg.SHAPES)))
        if a.get(Arg.DTYPES) is not None:
            m["dtypes"].add(str(a.get(Arg.DTYPES)))
    out = []
    for (where, op), rs in groups.items():
        m = meta[(where, op)]
        site = m["site"].call_site
        idx = np.asarray(rs, dtype=np.int64)
        ts, dur = sl.ts_ns[idx], sl.dur_ns[idx]
        cost = int(dur.sum())
        share = ctx.share(cost)
        split = ctx.step_split(ts, dur)
        alt = alternative_for(op)
        advice = f"{op} runs on the host and forces device<->host copies. "
        advice += (
            f"Replace it: {alt}."
            if alt
            else "Replace it with ops the device supports, or move it out of the step loop."
        )
        if m["unreported"]:
            advice += (f" The backend does not list it in get_fallback_ops() ({m['unreported']} of {len(rs)} "
                       f"calls found from the trace: {'; '.join(sorted(m['found_by']))}).")
        advice += (
            " List fallbacks with torch_neuronx.get_fallback_ops(); "
            "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 makes failing registered ops raise."
        )
        per_step = split.get("steady_per_step_ns")
        title = (
            f"CPU fallback: {op} ran on the host {len(rs)} times ({fmt_ns(cost)}"
        )
        if m["unreported"] == len(rs):
            title = title.replace("CPU fallback:", "CPU fallback (silent, not in get_fallback_ops()):", 1)
        title += (
            f", {fmt_ns(per_step)} = {split['steady_step_share']:.1%} of each steady step)"
            if per_step
            else ")"
        )
        ev = {
            "op": op,
            "host_ns": cost,
            "copy_bytes": copies[(where, op)],
            "shapes": sorted(m["shapes"]),
            "dtypes": sorted(m["dtypes"]),
            "called_as": [n for n in m["called_as"] if n != op],
            "reported_as": sorted(m["reported_as"] - {op}),
            "alternative": alt,
            "found_by": sorted(m["found_by"]),
            "unreported": m["unreported"],
            "rows": rs[:200],
            **split,
            **m["site"].evidence(),
        }
        out.append(
            Finding(
                kind=Kind.CPU_FALLBACK,
                severity=severity_for(share, "warning"),
                title=title,
                cost_ns=cost,
                share=share,
                count=len(rs),
                call_site=site,
                module=m["module"],
                advice=advice,
                evidence=ev,
                ts_ns=int(ts.min()),
            )
        )
    return out
