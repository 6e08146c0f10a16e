"""Idioms users write, each run on a device given by name ("cpu" or "neuron"): fixture module of
tests/test_emulator_idioms.py.

Each idiom is a function `f(dev) -> value` that runs the user's statements on device `dev` and returns plain
Python values (numbers, strings, bools, lists) that must be the same on every device: device-specific text
(", device='neuron:0'") is normalised away by the idiom itself, and random numbers are compared by
reproducibility, not value. `python -m tests._idioms BACKEND OUT [NAME,NAME...]` runs the idioms (default: all) in
order, in one process (BACKEND: see enable_device), and appends one JSON line per
idiom to OUT as soon as it finishes, so a crash (a segfault) loses only the idiom that was running.
"""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

IDIOMS: dict[str, Callable[[str], Any]] = {}


def idiom(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    IDIOMS[fn.__name__] = fn
    return fn


def vals(t: torch.Tensor, nd: int = 4) -> Any:
    """A tensor's values as nested lists rounded to `nd` decimals (read on the host)."""
    v = t.detach().cpu().tolist()
    return _round(v, nd)


def _round(v: Any, nd: int) -> Any:
    if isinstance(v, float):
        return round(v, nd)
    if isinstance(v, list):
        return [_round(x, nd) for x in v]
    return v


def nodev(s: str, dev: str) -> str:
    """`s` without the device text a device tensor's repr/str adds (", device='neuron:0'")."""
    return s.replace(f", device='{dev}:0'", "")


def on(t: torch.Tensor, dev: str) -> bool:
    """The tensor lives on device `dev`."""
    return t.device.type == dev


def mlp(dev: str) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev)


# ---------------------------------------------------------------- printing and formatting


@idiom
def format_float_scalar(dev: str) -> Any:
    loss = torch.tensor(1.234567, device=dev)
    return [f"loss {loss:.4f}", f"{loss:>10.2e}", "{:.3f}".format(loss), f"{loss:.1%}"]


@idiom
def format_int_scalar(dev: str) -> Any:
    n = torch.tensor(42, device=dev)
    return [f"{n:d}", f"{n:>5}", f"{n:,}"]


@idiom
def format_no_spec(dev: str) -> Any:
    t = torch.tensor([1.5, 2.0], device=dev)
    s = torch.tensor(3.0, device=dev)
    return [nodev(f"{t}", dev), nodev(f"{s}", dev), nodev(f"{s!r}", dev)]


@idiom
def print_tensor(dev: str) -> Any:
    buf = io.StringIO()
    t = torch.arange(6, dtype=torch.float32, device=dev).reshape(2, 3)
    print(t, file=buf)
    print("x =", t[0], file=buf)
    return [nodev(buf.getvalue(), dev), (f"device='{dev}:0'" in buf.getvalue()) == (dev != "cpu")]


@idiom
def repr_autograd(dev: str) -> Any:
    w = torch.ones(2, device=dev, requires_grad=True)
    y = w * 2
    return [nodev(repr(w), dev), nodev(repr(y), dev), nodev(repr(y.detach()), dev)]


@idiom
def format_large_tensor(dev: str) -> Any:
    t = torch.arange(2000, dtype=torch.float32, device=dev)
    return nodev(str(t), dev)


# ---------------------------------------------------------------- the tensor's type


@idiom
def type_is_tensor(dev: str) -> Any:
    t = torch.zeros(2, device=dev)
    return [type(t) is torch.Tensor, type(t).__name__, type(t * 2) is torch.Tensor]


@idiom
def isinstance_checks(dev: str) -> Any:
    m = mlp(dev)
    p = next(m.parameters())
    t = torch.zeros(2, device=dev)
    return [isinstance(t, torch.Tensor), isinstance(p, nn.Parameter), isinstance(p, torch.Tensor),
            torch.is_tensor(t), isinstance(p.data, torch.Tensor), isinstance(t * 2, torch.Tensor)]


@idiom
def exact_parameter_type(dev: str) -> Any:
    m = mlp(dev)
    p = next(m.parameters())
    return [type(p) is nn.Parameter, type(p).__name__, type(p.data) is torch.Tensor,
            type(copy.deepcopy(m)[0].weight) is nn.Parameter]


