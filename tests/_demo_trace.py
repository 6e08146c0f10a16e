"""`demo_like_trace()`: the demo-like trace the TUI tests use, built the way the probes write events
(neuron_prof/model/schema.py): compile, fallback, sync, collective, device and memory tracks with the probe
args. Its numbers are chosen so expected values are easy to state in the tests."""

from __future__ import annotations

from neuron_prof.model import Arg, Cat, ProcessKind, Trace, TraceBuilder, TrackKind

LONG = "/home/alice/projects/language-model/training/"
"""A long user folder (`demo_like_trace(site_dir=LONG)`): call sites that must be shortened, never cut."""

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
STEP_MS = 20
N_STEPS = 10
# op names that are also Textual/Rich markup: shown literally or it is a bug (and a security one for @click)
MARKUP_NAMES = ("[bold]", "[/]", "void k<T>(T*) [with T = float]", "[@click=app.quit]x[/]")
COMPILE_OP = "aten::matmul"
COMPILE_MS = 450  # the top compile stall: one first-call compile of aten::matmul
FALLBACK_SITE = "model.py:88"
FALLBACK_OP = "aten::_unique2"


CHURN_SIZES = (100, 120, 128, 200, 256)
"""With churn=True, aten::add.Tensor compiles once per sequence length, one per step from step 1."""


def demo_like_trace(rank: int | None = 0, *, slow: float = 1.0, churn: bool = False, site_dir: str = "") -> Trace:
    """A small training trace with the demo's problems: a big first-call compile, recompiles with
    reasons, CPU fallbacks at two call sites, syncs, a collective per step, memory counters.

    `site_dir` goes before every call site's file ("/home/me/project/" gives the long paths a user has)."""
    b = TraceBuilder()
    host = b.process(100 + (rank or 0), name=f"host rank {rank}", rank=rank)
    main = b.thread_track(100 + (rank or 0), 1, "MainThread")
    dev_p = b.process(f"neuron{rank}", name=f"neuron:{rank}", kind=ProcessKind.DEVICE)
    queue = b.track(dev_p, "queue 0", TrackKind.DEVICE)
    comp = b.track(host, "compile", TrackKind.COMPILE)
    fb = b.track(host, "fallback", TrackKind.FALLBACK)
    sync = b.track(host, "sync", TrackKind.SYNC)
    coll = b.track(host, "collectives", TrackKind.COLLECTIVE)
    mem = b.track(dev_p, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    steps = []
    t = T0
    for step in range(N_STEPS):
        dur = (COMPILE_MS + STEP_MS if step == 0 else STEP_MS) * MS
        dur = int(dur * slow)
        b.add_slice(main, t, dur, f"ProfilerStep#{step}", "user_annotation")
        steps.append([step, t, t + dur])
        c = t + MS
        if step == 0:
            b.add_slice(
                comp,
                c,
                COMPILE_MS * MS,
                COMPILE_OP,
                Cat.COMPILE,
                {
                    Arg.COMPILE_KIND: "eager",
                    Arg.SIGNATURE: "(f32[8,128], f32[128,128])",
                    Arg.CACHE: "miss",
                    Arg.CALL_SITE: site_dir + "train.py:42",
                    Arg.MODULE: "model.mlp",
                },
            )
            c += COMPILE_MS * MS
        if step in (3, 6):
            b.add_slice(
                comp,
                c,
                30 * MS,
                "forward_graph",
                Cat.COMPILE,
                {
                    Arg.COMPILE_KIND: "torch.compile",
                    Arg.SIGNATURE: f"seq={64 * step}",
                    Arg.CACHE: "miss",
                    Arg.CALL_SITE: site_dir + "train.py:50",
                    Arg.RECOMPILE_REASON: f"tensor 'x' size mismatch at index 1. "
                    f"expected {64 * (step - 3) or 64}, actual {64 * step}",
                },
            )
            c += 30 * MS
        b.add_slice(main, c, 4 * MS, "aten::linear", "cpu_op")
        b.add_slice(main, c + MS, 2 * MS, "aten::addmm", "cpu_op")
        for k, name in enumerate(MARKUP_NAMES):
            b.add_slice(main, c + 5 * MS + k * 100_000, 50_000, name, "cpu_op")
        b.add_slice(queue, c + 2 * MS, 3 * MS, "neuron_exec:matmul", Cat.DEVICE)
        # two fallback sites: model.py:88 costs 3 ms a step, data.py:12 1 ms every other step
        b.add_slice(
            fb,
            c + 6 * MS,
            3 * MS,
            FALLBACK_OP,
            Cat.FALLBACK,
            {
                Arg.CALL_SITE: site_dir + FALLBACK_SITE,
                Arg.MODULE: "model.head",
                Arg.COPY_BYTES: 4096,
                Arg.STACK: ["train.py:60 in step", "model.py:88 in forward"],
            },
        )
        if step % 2 == 0:
            b.add_slice(fb, c + 10 * MS, MS, "aten::nonzero", Cat.FALLBACK, {Arg.CALL_SITE: site_dir + "data.py:12"})
        b.add_slice(
            sync,
            c + 12 * MS,
            MS // 2,
            "aten::item",
            Cat.SYNC,
            {Arg.SYNC_KIND: "item", Arg.CALL_SITE: site_dir + "train.py:70"},
        )
        b.add_slice(
            coll,
            c + 13 * MS,
            2 * MS,
            "all_reduce",
            Cat.COLLECTIVE,
            {Arg.BYTES_IN: 8 * MS, Arg.DTYPE: "float32", Arg.GROUP: "default", Arg.WORLD_SIZE: 2},
        )
        if churn and 1 <= step <= len(CHURN_SIZES):
            n = CHURN_SIZES[step - 1]
            b.add_slice(
                comp,
                t + 17 * MS,  # inside its own step (steps 3 and 6 run past their 20 ms with their graph compile)
                2 * MS,
                "aten::add.Tensor",
                Cat.COMPILE,
                {
                    Arg.COMPILE_KIND: "eager",
                    Arg.SHAPES: [[8, n], [8, n]],
                    Arg.CACHE: "miss",
                    Arg.CALL_SITE: site_dir + "model.py:30",
                },
            )
        b.add_counter(mem, c, (1 + step % 3) * 1e8)
        t += dur
    b.add_counter(mem, t, 0.0)
    b.metadata.update({"steps": steps, "wall_ns": [T0, t], "source": f"demo-rank{rank}.json"})
    if rank is not None:
        b.metadata["rank"] = rank
    return b.build()
