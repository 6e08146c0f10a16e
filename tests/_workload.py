"""The synthetic workload of the analysis tests, built the way the probes write events (model/schema.py):
known problems at known sites, so expected numbers come from the construction, not from the analysis."""

from __future__ import annotations

from neuron_prof.model import Arg, Cat, KinetoCat, Meta, ProcessKind, Trace, TraceBuilder, TrackKind
from tests._builders import stack

MS = 1_000_000
T0 = 1_700_000_000_000_000_000
GIB = 1 << 30
STEP0 = 50 * MS
STEP = 10 * MS
N_STEPS = 8
FRAME_SIZES = [100, 120, 250, 256, 500, 512]  # size of L['x'] dim 0 at compile attempts 0..5
FRAME_CALLS = [5, 1, 3, 2, 1, 4]  # calls of each compiled graph


def step_start(k: int) -> int:
    return T0 + (0 if k == 0 else STEP0 + (k - 1) * STEP)


class Workload:
    """Builder of a small training trace with problems switched on or off."""

    def __init__(self, problems: bool = True) -> None:
        self.problems = problems
        b = self.b = TraceBuilder()
        host = b.process(100, "host", ProcessKind.HOST)
        dev = b.process("neuron:0", "neuron:0", ProcessKind.DEVICE)
        self.main = b.thread_track(100, 1, "main")
        self.queue = b.track(dev, "queue 0", TrackKind.DEVICE)
        self.compile = b.track(host, "compile", TrackKind.COMPILE)
        self.fallback = b.track(host, "fallback", TrackKind.FALLBACK)
        self.sync = b.track(host, "sync", TrackKind.SYNC)
        self.dtype = b.track(host, "dtype", TrackKind.DTYPE)
        self.coll = b.track(host, "collectives", TrackKind.COLLECTIVE)
        self.mem = b.track(dev, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")

    def build(self) -> Trace:
        b, p = self.b, self.problems
        steps = []
        for k in range(N_STEPS):
            s = step_start(k)
            e = s + (STEP0 if k == 0 else STEP)
            steps.append([k, s, e])
            b.add_slice(self.main, s, e - s, f"ProfilerStep#{k}", KinetoCat.USER_ANNOTATION)
        b.metadata[Meta.STEPS] = steps
        b.metadata[Meta.WALL] = [T0, steps[-1][2]]
        b.metadata["device_memory_bytes"] = 32 * GIB
        b.metadata["stack_lines"] = "exact"  # a neuron-prof capture: Call stack lines are the lines executed
        self._compiles(steps)
        for k in range(1, N_STEPS):
            self._steady_step(k, step_start(k))
        if p:
            b.metadata[Meta.PROBE_ERRORS] = [{"probe": "memory", "error": "RuntimeError: boom"}]
            b.metadata[Meta.OVERHEAD_NS] = int(1.2 * MS)
        return b.build()

    def _compiles(self, steps: list[list[int]]) -> None:
        b = self.b
        s = step_start(0)
        cache = "miss" if self.problems else "hit"
        dur = 20 * MS if self.problems else 50_000
        for i, (op, site) in enumerate((("aten::mm", "train.py:42"), ("aten::add", "train.py:43"))):
            b.add_slice(
                self.compile,
                s + 1 * MS + i * dur,
                dur,
                op,
                Cat.COMPILE,
                {
                    Arg.COMPILE_KIND: "eager",
                    Arg.SIGNATURE: f"{op}(f32[8, 128], f32[128, 64])",
                    Arg.CACHE: cache,
                    Arg.CALL_SITE: site,
                    Arg.MODULE: "model.ff",
                },
            )
        fdur = 5 * MS if self.problems else 40_000
        b.add_slice(
            self.compile,
            s + 41 * MS,
            fdur,
            "forward",
            Cat.COMPILE,
            {
                Arg.COMPILE_KIND: "torch.compile",
                Arg.COMPILE_ID: "0/0",
                Arg.CACHE: cache,
                Arg.CALL_SITE: "train.py:30",
                Arg.MODULE: "model",
            },
        )
        # device work of step 0 after the compiles
        b.add_slice(self.queue, s + 46 * MS, 4 * MS, "neff_exec", Cat.DEVICE)
        b.add_slice(self.main, s + 46 * MS, 10_000, "Torch-Compiled Region: 0/0", KinetoCat.CPU_OP)
        if not self.problems:
            return
        for att in range(1, len(FRAME_SIZES)):
            reason = (
                f"0/{att - 1}: tensor 'L['x']' size mismatch at index 0. "
                f"expected {FRAME_SIZES[att - 1]}, actual {FRAME_SIZES[att]}"
            )
            b.add_slice(
                self.compile,
                step_start(att + 1) + 100_000,
                3 * MS,
                "forward",
                Cat.COMPILE,
                {
                    Arg.COMPILE_KIND: "torch.compile",
                    Arg.COMPILE_ID: f"0/{att}",
                    Arg.CACHE: "miss",
                    Arg.RECOMPILE_REASON: reason,
                    Arg.CALL_SITE: "train.py:30",
                    Arg.MODULE: "model",
                },
            )
        # calls of each graph (the first graph's 1 call is in step 0 above)
        for att, n in enumerate(FRAME_CALLS):
            for j in range(n - (1 if att == 0 else 0)):
                b.add_slice(
                    self.main,
                    step_start(att + 1) + int(9.6 * MS) + j * 20_000,
                    10_000,
                    f"Torch-Compiled Region: 0/{att}",
                    KinetoCat.CPU_OP,
                )

    def _steady_step(self, k: int, s: int) -> None:
        b, p = self.b, self.problems
        # device: busy 1..6 ms (problems) or 0.05..9.98 ms (clean)
        lo, hi = (1 * MS, 6 * MS) if p else (50_000, 9_980_000)
        b.add_slice(self.queue, s + lo, hi - lo, "neff_exec", Cat.DEVICE)
        b.add_slice(
            self.main,
            s + 500_000,
            500_000,
            "aten::mm",
            KinetoCat.CPU_OP,
            {"Input Dims": [[8, 128], [128, 64]], "Call stack": stack("/home/u/model.py(60): forward")},
        )
        # memory: 1 GiB at rest, 3 GiB during the step; step 5 climbs to 6 GiB inside aten::bmm
        b.add_counter(self.mem, s + 2 * MS, 3 * GIB)
        if k == 5 and p:
            b.add_slice(
                self.main,
                s + int(2.5 * MS),
                1 * MS,
                "aten::bmm",
                KinetoCat.CPU_OP,
                {"Call stack": stack("/home/u/model.py(120): forward", "/home/u/train.py(30): main")},
            )
            b.add_counter(self.mem, s + 3 * MS, 6 * GIB)
        b.add_counter(self.mem, s + 8 * MS, 1 * GIB)
        # collective: 0.5 ms, overlapped by device work in the clean run; slow (2 ms) in step 6
        cdur = 2 * MS if (k == 6 and p) else 500_000
        cts = s + int(7.5 * MS) if p else s + 2 * MS
        b.add_slice(
            self.coll,
            cts,
            cdur,
            "all_reduce",
            Cat.COLLECTIVE,
            {Arg.BYTES_IN: 64 << 20, Arg.BYTES_OUT: 64 << 20, Arg.DTYPE: "float32", Arg.WORLD_SIZE: 2},
        )
        if not p:
            return
        b.add_slice(self.main, s + 7 * MS, 2 * MS, "aten::nonzero", KinetoCat.CPU_OP)
        b.add_slice(
            self.fallback,
            s + 7 * MS,
            2 * MS,
            "aten::nonzero",
            Cat.FALLBACK,
            {
                Arg.SHAPES: [[8, 128]],
                Arg.DTYPES: ["float32"],
                Arg.COPY_BYTES: 4096,
                Arg.CALL_SITE: "model.py:88",
                Arg.MODULE: "model.router",
            },
        )
        b.add_slice(self.main, s + 9 * MS, 500_000, "aten::item", KinetoCat.CPU_OP)
        b.add_slice(
            self.sync,
            s + 9 * MS,
            500_000,
            "aten::item",
            Cat.SYNC,
            {Arg.SYNC_KIND: "item", Arg.CALL_SITE: "train.py:57"},
        )
        if k in (1, 3):
            b.add_instant(
                self.dtype,
                s + 200_000,
                "float64 -> float32",
                Cat.DTYPE,
                {Arg.CALL_SITE: "data.py:12", Arg.SHAPE: [8, 128], Arg.OP: "aten::_to_copy"},
            )


WALL = STEP0 + (N_STEPS - 1) * STEP
