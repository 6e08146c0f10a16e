"""Generate a realistic Kineto-style trace (what torch.profiler writes for a GPU training job) of N events.

    python -m bench.gen_trace 1000000 /tmp/trace_1m.json        # .json.gz for a gzipped file
    python -m bench.gen_trace 1000000 out.json --seed 3

What it holds, per training "layer call" on the main thread (forward) or the autograd thread (backward):
forward, a `python_function` module span and a `cpu_op` with its autograd `Sequence number` (`Fwd thread id` 0),
Input Dims/type/Strides, Concrete Inputs and a Call stack; backward, as torch.profiler writes autograd's work,
the node's `autograd::engine::evaluate_function: <Node>Backward0` `cpu_op` with the node span inside (both with
the forward op's sequence number and a non-zero `Fwd thread id`), the backward aten op inside that, and after a
Linear's node its weight's `torch::autograd::AccumulateGrad` (no sequence number); each node's `fwdbwd` flow goes
from its forward op to its node span. Then a `cuda_runtime` launch, the `kernel` on a stream thread of the GPU
process with its `ac2g` flow (s/f, id = correlation), a `[memory]` instant; every few calls a `gpu_memcpy`;
every 40 calls an NCCL collective (`record_param_comms` + `ncclDevKernel_*` on its own stream);
`ProfilerStep#N` annotations cover each step. Metadata (M) events name processes and threads.
The event count is exact: one entry of `traceEvents` is one event.

The text is laid out as Kineto lays it out (one key per line for M events, args on their own lines) so
byte sizes per event are realistic (about 240 B/event, as in the 284 MB / 1.2M-event trace of issue 9).
"""

from __future__ import annotations

import argparse
import gzip
import io
import random
import sys
from collections.abc import Iterator
from pathlib import Path

BASE_NS = 1_790_857_026_000_000_000
"""baseTimeNanoseconds of generated traces (a whole second, as Kineto writes)."""
T0_NS = 5_160_494_368_000_000
"""First event, relative to BASE_NS (torch's steady clock is far from zero)."""
PID = 10115
TID_MAIN = 10115
TID_BWD = 10160
GPU_PID = 0
STREAM = 7
NCCL_STREAM = 20

_STACK = "torch/nn/modules/module.py(1784): _call_impl;model.py({line}): forward;train.py(88): train_step"
_LAYERS = [("aten::addmm", "Linear", (4096, 1024), (1024, 1024)),
           ("aten::mm", "Linear", (4096, 1024), (1024, 4096)),
           ("aten::gelu", "GELU", (4096, 4096), ()),
           ("aten::native_layer_norm", "LayerNorm", (4096, 1024), (1024,)),
           ("aten::_softmax", "Softmax", (32, 16, 128, 128), ()),
           ("aten::bmm", "Attention", (512, 128, 64), (512, 64, 128))]
_KERNELS = {"aten::addmm": "ampere_sgemm_128x64_tn", "aten::mm": "ampere_sgemm_128x128_nn",
            "aten::gelu": "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
            "aten::native_layer_norm": "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>",
            "aten::_softmax": "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>",
            "aten::bmm": "ampere_sgemm_64x64_nn"}
_NODES = {"aten::addmm": "AddmmBackward0", "aten::mm": "MmBackward0", "aten::gelu": "GeluBackward0",
          "aten::native_layer_norm": "NativeLayerNormBackward0", "aten::_softmax": "SoftmaxBackward0",
          "aten::bmm": "BmmBackward0"}
"""The autograd node each forward op makes (what its backward runs)."""
EVALUATE = "autograd::engine::evaluate_function: "
ACCUMULATE = "torch::autograd::AccumulateGrad"


