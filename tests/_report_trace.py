"""The report tests' trace: shaped like `neuron-prof demo`'s, with hostile strings (XSS) when asked."""

from __future__ import annotations

from neuron_prof.analysis import Finding
from neuron_prof.model import Arg, Cat, Meta, ProcessKind, Trace, TraceBuilder, TrackKind

XSS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror="window.__xss=1">',
    "</script><script>window.__xss=2</script>",
    "<svg onload=window.__xss=3>",
    "&lt;b&gt;entity&lt;/b&gt;",
    "<!--",
    "]]>",
]
MS = 1_000_000
T0 = 1_767_000_000_000_000_000  # Unix ns
LONG_SITE = "/home/alice/" + "/".join(f"experiments_2026_run_{i:02d}_language_model" for i in range(6)) + "/train.py:118"


def demo_like_trace(names: list[str] | None = None) -> Trace:
    """A trace shaped like `neuron-prof demo`'s: host ops, compiles, fallbacks, two device queues,
    memory counters, collectives and findings. `names` (e.g. XSS) are worked into every string field."""
    n = names or ["aten::mm", "aten::gelu", "aten::layer_norm"]
    b = TraceBuilder()
    b.process(1, name=f"host {n[0]}", kind=ProcessKind.HOST, rank=0)
    b.process(100, name=f"neuron:0 {n[-1]}", kind=ProcessKind.DEVICE)
    host = b.thread_track(1, 1, f"main {n[1 % len(n)]}")
    comp = b.track(0, "compile", TrackKind.COMPILE)
    fb = b.track(0, "fallback", TrackKind.FALLBACK)
    coll = b.track(0, "collectives", TrackKind.COLLECTIVE)
    q0 = b.track(1, "queue 0", TrackKind.DEVICE)
    q1 = b.track(1, f"queue 1 {n[0]}", TrackKind.DEVICE)
    mem = b.track(1, f"neuron:0 allocated {n[0]}", TrackKind.MEMORY, unit="bytes")
    for step in range(10):
        base = T0 + step * 100 * MS
        for i in range(6):
            b.add_slice(host, base + i * 10 * MS, 8 * MS, n[i % len(n)], "cpu_op")
        # device: queue 0 busy [base, base+40ms) as two overlapping slices, queue 1 busy [base+30, base+50)
        b.add_slice(q0, base, 30 * MS, n[0], Cat.DEVICE)
        b.add_slice(q0, base + 20 * MS, 20 * MS, n[1 % len(n)], Cat.DEVICE)
        b.add_slice(q1, base + 30 * MS, 20 * MS, n[2 % len(n)], Cat.DEVICE)
        b.add_slice(
            fb,
            base + 60 * MS,
            2 * MS,
            n[step % len(n)],
            Cat.FALLBACK,
            {Arg.CALL_SITE: f"train.py:{40 + step % 2} {n[0]}", Arg.COPY_BYTES: 4096},
        )
        b.add_slice(
            coll,
            base + 70 * MS,
            5 * MS,
            "all_reduce",
            Cat.COLLECTIVE,
            {Arg.BYTES_IN: 50_000_000, Arg.GROUP: "0", Arg.SEQ: step},
        )
        b.add_counter(mem, base, float(2**30 + step * 2**20))
        b.add_counter(mem, base + 50 * MS, float(2**29))
    for k in range(4):
        b.add_slice(
            comp,
            T0 + k * 25 * MS,
            (4 + k) * MS,
            n[k % len(n)],
            Cat.COMPILE,
            {
                Arg.COMPILE_KIND: "eager",
                Arg.CACHE: "miss" if k < 3 else "hit",
                Arg.SIGNATURE: f"f32[{k}] {n[-1]}",
                Arg.CALL_SITE: f"model.py:{k} {n[0]}",
            },
        )
    b.metadata.update(
        {
            Meta.SOURCE: f"/tmp/{n[0]}.json",
            Meta.SOURCE_FORMAT: "capture",
            Meta.BACKEND: "neuron",
            Meta.CLOCK: "unix",
            Meta.WARNINGS: [f"odd event {n[0]}"],
            Meta.PROBE_ERRORS: [{"probe": "memory", "error": f"boom {n[-1]}"}],
        }
    )
    b.findings.extend(
        [
            Finding(
                "cpu_fallback",
                "critical",
                f"{n[0]} fell back to CPU",
                cost_ns=10 * MS,
                share=0.1,
                count=5,
                call_site=f"train.py:40 {n[0]}",
                advice=f"use {n[1 % len(n)]}",
                evidence={"ops": n},
            ).to_dict(),
            Finding(
                "cpu_fallback",
                "warning",
                f"{n[1 % len(n)]} fell back",
                cost_ns=8 * MS,
                share=0.08,
                count=5,
                call_site=f"train.py:41 {n[0]}",
            ).to_dict(),
            Finding(
                "first_call_compile",
                "warning",
                f"compile of {n[-1]}",
                cost_ns=22 * MS,
                share=0.02,
                count=4,
                advice=n[-1],
            ).to_dict(),
            # a user's deep project path and a long signature: no space to wrap at (a page wider than 1400 px)
            Finding(
                "memory_peak",
                "info",
                f"Memory peak: {n[0]} allocated reached 1.0 GiB (3% of 32.0 GiB) at {LONG_SITE}",
                cost_ns=MS,
                share=0.001,
                count=1,
                call_site=LONG_SITE,
                evidence={"signature": "[" + ",".join(["[8,40,64]"] * 40) + "]"},
            ).to_dict(),
        ]
    )
    return b.build()
