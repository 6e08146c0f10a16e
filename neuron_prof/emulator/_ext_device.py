"""Device "neuron" as a C++ PrivateUse1 extension (torch's open-registration pattern), run by the emulator.

`register` loads the extension (`_ext_build`, built once per machine) and takes the steps of
torch.utils.backend_registration._setup_privateuseone_for_python_backend with the extension's C++ hooks
(device generators, pinned memory) in place of Python ones. A device tensor is then a plain `torch.Tensor`
with device storage: views, in-place ops on views, autograd, printing, saving and deepcopy are torch's own.
What is not C++ reaches the emulator's executor (`_dispatch.execute`) on host aliases of the device memory:

- every op without a C++ kernel, through a boxed PrivateUse1 fallback (signature, first-call compile,
  CPU fallbacks, float64 as float32, the device clock and cost model, ground truth);
- `_copy_from` (every copy between host and device, `.to`, `.cpu()`, `copy_`) and `_local_scalar_dense`
  (`.item()`), so that copies are modelled DMAs and reading a value is a sync point;
- `convolution_overrideable` and its backward (torch's hook for out-of-tree convolutions): aten::convolution;
- the c10d ops: the collective runs on the host aliases with the group's CPU backend (`_c10d`).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import torch

from neuron_prof.emulator import _operands, _state
from neuron_prof.emulator._dispatch import copy_from_host, copy_to_host, execute
from neuron_prof.emulator._operands import device_index
from neuron_prof.emulator._state import sync_point

aten = torch.ops.aten
_LIBS: list[torch.library.Library] = []


def _fallback(op: Any, *args: Any, **kwargs: Any) -> Any:
    gen = kwargs.get("generator")
    if gen is not None and gen.device.type == "neuron":
        return _with_device_generator(op, gen, args, kwargs)
    return execute(op, args, kwargs)


_OPS: dict[tuple[str, str], Any] = {}


def _cold(name: str, overload: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Launch mode: an op the extension did not launch (`csrc.launch`), by schema name ("aten::mul") and
    overload, taken as the default mode takes every op."""
    op = _OPS.get((name, overload))
    if op is None:
        ns, _, base = name.partition("::")
        op = _OPS[(name, overload)] = getattr(getattr(getattr(torch.ops, ns), base), overload or "default")
    return _fallback(op, *args, **kwargs)


def _launch_queue(rt: _state.Runtime, ext: Any) -> None:
    """Launch mode: the extension's queue is the device's (`_timing.Activity.queue`); the ops it launched are
    ground truth executions and NEFF cache hits, as the executor records them."""
    ext.set_queue(rt.cfg.blocking_execution, rt.cfg.max_device_events)
    rt.activity.queue = ext
    gt = rt.gt

    def launched(name: str, host: int, host_end: int, start: int, end: int, entry: int) -> None:
        gt.add("exec", name, host, host_end, 0, start, end)
        rt.cache.hit(entry)  # each launch looks its NEFF up, as each call of the executor does

    rt.activity.on_launch = launched
    gt.pull = rt.activity.drain
    rt.cache.pull = rt.activity.drain
    rt.cache.on_clear = ext.clear_warm  # a dropped NEFF compiles again at its next call


def _with_device_generator(op: Any, gen: torch.Generator, args: Any, kwargs: dict[str, Any]) -> Any:
    """A device generator holds a CPU generator's state (the C++ DeviceGenerator): the host kernel draws from
    a CPU generator carrying it, and the state it leaves goes back to the device generator."""
    if not any(isinstance(a, torch.Tensor) and a.device.type == "neuron" for a in (*args, *kwargs.values())):
        # only the generator sent the op here (its keys join the dispatch): a host op, as torch refuses it
        raise RuntimeError("Expected a 'cpu' device type for generator but found 'neuron'")
    host = torch.Generator()
    host.set_state(gen.get_state())
    try:
        return execute(op, args, {**kwargs, "generator": host})
    finally:
        gen.set_state(host.get_state())


_DECOMPOSED = {"copy_", "_to_copy", "_copy_from", "_copy_from_and_resize", "resize_", "resize_as_", "set_",
               "empty_like", "new_empty", "new_empty_strided", "_local_scalar_dense", "convolution_overrideable",
               "convolution_backward_overrideable"}
"""Ops left to torch's composite kernel: the copies (they meet _copy_from) and allocations (C++)."""


