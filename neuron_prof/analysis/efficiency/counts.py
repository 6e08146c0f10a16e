"""FLOPs and bytes of one op from its recorded shapes and dtypes (Kineto ``Input Dims`` / ``Input type``).

The counts follow torch's own FLOP counter (``torch.utils.flop_counter``, and the profiler's ``with_flops``,
which writes no FLOPs into the Chrome JSON the capture reads): a multiply-add is 2 FLOPs.

- matmul (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``): 2 * batch * M * K * N (an addmm's
  bias add is not counted, as torch does not);
- convolution (``conv1d/2d/3d``, ``convolution``, ``_convolution``, transposed too): 2 * N * out positions *
  weight elements (transposed: in positions), out positions from stride, padding and dilation (``Concrete
  Inputs``); ``convolution_backward``: that per gradient asked for (grad input, grad weight);
- attention (``scaled_dot_product_attention`` and its flash/efficient/cudnn/math variants): 2 * B * H * L * S
  * (E + Ev); a backward variant 2.5 times that (torch's count: five matmuls for two);
- elementwise: one FLOP per output element (output: the broadcast of the tensor inputs); reductions and
  normalisations: one per input element (softmax/layer/group/batch norm: 5);
- copies and dtype casts: no FLOPs, bytes only. Views, allocations and anything else: nothing (not counted).

Bytes moved: the tensor inputs plus the output, each by its dtype's size (a reduction's output is not known
from the inputs and is left out: at most the input's size, usually far less).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

DTYPE_BYTES = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "torch.float64": 8, "torch.float32": 4, "torch.float16": 2, "torch.bfloat16": 2, "torch.int64": 8,
    "torch.int32": 4, "torch.int16": 2, "torch.int8": 1, "torch.uint8": 1, "torch.bool": 1,
    "torch.float8_e4m3fn": 1, "torch.float8_e5m2": 1,
}
"""Element size per dtype as Kineto's ``Input type`` spells it (C++ names) and as torch prints it."""

PRECISION = {"double": "fp64", "torch.float64": "fp64", "float": "fp32", "torch.float32": "fp32",
             "c10::Half": "fp16", "torch.float16": "fp16", "c10::BFloat16": "bf16", "torch.bfloat16": "bf16",
             "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
             "c10::Float8_e5m2fnuz": "fp8", "torch.float8_e4m3fn": "fp8", "torch.float8_e5m2": "fp8",
             "signed char": "int8", "torch.int8": "int8"}
"""The peak-table precision of a dtype (`peaks.Peak.flops`); other dtypes (ints, bool): "other"."""

MATMUL = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addbmm", "_addmm_activation")
ELEMENTWISE = frozenset((
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "abs", "relu", "relu_", "gelu", "silu",
    "silu_", "sigmoid", "tanh", "exp", "log", "pow", "sqrt", "rsqrt", "reciprocal", "clamp", "clamp_", "where",
    "maximum", "minimum", "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward",
    "tanh_backward", "addcmul_", "addcdiv_", "lerp_", "rsub", "sin", "cos", "erf", "eq", "ne", "lt", "gt", "le",
    "ge", "masked_fill", "masked_fill_", "hardtanh", "leaky_relu", "elu", "dropout", "native_dropout", "square",
    "mish", "softplus", "nan_to_num", "sgn", "sign", "fill_", "zero_", "_foreach_add_", "_foreach_mul_",
))
REDUCTION = frozenset(("sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm", "var",
                       "std", "argmax", "argmin", "logsumexp", "cumsum", "all", "any", "var_mean", "std_mean"))
NORM = frozenset(("softmax", "_softmax", "log_softmax", "_log_softmax", "layer_norm", "native_layer_norm",
                  "group_norm", "native_group_norm", "batch_norm", "native_batch_norm", "rms_norm",
                  "_fused_rms_norm", "_softmax_backward_data", "native_layer_norm_backward",
                  "native_batch_norm_backward", "_log_softmax_backward_data", "cross_entropy_loss", "nll_loss"))
COPY = frozenset(("copy_", "_to_copy", "to", "clone", "contiguous", "cat", "stack", "index_select", "gather",
                  "embedding", "index", "_copy_from", "_copy_from_and_resize"))

KINDS = ("matmul", "conv", "attention", "elementwise", "reduction", "copy")


def base_name(name: str) -> str:
    """``aten::add.Tensor`` -> ``add``: the op without namespace and overload."""
    b = name.rsplit("::", 1)[-1]
    return b.split(".", 1)[0]


