"""The operands of one device op: unwrapping device tensors for the host, rewrapping the results.

Shared by the device path (_dispatch.execute) and the CPU-fallback path (_fallback.run_on_host). A device
tensor is a plain tensor on device "neuron" of the C++ extension (`EXT`, set by _ext_device.register): its
host values are a CPU alias of its memory, and a host result becomes a device tensor over the same bytes.
Without a C++ compiler the device is the tensor subclass NeuronTensor, which holds a host tensor (`_elem`).
"""

from __future__ import annotations

from typing import Any

import torch

from neuron_prof.emulator._tensor import NeuronTensor

aten = torch.ops.aten
_seq_nr = torch._C._autograd._get_sequence_nr
_grad_enabled = torch.is_grad_enabled
_F64 = torch.float64
_I64 = torch.int64
_CPU = torch.device("cpu")
EXT: Any = None
"""The device extension's module (host_alias, device_result, copy_raw) when the device is the extension."""


def is_device(x: Any) -> bool:
    """True for a tensor on the emulated device (either implementation)."""
    if type(x) is NeuronTensor:
        return True
    return isinstance(x, torch.Tensor) and x.device.type == "neuron"


def device_index(x: torch.Tensor) -> int:
    return x._dev if type(x) is NeuronTensor else (x.device.index or 0)


def host_of(x: torch.Tensor) -> torch.Tensor:
    """The host tensor holding a device tensor's values (no copy)."""
    return x._elem if type(x) is NeuronTensor else EXT.host_alias(x)


class Unwrapped:
    """Operands of one call, unwrapped, with what the signature and cost model need."""

    __slots__ = ("ins", "sig", "ids", "dev", "f64", "i64", "target_dev", "tracing", "rg", "host_only", "devs")

    def __init__(self) -> None:
        self.ins: list[torch.Tensor] = []
        self.devs: list[torch.Tensor] = []
        """The device operands (extension): a host result sharing one's memory is a view of it."""
        self.sig: list[Any] = []
        self.ids: dict[int, Any] = {}
        self.dev = -1
        self.f64 = False
        self.i64 = False
        self.target_dev = -1
        self.tracing = False
        self.rg = False
        self.host_only = False

    def _operand(self, x: torch.Tensor, e: torch.Tensor, dev: int) -> torch.Tensor:
        self.ins.append(e)
        self.ids[id(e)] = x
        if x.requires_grad:
            self.rg = True
        dt = e.dtype
        self.sig.append((e.shape, dt))
        if self.dev < 0:
            self.dev = dev
        if dt is _F64:
            self.f64 = True
        elif dt is _I64:
            self.i64 = True
        return e

    def unwrap(self, x: Any) -> Any:
        if type(x) is NeuronTensor or isinstance(x, NeuronTensor):
            e = x._elem
            if type(e) is not torch.Tensor:  # fake / functional while torch.compile traces
                self.tracing = True
            return self._operand(x, e, x._dev)
        t = type(x)
        if t is list or t is tuple:
            return t([self.unwrap(v) for v in x])
        if t is float:  # runtime scalars share one NEFF (the real cache key ignores their value)
            self.sig.append(float)
            return x
        if t is int or t is bool or x is None:
            self.sig.append(x)
            return x
        if isinstance(x, torch.Tensor):
            if EXT is not None and x.device.type == "neuron":
                self.devs.append(x)
                return self._operand(x, EXT.host_alias(x), x.device.index or 0)
            # a plain CPU tensor mixed in (e.g. a 0-dim scalar)
            if x.layout is not torch.strided or x.is_nested:
                self.host_only = True  # sparse / nested tensors exist only on the host: the op falls back
            self.ids[id(x)] = x
            self.sig.append(("host", x.shape, x.dtype))
            return x
        if t is torch.Generator:  # its state is a runtime value, not part of the compiled op
            self.sig.append("generator")
            return x
        if t is torch.device and x.type == "neuron":
            self.target_dev = x.index or 0
            self.sig.append("neuron")
            return _CPU
        self.sig.append(x)
        return x


def wrap(o: Any, u: Unwrapped, dev: int, outs: list[torch.Tensor]) -> Any:
    """Host results -> device tensors on `dev` (appended to `outs`); an operand handed back stays itself."""
    if isinstance(o, torch.Tensor):
        w = u.ids.get(id(o))
        if w is not None:  # in-place / out= ops return their input: hand back the same wrapper
            outs.append(o)
            if w is not o and (w.shape != o.shape or w.stride() != o.stride()):
                _restride(w, o)
            return w
        if o.layout is not torch.strided or o.is_nested:
            return o  # no sparse or nested tensors on the device (not in TorchNeuron's first release)
        if o.dtype is _F64:
            demote_f64(o)
        outs.append(o)
        return NeuronTensor(o, dev) if EXT is None else EXT.device_result(o, u.devs)
    t = type(o)
    if t is list or t is tuple:
        return t([wrap(v, u, dev, outs) for v in o])
    return o


def wrap_except(
    host: frozenset[int], o: tuple[Any, ...], u: Unwrapped, dev: int, outs: list[torch.Tensor]
) -> Any:
    """wrap() for an op whose outputs at positions `host` stay on the host, as the device kernel leaves them
    (the batch sizes of a packed sequence: torch requires them on the CPU)."""
    return type(o)(v if i in host else wrap(v, u, dev, outs) for i, v in enumerate(o))


_PY_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | torch._C.DispatchKeySet(
    torch._C.DispatchKey.PythonTLSSnapshot
)


def _restride(w: torch.Tensor, o: torch.Tensor) -> None:
    """An in-place op changed its operand's shape (unsqueeze_, t_, resize_, a resized out=): the device
    tensor's own metadata must follow its host values."""
    if type(w) is not NeuronTensor:  # the extension's tensor: its metadata is torch's own
        w.as_strided_(o.shape, o.stride(), o.storage_offset())
        return
    try:
        with torch._C._ExcludeDispatchKeyGuard(_PY_KEYS):
            aten.as_strided_.default(w, o.shape, o.stride(), o.storage_offset())
    except RuntimeError as e:  # the device tensor's storage cannot grow from Python
        raise RuntimeError(
            f"neuron (emulated): a device tensor cannot grow in place ({tuple(w.shape)} -> {tuple(o.shape)}, "
            "e.g. resize_ or an out= tensor of the wrong size); allocate it at its final size"
        ) from e


def demote_f64(t: torch.Tensor) -> None:
    """float64 lives on the device at float32 precision (TorchNeuron computes it as float32)."""
    if type(t) is torch.Tensor:
        with torch.no_grad():
            t.copy_(t.to(torch.float32))


def host_seq_nr(u: Unwrapped) -> int:
    """The autograd sequence number the profiler gave the host op now running (its "Sequence number").

    The profiler records the thread's counter when the op enters autograd; if the op then created a
    backward node, the counter has moved on by one by the time the op reaches the device.
    """
    seq = _seq_nr()
    return seq - 1 if u.rg and _grad_enabled() else seq