def _us(ns: int) -> str:
    """Relative ns -> Kineto's µs text with 3 decimals (exact, no float)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def _x(cat: str, name: str, pid: int, tid: int | str, ts: int, dur: int, args: str) -> str:
    return (f'  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid},\n'
            f'    "ts": {_us(ts)}, "dur": {_us(dur)},\n    "args": {{\n      {args}\n    }}\n  }}')


def _flow(ph: str, cat: str, fid: int, pid: int, tid: int, ts: int) -> str:
    bp = ', "bp": "e"' if ph == "f" else ""
    return (f'  {{\n    "ph": "{ph}", "id": {fid}, "pid": {pid}, "tid": {tid}, "ts": {_us(ts)},\n'
            f'    "cat": "{cat}", "name": "{cat}"{bp}\n  }}')


def _meta(name: str, pid: int | str, tid: int | str, key: str, value: str) -> str:
    return (f'  {{\n    "name": "{name}", "ph": "M", "ts": {_us(T0_NS)}, "pid": {_j(pid)}, "tid": {_j(tid)},\n'
            f'    "args": {{\n      "{key}": {value}\n    }}\n  }}')


def _j(v: int | str) -> str:
    return f'"{v}"' if isinstance(v, str) else str(v)


def _dims(*shapes: tuple[int, ...]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in shapes) + "]"


def _strides(*shapes: tuple[int, ...]) -> str:
    out = []
    for s in shapes:
        st, acc = [], 1
        for d in reversed(s):
            st.append(acc)
            acc *= d
        out.append("[" + ", ".join(map(str, reversed(st))) + "]")
    return "[" + ", ".join(out) + "]"


def _metadata_events() -> list[str]:
    return [
        _meta("process_name", PID, 0, "name", '"python"'),
        _meta("process_labels", PID, 0, "labels", '"CPU"'),
        _meta("process_sort_index", PID, 0, "sort_index", str(PID)),
        _meta("process_name", GPU_PID, 0, "name", '"python"'),
        _meta("process_labels", GPU_PID, 0, "labels", '"GPU 0"'),
        _meta("process_sort_index", GPU_PID, 0, "sort_index", "5000000"),
        _meta("thread_name", PID, TID_MAIN, "name", f'"thread {TID_MAIN} (python)"'),
        _meta("thread_sort_index", PID, TID_MAIN, "sort_index", str(TID_MAIN)),
        _meta("thread_name", PID, TID_BWD, "name", f'"thread {TID_BWD} (pt_autograd_0)"'),
        _meta("thread_sort_index", PID, TID_BWD, "sort_index", str(TID_BWD)),
        _meta("thread_name", GPU_PID, STREAM, "name", f'"stream {STREAM} "'),
        _meta("thread_sort_index", GPU_PID, STREAM, "sort_index", str(STREAM)),
        _meta("thread_name", GPU_PID, NCCL_STREAM, "name", f'"stream {NCCL_STREAM} "'),
        _meta("thread_sort_index", GPU_PID, NCCL_STREAM, "sort_index", str(NCCL_STREAM)),
    ]


class _Gen:
    """State of the simulated job: clocks of the host threads and streams, ids."""

    def __init__(self, seed: int, slow: float = 1.0) -> None:
        self.rng = random.Random(seed)
        self.slow = slow  # host work of each call lasts this many times longer (a slow rank)
        self.t = T0_NS + 50_000  # host clock (relative ns)
        self.gpu_t = self.t
        self.nccl_t = self.t
        self.ext = 0
        self.corr = 0
        self.seq = 0
        self.pyid = 0
        self.ev_idx = 0
        self.fwd_ops: list[tuple[int, int]] = []  # (seq, ts) of forward ops awaiting their backward

    def _next_ext(self) -> int:
        self.ext += 1
        self.ev_idx += 1
        return self.ext

    def call(self, k: int, backward: bool) -> list[str]:
        """One module call. Forward (main thread): python span, the cpu op (its autograd sequence number, a
        `fwdbwd` flow start), launch, kernel, flows, memory: 9-11 events. Backward (autograd thread, k mirrors
        the forward call it undoes): the node's ``autograd::engine::evaluate_function: <Node>`` cpu op with the
        node span inside (both carry the forward op's sequence number and ``Fwd thread id``; the flow ends on
        the node span), the backward aten op inside it, launch, kernel, flows, memory: 10-12 events; after a
        Linear's node its weight's ``AccumulateGrad`` (no sequence number, no flow): 2 more."""
        r = self.rng
        op, mod, a, b = _LAYERS[k % len(_LAYERS)]
        node = _NODES[op]
        if backward:
            op = op + "_backward" if not op.endswith("mm") else op
        tid = TID_BWD if backward else TID_MAIN
        t = self.t
        launch = 4_000 + r.randrange(3_000)
        dur = int((30_000 + r.randrange(40_000)) * self.slow)
        ev: list[str] = []
        shapes = (a, b) if b else (a,)
        stack = _STACK.format(line=40 + k % 24)
        empties = ", ".join(['""'] * len(shapes))
        floats = ", ".join(['"float"'] * len(shapes))
        inputs = (f'"Concrete Inputs": [{empties}], "Input type": [{floats}], "Input Strides": {_strides(*shapes)}, ')
        if backward:  # autograd's thread: no Python frames; the node's spans around the op (module docstring)
            seq = self.fwd_ops.pop()[0] if self.fwd_ops else -1
            ext = self._next_ext()
            ev.append(_x("cpu_op", EVALUATE + node, PID, tid, t, dur,
                         f'"External id": {ext},"Record function id": 0, "Sequence number": {seq}, '
                         f'"Fwd thread id": 1, "Ev Idx": {self.ev_idx}'))
            ext = self._next_ext()
            ev.append(_x("cpu_op", node, PID, tid, t + 500, dur - 1_000,
                         f'"External id": {ext}, "Sequence number": {seq}, "Fwd thread id": 1, '
                         f'"Record function id": 0, {inputs}"Input Dims": {_dims(*shapes)}, "Ev Idx": {self.ev_idx}'))
            if seq >= 0:
                ev.append(_flow("f", "fwdbwd", seq, PID, tid, t + 500))
            ext = self._next_ext()
            ev.append(_x("cpu_op", op, PID, tid, t + 1_000, dur - 2_000,
                         f'"External id": {ext},"Record function id": 0, {inputs}'
                         f'"Input Dims": {_dims(*shapes)}, "Ev Idx": {self.ev_idx}'))
        else:
            self.pyid += 1
            ev.append(_x("python_function", f"nn.Module: {mod}_{k % 24}", PID, tid, t, dur,
                         f'"Python parent id": {max(self.pyid - 1, 0)}, "Python id": {self.pyid}, '
                         f'"Python thread": 0, "Ev Idx": {self.ev_idx}'))
            self.seq += 1
            ext = self._next_ext()
            ev.append(_x("cpu_op", op, PID, tid, t + 1_000, dur - 2_000,
                         f'"External id": {ext},"Record function id": 0, "Sequence number": {self.seq}, '
                         f'"Fwd thread id": 0, {inputs}'
                         f'"Call stack": "{stack}", "Input Dims": {_dims(*shapes)}, "Ev Idx": {self.ev_idx}'))
            self.fwd_ops.append((self.seq, t + 1_000))
            ev.append(_flow("s", "fwdbwd", self.seq, PID, tid, t + 1_000))
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", PID, tid, t + 3_000, launch,
                     f'"External id": {ext}, "cbid": 211, "correlation": {self._corr()}'))
        ev.append(_flow("s", "ac2g", self.corr, PID, tid, t + 3_000))
        kts = max(self.gpu_t, t + 3_000 + launch + 2_000)
        kdur = 20_000 + r.randrange(200_000)
        ev.append(_x("kernel", _KERNELS[op.removesuffix("_backward")], GPU_PID, STREAM, kts, kdur,
                     f'"queued": 0, "device": 0, "context": 1, "stream": {STREAM}, "correlation": {self.corr}, '
                     f'"registers per thread": 122, "shared memory": 33280, "blocks per SM": 1.32, '
                     f'"warps per SM": 10.5, "grid": [128, 8, 1], "block": [256, 1, 1], '
                     f'"est. achieved occupancy %": 16, "External id": {ext}'))
        ev.append(_flow("f", "ac2g", self.corr, GPU_PID, STREAM, kts))
        self.gpu_t = kts + kdur + 1_500
        nbytes = 4 * a[0] * a[-1]
        ev.append(f'  {{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
                  f'    "pid": {PID}, "tid": {tid},\n    "ts": {_us(t + 2_000)},\n    "args": {{\n'
                  f'      "Total Reserved": 2097152000, "Total Allocated": {1_000_000_000 + (self.ext % 997) * nbytes}, '
                  f'"Bytes": {nbytes}, "Addr": {139_800_000_000_000 + self.ext * 4096}, "Device Type": 1, '
                  f'"Device Id": 0, "Ev Idx": {self.ev_idx}\n    }}\n  }}')
        if k % 7 == 3:
            ext = self._next_ext()
            mts = t + 10_000
            ev.append(_x("cuda_runtime", "cudaMemcpyAsync", PID, tid, mts, 6_000,
                         f'"External id": {ext}, "cbid": 51, "correlation": {self._corr()}'))
            gts = max(self.gpu_t, mts + 3_000)
            ev.append(_x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", GPU_PID, STREAM, gts, 3_000,
                         f'"device": 0, "context": 1, "stream": {STREAM}, "correlation": {self.corr}, '
                         f'"bytes": 65536, "memory bandwidth (GB/s)": 21.8, "External id": {ext}'))
            self.gpu_t = gts + 3_000
        self.t = t + dur + 2_000 + r.randrange(5_000)
        if backward and mod == "Linear":  # the weight's gradient accumulated: a node no forward op makes
            t = self.t
            ext = self._next_ext()
            ev.append(_x("cpu_op", EVALUATE + ACCUMULATE, PID, tid, t, 9_000,
                         f'"External id": {ext},"Record function id": 0, "Ev Idx": {self.ev_idx}'))
            ext = self._next_ext()
            ev.append(_x("cpu_op", ACCUMULATE, PID, tid, t + 500, 5_000,
                         f'"External id": {ext},"Record function id": 0, "Ev Idx": {self.ev_idx}'))
            self.t = t + 11_000
        return ev

    def _corr(self) -> int:
        self.corr += 1
        return self.corr

    def collective(self, tid: int) -> list[str]:
        """record_param_comms on the host, ncclDevKernel on its stream, with launch and flow. 5 events."""
        t = self.t
        ext = self._next_ext()
        nel = 1 << (18 + self.rng.randrange(6))
        ev = [_x("cpu_op", "record_param_comms", PID, tid, t, 40_000,
                 f'"External id": {ext},"Record function id": 0, "Collective name": "allreduce", '
                 f'"dtype": "Float", "In msg nelems": {nel}, "Out msg nelems": {nel}, "In split size": "[]", '
                 f'"Out split size": "[]", "Global rank start": 0, "Global rank stride": 1, "Group size": 8, '
                 f'"Process Group Name": "0", "Process Group Description": "default_pg", '
                 f'"Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Ev Idx": {self.ev_idx}'),
              _x("cuda_runtime", "cudaLaunchKernel", PID, tid, t + 20_000, 8_000,
                 f'"External id": {ext}, "cbid": 211, "correlation": {self._corr()}'),
              _flow("s", "ac2g", self.corr, PID, tid, t + 20_000)]
        kts = max(self.nccl_t, t + 30_000)
        kdur = nel // 4
        ev.append(_x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                     GPU_PID, NCCL_STREAM, kts, kdur,
                     f'"queued": 0, "device": 0, "context": 1, "stream": {NCCL_STREAM}, '
                     f'"correlation": {self.corr}, "registers per thread": 96, "shared memory": 0, '
                     f'"grid": [2, 1, 1], "block": [512, 1, 1], "External id": {ext}, "Collective name": "allreduce", '
                     f'"In msg nelems": {nel}, "Out msg nelems": {nel}, "Group size": 8, "dtype": "Float", '
                     f'"Process Group Name": "0", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"'))
        ev.append(_flow("f", "ac2g", self.corr, GPU_PID, NCCL_STREAM, kts))
        self.nccl_t = kts + kdur + 1_000
        self.t = t + 45_000
        return ev


def events(n: int, seed: int = 0, slow: float = 1.0) -> Iterator[str]:
    """Exactly `n` traceEvents entries as Kineto-formatted JSON text (no separators); `slow` stretches the host
    work of every call (a slow rank's steps)."""
    g = _Gen(seed, slow)
    count = 0
    for e in _metadata_events():
        if count == n:
            return
        yield e
        count += 1
    step = 0
    calls_per_step = 300
    while True:
        step_start, gpu_start = g.t, g.gpu_t
        batch: list[str] = []
        for k in range(calls_per_step):
            backward = k >= calls_per_step // 2
            batch += g.call(calls_per_step - 1 - k if backward else k, backward)  # backward undoes in reverse
            if k % 40 == 39:
                batch += g.collective(TID_BWD if backward else TID_MAIN)
        ext = g._next_ext()
        batch.append(_x("user_annotation", f"ProfilerStep#{step}", PID, TID_MAIN, step_start, g.t - step_start,
                        f'"External id": {ext},"Record function id": 0, "Ev Idx": {g.ev_idx}'))
        batch.append(_x("gpu_user_annotation", f"ProfilerStep#{step}", GPU_PID, STREAM, gpu_start,
                        max(g.gpu_t - gpu_start, 1), f'"External id": {ext}'))
        # Flow pairs must not be cut: stop before a step that would overflow, then pad with instants.
        if count + len(batch) > n:
            break
        yield from batch
        count += len(batch)
        g.t += 100_000
        step += 1
    while count < n:
        yield (f'  {{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
               f'    "pid": {PID}, "tid": {TID_MAIN},\n    "ts": {_us(g.t)},\n    "args": {{\n'
               f'      "Total Reserved": 2097152000, "Total Allocated": 1000000000, "Bytes": -4096, '
               f'"Device Type": 1, "Device Id": 0\n    }}\n  }}')
        g.t += 1_000
        count += 1


def write(n: int, path: str | Path, seed: int = 0, rank: int = 0, world_size: int | None = None,
          slow: float = 1.0) -> Path:
    """Write a trace of exactly `n` events to `path` (.json or .json.gz) as rank `rank` of `world_size` (default:
    at least 8), its host work `slow` times longer. Returns the path."""
    path = Path(path)
    raw = open(path, "wb")  # wrapped below, closed in finally
    f: io.BufferedIOBase = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) if path.name.endswith(".gz") else raw  # type: ignore[assignment]
    try:
        f.write(b'{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "NVIDIA A100-SXM4-80GB", '
                b'"totalGlobalMem": 85031714816,\n      "computeMajor": 8, "computeMinor": 0,\n      '
                b'"maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n      "regsPerBlock": 65536, '
                b'"warpSize": 32,\n      "sharedMemPerBlock": 49152, "numSms": 108\n    }\n  ],\n'
                b'  "distributedInfo": {"backend": "nccl", "rank": ' + str(rank).encode()
                + b', "world_size": ' + str(world_size or max(8, rank + 1)).encode() + b', "pg_count": 1, '
                b'"pg_config": [], "nccl_version": "2.21.5"},\n'
                b'  "record_shapes": 1,\n  "with_stack": 1,\n  "displayTimeUnit": "ms",\n'
                b'  "baseTimeNanoseconds": ' + str(BASE_NS).encode() + b',\n  "traceEvents": [\n')
        buf: list[str] = []
        first = True
        for e in events(n, seed, slow):
            if not first:
                buf.append(",\n")
            first = False
            buf.append(e)
            if len(buf) >= 20_000:
                f.write("".join(buf).encode())
                buf.clear()
        f.write("".join(buf).encode())
        f.write(f'\n  ],\n  "traceName": "{path.name}"\n}}\n'.encode())
    finally:
        if f is not raw:
            f.close()
        raw.close()
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gen_trace", description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=float, help="number of events (1e6 accepted)")
    ap.add_argument("out", help="output path (.json or .json.gz)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rank", type=int, default=0, help="distributedInfo.rank (default 0)")
    a = ap.parse_args(argv)
    p = write(int(a.n), a.out, a.seed, a.rank)
    print(f"{p}: {int(a.n):,} events, {p.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