def kind_of(name: str) -> str | None:
    """The counting rule an op name falls under (`KINDS`), None when it is not counted."""
    if "::" in name and not name.startswith(("aten::", "prims::")):
        return None
    b = base_name(name)
    if "scaled_dot_product" in b or b in ("_flash_attention_forward", "_efficient_attention_forward",
                                          "_flash_attention_backward", "_efficient_attention_backward"):
        return "attention"
    if b in MATMUL:
        return "matmul"
    if b in CONV_PARAMS or b == "convolution_backward":
        return "conv"
    if b in ELEMENTWISE:
        return "elementwise"
    if b in REDUCTION or b in NORM:
        return "reduction"
    if b in COPY:
        return "copy"
    return None


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape) if shape else 1


def _broadcast(shapes: list[list[int]]) -> list[int]:
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s):
            j = n - len(s) + i
            out[j] = max(out[j], d)
    return out


def _tensors(dims: list[Any], types: list[Any]) -> list[tuple[list[int], str]]:
    """(shape, dtype) of each tensor input: an entry of ``Input Dims`` that is a list of ints with a dtype that
    has a size (Scalars and lists of scalars have no dims, ``[]``, and types like "Scalar", "ScalarList")."""
    out = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if isinstance(d, list) and all(isinstance(x, int) for x in d) and t in DTYPE_BYTES:
            if d or t:  # a 0-dim tensor has [] and a real dtype
                out.append((d, t))
    return out


def _ints(v: Any, n: int, default: int) -> list[int]:
    """A conv parameter (``Concrete Inputs`` as Kineto writes it: "[1, 1]", "1", or ""), one value per dim."""
    if isinstance(v, str):
        v = v.strip()
        try:
            v = [int(x) for x in v.strip("[]").split(",") if x.strip()] if v else []
        except ValueError:
            v = []
    if isinstance(v, int):
        v = [v]
    if not isinstance(v, list) or not v:
        return [default] * n
    return [int(x) for x in v] * n if len(v) == 1 else [int(x) for x in v[:n]] + [default] * (n - len(v))


def _matmul_flops(b: str, ts: list[tuple[list[int], str]]) -> int | None:
    shapes = [s for s, _ in ts]
    if b in ("addmm", "baddbmm", "addbmm", "_addmm_activation") and len(shapes) >= 3:
        shapes = shapes[1:3]
    if len(shapes) < 2:
        return None
    x, w = shapes[0], shapes[1]
    if b == "linear":  # x [..., K] @ W[N, K]^T
        if len(w) != 2:
            return None
        return 2 * _numel(x[:-1]) * x[-1] * w[0] if x else None
    if not x or not w:
        return None
    if len(x) == 1:
        x = [1, *x]
    if len(w) == 1:
        w = [*w, 1]
    m, k, n = x[-2], x[-1], w[-1]
    batch = _numel(_broadcast([x[:-2], w[:-2]])) if b != "addbmm" else max(x[0] if len(x) == 3 else 1, 1)
    return 2 * batch * m * k * n


CONV_PARAMS: dict[str, tuple[int, int, int, int, int, int]] = {
    # op: positions of (stride, padding, dilation, transposed, output_padding, groups); -1: not an argument
    "conv1d": (3, 4, 5, -1, -1, 6), "conv2d": (3, 4, 5, -1, -1, 6), "conv3d": (3, 4, 5, -1, -1, 6),
    "convolution": (3, 4, 5, 6, 7, 8), "_convolution": (3, 4, 5, 6, 7, 8), "convolution_overrideable": (3, 4, 5, 6, 7, 8),
    "conv_transpose1d": (3, 4, 7, -2, 5, 6), "conv_transpose2d": (3, 4, 7, -2, 5, 6),
    "conv_transpose3d": (3, 4, 7, -2, 5, 6), "mkldnn_convolution": (4, 3, 5, -1, -1, 6),
    "cudnn_convolution": (3, 2, 4, -1, -1, 5),
}
"""Where each convolution op's schema puts its parameters (native_functions.yaml); -2: always transposed."""


