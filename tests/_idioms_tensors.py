"""Idioms on tensors: printing, types, host values, construction, indexing, views, autograd (see
tests/_idioms.py)."""

from __future__ import annotations

import copy
import io
from typing import Any

import torch
import torch.nn as nn

from tests._idiom_kit import idiom, mlp, nodev, on, vals

# ---------------------------------------------------------------- printing and formatting


@idiom
def format_float_scalar(dev: str) -> Any:
    loss = torch.tensor(1.234567, device=dev)
    return [f"loss {loss:.4f}", f"{loss:>10.2e}", "{:.3f}".format(loss), f"{loss:.1%}"]  # noqa: UP032 - str.format is an idiom of its own


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
