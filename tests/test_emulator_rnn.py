"""Recurrent layers on the emulated device: nn.GRU, nn.LSTM, nn.GRUCell, nn.LSTMCell (whose fused cell ops
have no CPU kernel), nn.RNN and packed sequences train as on the CPU, and the fused cells run as device ops:
compiled on the first call of a signature, timed, listed as executed, never as fallbacks."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from neuron_prof import emulator
from neuron_prof.emulator import _rnn_cells

# The device is registered before the session's first backward (tests/conftest.py); see the marker.
pytestmark = pytest.mark.emulator_inprocess

aten = torch.ops.aten
GRU_OPS = {"aten::_thnn_fused_gru_cell", "aten::_thnn_fused_gru_cell_backward"}
LSTM_OPS = {"aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl"}


@pytest.fixture(scope="module")
def tnx(emulated_torch_neuronx):  # type: ignore[no-untyped-def]
    return emulated_torch_neuronx


@pytest.fixture
def fresh(tnx):  # type: ignore[no-untyped-def]
    """The fast config with op tracking cleared; the device drained afterwards."""
    emulator.reconfigure(emulator.EmulatorConfig.fast())
    tnx.clear_op_tracking()
    yield tnx
    torch.neuron.synchronize()


def _out(o: Any) -> torch.Tensor:
    return o[0] if isinstance(o, tuple) else o


def _train(
    model: torch.nn.Module, x: torch.Tensor, lengths: torch.Tensor | None = None, steps: int = 3
) -> tuple[list[float], list[list[torch.Tensor]]]:
    """`steps` AdamW steps; the losses and each step's gradients (on the host)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch_first = getattr(model, "batch_first", False)
    losses, grads = [], []
    for _ in range(steps):
        opt.zero_grad()
        inp: Any = x
        if lengths is not None:
            inp = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False)
        out = _out(model(inp))
        if lengths is not None:
            out = pad_packed_sequence(out, batch_first=batch_first)[0]
        # A loss with O(1) gradients: with near-zero gradients Adam divides rounding noise by eps.
        loss = (out**2).mean() + out.sum(-1).abs().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        grads.append([p.grad.to("cpu") for p in model.parameters()])  # type: ignore[union-attr]
    return losses, grads


def _assert_trains_like_cpu(
    make: Callable[[], torch.nn.Module], x: torch.Tensor, lengths: Any = None
) -> None:
    torch.manual_seed(0)
    cpu_model = make()
    dev_model = copy.deepcopy(cpu_model).to("neuron")
    assert all(p.device.type == "neuron" for p in dev_model.parameters())
    cpu_losses, cpu_grads = _train(cpu_model, x, lengths)
    dev_losses, dev_grads = _train(dev_model, x.to("neuron"), lengths)
    assert dev_losses == pytest.approx(cpu_losses, rel=1e-5, abs=1e-6)
    names = [n for n, _ in cpu_model.named_parameters()]
    for step, (gc, gd) in enumerate(zip(cpu_grads, dev_grads, strict=True)):
        for name, a, b in zip(names, gc, gd, strict=True):
            torch.testing.assert_close(
                b, a, rtol=1e-4, atol=1e-5, msg=lambda m, s=step, n=name: f"step {s} {n}: {m}"
            )
    for (name, p_cpu), p_dev in zip(cpu_model.named_parameters(), dev_model.parameters(), strict=True):
        torch.testing.assert_close(
            p_dev.to("cpu"), p_cpu, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}"
        )