def _direct_ops() -> list[Any]:
    """The aten ops on tensors that torch would decompose for a backend without a kernel of its own
    (CompositeExplicitAutograd, and the functional and in-place forms of structured ops, which allocate and
    call the out= form): the executor takes them whole, as the subclass device's __torch_dispatch__ does
    (one device op named as the user called it: aten::mul.Tensor, not empty_strided + aten::mul.out). Views
    and in-place metadata ops stay torch's own (C++)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    ops = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::") or has(name, "PrivateUse1"):
            continue
        if not (has(name, "CompositeExplicitAutograd") or has(name, "CompositeExplicitAutogradNonFunctional")):
            continue
        base, _, overload = name[6:].partition(".")
        if base in _DECOMPOSED:
            continue
        op = getattr(getattr(aten, base), overload or "default")
        schema = op._schema
        if torch.Tag.inplace_view in op.tags or any(
                r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            continue
        if any("Tensor" in str(a.type) for a in schema.arguments):
            ops.append(op)
    return ops


def _qualified(op: Any) -> str:
    name = op._schema.name.split("::")[1]
    return name if op._overloadname == "default" else f"{name}.{op._overloadname}"


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    if dst.device.type != "neuron":
        return copy_to_host(dst, src)
    if src.device.type != "neuron":
        return copy_from_host(dst, src)
    return execute(aten.copy_.default, (dst, src), {})


def _local_scalar_dense(t: torch.Tensor) -> Any:
    sync_point(device_index(t), "item")
    return _operands.EXT.host_alias(t).item()


def _conv(*args: Any) -> Any:
    """aten::convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups): aten::convolution's arguments."""
    return execute(aten.convolution.default, args, {})


def _conv_backward(grad_output: Any, input: Any, weight: Any, stride: Any, padding: Any,
                   dilation: Any, transposed: bool, output_padding: Any, groups: int, output_mask: Any) -> Any:
    """aten::convolution_backward_overrideable: aten::convolution_backward, which also takes the bias's
    size (the output channels: weight's dim 0, or dim 1 times groups when transposed)."""
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
    return execute(aten.convolution_backward.default, (grad_output, input, weight, bias_sizes, stride, padding,
                   dilation, transposed, output_padding, groups, output_mask), {})


def _print_on_host() -> None:
    """torch formats a tensor with tensor ops (slices, masks, a cast to float64) on its device, except for
    the devices it knows compile per op (XLA, lazy, IPU, MTIA), which it copies to the host first: so does
    the emulated device, as the subclass device did. The values are formatted from one copy to the host (a
    sync point); the rest of the text (device, dtype, grad_fn) is torch's own."""
    import torch._tensor_str as ts

    original = ts._tensor_str
    if getattr(original, "_neuron_host", False):
        return

    def _tensor_str(self: torch.Tensor, indent: int) -> str:
        if self.device.type == "neuron":
            self = self.detach().to("cpu")
        return original(self, indent)

    _tensor_str._neuron_host = True  # type: ignore[attr-defined]
    ts._tensor_str = _tensor_str


class _DeviceGuard(torch._C._acc.DeviceGuard):
    # The guard's device type, as a C callable: torch calls it from C++ around device ops, and a Python
    # frame there would be one more frame per op and one Dynamo tries to compile when it runs inside a
    # torch.compile'd function (it showed as a compile of a frame named "type_").
    # (torch's stub leaves DeviceType out of what type_ returns)
    type_ = itertools.repeat(torch._C._autograd.DeviceType.PrivateUse1).__next__  # type: ignore[assignment]


class _DeviceContext:
    """torch.neuron.device(i): one device, nothing to switch."""

    def __init__(self, device: Any) -> None:
        self.device = device

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def register(module: Any, ext: Any) -> None:
    """Register device "neuron" with the loaded extension `ext` and `module` as torch.neuron."""
    from neuron_prof.emulator import _autocast, _c10d

    _operands.EXT = ext
    ext.install_allocator()
    torch.utils.rename_privateuse1_backend("neuron")
    torch.utils.generate_methods_for_privateuse1_backend()
    if not hasattr(module, "device"):
        module.device = _DeviceContext
    torch._register_device_module("neuron", module)
    ext.install_hooks()
    torch._C._acc.register_python_privateuseone_device_guard(_DeviceGuard())
    rt = _state.RUNTIME
    assert rt is not None
    launch = rt.cfg.host_cost == "launch"
    glob = torch.library.Library("_", "IMPL")
    glob.fallback(_fallback, "SparsePrivateUse1")  # a host sparse tensor meets a device one: it falls back
    glob.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    lib = torch.library.Library("aten", "IMPL")
    if launch:  # the extension's launch path takes these ops first, and hands the executor what it does not
        ext.register_launch(_cold, [_qualified(op) for op in _direct_ops()])
        _launch_queue(rt, ext)
    else:
        glob.fallback(_fallback, "PrivateUse1")
        for op in _direct_ops():
            lib.impl(_qualified(op), functools.partial(_fallback, op), "PrivateUse1")
    lib.impl("_copy_from", _copy_from, "PrivateUse1")
    lib.impl("_local_scalar_dense", _local_scalar_dense, "PrivateUse1")
    lib.impl("convolution_overrideable", _conv, "PrivateUse1")
    lib.impl("convolution_backward_overrideable", _conv_backward, "PrivateUse1")
    _autocast.register(lib)
    from neuron_prof.emulator._rnn_cells import KERNELS

    for op, kernel in KERNELS.items():  # the fused RNN cells' shapes for torch.compile's fake tensors
        lib.impl(_qualified(op), kernel, "Meta")
    _print_on_host()
    _LIBS.extend([glob, lib, _c10d.register_device_kernels()])
    from neuron_prof.emulator._memory import ExtMemory

    rt.memory = [ExtMemory(ext, i, rt.cfg.memory_capacity_bytes, rt.cfg.reserve_granularity_bytes)
                 for i in range(rt.cfg.num_devices)]