@idiom
def tensor_type_string(dev: str) -> Any:
    t = torch.zeros(2, device=dev)
    want = "torch.FloatTensor" if dev == "cpu" else f"torch.{dev}.FloatTensor"
    return [t.type() == want, t.is_floating_point(), t.dtype is torch.float32]


# ---------------------------------------------------------------- host values


@idiom
def item_tolist_float(dev: str) -> Any:
    t = torch.tensor([[1.5, 2.0], [3.0, 4.25]], device=dev)
    return [t.sum().item(), t.tolist(), t[0, 1].item(), float(t[1, 1]), int(t[1, 0]), bool(t[0, 0] > 1)]


@idiom
def numpy_error_then_cpu(dev: str) -> Any:
    t = torch.tensor([1.0, 2.0], device=dev)
    try:
        t.numpy()
        err = "none"
    except TypeError as e:
        err = "TypeError: use .cpu()" if "Tensor.cpu()" in str(e) else f"TypeError: {e}"
    want = "none" if dev == "cpu" else "TypeError: use .cpu()"
    return [err == want, t.cpu().numpy().tolist(), t.detach().cpu().numpy().dtype.name]


@idiom
def python_control_flow(dev: str) -> Any:
    t = torch.tensor([1.0, -2.0, 3.0], device=dev)
    out = []
    if t.sum() > 0:
        out.append("pos")
    while t.max() > 0.5:
        t = t / 2
    out.append(round(t.max().item(), 4))
    out.append(sum(torch.ones(3, device=dev)).item())  # the builtin sum over a tensor's rows
    out.append([round(float(v), 4) for v in t])  # iterating a device tensor
    return out


# ---------------------------------------------------------------- construction, indexing, views


@idiom
def factories(dev: str) -> Any:
    a = torch.arange(5, device=dev)
    b = torch.linspace(0, 1, 5, device=dev)
    c = torch.eye(3, device=dev)
    d = torch.full((2, 2), 7.0, device=dev)
    e = torch.zeros_like(d)
    f = d.new_tensor([1, 2])
    g = d.new_zeros(3)
    h = torch.tensor([[1, 2], [3, 4]], device=dev)
    return [vals(x) for x in (a, b, c, d, e, f, g, h)] + [all(on(x, dev) for x in (a, b, c, d, e, f, g, h))]


@idiom
def where_and_masks(dev: str) -> Any:
    x = torch.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], device=dev)
    y = torch.where(x > 0, x, torch.zeros_like(x))
    z = torch.where(x > 0, x, 0.0)
    idx = torch.where(x < 0)
    sel = x[x > 0]
    x2 = x.clone()
    x2[x2 < 0] = 0
    nz = (x > 0).nonzero()
    return [vals(y), vals(z), [vals(i) for i in idx], vals(sel), vals(x2), vals(nz)]


@idiom
def fancy_indexing(dev: str) -> Any:
    x = torch.arange(12, dtype=torch.float32, device=dev).reshape(3, 4)
    i = torch.tensor([2, 0], device=dev)
    a = x[i]
    b = x[:, 1:3]
    c = x[..., -1]
    d = x[i, i + 1]
    x[0, :] = -1
    x[:, 0] += 10
    x[1] = torch.tensor([5.0, 6.0, 7.0, 8.0], device=dev)
    return [vals(a), vals(b), vals(c), vals(d), vals(x)]


@idiom
def inplace_on_views(dev: str) -> Any:
    x = torch.zeros(4, 4, device=dev)
    x[1].add_(1)
    x[:, 2] = 5
    v = x.view(16)
    v[0] = 7
    col = x.t()[3]
    col.fill_(2)
    x.diagonal().mul_(3)
    flat = x.reshape(-1)
    return [vals(x), vals(flat), x.t().is_contiguous(), x.t().stride(), x[:, 1:].storage_offset()]


@idiom
def aliasing_checks(dev: str) -> Any:
    x = torch.zeros(4, 4, device=dev)
    v = x.view(16)
    c = x.clone()
    return [v.data_ptr() == x.data_ptr(), c.data_ptr() != x.data_ptr(), x[1:].data_ptr() != x.data_ptr(),
            v._base is x, x.untyped_storage().nbytes(), x.element_size(), x.nbytes]