@pytest.mark.parametrize(
    ("make", "ops"),
    [
        pytest.param(lambda: torch.nn.GRU(6, 8, 2, batch_first=True, bidirectional=True), GRU_OPS, id="gru"),
        pytest.param(lambda: torch.nn.LSTM(6, 8, 2, batch_first=True), LSTM_OPS, id="lstm"),
    ],
)
def test_gru_and_lstm_train_as_on_cpu_with_the_fused_cells_on_the_device(fresh, make, ops) -> None:  # type: ignore[no-untyped-def]
    _assert_trains_like_cpu(make, torch.randn(4, 5, 6))
    executed = set(fresh.get_executed_ops())
    assert ops <= executed
    assert {"aten::mm"} <= executed  # the gate matmuls stay ordinary device ops
    assert not ops & set(fresh.get_fallback_ops())
    assert fresh.get_fallback_ops() == []


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: torch.nn.LSTM(6, 8, 2, bidirectional=True, proj_size=3), id="lstm_bidir_proj"),
        pytest.param(lambda: torch.nn.GRU(6, 8, 1, bias=False), id="gru_no_bias"),
        pytest.param(lambda: torch.nn.LSTM(6, 8, 1, bias=False), id="lstm_no_bias"),
        pytest.param(lambda: torch.nn.RNN(6, 8, 2, bidirectional=True), id="rnn_tanh_bidir"),
        pytest.param(lambda: torch.nn.RNN(6, 8, 2, nonlinearity="relu"), id="rnn_relu"),
    ],
)
def test_other_recurrent_layers_train_as_on_cpu(fresh, make) -> None:  # type: ignore[no-untyped-def]
    _assert_trains_like_cpu(make, torch.randn(5, 4, 6))
    assert fresh.get_fallback_ops() == []


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: torch.nn.GRU(6, 8, 2, batch_first=True, bidirectional=True), id="gru"),
        pytest.param(lambda: torch.nn.LSTM(6, 8, 1, batch_first=True, bidirectional=True), id="lstm"),
    ],
)
def test_packed_sequences_train_as_on_cpu(fresh, make) -> None:  # type: ignore[no-untyped-def]
    _assert_trains_like_cpu(make, torch.randn(4, 5, 6), lengths=torch.tensor([3, 5, 1, 4]))
    packed = pack_padded_sequence(
        torch.randn(4, 5, 6, device="neuron"), torch.tensor([5, 4, 2, 1]), batch_first=True
    )
    assert packed.data.device.type == "neuron"
    assert packed.batch_sizes.device.type == "cpu" and packed.batch_sizes.tolist() == [4, 3, 2, 2, 1]
    assert "aten::_pack_padded_sequence" in fresh.get_executed_ops()
    assert fresh.get_fallback_ops() == []


@pytest.mark.parametrize(("cls", "ops"), [(torch.nn.GRUCell, GRU_OPS), (torch.nn.LSTMCell, LSTM_OPS)])
def test_cells_forward_and_backward_match_cpu(fresh, cls, ops) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(2)
    cpu_cell = cls(6, 8)
    dev_cell = copy.deepcopy(cpu_cell).to("neuron")
    x, h = torch.randn(4, 6), torch.randn(4, 8)
    state = (h, torch.randn(4, 8)) if cls is torch.nn.LSTMCell else h

    def run(cell: torch.nn.Module, x: torch.Tensor, state: Any) -> tuple[Any, list[torch.Tensor]]:
        x = x.clone().requires_grad_()
        state = (
            tuple(s.clone().requires_grad_() for s in state)
            if isinstance(state, tuple)
            else state.clone().requires_grad_()
        )
        out = cell(x, state)
        outs = out if isinstance(out, tuple) else (out,)
        sum(((o * (i + 1)) ** 2).sum() for i, o in enumerate(outs)).backward()  # type: ignore[union-attr]
        leaves = [x, *(state if isinstance(state, tuple) else (state,))]
        return [o.detach() for o in outs], [t.grad for t in leaves] + [p.grad for p in cell.parameters()]

    want_out, want_grads = run(cpu_cell, x, state)
    dev_state = tuple(s.to("neuron") for s in state) if isinstance(state, tuple) else state.to("neuron")
    got_out, got_grads = run(dev_cell, x.to("neuron"), dev_state)
    for a, b in zip(want_out, got_out, strict=True):
        assert b.device.type == "neuron"
        torch.testing.assert_close(b.to("cpu"), a, rtol=1e-5, atol=1e-6)
    for a, b in zip(want_grads, got_grads, strict=True):
        torch.testing.assert_close(b.to("cpu"), a, rtol=1e-4, atol=1e-5)
    assert ops <= set(fresh.get_executed_ops()) and fresh.get_fallback_ops() == []

    # create_graph: the backward itself is differentiable (PyTorch's composite cell backward, on the device)
    xc, xd = x.clone().requires_grad_(), x.to("neuron").requires_grad_()
    for cell, xx in ((cpu_cell, xc), (dev_cell, xd)):
        (g,) = torch.autograd.grad((_out(cell(xx)) ** 2).sum(), xx, create_graph=True)
        (g**2).sum().backward()
    torch.testing.assert_close(xd.grad.to("cpu"), xc.grad, rtol=1e-4, atol=1e-5)  # type: ignore[union-attr]


