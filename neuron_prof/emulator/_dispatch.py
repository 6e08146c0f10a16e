"""Executing one aten op on the emulated device.

execute(func, args, kwargs)
  unwrap device tensors -> signature (op, shapes, dtypes, static args; float scalars are runtime values)
  sync ops (.item(), .cpu(), cross-device copies) -> the host waits for the device first
  fallback ops -> _fallback.run_on_host (host compute + copies, tracked like TorchNeuron)
  first call of a signature -> NEFF compile (the host blocks, or with NEURON_LAUNCH_BLOCKING=0 the background
    compile thread does it and the op waits for it on the device), then cached
  run on CPU, rewrap, model the device duration and queue it on the device clock

Values are computed by the op's own CPU kernel on the host copies, or, for device ops that have no CPU
kernel (the fused RNN cells), by the host kernel in _rnn_cells.KERNELS; either way it is one device op.
"""

from __future__ import annotations

import functools
import sys
import time
import types
import warnings
from typing import Any, NamedTuple

import torch
from torch._subclasses.fake_tensor import FakeTensorDeviceMismatchError, UnsupportedOperatorException

from neuron_prof.emulator import _operands, _state
from neuron_prof.emulator._fallback import run_on_host
from neuron_prof.emulator._operands import (
    Unwrapped,
    demote_f64,
    device_index,
    host_of,
    host_seq_nr,
    is_device,
    wrap,
    wrap_except,
)
from neuron_prof.emulator._rnn_cells import KERNELS
from neuron_prof.emulator._state import sync_point
from neuron_prof.emulator._tensor import NeuronTensor
from neuron_prof.emulator._timing import (
    KIND_COPY_D2H,
    KIND_COPY_H2D,
    STREAM_DMA,
    copy_duration_ns,
    device_duration_ns,
    op_cost,
)
from neuron_prof.model.callsite import USER, file_kind

aten = torch.ops.aten
_TO_COPY = aten._to_copy.default
_COPY_ = aten.copy_.default
_seq_nr = torch._C._autograd._get_sequence_nr
_profiling = torch.autograd._profiler_enabled
_record_functions = torch._C._autograd._enable_record_function
_F64 = torch.float64
_NO_DEVICE_WORK = {
    "aten::empty.memory_format",
    "aten::empty_strided",
    "aten::detach",
    "aten::view",
    "aten::_unsafe_view",
    "aten::alias",
    "aten::lift_fresh",
    "aten::t",
    "aten::transpose.int",
    "aten::permute",
    "aten::expand",
    "aten::as_strided",
    "aten::unsqueeze",
    "aten::squeeze.dim",
    "aten::slice.Tensor",
    "aten::select.int",
    "aten::split.Tensor",
    "aten::split_with_sizes",
    "aten::unbind.int",
    "aten::set_.source_Storage_storage_offset",
    "aten::empty_like",
    "aten::_reshape_alias",
    "aten::squeeze.dims",
    "aten::new_empty",
    "aten::new_empty_strided",
}
_ALLOCATORS = {"aten::empty.memory_format", "aten::empty_strided"}
_SYNC_OPS = {"aten::_local_scalar_dense", "aten::equal", "aten::is_nonzero"}
# Outputs a device kernel leaves on the host: torch requires a packed sequence's batch sizes on the CPU (the
# kernel allocates them with the CPU `lengths`' options), and RNNs read them there.
_HOST_OUTPUTS = {"aten::_pack_padded_sequence": frozenset({1})}


class OpInfo(NamedTuple):
    name: str
    """"aten::add.Tensor"; the default overload is left out ("aten::mm")."""
    base: str
    """"add": the op's short name, used by the cost model."""
    fallback: bool
    silent: bool
    int64_fallback: bool
    device_work: bool
    sync: bool
    kernel: Any
    """What computes the values on the host copies: the op itself, or its _rnn_cells kernel."""
    wrap: Any
    """What turns the results into device tensors: _operands.wrap, or a wrap_except for _HOST_OUTPUTS."""


_INFO: dict[int, OpInfo] = {}  # by id(OpOverload): they live for the whole process; their __hash__ is Python


def op_info(func: Any) -> OpInfo:
    info = _INFO.get(id(func))
    if info is None:
        schema = func._schema
        ov = schema.overload_name
        name = schema.name + (f".{ov}" if ov and ov != "default" else "")
        base = schema.name.split("::")[-1]
        cfg = _state.RUNTIME.cfg  # type: ignore[union-attr]
        fb = name in cfg.fallback_ops or schema.name in cfg.fallback_ops
        info = OpInfo(
            name,
            base,
            fb,
            fb and (name in cfg.silent_fallback_ops or schema.name in cfg.silent_fallback_ops),
            name in cfg.int64_fallback_ops or schema.name in cfg.int64_fallback_ops,
            name not in _NO_DEVICE_WORK and name not in _SYNC_OPS,
            name in _SYNC_OPS,
            KERNELS.get(func, func),
            functools.partial(wrap_except, _HOST_OUTPUTS[name]) if name in _HOST_OUTPUTS else wrap,
        )
        _INFO[id(func)] = info
    return info


