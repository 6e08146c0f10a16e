"""c10d backend "neuron": a Python ProcessGroup over gloo, like TorchNeuron's (no record_param_comms).

Device tensors are unwrapped to their host values and handed to a gloo group created on the same store; the
collective completes on the host, and the device queue gets a collective of modelled duration on stream 2
(ring algorithm: 2(n-1)/n of the bytes for allreduce). Work objects come from completed futures.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from neuron_prof.emulator import _state
from neuron_prof.emulator._tensor import NeuronTensor
from neuron_prof.emulator._timing import KIND_COLLECTIVE, STREAM_COLLECTIVE

_LINK_BYTES_PER_S = 100e9  # NeuronLink within an instance
_LATENCY_NS = 15_000


def _unwrap(x: Any, found: list[NeuronTensor]) -> Any:
    if isinstance(x, NeuronTensor):
        found.append(x)
        return x._elem
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, found) for v in x)
    return x


def _done(result: Any) -> Any:
    fut: torch.futures.Future[Any] = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


class NeuronProcessGroup(dist.ProcessGroup):
    """Collectives for device "neuron" (and plain CPU tensors), computed by gloo on the host values."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self) -> str:  # noqa: N802 - the c10d name
        return "neuron"

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank

    def _run(self, name: str, result_arg: int, factor: float, *args: Any) -> Any:
        found: list[NeuronTensor] = []
        uargs = [_unwrap(a, found) for a in args]
        t0 = time.time_ns()
        getattr(self._gloo, name)(*uargs).wait()
        rt = _state.RUNTIME
        if found and rt is not None:
            nbytes = sum(t._elem.numel() * t._elem.element_size() for t in found)
            dur = int(rt.cfg.device_time_scale * (_LATENCY_NS + factor * nbytes / _LINK_BYTES_PER_S * 1e9))
            dev = found[0]._dev
            start, end, seq = rt.clocks[dev].submit(
                name, dur, STREAM_COLLECTIVE, KIND_COLLECTIVE, seq_nr=torch._C._autograd._get_sequence_nr()
            )
            rt.activity.cc[seq] = (nbytes, self._size)
            rt.gt.add("collective", name, t0, time.time_ns(), dev, start, end, detail=nbytes)
        return _done(args[result_arg] if result_arg >= 0 else None)

    def _ring(self) -> float:
        return 2.0 * (self._size - 1) / max(self._size, 1)

    def allreduce(self, tensors: Any, opts: Any) -> Any:
        return self._run("allreduce", 0, self._ring(), tensors, opts)

    def allreduce_coalesced(self, tensors: Any, opts: Any) -> Any:
        return self._run("allreduce_coalesced", 0, self._ring(), tensors, opts)

    def allgather(self, output_tensors: Any, input_tensors: Any, opts: Any) -> Any:
        return self._run("allgather", 0, 1.0, output_tensors, input_tensors, opts)

    def _allgather_base(self, output: Any, input: Any, opts: Any) -> Any:  # noqa: A002
        return self._run("_allgather_base", 0, 1.0, output, input, opts)

    def all_gather_single(self, output: Any, input: Any, opts: Any) -> Any:  # noqa: A002
        return self._run("_allgather_base", 0, 1.0, output, input, opts)

    def reduce_scatter_single(self, output: Any, input: Any, opts: Any) -> Any:  # noqa: A002
        return self._run("_reduce_scatter_base", 0, 1.0, output, input, opts)

    def all_to_all_single(self, output: Any, input: Any, out_splits: Any, in_splits: Any, opts: Any) -> Any:  # noqa: A002
        return self._run("alltoall_base", 0, 1.0, output, input, out_splits, in_splits, opts)

    def allgather_coalesced(self, output_lists: Any, input_list: Any, opts: Any) -> Any:
        return self._run("allgather_coalesced", 0, 1.0, output_lists, input_list, opts)

    def broadcast(self, tensors: Any, opts: Any) -> Any:
        return self._run("broadcast", 0, 1.0, tensors, opts)

    def reduce(self, tensors: Any, opts: Any) -> Any:
        return self._run("reduce", 0, 1.0, tensors, opts)

    def reduce_scatter(self, output_tensors: Any, input_lists: Any, opts: Any) -> Any:
        return self._run("reduce_scatter", 0, 1.0, output_tensors, input_lists, opts)

    def _reduce_scatter_base(self, output: Any, input: Any, opts: Any) -> Any:  # noqa: A002
        return self._run("_reduce_scatter_base", 0, 1.0, output, input, opts)

    def alltoall_base(self, output: Any, input: Any, out_splits: Any, in_splits: Any, opts: Any) -> Any:  # noqa: A002
        return self._run("alltoall_base", 0, 1.0, output, input, out_splits, in_splits, opts)

    def alltoall(self, output_tensors: Any, input_tensors: Any, opts: Any) -> Any:
        return self._run("alltoall", 0, 1.0, output_tensors, input_tensors, opts)

    def gather(self, output_lists: Any, input_tensors: Any, opts: Any) -> Any:
        return self._run("gather", 0, 1.0, output_lists, input_tensors, opts)

    def scatter(self, output_tensors: Any, input_lists: Any, opts: Any) -> Any:
        return self._run("scatter", 0, 1.0, output_tensors, input_lists, opts)

    def barrier(self, opts: Any = None) -> Any:
        self._gloo.barrier(opts).wait() if opts is not None else self._gloo.barrier().wait()
        return _done(None)


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> NeuronProcessGroup:
    return NeuronProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Register c10d backend "neuron" for device types cpu and neuron (collectives fail without "cpu")."""
    if not dist.is_available() or "NEURON" in dist.Backend._plugins:
        return
    dist.Backend.register_backend("neuron", _create, devices=["cpu", "neuron"])
