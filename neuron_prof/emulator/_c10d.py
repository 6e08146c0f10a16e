"""c10d backend "neuron": a Python ProcessGroup over gloo, like TorchNeuron's (no record_param_comms).

Device tensors are unwrapped to their host values and handed to a gloo group created on the same store; the
collective completes on the host, and the device queue gets a collective of modelled duration on stream 2
(ring algorithm: 2(n-1)/n of the bytes for allreduce). Work objects come from completed futures.

On the C++ extension device, c10d's PrivateUse1 kernels would ask the group for a backend of the device,
which a gloo group has none of; `register_device_kernels` replaces them: the collective runs on the device
tensors' host aliases with the group's CPU backend (gloo, or this group, which then times the collective
for the device tensors the kernel saw), as the subclass device's collectives run on its host values.
"""

from __future__ import annotations

import functools
import threading
import time
import warnings
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future  # type: ignore[attr-defined]  # not in the stub

from neuron_prof.emulator import _state
from neuron_prof.emulator._operands import device_index, host_of, is_device
from neuron_prof.emulator._timing import KIND_COLLECTIVE, STREAM_COLLECTIVE

_LINK_BYTES_PER_S = 100e9  # NeuronLink within an instance
_LATENCY_NS = 15_000


_LOCAL = threading.local()
"""`found`: the device tensors of the collective a device kernel is running on their host aliases."""


def _unwrap(x: Any, found: list[torch.Tensor], aliases: dict[int, torch.Tensor] | None = None) -> Any:
    if is_device(x):
        found.append(x)
        h = host_of(x)
        if aliases is not None:
            aliases[id(h)] = x
        return h
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, found, aliases) for v in x)
    return x


def _rewrap(x: Any, aliases: dict[int, torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        return aliases.get(id(x), x)
    if isinstance(x, (list, tuple)):
        return type(x)(_rewrap(v, aliases) for v in x)
    return x


def _device_kernel(op: Any, *args: Any, **kwargs: Any) -> Any:
    """A c10d op on extension device tensors: run on their host aliases by the group's CPU backend."""
    found: list[torch.Tensor] = []
    aliases: dict[int, torch.Tensor] = {}
    hargs = _unwrap(args, found, aliases)
    hkwargs = {k: _unwrap(v, found, aliases) for k, v in kwargs.items()}
    _LOCAL.found = found
    try:
        return _rewrap(op(*hargs, **hkwargs), aliases)
    finally:
        _LOCAL.found = None


def _qualified(op: Any) -> str:
    name = op._schema.name.split("::")[1]
    return name if op._overloadname == "default" else f"{name}.{op._overloadname}"


def register_device_kernels() -> torch.library.Library:
    """The extension device's c10d kernels (see the module docstring); returns the Library to keep alive."""
    lib = torch.library.Library("c10d", "IMPL")
    names = [n for n in torch._C._dispatch_get_all_op_names()
             if n.startswith("c10d::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, "PrivateUse1")]
    with warnings.catch_warnings():  # c10d's own PrivateUse1 kernels, replaced: torch warns once about it
        warnings.simplefilter("ignore")
        for name in names:
            op = getattr(torch.ops.c10d, name.split("::")[1]).default
            lib.impl(_qualified(op), functools.partial(_device_kernel, op), "PrivateUse1")
    return lib


def _done(result: Any) -> Any:
    fut: torch.futures.Future[Any] = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


class NeuronProcessGroup(dist.ProcessGroup):
    """Collectives for device "neuron" (and plain CPU tensors), computed by gloo on the host values."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg]  # the Python-backend constructor, not in the stub
        self._rank, self._size = rank, size
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self) -> str:  # the c10d name
        return "neuron"

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank

    def _run(self, name: str, result_arg: int, factor: float, *args: Any) -> Any:
        found: list[torch.Tensor] = []
        uargs = [_unwrap(a, found) for a in args]
        if not found:  # host aliases from a device kernel (register_device_kernels)
            found = getattr(_LOCAL, "found", None) or []
        t0 = time.time_ns()
        getattr(self._gloo, name)(*uargs).wait()
        rt = _state.RUNTIME
        if found and rt is not None:
            nbytes = sum(t.numel() * t.element_size() for t in found)
            dur = int(rt.cfg.device_time_scale * (_LATENCY_NS + factor * nbytes / _LINK_BYTES_PER_S * 1e9))
            dev = device_index(found[0])
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

    def _allgather_base(self, output: Any, input: Any, opts: Any) -> Any:
        return self._run("_allgather_base", 0, 1.0, output, input, opts)

    def all_gather_single(self, output: Any, input: Any, opts: Any) -> Any:
        return self._run("_allgather_base", 0, 1.0, output, input, opts)

    def reduce_scatter_single(self, output: Any, input: Any, opts: Any) -> Any:
        return self._run("_reduce_scatter_base", 0, 1.0, output, input, opts)

    def all_to_all_single(self, output: Any, input: Any, out_splits: Any, in_splits: Any, opts: Any) -> Any:
        return self._run("alltoall_base", 0, 1.0, output, input, out_splits, in_splits, opts)

    def allgather_coalesced(self, output_lists: Any, input_list: Any, opts: Any) -> Any:
        return self._run("allgather_coalesced", 0, 1.0, output_lists, input_list, opts)

    def broadcast(self, tensors: Any, opts: Any) -> Any:
        return self._run("broadcast", 0, 1.0, tensors, opts)

    def reduce(self, tensors: Any, opts: Any) -> Any:
        return self._run("reduce", 0, 1.0, tensors, opts)

    def reduce_scatter(self, output_tensors: Any, input_lists: Any, opts: Any) -> Any:
        return self._run("reduce_scatter", 0, 1.0, output_tensors, input_lists, opts)

    def _reduce_scatter_base(self, output: Any, input: Any, opts: Any) -> Any:
        return self._run("_reduce_scatter_base", 0, 1.0, output, input, opts)

    def alltoall_base(self, output: Any, input: Any, out_splits: Any, in_splits: Any, opts: Any) -> Any:
        return self._run("alltoall_base", 0, 1.0, output, input, out_splits, in_splits, opts)

    def alltoall(self, output_tensors: Any, input_tensors: Any, opts: Any) -> Any:
        return self._run("alltoall", 0, 1.0, output_tensors, input_tensors, opts)

    def gather(self, output_lists: Any, input_tensors: Any, opts: Any) -> Any:
        return self._run("gather", 0, 1.0, output_lists, input_tensors, opts)

    def scatter(self, output_tensors: Any, input_lists: Any, opts: Any) -> Any:
        return self._run("scatter", 0, 1.0, output_tensors, input_lists, opts)

    def barrier(self, opts: Any = None) -> Any:
        gloo: Any = self._gloo  # the stub's Backend has no barrier; gloo's has
        gloo.barrier(opts).wait() if opts is not None else gloo.barrier().wait()
        return _done(None)


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> NeuronProcessGroup:
    return NeuronProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Register c10d backend "neuron" for device types cpu and neuron (collectives fail without "cpu")."""
    if not dist.is_available() or "NEURON" in dist.Backend._plugins:
        return
    dist.Backend.register_backend("neuron", _create, devices=["cpu", "neuron"])
