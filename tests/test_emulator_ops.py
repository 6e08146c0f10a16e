"""A sweep of everyday ops: on the emulated device they give the CPU's numbers (and stay on the device)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from neuron_prof import emulator

torch.manual_seed(0)
X, Y, IDX, IMG = torch.randn(4, 6), torch.randn(4, 6), torch.tensor([0, 2, 3]), torch.randn(2, 3, 8, 8)

CASES: dict[str, Any] = {
    "index": lambda x, y, idx, img: x[idx],
    "index_put": lambda x, y, idx, img: x.clone().index_put_((idx,), torch.ones(6, device=x.device)),
    "bool_mask": lambda x, y, idx, img: x[x > 0],
    "masked_fill": lambda x, y, idx, img: x.masked_fill(x > 0, 0.5),
    "where": lambda x, y, idx, img: torch.where(x > 0, x, y),
    "scatter_add": lambda x, y, idx, img: torch.zeros(4, 6, device=x.device).scatter_add_(
        0, torch.zeros(4, 6, dtype=torch.long, device=x.device), y
    ),
    "gather": lambda x, y, idx, img: x.gather(1, torch.zeros(4, 2, dtype=torch.long, device=x.device)),
    "cat_stack": lambda x, y, idx, img: torch.cat([x, torch.stack([x, y]).sum(0)], 1),
    "embedding": lambda x, y, idx, img: F.embedding(idx, x),
    "cross_entropy": lambda x, y, idx, img: F.cross_entropy(x, torch.tensor([1, 0, 5, 2], device=x.device)),
    "layer_norm": lambda x, y, idx, img: F.layer_norm(x, (6,)),
    "softmax_topk": lambda x, y, idx, img: torch.topk(x.softmax(-1), 2, dim=-1).values,
    "cumsum": lambda x, y, idx, img: x.cumsum(1),
    "einsum": lambda x, y, idx, img: torch.einsum("ij,kj->ik", x, y),
    "conv_pool": lambda x, y, idx, img: F.max_pool2d(
        F.conv2d(img, torch.ones(4, 3, 3, 3, device=img.device)), 2
    ),
    "batchnorm_train": lambda x, y, idx, img: F.batch_norm(
        img, torch.zeros(3, device=img.device), torch.ones(3, device=img.device), training=True
    ),
    "interpolate": lambda x, y, idx, img: F.interpolate(img, scale_factor=2, mode="bilinear"),
    "pad": lambda x, y, idx, img: F.pad(x, (1, 2)),
    "argmax_eq": lambda x, y, idx, img: (x.argmax(1) == y.argmax(1)).float(),
    "to_dtype": lambda x, y, idx, img: x.to(torch.bfloat16).to(torch.float32),
    "transpose_contig": lambda x, y, idx, img: x.t().contiguous().view(-1),
    "repeat_expand": lambda x, y, idx, img: x[:, :1].expand(4, 3).repeat(2, 1),
    "nonzero": lambda x, y, idx, img: (x > 0).nonzero().float(),
    "inplace_view": lambda x, y, idx, img: (lambda t: (t[:, 1].mul_(3), t)[1])(x.clone()),
    "clamp_pow": lambda x, y, idx, img: x.clamp(-0.5, 0.5).pow(2),
    "min_max": lambda x, y, idx, img: torch.stack([x.max(), x.min(), x.mean(), x.std()]),
    "chunk_split": lambda x, y, idx, img: torch.cat(list(x.chunk(3, 1)), 0),
    "tril_triu": lambda x, y, idx, img: torch.tril(x) + torch.triu(y),
    "full_like": lambda x, y, idx, img: (
        torch.full_like(x, 2.0) + torch.zeros_like(y) + torch.ones(4, 6, device=x.device)
    ),
    "linspace": lambda x, y, idx, img: torch.linspace(0, 1, 5, device=x.device),
    "randperm_shape": lambda x, y, idx, img: torch.randperm(7, device=x.device).sort().values.float(),
    "dropout_eval": lambda x, y, idx, img: F.dropout(x, 0.5, training=False),
    "gelu_silu": lambda x, y, idx, img: F.gelu(x) + F.silu(y),
    "sdpa": lambda x, y, idx, img: F.scaled_dot_product_attention(
        x[None, None], y[None, None], y[None, None], is_causal=True
    ),
    "amax_logsumexp": lambda x, y, idx, img: torch.logsumexp(x, 1) + x.amax(1),
    "flip_roll": lambda x, y, idx, img: torch.roll(torch.flip(x, [1]), 2, 0),
}


# The device is registered before the session's first backward (tests/conftest.py); see the marker.
pytestmark = pytest.mark.emulator_inprocess


@pytest.fixture(scope="module")
def tnx(emulated_torch_neuronx):  # type: ignore[no-untyped-def]
    return emulated_torch_neuronx


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_cpu(tnx, name: str) -> None:  # type: ignore[no-untyped-def]
    f = CASES[name]
    torch.manual_seed(1)
    want = f(X, Y, IDX, IMG)
    torch.manual_seed(1)
    got = f(X.to("neuron"), Y.to("neuron"), IDX.to("neuron"), IMG.to("neuron"))
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)


def test_gradients_through_indexing_norm_and_where_match_cpu(tnx) -> None:  # type: ignore[no-untyped-def]
    def loss(x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return (F.layer_norm(x, (6,)) * y).sum() + x[idx].pow(2).sum() + torch.where(x > 0, x, 0).sum()

    xd = X.to("neuron").requires_grad_()
    loss(xd, Y.to("neuron"), IDX.to("neuron")).backward()
    xc = X.clone().requires_grad_()
    loss(xc, Y, IDX).backward()
    assert xd.grad is not None and xc.grad is not None
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


def test_in_place_shape_changes_update_the_device_tensor(tnx) -> None:  # type: ignore[no-untyped-def]
    t = torch.arange(6.0, device="neuron").reshape(2, 3)
    assert t.unsqueeze_(0).shape == (1, 2, 3) and t.squeeze_(0).shape == (2, 3)
    assert t.t_().shape == (3, 2) and t.stride() == (1, 3)
    assert t.cpu().tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    out = torch.empty(2, 3, device="neuron")
    assert torch.add(torch.ones(2, 3, device="neuron"), 1, out=out) is out and out.sum().item() == 12.0
    if emulator.device_impl() == "subclass":
        with pytest.raises(RuntimeError, match="cannot grow in place"):
            torch.ones(2, device="neuron").resize_(8)
    else:  # the extension's device storage grows as a C++ device's does, keeping its values
        g = torch.ones(2, device="neuron").resize_(8)
        assert g.shape == (8,) and g[:2].cpu().tolist() == [1.0, 1.0]


def test_dataloader_with_pin_memory_still_works(tnx) -> None:  # type: ignore[no-untyped-def]
    ds = torch.utils.data.TensorDataset(torch.arange(8.0).reshape(4, 2))
    batches = [
        b.to("neuron", non_blocking=True) for (b,) in torch.utils.data.DataLoader(ds, 2, pin_memory=True)
    ]
    assert [b.device.type for b in batches] == ["neuron", "neuron"]
    assert torch.cat(batches).sum().item() == 28.0


def test_the_float64_warning_never_names_a_library_frame(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 34: a float64 op on autograd's thread (a backward op) has no line of the user's code on its stack;
    its warning named neuron_prof/emulator/_dispatch.py. It says it came from the backward pass instead, and a
    forward op's warning names the user's line."""
    import subprocess
    import sys

    script = tmp_path / "work.py"
    script.write_text(
        "import torch\n"
        "from neuron_prof import emulator\n"
        "emulator.enable(emulator.EmulatorConfig.fast())\n"
        "x = torch.randn(4, device='neuron', requires_grad=True)\n"
        "y = x.double().tanh().sum()  # FORWARD\n"
        "y.backward()\n")
    r = subprocess.run([sys.executable, "-W", "always", str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    warned = [ln for ln in r.stderr.splitlines() if "float64 is not supported" in ln]
    assert warned and not [ln for ln in warned if "neuron_prof" in ln or "site-packages" in ln], warned
    assert any(ln.startswith(f"{script}:5:") for ln in warned), warned
    assert any(ln.startswith("<backward>:0:") and "tanh_backward" in ln for ln in warned), warned