def test_lstm_cell_backward_when_only_the_cell_state_is_used(fresh) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(3)
    cpu_cell = torch.nn.LSTMCell(5, 7)
    dev_cell = copy.deepcopy(cpu_cell).to("neuron")
    x = torch.randn(3, 5)
    cpu_cell(x)[1].pow(2).sum().backward()
    dev_cell(x.to("neuron"))[1].pow(2).sum().backward()
    for p_cpu, p_dev in zip(cpu_cell.parameters(), dev_cell.parameters(), strict=True):
        torch.testing.assert_close(p_dev.grad.to("cpu"), p_cpu.grad, rtol=1e-4, atol=1e-5)  # type: ignore[union-attr]


def _cache_counts(tnx: Any, names: set[str]) -> dict[str, tuple[int, int]]:
    """Per op name: (cache entries, total accesses) in the emulated NEFF cache."""
    out = {n: (0, 0) for n in names}
    for e in tnx._C._get_compilation_cache_entries():
        name = e["cache_key"].rsplit("_", 1)[0]
        if name in out:
            k, a = out[name]
            out[name] = (k + 1, a + e["access_count"])
    return out


@pytest.mark.parametrize(("cls", "ops"), [(torch.nn.GRUCell, GRU_OPS), (torch.nn.LSTMCell, LSTM_OPS)])
def test_first_call_of_a_cell_signature_compiles_and_the_second_does_not(fresh, cls, ops) -> None:  # type: ignore[no-untyped-def]
    gt = emulator.ground_truth()
    cell = cls(7, 13).to("neuron")  # sizes no other test uses: new signatures
    n_exec = len(gt.records("exec"))

    def step() -> None:
        _out(cell(torch.randn(3, 7, device="neuron"))).sum().backward()
        torch.neuron.synchronize()

    before = _cache_counts(fresh, ops)
    step()
    first = _cache_counts(fresh, ops)
    step()
    second = _cache_counts(fresh, ops)
    for op in ops:
        assert first[op][0] == before[op][0] + 1, (op, before[op], first[op])  # one new NEFF per op
        assert second[op][0] == first[op][0], (op, first[op], second[op])  # ...reused by the second call
        assert second[op][1] == first[op][1] + 1
    # each call is timed by the cost model as one device execution of the fused op
    execs = [r for r in gt.records("exec")[n_exec:] if r["name"] in ops]
    assert sorted(r["name"] for r in execs) == sorted(list(ops) * 2)
    assert all(r["device_end_ns"] > r["device_start_ns"] for r in execs), execs[0]


@pytest.mark.parametrize("cls", [torch.nn.GRUCell, torch.nn.LSTMCell])
def test_cells_compile_with_the_neuron_backend_while_the_structured_trace_is_on(fresh, cls) -> None:  # type: ignore[no-untyped-def]
    """torch.compile(backend="neuron") of a cell, with a handler on "torch.__trace" (the structured trace a
    profiler may read): AOTAutograd logs the traced device tensors' reprs, which must not read values."""
    import logging

    import torch._dynamo

    saved = {
        k: getattr(torch._dynamo.config, k) for k in ("automatic_dynamic_shapes", "assume_static_by_default")
    }
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: None  # type: ignore[method-assign]
    trace_log = logging.getLogger("torch.__trace")
    trace_log.addHandler(handler)
    try:
        torch._dynamo.reset()
        fresh.reset_dynamo_metrics()
        torch.manual_seed(7)
        cpu_cell = cls(4, 6)
        dev_cell = copy.deepcopy(cpu_cell).to("neuron")
        x = torch.randn(3, 4)
        y = _out(torch.compile(dev_cell, backend="neuron", dynamic=False)(x.to("neuron")))
        y.sum().backward()
        _out(cpu_cell(x)).sum().backward()
        assert len(fresh.get_dynamo_metrics()) >= 1  # compiled by the backend, not left to eager
        torch.testing.assert_close(y.to("cpu"), _out(cpu_cell(x)), rtol=1e-5, atol=1e-6)
        for p_cpu, p_dev in zip(cpu_cell.parameters(), dev_cell.parameters(), strict=True):
            torch.testing.assert_close(p_dev.grad.to("cpu"), p_cpu.grad, rtol=1e-4, atol=1e-5)  # type: ignore[union-attr]
    finally:
        trace_log.removeHandler(handler)
        torch._dynamo.reset()
        for k, v in saved.items():
            setattr(torch._dynamo.config, k, v)


# -- the kernels against PyTorch's own composites, on the CPU --------------------------------------------


