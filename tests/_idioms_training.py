"""Idioms of training code: modules, optimizers, saving and loading, layers, autocast, data loading,
torch.compile, DDP (see tests/_idioms.py)."""

from __future__ import annotations

import copy
import gc
import io
import os
import pickle
import tempfile
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from tests import _idiom_kit as kit
from tests._idiom_kit import idiom, mlp, on, vals

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
    where = sorted({v.device.type for v in sd_default.values()})
    return [all(v.device.type == "cpu" for v in sd.values()), on(m2[0].weight, dev),
            vals(m2[2].weight) == vals(m[2].weight), where == [dev]]


@idiom
def save_load_whole_model(dev: str) -> Any:
    m = mlp(dev)
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    m2 = torch.load(buf, weights_only=False)
    ps = list(m2.parameters())
    return [len(ps), all(isinstance(p, nn.Parameter) for p in ps), all(on(p, dev) for p in ps),
            all(p.requires_grad for p in ps), vals(m2(torch.ones(1, 6, device=dev)))]


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
    c = torch.randn(4, device=dev, generator=g)  # the generator moved on
    try:
        torch.randn(2, generator=g)  # a host tensor from it: torch refuses a device's generator
        host = "ok"
    except RuntimeError as e:
        host = "refused" if "device type for generator" in str(e) else f"RuntimeError: {e}"
    return [vals(a) == vals(b), vals(c) != vals(b), on(a, dev), g.device.type == dev,
            host == ("ok" if dev == "cpu" else "refused")]


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
        m = None
        try:
            m = DDP(mlp(dev))
            m(torch.ones(2, 6, device=dev)).sum().backward()
            t = torch.ones(2, device=dev)
            dist.all_reduce(t)
            return [vals(m.module[0].bias.grad), vals(t)]
        finally:
            # as users must (issue 22): the DDP model's Reducer holds the group; freed after
            # destroy_process_group(), it joins gloo's thread while holding the GIL that thread waits for
            del m
            gc.collect()  # a DDP module in a reference cycle would outlive the del
            dist.destroy_process_group()


def _ddp_rank(rank: int, dev: str, store: str, q: Any, backend: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    kit.enable_device(backend)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    m = DDP(mlp(dev))
    m(torch.full((2, 6), float(rank + 1), device=dev)).sum().backward()
    q.put((rank, vals(m.module[0].bias.grad)))
    del m  # before the group goes (see ddp_one_process)
    gc.collect()
    dist.destroy_process_group()


@idiom
def ddp_two_processes(dev: str) -> Any:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_ddp_rank, args=(dev, f"{d}/store", q, kit.BACKEND), nprocs=2, join=True)
    got = dict(q.get(timeout=60) for _ in range(2))
    return [got[0], got[0] == got[1]]


@idiom
def distributions_sample_logprob(dev: str) -> Any:
    loc = torch.zeros(3, device=dev)
    d = torch.distributions.Normal(loc, torch.ones(3, device=dev))
    torch.manual_seed(0)
    s = d.sample()
    return [on(s, dev), vals(d.log_prob(torch.ones(3, device=dev))), tuple(s.shape)]
