"""torch.autocast("neuron"): PyTorch has no AutocastPrivateUse1 kernels, so we register CUDA-like policies.

Matrix ops run in the autocast dtype (bf16 by default); numerically sensitive ops run in float32; every other
op falls through. Kernels exclude the autocast key and call the op again, so casts and the op itself go
through the device's normal dispatch.
"""

from __future__ import annotations

from typing import Any

import torch

_LOWER = (
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "addbmm",
    "matmul",
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "convolution",
    "_convolution",
    "conv_transpose1d",
    "conv_transpose2d.input",
    "conv_transpose3d.input",
    "addmv",
    "addr",
    "prelu",
    "scaled_dot_product_attention",
    "chain_matmul",
    "multi_dot",
)
_FP32 = (
    "softmax.int",
    "log_softmax.int",
    "layer_norm",
    "group_norm",
    "native_layer_norm",
    "mse_loss",
    "cross_entropy_loss",
    "nll_loss",
    "nll_loss_nd",
    "binary_cross_entropy_with_logits",
    "smooth_l1_loss",
    "exp",
    "log",
    "pow.Tensor_Scalar",
    "cumsum",
    "norm.Scalar",
    "sum",
    "prod",
    "rsqrt",
    "erfinv",
)
# AutocastPrivateUse1 is missing from torch's stub
_KEYSET = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)  # type: ignore[attr-defined]


def _cast(x: Any, frm: tuple[torch.dtype, ...], to: torch.dtype) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(to) if x.dtype in frm and x.device.type == "neuron" else x
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, frm, to) for v in x)
    return x


def _kernel(op: Any, lower: bool) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if lower:
            to = torch.get_autocast_dtype("neuron")
            frm: tuple[torch.dtype, ...] = tuple(
                d for d in (torch.float32, torch.float16, torch.bfloat16) if d != to
            )
        else:
            to, frm = torch.float32, (torch.float16, torch.bfloat16)
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            return op(*_cast(args, frm, to), **_cast(kwargs, frm, to))

    return kernel


def register(lib: torch.library.Library) -> None:
    """Install the policies on `lib` (a Library("aten", "IMPL") kept alive by the caller)."""
    for names, lower in ((_LOWER, True), (_FP32, False)):
        for name in names:
            base, _, ov = name.partition(".")
            packet = getattr(torch.ops.aten, base, None)
            if packet is None or (ov or "default") not in packet.overloads():
                continue
            lib.impl(name, _kernel(getattr(packet, ov or "default"), lower), "AutocastPrivateUse1")