def _gates(n: int, b: int = 4, h: int = 5, i: int = 3) -> tuple[torch.Tensor, ...]:
    x, hx = torch.randn(b, i), torch.randn(b, h)
    w_ih, w_hh, b_ih, b_hh = (
        torch.randn(n * h, i),
        torch.randn(n * h, h),
        torch.randn(n * h),
        torch.randn(n * h),
    )
    return x, hx, w_ih, w_hh, b_ih, b_hh


@pytest.mark.parametrize("bias", [True, False])
def test_gru_kernels_match_torch_cell_and_its_composite_backward(bias: bool) -> None:
    torch.manual_seed(4)
    x, hx, w_ih, w_hh, b_ih, b_hh = _gates(3)
    bi, bh = (b_ih, b_hh) if bias else (None, None)
    ig, hg = x @ w_ih.t(), hx @ w_hh.t()
    hy, ws = _rnn_cells.gru_cell(ig, hg, hx, bi, bh)
    torch.testing.assert_close(hy, torch.gru_cell(x, hx, w_ih, w_hh, bi, bh))
    assert ws.shape == (4, 25)
    grad = torch.randn(4, 5)
    got = _rnn_cells.gru_cell_backward(grad, ws, bias)
    want = aten._thnn_differentiable_gru_cell_backward(grad, ig, hg, hx, bi, bh)
    assert len(got) == 5
    for g, w in zip(got, want, strict=True):
        if not bias and g is None:
            continue
        torch.testing.assert_close(g, w)
    assert (got[3] is None) == (not bias)


@pytest.mark.parametrize("grads", ["both", "hy", "cy"])
def test_lstm_kernels_match_torch_cell_and_its_composite_backward(grads: str) -> None:
    torch.manual_seed(5)
    x, hx, w_ih, w_hh, b_ih, b_hh = _gates(4)
    cx = torch.randn(4, 5)
    ig, hg = x @ w_ih.t(), hx @ w_hh.t()
    hy, cy, ws = _rnn_cells.lstm_cell(ig, hg, cx, b_ih, b_hh)
    want_hy, want_cy = torch.lstm_cell(x, (hx, cx), w_ih, w_hh, b_ih, b_hh)
    torch.testing.assert_close(hy, want_hy)
    torch.testing.assert_close(cy, want_cy)
    assert ws.shape == (4, 20)
    ghy = torch.randn(4, 5) if grads in ("both", "hy") else None
    gcy = torch.randn(4, 5) if grads in ("both", "cy") else None
    g_gates, g_cx, g_bias = _rnn_cells.lstm_cell_backward(ghy, gcy, cx, cy, ws, True)
    w_gates, _, w_cx, w_bias, _ = aten._thnn_differentiable_lstm_cell_backward(
        ghy, gcy, ig, hg, b_ih, b_hh, cx, cy
    )
    torch.testing.assert_close(g_gates, w_gates)
    torch.testing.assert_close(g_cx, w_cx)
    torch.testing.assert_close(g_bias, w_bias)
    assert _rnn_cells.lstm_cell_backward(None, None, cx, cy, ws, True) == (None, None, None)


def test_bfloat16_cells_compute_in_float32_and_keep_their_dtype() -> None:
    torch.manual_seed(6)
    x, hx, w_ih, w_hh, b_ih, b_hh = _gates(3, b=16, h=32)
    bf = [t.bfloat16() for t in (x @ w_ih.t(), hx @ w_hh.t(), hx, b_ih, b_hh)]
    got, ws = _rnn_cells.gru_cell(*bf)
    assert got.dtype == ws.dtype == torch.bfloat16
    want, want_ws = _rnn_cells.gru_cell(*[t.float() for t in bf])  # float32 math, rounded once at the end
    assert torch.equal(got, want.bfloat16()) and torch.equal(ws, want_ws.bfloat16())
    grad = torch.randn(16, 32).bfloat16()
    got_g = _rnn_cells.gru_cell_backward(grad, ws, True)
    want_g = _rnn_cells.gru_cell_backward(grad.float(), ws.float(), True)
    assert all(g.dtype == torch.bfloat16 for g in got_g)
    for g, w in zip(got_g[:3], want_g[:3], strict=True):  # the gates' and hx's grads: exact
        assert torch.equal(g, w.bfloat16())
    for g, w in zip(got_g[3:], want_g[3:], strict=True):  # bias grads sum the rounded gate grads (as CUDA)
        torch.testing.assert_close(g.float(), w, rtol=2e-2, atol=2e-2)