@idiom
def dtype_conversions(dev: str) -> Any:
    t = torch.tensor([1.5, 2.25, -3.75], device=dev)
    return [vals(t.half()), str(t.half().dtype), vals(t.to(torch.bfloat16)), vals(t.int()), vals(t.long()),
            vals(t.bool()), str(t.to(torch.int8).dtype), vals(t.double().float())]


@idiom
def reductions_sort(dev: str) -> Any:
    torch.manual_seed(0)
    x = torch.randn(4, 5).to(dev)
    s, i = torch.sort(x, dim=1)
    tv, ti = x.topk(2)
    return [vals(s), vals(i), vals(tv), vals(ti), vals(x.argmax(1)), vals(x.mean(0)), vals(torch.unique(i)),
            vals(x.max(dim=1).values), vals(x.cumsum(1))]


@idiom
def cat_stack_split(dev: str) -> Any:
    a = torch.ones(2, 3, device=dev)
    b = torch.zeros(2, 3, device=dev)
    parts = torch.cat([a, b], 0).chunk(2)
    return [vals(torch.cat([a, b], 1)), vals(torch.stack([a, b])), [vals(p) for p in parts],
            [p.shape[0] for p in torch.ones(5, device=dev).split(2)]]


# ---------------------------------------------------------------- autograd


@idiom
def requires_grad_backward(dev: str) -> Any:
    t = torch.tensor([1.0, 2.0, 3.0], device=dev).requires_grad_()
    (t * t).sum().backward()
    g1 = vals(t.grad)
    t.grad.zero_()
    (t ** 3).mean().backward()
    return [g1, vals(t.grad), t.is_leaf, t.grad.device.type == dev]


@idiom
def no_grad_inference_mode(dev: str) -> Any:
    w = torch.ones(3, device=dev, requires_grad=True)
    with torch.no_grad():
        a = w * 2
    with torch.inference_mode():
        b = w * 3
    c = w.detach()
    return [a.requires_grad, b.requires_grad, b.is_inference(), c.requires_grad, vals(a), vals(b),
            torch.is_grad_enabled()]


@idiom
def hooks(dev: str) -> Any:
    m = mlp(dev)
    seen: list[Any] = []
    h1 = m[0].register_forward_hook(lambda mod, i, o: seen.append(("fwd", tuple(o.shape))))
    h2 = m[2].register_full_backward_hook(lambda mod, gi, go: seen.append(("bwd", tuple(go[0].shape))))
    x = torch.ones(2, 6, device=dev, requires_grad=True)
    x.register_hook(lambda g: seen.append(("grad", vals(g.sum(), 3))))
    m(x).sum().backward()
    h1.remove()
    h2.remove()
    m(x)
    return [[list(s) if isinstance(s, tuple) else s for s in seen]]


@idiom
def clip_grad_norm(dev: str) -> Any:
    m = mlp(dev)
    m(torch.ones(4, 6, device=dev)).pow(2).sum().backward()
    total = nn.utils.clip_grad_norm_(m.parameters(), max_norm=0.5)
    after = torch.sqrt(sum(p.grad.pow(2).sum() for p in m.parameters()))
    nn.utils.clip_grad_value_(m.parameters(), 0.01)
    return [vals(total), vals(after), vals(m[0].bias.grad)]


@idiom
def checkpointing(dev: str) -> Any:
    from torch.utils.checkpoint import checkpoint

    m = mlp(dev)
    x = torch.ones(2, 6, device=dev, requires_grad=True)
    checkpoint(m, x, use_reentrant=False).sum().backward()
    return vals(x.grad)


# ---------------------------------------------------------------- modules, optimizers, training


@idiom
def module_to_round_trip(dev: str) -> Any:
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    before = vals(m.weight)
    m.to(dev)
    on_dev = [on(p, dev) for p in m.parameters()] + [isinstance(m.weight, nn.Parameter)]
    m.to("cpu")
    m.to(dev)
    return [before == vals(m.weight), on_dev, m.weight.requires_grad, on(m.weight, dev)]


@idiom
def train_loop_cross_entropy(dev: str) -> Any:
    m = mlp(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(1)
    x = torch.randn(16, 6).to(dev)
    y = torch.randint(0, 3, (16,)).to(dev)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 4))
    return losses


