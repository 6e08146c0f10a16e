"""The device tensor: a wrapper subclass on device "neuron:i" holding a CPU tensor with the values.

Every aten op on it goes through __torch_dispatch__ into _dispatch.execute (unwrap, compile on first call,
run on CPU, model the device time, rewrap), which _device.register installs with set_executor. Printing is
a sync point, as on a real async device.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

import torch

from neuron_prof.emulator import _state
from neuron_prof.emulator._memory import DeviceMemory

_DEVICES: list[torch.device] = []
_execute: Any = None
"""What runs an aten op on device tensors (_dispatch.execute), given by set_executor when the device is
registered: _dispatch builds on this module, so this module does not import it."""


def set_devices(n: int) -> None:
    _DEVICES[:] = [torch.device("neuron", i) for i in range(n)]


def set_executor(execute: Any) -> None:
    """Send every aten op on a NeuronTensor to `execute(func, args, kwargs)`."""
    global _execute
    _execute = execute


def hide_dispatch_from_dynamo() -> None:
    """Keep Dynamo from tracing into __torch_dispatch__ (torch-facts). Called when torch._dynamo loads:
    torch._disable_dynamo would import it (seconds) on the first op, and costs a frame toggle per op."""
    fn = NeuronTensor.__dict__["__torch_dispatch__"].__func__
    if not getattr(fn, "_neuron_hidden", False):
        wrapped = torch._disable_dynamo(fn)
        wrapped._neuron_hidden = True  # type: ignore[attr-defined]
        NeuronTensor.__torch_dispatch__ = classmethod(wrapped)  # type: ignore[assignment,method-assign]


class NeuronTensor(torch.Tensor):
    """A tensor on the emulated Trainium device."""

    _elem: torch.Tensor
    _dev: int

    @staticmethod
    def __new__(cls, elem: torch.Tensor, dev: int = 0) -> NeuronTensor:
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=_DEVICES[dev],
            requires_grad=elem.requires_grad,
        )
        r._elem = elem
        r._dev = dev
        # Fake/functional tensors appear while torch.compile traces: they own no device memory.
        if type(elem) is torch.Tensor and _state.RUNTIME is not None:
            st = elem.untyped_storage()
            mem = _state.RUNTIME.memory[dev]
            assert isinstance(mem, DeviceMemory)  # this device keeps its own books (ExtMemory: the C++ device's)
            mem.track(elem, st.data_ptr(), st.nbytes())
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]  # torch's idiom

    @classmethod  # the signature torch calls (its stub drops `func`)
    def __torch_dispatch__(  # type: ignore[override]
            cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return _execute(func, args, kwargs or {})

    def __tensor_flatten__(self) -> tuple[list[str], int]:
        return ["_elem"], self._dev

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], ctx: int, outer_size: Any, outer_stride: Any
    ) -> Any:
        return NeuronTensor(inner["_elem"], ctx)

    def tolist(self) -> Any:
        """torch refuses .tolist() on tensor subclasses: read the values through a copy to the host, as the
        stock C++ path does for a device tensor (a sync point)."""
        return self.to("cpu").tolist()

    def __reduce_ex__(self, proto: Any) -> Any:
        # What torch itself writes for a PrivateUse1 tensor without storage (Tensor._reduce_ex_internal): a
        # host copy (a sync point) and the device to rebuild it on; torch.load (weights_only too) brings it
        # back to "neuron", or wherever map_location sends it. Never the class itself: loading needs no
        # emulator.
        if self.__dict__.get("_is_param"):
            # A parameter (nn.Parameter of a device tensor keeps our type, flagged _is_param): as
            # Parameter.__reduce_ex__ writes one, so torch.save(model) loads back with parameters.
            return (torch._utils._rebuild_parameter, (self.detach(), self.requires_grad, OrderedDict()))
        return (
            torch._utils._rebuild_device_tensor_from_cpu_tensor,
            (self.detach().cpu(), self.dtype, str(self.device), self.requires_grad),
        )

    def __format__(self, format_spec: str) -> str:
        # torch formats a 0-dim tensor as its value only when `type(self) is Tensor` (Tensor.__format__); a
        # device tensor on a C++ backend is a plain Tensor, so f"{loss:.4f}" works there: the same here.
        if self.dim() == 0 and type(self._elem) is torch.Tensor:
            return self.detach().item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def data_ptr(self) -> int:
        """The address of the first element, in the host memory that holds the device values: views share
        it and copies do not, as on a C++ device (a wrapper subclass would report 0 for every tensor)."""
        return int(self._elem.data_ptr())

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        """torch's deepcopy for tensors without host storage (Tensor.__deepcopy__: a clone, its grad, its
        Python state), chosen there by `data_ptr() == 0`, which no longer holds here (see data_ptr)."""
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at "
                "the moment."
            )
        with torch.no_grad():
            new = self.clone()
        new.requires_grad = self.requires_grad
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        state = {k: v for k, v in self.__dict__.items() if k not in ("_elem", "_dev")}
        new.__dict__.update(copy.deepcopy(state, memo))
        memo[id(self)] = new
        return new

    def numpy(self, *, force: bool = False) -> Any:
        if not force:
            raise TypeError(
                f"can't convert {_DEVICES[self._dev]} device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        return self.cpu().numpy()

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]  # Tensor's, typed
        if type(self._elem) is not torch.Tensor:
            # fake / functional while torch.compile traces (AOTAutograd's structured trace log prints its
            # metadata): there are no values to read, and reading them would fail the compile
            return (
                f"NeuronTensor(..., size={tuple(self.shape)}, dtype={self.dtype}, "
                f"device='{_DEVICES[self._dev]}')"
            )
        # printing reads the values on the host: a copy to host, so a sync point as on a real async device
        with torch.no_grad():
            host = self.to("cpu")
        body = torch._tensor_str._str(host.detach())
        extra = f", device='{_DEVICES[self._dev]}'"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return body[:-1] + extra + ")"
