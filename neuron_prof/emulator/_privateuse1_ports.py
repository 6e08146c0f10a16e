"""The emulator's device parts, ported to the experimental PrivateUse1 device (experimental_privateuse1.py).

Each registers what a C++ backend registers for its device, with the emulator's own behaviour where it has
one (the kernels and policies are the emulator's, not twins):

- convolution: PrivateUse1 tensors reach aten::convolution_overrideable and its backward (torch's hook for
  out-of-tree backends); they run aten::convolution / convolution_backward on the host aliases.
- the fused RNN cells (nn.GRU, nn.LSTM on a device): the emulator's host kernels, _rnn_cells.KERNELS.
- autocast("neuron"): the emulator's AutocastPrivateUse1 policies, _autocast.register.
- collectives: c10d's PrivateUse1 kernels ask the process group for a backend of the device, which a gloo
  group has none of; as the emulator does for its tensors (the collective computed by gloo on the host
  values), the device's c10d kernels run the op on the host aliases, so the group's CPU backend runs it.
- torch.compile(backend="neuron"): AOTAutograd graphs run op by op on the device (no NEFF, no compile cache;
  static shapes as the emulator's backend enforces).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten
Executor = Callable[..., Any]


def _conv(execute: Executor, *args: Any) -> Any:
    """aten::convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups): aten::convolution's arguments."""
    return execute(aten.convolution.default, *args)


def _conv_backward(
    execute: Executor, grad_output: Any, input: Any, weight: Any, stride: Any, padding: Any,  # noqa: A002
    dilation: Any, transposed: bool, output_padding: Any, groups: int, output_mask: Any,
) -> Any:
    """aten::convolution_backward_overrideable: aten::convolution_backward, which also takes the bias's
    size (the output channels: weight's dim 0, or dim 1 times groups when transposed)."""
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
    return execute(aten.convolution_backward.default, grad_output, input, weight, bias_sizes, stride, padding,
                   dilation, transposed, output_padding, groups, output_mask)


def _qualified(op: torch._ops.OpOverload) -> str:
    """The name Library.impl takes: "name" for the default overload, else "name.overload"."""
    name = op._schema.name.split("::")[1]
    return name if op._overloadname == "default" else f"{name}.{op._overloadname}"


def register_kernels(lib: torch.library.Library, execute: Executor) -> None:
    """Convolution, the fused RNN cells and the autocast policies on `lib` (a Library("aten", "IMPL") the
    caller keeps alive); `execute(op, *args)` runs an op's CPU kernel on host aliases of device tensors."""
    from neuron_prof.emulator import _autocast
    from neuron_prof.emulator._rnn_cells import KERNELS

    lib.impl("convolution_overrideable", functools.partial(_conv, execute), "PrivateUse1")
    lib.impl("convolution_backward_overrideable", functools.partial(_conv_backward, execute), "PrivateUse1")
    for op, kernel in KERNELS.items():
        lib.impl(_qualified(op), kernel, "PrivateUse1")
    _autocast.register(lib)


def register_collectives(execute: Executor) -> torch.library.Library:
    """The device's c10d kernels: each collective on the host aliases (returns the Library to keep alive)."""
    lib = torch.library.Library("c10d", "IMPL")
    names = [n for n in torch._C._dispatch_get_all_op_names()
             if n.startswith("c10d::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, "PrivateUse1")]
    with warnings.catch_warnings():  # c10d's own PrivateUse1 kernels, replaced: torch warns once about it
        warnings.simplefilter("ignore")
        for name in names:
            op = getattr(torch.ops.c10d, name.split("::")[1]).default
            lib.impl(_qualified(op), functools.partial(execute, op), "PrivateUse1")
    return lib


def _compile_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
    from torch._dynamo.backends.registry import lookup_backend

    from neuron_prof.emulator._dynamo_backend import enforce_static_shapes

    enforce_static_shapes()
    return lookup_backend("aot_eager")(gm, example_inputs)


def _register_compile_backend() -> None:
    from torch._dynamo.backends import registry

    if "neuron" not in registry._COMPILER_FNS:
        registry.register_backend(name="neuron")(_compile_backend)


def register_compile_backend() -> None:
    """torch.compile(backend="neuron"), registered when torch._dynamo is imported (it costs seconds)."""
    from neuron_prof.emulator._dynamo_backend import after_dynamo_import

    after_dynamo_import(_register_compile_backend)