@idiom
def optimizer_state(dev: str) -> Any:
    m = mlp(dev)
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    m(torch.ones(2, 6, device=dev)).sum().backward()
    opt.step()
    st = opt.state[m[0].weight]
    sd = opt.state_dict()
    opt2 = torch.optim.Adam(m.parameters(), lr=0.01)
    opt2.load_state_dict(sd)
    st2 = opt2.state[m[0].weight]
    return [sorted(st), st["exp_avg"].device.type == dev, vals(st["exp_avg"].sum()), vals(st["step"]),
            st2["exp_avg"].device.type == dev, vals(st2["exp_avg_sq"].sum(), 8)]


@idiom
def adamw_foreach_and_fused(dev: str) -> Any:
    out = []
    for kw in ({"foreach": True}, {"foreach": False}, {"fused": True}):
        m = mlp(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=0.01, **kw)  # type: ignore[arg-type]
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            m(torch.ones(2, 6, device=dev)).pow(2).mean().backward()
            opt.step()
        out.append(vals(m[2].bias))
    return out


@idiom
def deepcopy_model(dev: str) -> Any:
    m = mlp(dev)
    m2 = copy.deepcopy(m)
    with torch.no_grad():
        m2[0].weight.add_(1)
    t = torch.ones(3, device=dev)
    t2 = copy.deepcopy(t)
    return [on(m2[0].weight, dev), isinstance(m2[0].weight, nn.Parameter), vals(m[0].weight.sum()),
            vals(m2[0].weight.sum()), on(t2, dev), vals(t2)]


@idiom
def state_dict_save_load(dev: str) -> Any:
    m = mlp(dev)
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, map_location="cpu")
    m2 = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev)
    m2.load_state_dict(sd)
    buf.seek(0)
    sd_default = torch.load(buf)  # no map_location: tensors come back where they were saved
    return [all(v.device.type == "cpu" for v in sd.values()), on(m2[0].weight, dev),
            vals(m2[2].weight) == vals(m[2].weight), sorted({v.device.type for v in sd_default.values()}) == [dev]]


@idiom
def save_load_device_tensor(dev: str) -> Any:
    t = torch.tensor([1.0, 2.0], device=dev)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.pt")
        torch.save({"t": t, "step": 3}, path)
        back = torch.load(path)
        weights_only = torch.load(path, weights_only=True)
    return [back["t"].device.type == dev, vals(back["t"]), weights_only["step"], on(weights_only["t"], dev)]


@idiom
def load_map_location_device(dev: str) -> Any:
    buf = io.BytesIO()
    torch.save({"w": torch.tensor([3.0, 4.0])}, buf)
    buf.seek(0)
    sd = torch.load(buf, map_location=dev)
    buf.seek(0)
    sd2 = torch.load(buf, map_location=torch.device(dev))
    return [on(sd["w"], dev), vals(sd["w"]), on(sd2["w"], dev)]


@idiom
def pickle_tensor(dev: str) -> Any:
    t = torch.tensor([1.0, 2.0], device=dev)
    back = pickle.loads(pickle.dumps(t))
    return [back.device.type == dev, vals(back)]


@idiom
def manual_seed_reproducible(dev: str) -> Any:
    torch.manual_seed(123)
    a = torch.randn(5, device=dev)
    d1 = F.dropout(torch.ones(8, device=dev), 0.5)
    torch.manual_seed(123)
    b = torch.randn(5, device=dev)
    d2 = F.dropout(torch.ones(8, device=dev), 0.5)
    c = torch.randn(5, device=dev)
    return [vals(a) == vals(b), vals(d1) == vals(d2), vals(a) != vals(c), on(a, dev)]


@idiom
def device_generator(dev: str) -> Any:
    g = torch.Generator(device=dev)
    g.manual_seed(7)
    a = torch.randn(4, device=dev, generator=g)
    g.manual_seed(7)
    b = torch.randn(4, device=dev, generator=g)
    return [vals(a) == vals(b), on(a, dev), g.device.type == dev]


