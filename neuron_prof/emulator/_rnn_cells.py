"""Device kernels for PyTorch's fused RNN cells, which have no CPU kernel to run the host copy on.

For a device tensor (CUDA, XPU, PrivateUse1) PyTorch's GRU/LSTM code (nn.GRU, nn.LSTM, nn.GRUCell,
nn.LSTMCell: aten::gru, aten::lstm, aten::gru_cell, aten::lstm_cell) computes the gate matmuls and hands
the pointwise part to one fused op per time step; its autograd formula calls a fused backward op:

  _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias, hidden_bias) -> (hy, workspace)
  _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) -> 5 grads
  _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias, hidden_bias) -> (hy, cy, workspace)
  _thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias) -> 3 grads

Only CUDA registers kernels for them, and torch._decomp has no decomposition of them (torch 2.13/2.14),
so the emulator runs them as device ops with the kernels below: the math and the workspace layouts of
aten/src/ATen/native/cuda/RNN.cu (GRU workspace [r, z, n, hx, hn + b_hn], LSTM workspace the activated
gates [i, f, g, o]), written with the aten ops and the sigmoid/tanh backward formulas that
_thnn_differentiable_{gru,lstm}_cell_backward (the composite used under create_graph) uses. Half and
bfloat16 are computed in float32, as the CUDA kernels' accumulate type is. nn.RNN (tanh/relu) needs
none of this: its cell is a plain linear + activation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten
_sigmoid_backward = aten.sigmoid_backward.default
_tanh_backward = aten.tanh_backward.default
_LOWP = (torch.float16, torch.bfloat16)


def _acc(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.dtype in _LOWP else t


def _gates(
    input_gates: torch.Tensor,
    hidden_gates: torch.Tensor,
    input_bias: torch.Tensor | None,
    hidden_bias: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    ig, hg = _acc(input_gates), _acc(hidden_gates)
    if input_bias is not None:
        ig = ig + _acc(input_bias)
    if hidden_bias is not None:
        hg = hg + _acc(hidden_bias)
    return ig, hg


def gru_cell(
    input_gates: torch.Tensor,
    hidden_gates: torch.Tensor,
    hx: torch.Tensor,
    input_bias: torch.Tensor | None = None,
    hidden_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """aten::_thnn_fused_gru_cell: (hy, workspace (B, 5H))."""
    ig, hg = _gates(input_gates, hidden_gates, input_bias, hidden_bias)
    ir, ii, in_ = ig.chunk(3, 1)
    hr, hi, hn = hg.chunk(3, 1)
    h = _acc(hx)
    r = (ir + hr).sigmoid()
    z = (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (h - n)
    workspace = torch.cat((r, z, n, h, hn), 1)
    dt = hx.dtype
    return hy.to(dt), workspace.to(dt)


def gru_cell_backward(
    grad_hy: torch.Tensor, workspace: torch.Tensor, has_bias: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """aten::_thnn_fused_gru_cell_backward: grads of input_gates, hidden_gates, hx, input_bias, hidden_bias."""
    r, z, n, hx, hn = _acc(workspace).chunk(5, 1)
    go = _acc(grad_hy)
    grad_hx = go * z
    gz = _sigmoid_backward(go * (hx - n), z)
    gn = _tanh_backward(go * (1 - z), n)
    ghn = gn * r
    gr = _sigmoid_backward(gn * hn, r)
    dt = workspace.dtype
    grad_input_gates = torch.cat((gr, gz, gn), 1).to(dt)
    grad_hidden_gates = torch.cat((gr, gz, ghn), 1).to(dt)
    if not has_bias:
        return grad_input_gates, grad_hidden_gates, grad_hx.to(dt), None, None
    return (
        grad_input_gates,
        grad_hidden_gates,
        grad_hx.to(dt),
        grad_input_gates.sum(0),
        grad_hidden_gates.sum(0),
    )


def lstm_cell(
    input_gates: torch.Tensor,
    hidden_gates: torch.Tensor,
    cx: torch.Tensor,
    input_bias: torch.Tensor | None = None,
    hidden_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """aten::_thnn_fused_lstm_cell: (hy, cy, workspace (B, 4H))."""
    ig, hg = _gates(input_gates, hidden_gates, input_bias, hidden_bias)
    gi, gf, gg, go = (ig + hg).chunk(4, 1)
    i, f, g, o = gi.sigmoid(), gf.sigmoid(), gg.tanh(), go.sigmoid()
    cy = f * _acc(cx) + i * g
    hy = o * cy.tanh()
    dt = cx.dtype
    return hy.to(dt), cy.to(dt), torch.cat((i, f, g, o), 1).to(input_gates.dtype)


def lstm_cell_backward(
    grad_hy: torch.Tensor | None,
    grad_cy: torch.Tensor | None,
    cx: torch.Tensor,
    cy: torch.Tensor,
    workspace: torch.Tensor,
    has_bias: bool,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """aten::_thnn_fused_lstm_cell_backward_impl: grads of the gates (B, 4H), cx, and the bias (4H)."""
    if grad_hy is None and grad_cy is None:
        return None, None, None  # as the CUDA kernel and torch's meta kernel: nothing flows back
    i, f, g, o = _acc(workspace).chunk(4, 1)
    tcy = _acc(cy).tanh()
    if grad_hy is not None:
        gh = _acc(grad_hy)
        gc = _tanh_backward(gh * o, tcy)
        if grad_cy is not None:
            gc = gc + _acc(grad_cy)
        go = _sigmoid_backward(gh * tcy, o)
    else:
        assert grad_cy is not None
        gc = _acc(grad_cy)
        go = torch.zeros_like(o)
    gi = _sigmoid_backward(gc * g, i)
    gf = _sigmoid_backward(gc * _acc(cx), f)
    gg = _tanh_backward(gc * i, g)
    grad_gates = torch.cat((gi, gf, gg, go), 1).to(workspace.dtype)
    grad_cx = (gc * f).to(cx.dtype)
    return grad_gates, grad_cx, (grad_gates.sum(0) if has_bias else None)


KERNELS: dict[Any, Callable[..., Any]] = {
    aten._thnn_fused_gru_cell.default: gru_cell,
    aten._thnn_fused_gru_cell_backward.default: gru_cell_backward,
    aten._thnn_fused_lstm_cell.default: lstm_cell,
    aten._thnn_fused_lstm_cell_backward_impl.default: lstm_cell_backward,
}
"""Op overload -> the host kernel that computes it for the device."""