def _warn_f64(name: str, dev: int) -> None:
    rt = _state.RUNTIME
    assert rt is not None
    now = time.time_ns()
    rt.gt.add("f64", name, now, now, dev)
    if name not in rt.warned_f64:
        rt.warned_f64.add(name)
        msg = f"neuron: float64 is not supported on Neuron devices; {name} computed in float32"
        level = _user_level()
        if level is None:  # autograd's thread (a backward op): no line of the user's code runs it
            warnings.warn_explicit(msg + " (in the backward pass)", UserWarning, "<backward>", 0,
                                   module="neuron_prof.emulator")
        else:
            warnings.warn(msg, UserWarning, stacklevel=level)


def _user_level() -> int | None:
    """The stacklevel of the first frame of the user's code (a warning is about the user's statement); None
    when the user's code is not on this thread's stack (library frames never name the user's statement)."""
    f: types.FrameType | None = sys._getframe(1)
    level = 1
    while f is not None and file_kind(f.f_code.co_filename) != USER:
        f, level = f.f_back, level + 1
    return level if f is not None else None


def execute(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run one aten op with device-tensor operands (see the module docstring)."""
    rt = _state.RUNTIME
    assert rt is not None
    info = op_info(func)
    u = Unwrapped()
    uargs = u.unwrap(args)
    ukwargs = {k: u.unwrap(v) for k, v in kwargs.items()} if kwargs else kwargs
    # The op runs where its result goes: a device= argument (factories, .to("neuron:1")) wins.
    dev = u.target_dev if u.target_dev >= 0 else max(u.dev, 0)
    dev_out = None
    if ukwargs and _operands.EXT is not None and is_device(kwargs.get("out")):
        # out= may resize its tensor (arange, linspace fill through it), which a host alias cannot: the op
        # writes a host tensor, and the device tensor is resized (torch's resize_) and filled from it
        dev_out = kwargs["out"]
        ukwargs["out"] = torch.empty(0, dtype=dev_out.dtype)
    if u.tracing:  # torch.compile is tracing: no device, compile or tracking side effects
        try:
            out = info.kernel(*uargs, **ukwargs)
            return info.wrap(out, u, dev, []) if dev_out is None else _fill_out(dev_out, out, [])
        except FakeTensorDeviceMismatchError as e:
            # A factory for "neuron" in the traced code (torch.zeros(..., device=x.device)) gives a plain fake
            # tensor on the device, not a NeuronTensor: it cannot meet device tensors' host copies here, so
            # Dynamo breaks the graph at this op and runs it eagerly.
            raise UnsupportedOperatorException(func) from e

    if info.name in _ALLOCATORS and not u.ins:
        # Refuse before the host allocates: a request past device capacity may not fit in host RAM either.
        rt.memory[dev].check(_requested_bytes(args, kwargs))
    if func is _TO_COPY and not u.tracing:
        # As a backend that implements copies only (PrivateUse1 `copy_`/`_copy_from`) runs `_to_copy`: a new
        # tensor on the target device, then `copy_` into it; the profiler records the copy with both devices.
        src = args[0]
        if not isinstance(src, NeuronTensor) and u.target_dev >= 0:
            return _via_copy(src, kwargs, f"neuron:{u.target_dev}")
        if isinstance(src, NeuronTensor) and u.target_dev < 0 and _to_host(kwargs):
            return _via_copy(src, kwargs, "cpu")
    if func is _COPY_:
        dst, src = args[0], args[1]
        if not is_device(dst):
            return _copy_to_host(rt, info, uargs, ukwargs, u, dev, dst=dst)
        if not is_device(src):
            return copy_from_host(dst, src)

    if info.sync:
        sync_point(dev, "item" if info.base == "_local_scalar_dense" else info.base)
    if info.fallback or u.host_only or (u.i64 and info.int64_fallback):
        return run_on_host(rt, func, info, uargs, ukwargs, u, dev)
    local = rt.local
    cfg = rt.cfg
    ready = 0
    if not local.in_graph and info.device_work:
        sig = (info.name, *u.sig)
        if not rt.cache.get(sig):
            flops, nbytes, _, _ = op_cost(info.base, u.ins, ())
            cost = (
                cfg.eager_compile_base_ms
                + cfg.eager_compile_ms_per_operand * len(u.ins)
                + cfg.eager_compile_ms_per_gflop * flops / 1e9
            )
            ready = rt.cache.compile(sig, info.name, cost, 8192 + 1024 * len(u.ins), dev, cfg.launch_blocking)
    t0 = time.time_ns()
    seq = host_seq_nr(u)
    if _profiling() and not local.in_graph:  # a graph hides its ops already (_dynamo_backend)
        # The device kernel is opaque to the host profiler: hide the CPU ops that compute its values.
        _record_functions(False)
        try:
            out = info.kernel(*uargs, **ukwargs)
        finally:
            _record_functions(True)
    else:
        out = info.kernel(*uargs, **ukwargs)
    outs: list[torch.Tensor] = []
    if dev_out is not None:
        res = _fill_out(dev_out, out, outs)
    else:
        res = info.wrap(out, u, dev, outs)
    rt.executed_names.add(info.name)
    if u.f64 or (outs and outs[0].dtype is _F64):
        _warn_f64(info.name, dev)
    if info.device_work:
        flops, nbytes, matrix, lowp = op_cost(info.base, u.ins, outs)
        dur = device_duration_ns(cfg, flops, nbytes, matrix, lowp)
        if local.in_graph:
            local.graph_ns += dur - int(cfg.op_launch_us * 1e3 * cfg.device_time_scale)
        else:
            start, end, _ = rt.clocks[dev].submit(info.name, dur, seq_nr=seq, not_before=ready, work=(flops, nbytes))
            rt.gt.add("exec", info.name, t0, time.time_ns(), dev, start, end)
            queue = rt.activity.queue
            if (queue is not None and dev_out is None and not u.f64 and info.kernel is func and info.wrap is wrap
                    and all(o.dtype is not _F64 for o in outs)):
                # launch mode: this signature is compiled and runs as a plain device op; the extension
                # launches its next calls itself (csrc.launch), at this duration
                queue.mark_warm(info.name, dur, flops, nbytes, rt.cache.entry_id(sig))
    return res


def _requested_bytes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    size = args[0] if args else kwargs.get("size", ())
    n = 1
    for d in size:
        n *= int(d)
    dtype = kwargs.get("dtype") or torch.get_default_dtype()  # keyword-only in both allocators' schemas
    return n * dtype.itemsize


def _via_copy(src: torch.Tensor, kwargs: dict[str, Any], device: str) -> torch.Tensor:
    """`_to_copy(src, ...)` onto `device` as an allocation plus `copy_` (see execute)."""
    host = src._elem if isinstance(src, NeuronTensor) else src
    mf = kwargs.get("memory_format")
    with torch.no_grad():
        dst = torch.empty_like(host, dtype=kwargs.get("dtype") or host.dtype, device=device,
                               memory_format=mf if mf is not None else torch.preserve_format)
        aten.copy_.default(dst, src, bool(kwargs.get("non_blocking", False)))
    return dst


def _fill_out(dev_out: torch.Tensor, host: torch.Tensor, outs: list[torch.Tensor]) -> torch.Tensor:
    """The extension's device out= tensor, given the host result's shape and values."""
    if host.dtype is _F64:
        demote_f64(host)
    if dev_out.shape != host.shape:
        dev_out.resize_(host.shape)
    _operands.EXT.copy_raw(host, dev_out)
    outs.append(host)
    return dev_out


def _to_host(kwargs: dict[str, Any]) -> bool:
    d = kwargs.get("device")
    return d is not None and torch.device(d).type == "cpu"


def _copy_to_host(
    rt: _state.Runtime, info: OpInfo, uargs: Any, ukwargs: Any, u: Unwrapped, dev: int, dst: Any = None
) -> Any:
    """Device -> host (.cpu(), .to("cpu"), cpu_tensor.copy_(dev_tensor)): a sync point plus a DMA."""
    sync_point(dev, "copy_to_host")
    nbytes = sum(t.numel() * t.element_size() for t in u.ins)
    t0 = time.time_ns()
    start, end, _ = rt.clocks[dev].submit(
        "copy_d2h", copy_duration_ns(rt.cfg, nbytes), STREAM_DMA, KIND_COPY_D2H, seq_nr=_seq_nr()
    )
    rt.clocks[dev].wait()
    out = _COPY_(*uargs, **ukwargs) if dst is not None else _TO_COPY(*uargs, **ukwargs)
    rt.gt.add("copy", "d2h", t0, time.time_ns(), dev, start, end, detail=nbytes)
    return dst if dst is not None else out


def copy_from_host(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Host -> device into an existing device tensor: an async DMA on the device queue."""
    rt = _state.RUNTIME
    assert rt is not None
    t0 = time.time_ns()
    host = host_of(dst)
    with torch.no_grad():
        host.copy_(src)
    dev = device_index(dst)
    if dst.dtype is _F64:
        demote_f64(host)
        if type(dst) is not NeuronTensor:  # the subclass device logs it at the allocation (empty_strided)
            _warn_f64("aten::copy_", dev)
    nbytes = host.numel() * host.element_size()
    start, end, _ = rt.clocks[dev].submit(
        "copy_h2d", copy_duration_ns(rt.cfg, nbytes), STREAM_DMA, KIND_COPY_H2D, seq_nr=_seq_nr()
    )
    rt.gt.add("copy", "h2d", t0, time.time_ns(), dev, start, end, detail=nbytes)
    return dst


def copy_to_host(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Device -> host into an existing host tensor (the extension's `_copy_from`): a sync point plus a DMA."""
    rt = _state.RUNTIME
    assert rt is not None
    u = Unwrapped()
    hsrc = u.unwrap(src)
    return _copy_to_host(rt, op_info(_COPY_), (dst, hsrc), {}, u, device_index(src), dst=dst)