@idiom
def assert_close(dev: str) -> Any:
    a = torch.tensor([1.0, 2.0], device=dev)
    torch.testing.assert_close(a, a + 1e-7)
    try:
        torch.testing.assert_close(a, a + 1)
        mismatch = "no error"
    except AssertionError as e:
        mismatch = str(e).splitlines()[0]
    try:
        torch.testing.assert_close(a, torch.tensor([1.0, 2.0]))
        devcheck = "no error"
    except AssertionError:
        devcheck = "device mismatch"
    torch.testing.assert_close(a, torch.tensor([1.0, 2.0]), check_device=False)
    return [mismatch, devcheck == ("no error" if dev == "cpu" else "device mismatch"),
            torch.allclose(a, a.clone()), torch.equal(a, a.clone())]


@idiom
def rnn_gru_lstm(dev: str) -> Any:
    torch.manual_seed(0)
    gru = nn.GRU(4, 5, batch_first=True).to(dev)
    lstm = nn.LSTM(4, 5, num_layers=2, batch_first=True).to(dev)
    x = torch.ones(2, 3, 4, device=dev, requires_grad=True)
    o1, h1 = gru(x)
    o2, (h2, c2) = lstm(x)
    (o1.sum() + o2.sum()).backward()
    return [vals(o1.sum()), vals(h1.sum()), vals(o2.sum()), vals(c2.sum()), vals(x.grad.sum())]


@idiom
def multihead_attention(dev: str) -> Any:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).to(dev)
    q = torch.linspace(-1, 1, 2 * 3 * 8, device=dev).reshape(2, 3, 8)
    out, w = mha(q, q, q)
    out.sum().backward()
    with torch.no_grad():
        mha.eval()
        out_eval, _ = mha(q, q, q, need_weights=False)  # the fast path when eval and no grad
    return [vals(out.sum()), vals(w.sum(-1)), vals(mha.in_proj_weight.grad.sum()), vals(out_eval.sum())]


@idiom
def transformer_layer(dev: str) -> Any:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True).to(dev)
    x = torch.linspace(-1, 1, 48, device=dev).reshape(2, 3, 8)
    y = layer(x)
    y.sum().backward()
    return [vals(y.abs().sum(), 3), vals(layer.linear1.weight.grad.abs().sum(), 3)]


@idiom
def embedding_layernorm_conv(dev: str) -> Any:
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4).to(dev)
    ln = nn.LayerNorm(4).to(dev)
    conv = nn.Conv1d(4, 2, 3, padding=1).to(dev)
    ids = torch.tensor([[1, 2, 3], [4, 5, 9]], device=dev)
    h = ln(emb(ids))
    y = conv(h.transpose(1, 2))
    y.sum().backward()
    return [vals(y.sum()), vals(emb.weight.grad.sum(1))]


@idiom
def autocast_bf16(dev: str) -> Any:
    lin = mlp(dev)
    x = torch.ones(2, 6, device=dev)
    with torch.autocast(device_type=dev, dtype=torch.bfloat16):
        y = lin(x)
        enabled = torch.is_autocast_enabled(dev)
    return [str(y.dtype), vals(y.float().sum(), 1), enabled, torch.is_autocast_enabled(dev)]