def _conv_flops(b: str, ts: list[tuple[list[int], str]], concrete: list[Any]) -> tuple[int, list[int]] | None:
    """(FLOPs, output shape) of a convolution or its backward."""
    if b == "convolution_backward":  # (grad_output, input, weight, bias_sizes, stride, padding, dilation,
        if len(ts) < 3:  # transposed, output_padding, groups, output_mask)
            return None
        gout, x, w = ts[0][0], ts[1][0], ts[2][0]
        transposed = str(_at(concrete, 7)).strip() == "True"
        mask = str(_at(concrete, 10) or "")
        want = [p.strip() == "True" for p in mask.strip("[]").split(",")] if "True" in mask or "False" in mask \
            else [True, True, True]
        positions = _numel(x[2:]) if transposed else _numel(gout[2:])
        one = 2 * gout[0] * positions * _numel(w) if gout else 0
        return one * sum(want[:2]), x
    pos = CONV_PARAMS.get(b)
    if pos is None or len(ts) < 2:
        return None
    x, w = ts[0][0], ts[1][0]
    sp = len(w) - 2
    if sp < 1 or len(x) < sp + 1:
        return None
    batched = len(x) == sp + 2
    n = x[0] if batched else 1
    xs = x[-sp:]
    s_i, p_i, d_i, t_i, o_i, g_i = pos
    transposed = t_i == -2 or (t_i >= 0 and str(_at(concrete, t_i)).strip() == "True")
    stride, dil = _ints(_at(concrete, s_i), sp, 1), _ints(_at(concrete, d_i), sp, 1)
    pad_v = _at(concrete, p_i)
    if isinstance(pad_v, str) and pad_v.strip().strip("'\"") == "same":
        outs = list(xs)
    else:
        pad = _ints(pad_v, sp, 0)
        if transposed:
            opad = _ints(_at(concrete, o_i), sp, 0)
            outs = [(xs[i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (w[2 + i] - 1) + opad[i] + 1 for i in range(sp)]
        else:
            outs = [(xs[i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(sp)]
    if transposed:  # weight [Cin, Cout / groups, k...]: every input position meets every weight
        cout = w[1] * max(_int(_at(concrete, g_i), 1), 1)
        flops = 2 * n * _numel(xs) * _numel(w)
    else:  # weight [Cout, Cin / groups, k...]: every output position meets every weight
        cout = w[0]
        flops = 2 * n * _numel(outs) * _numel(w)
    return flops, ([n] if batched else []) + [cout, *outs]


def _at(v: list[Any], i: int) -> Any:
    return v[i] if isinstance(v, list) and i < len(v) else None


def _int(v: Any, default: int) -> int:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return default


def op_work(name: str, dims: Any, types: Any, concrete: Any = None) -> tuple[int, int, str] | None:
    """(FLOPs, bytes moved, precision) of one call of op `name` with Kineto's ``Input Dims`` `dims`, ``Input
    type`` `types` and ``Concrete Inputs`` `concrete`; None when the op is not counted or its shapes are not
    recorded (see the module docstring)."""
    kind = kind_of(name)
    if kind is None or not isinstance(dims, list) or not isinstance(types, list):
        return None
    ts = _tensors(dims, types)
    if not ts:
        return None
    b = base_name(name)
    in_bytes = sum(_numel(s) * DTYPE_BYTES[t] for s, t in ts)
    prec_of = ts[-1][1] if kind == "matmul" and len(ts) >= 2 else ts[0][1]
    prec = PRECISION.get(prec_of, "other")
    esize = DTYPE_BYTES[ts[0][1]]
    if kind == "matmul":
        f = _matmul_flops(b, ts)
        if f is None:
            return None
        shapes = [s for s, _ in ts]
        if b in ("addmm", "baddbmm", "addbmm", "_addmm_activation"):
            shapes = shapes[1:3]
        out = f // (2 * (shapes[0][-1] if shapes[0] else 1) or 1)
        return f, in_bytes + out * esize, prec
    if kind == "conv":
        r = _conv_flops(b, ts, concrete if isinstance(concrete, list) else [])
        if r is None:
            return None
        f, out_shape = r
        return f, in_bytes + _numel(out_shape) * esize, prec
    if kind == "attention":
        if len(ts) < 3 or len(ts[0][0]) < 2 or len(ts[1][0]) < 2:
            return None
        q, k, v = ts[0][0], ts[1][0], ts[2][0]
        lq, e, s, ev = q[-2], q[-1], k[-2], v[-1]
        bh = _numel(q[:-2])
        f = 2 * bh * lq * s * (e + ev)
        if "backward" in b:
            return f * 5 // 2, in_bytes, prec
        return f, in_bytes + bh * lq * ev * esize, prec
    if kind == "elementwise":
        if b in ("fill_", "zero_"):
            return 0, in_bytes, prec
        out = _numel(_broadcast([s for s, _ in ts]))
        return out, in_bytes + out * esize, prec
    if kind == "reduction":
        n = _numel(ts[0][0])
        return (5 * n if b in NORM else n), in_bytes, prec
    # copies: input read, output written (a cat's output is all of its inputs)
    return 0, 2 * in_bytes if b not in ("index_select", "gather", "index", "embedding") else in_bytes, prec