@idiom
def grad_scaler(dev: str) -> Any:
    m = mlp(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(dev, init_scale=1024.0)
    x = torch.ones(4, 6, device=dev)
    for _ in range(2):
        opt.zero_grad()
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            loss = m(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
    return [scaler.get_scale(), vals(m[2].bias, 3)]


@idiom
def dataloader_workers_pin_memory(dev: str) -> Any:
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.arange(12, dtype=torch.float32).reshape(6, 2), torch.arange(6))
    dl = DataLoader(ds, batch_size=2, num_workers=2, pin_memory=True, persistent_workers=False)
    got = []
    for x, y in dl:
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        got.append([vals(x.sum()), vals(y)])
    return got


@idiom
def torch_compile(dev: str) -> Any:
    m = mlp(dev)
    backend = "neuron" if dev == "neuron" else "aot_eager"  # the device's own backend; eager-AOT on the CPU
    cm = torch.compile(m, backend=backend, dynamic=False)
    x = torch.linspace(-1, 1, 12, device=dev).reshape(2, 6)
    y = cm(x)
    y.sum().backward()
    return [vals(y), vals(m[0].bias.grad), vals(m(x)) == vals(y)]


@idiom
def ddp_one_process(dev: str) -> Any:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
        try:
            m = DDP(mlp(dev))
            m(torch.ones(2, 6, device=dev)).sum().backward()
            t = torch.ones(2, device=dev)
            dist.all_reduce(t)
            return [vals(m.module[0].bias.grad), vals(t)]
        finally:
            dist.destroy_process_group()


def _ddp_rank(rank: int, dev: str, store: str, q: Any, backend: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    enable_device(backend)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    m = DDP(mlp(dev))
    m(torch.full((2, 6), float(rank + 1), device=dev)).sum().backward()
    q.put((rank, vals(m.module[0].bias.grad)))
    dist.destroy_process_group()


@idiom
def ddp_two_processes(dev: str) -> Any:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_ddp_rank, args=(dev, f"{d}/store", q, BACKEND), nprocs=2, join=True)
    got = dict(q.get(timeout=60) for _ in range(2))
    return [got[0], got[0] == got[1]]


@idiom
def distributions_sample_logprob(dev: str) -> Any:
    loc = torch.zeros(3, device=dev)
    d = torch.distributions.Normal(loc, torch.ones(3, device=dev))
    torch.manual_seed(0)
    s = d.sample()
    return [on(s, dev), vals(d.log_prob(torch.ones(3, device=dev))), tuple(s.shape)]


# ---------------------------------------------------------------- the runner


BACKEND = "cpu"
"""What gives the device in this process: "cpu", "neuron" (the emulator) or "neuron-experimental" (the
prototype PrivateUse1 extension, neuron_prof.emulator.experimental_privateuse1)."""


def enable_device(backend: str) -> str:
    """Register the device `backend` names in this process; returns the device name idioms get."""
    global BACKEND
    BACKEND = backend
    if backend == "neuron":
        from neuron_prof import emulator

        emulator.enable(emulator.EmulatorConfig.fast())
    elif backend == "neuron-experimental":
        from neuron_prof.emulator import experimental_privateuse1

        experimental_privateuse1.enable()
    return "cpu" if backend == "cpu" else "neuron"


def _plain(v: Any) -> Any:
    """JSON-safe: tuples as lists, anything else unusual as its repr."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def run(dev: str, out: str, names: list[str]) -> None:
    with open(out, "a") as f:
        for name in names:
            f.write(json.dumps({"name": name, "started": True}) + "\n")
            f.flush()
            torch.manual_seed(0)
            t0 = time.perf_counter()
            try:
                rec = {"name": name, "ok": _plain(IDIOMS[name](dev))}
            except Exception as e:  # noqa: BLE001 - the error is the idiom's result
                tb = traceback.extract_tb(e.__traceback__)
                rec = {"name": name, "error": f"{type(e).__name__}: {e}".splitlines()[0][:400],
                       "where": f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""}
            rec["s"] = round(time.perf_counter() - t0, 2)
            f.write(json.dumps(rec) + "\n")
            f.flush()


def run_backend(backend: str, out: Path, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Run idioms `names` (default: all) on `backend` in a process of its own and return {name: record}:
    {"ok": value} or {"error": text}; a process that dies is restarted after the idiom it died in, which
    gets {"crash": returncode}."""
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONWARNINGS": "ignore"}
    todo = list(names or IDIOMS)
    results: dict[str, dict[str, Any]] = {}
    while todo:
        proc = subprocess.run([sys.executable, "-m", "tests._idioms", backend, str(out), ",".join(todo)],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=900)
        running = None
        for line in out.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("started"):
                running = rec["name"]
            else:
                results[rec["name"]] = rec
                running = None
        if running is not None:  # the process died inside this idiom
            results[running] = {"crash": proc.returncode, "stderr": proc.stderr[-2000:]}
            todo = todo[todo.index(running) + 1:]
        elif proc.returncode != 0:
            raise AssertionError(f"idiom runner on {backend} failed outside an idiom:\n{proc.stderr[-3000:]}")
        else:
            todo = []
    return results


def same(a: Any, b: Any) -> bool:
    """Idiom results match: equal, floats within 1e-3 relative (rounded values may differ in the last digit)."""
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return abs(a - b) <= 1e-3 * max(1.0, abs(a))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


if __name__ == "__main__":
    run(enable_device(sys.argv[1]), sys.argv[2], sys.argv[3].split(",") if len(sys.argv) > 3 else list(IDIOMS))
