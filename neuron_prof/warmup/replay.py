"""Running a warm-up plan: each recorded eager (op, dtype, shape) signature called once on the device with
tensors of its recorded shapes and dtypes (zeros: valid indices for every op), so its compile happens now and
not in a training step; graphs through the compiled callables the caller passes. Needs torch.

In a process of its own (`python warmup.py`, to fill the persistent NEFF cache before training) the device is
loaded as in the training process: `import torch` autoloads torch_neuronx on an SDK install; the emulated
device is enabled when NEURON_PROF_EMULATE=1, as `neuron-prof run --emulate-neuron` does."""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from neuron_prof.backends.neuron import DEVICE, find_neuron_module
from neuron_prof.errors import UsageError

_DTYPES = {
    "float": torch.float32, "double": torch.float64, "c10::Half": torch.float16, "c10::BFloat16": torch.bfloat16,
    "long int": torch.int64, "int": torch.int32, "short int": torch.int16, "signed char": torch.int8,
    "unsigned char": torch.uint8, "bool": torch.bool, "c10::complex<float>": torch.complex64,
    "c10::complex<double>": torch.complex128,
}
"""Kineto's "Input type" names (caffe2 TypeMeta) -> dtypes."""
_SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
                 6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16}
"""c10::ScalarType codes (a ScalarType argument's concrete value) -> dtypes."""
_MEMORY_FORMATS = {0: torch.contiguous_format, 1: torch.preserve_format, 2: torch.channels_last,
                   3: torch.channels_last_3d}


def _literal(text: str) -> Any:
    if text in ("", "None"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


class _Inputs:
    """Zero tensors on the device, one per (shape, dtype) shared by the arguments an op only reads (copies to
    the device are the plan's own cost); an argument the op writes gets a fresh one."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.shared: dict[tuple[tuple[int, ...], torch.dtype], torch.Tensor] = {}

    def get(self, shape: Any, dtype: torch.dtype, written: bool = False) -> torch.Tensor:
        key = (tuple(int(d) for d in shape), dtype)
        if written:
            return torch.zeros(key[0], dtype=dtype).to(self.device)
        t = self.shared.get(key)
        if t is None:
            t = self.shared[key] = torch.zeros(key[0], dtype=dtype).to(self.device)
        return t


def _value(schema_type: str, dims: Any, typ: str, conc: str, inputs: _Inputs, list_dtype: torch.dtype,
           written: bool) -> Any:
    """One argument from its schema type and what the profiler recorded of it."""
    t = schema_type.rstrip("?")
    if t.startswith("Optional[") and t.endswith("]"):
        t = t[len("Optional["):-1]
    if t == "Tensor":
        return None if typ == "" else inputs.get(dims, _DTYPES.get(typ, list_dtype), written)
    if t in ("List[Tensor]", "List[Optional[Tensor]]") or (t.startswith("Tensor") and t.endswith("[]")):
        return [inputs.get(d, list_dtype, written) for d in (dims or [])]
    v = _literal(conc)
    if v is None:
        return None
    if t == "ScalarType":
        return _SCALAR_TYPES.get(int(v), torch.float32)
    if t == "MemoryFormat":
        return _MEMORY_FORMATS.get(int(v), torch.preserve_format)
    if t == "Layout":
        return torch.strided
    if t == "Device":
        return torch.device(inputs.device)
    if t == "Generator":
        return None
    if t == "float":
        return float(v)
    if t in ("int", "SymInt"):
        return int(v)
    return v


def call(entry: dict[str, Any], inputs: _Inputs) -> None:
    """Call the op of one eager entry once on the device with inputs like the recorded ones."""
    packet = getattr(torch.ops.aten, entry["op"].split("::", 1)[-1])
    op = getattr(packet, entry.get("overload") or "default")
    dims, types, conc = entry["dims"], entry["types"], entry.get("concrete") or []
    known = [_DTYPES[t] for t in types if t in _DTYPES]
    list_dtype = known[0] if known else torch.float32
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for i, a in enumerate(op._schema.arguments):
        if i >= len(types):
            break
        written = a.alias_info is not None and a.alias_info.is_write
        v = _value(str(a.type), dims[i] if i < len(dims) else [], types[i], conc[i] if i < len(conc) else "",
                   inputs, list_dtype, written)
        if a.kwarg_only:
            kwargs[a.name] = v
        else:
            args.append(v)
    op(*args, **kwargs)


def ensure_device(device: Any) -> None:
    """Load the backend of a "neuron" `device` when this process has none yet: the emulated device when
    NEURON_PROF_EMULATE=1 (`emulator.enable_from_env`), else torch_neuronx (`backends.neuron.find_neuron_module`;
    `import torch` has usually autoloaded it). Any other device, or one already loaded: nothing to do."""
    kind = device.type if isinstance(device, torch.device) else str(device).split(":", 1)[0]
    if kind != DEVICE or torch._C._get_privateuse1_backend_name() == DEVICE:
        return
    from neuron_prof.emulator import enable_from_env

    if enable_from_env() is None:
        find_neuron_module()
    if torch._C._get_privateuse1_backend_name() != DEVICE:
        raise UsageError(f"warm-up on {device!r}: no neuron device in this process (install torch-neuronx, or set "
                         "NEURON_PROF_EMULATE=1 for the emulated device)")


def run(eager: Sequence[dict[str, Any]], graphs: Sequence[dict[str, Any]], device: Any = "neuron", *,
        compiled: dict[str, Callable[..., Any]] | None = None, quiet: bool = False) -> dict[str, Any]:
    """Compile what the plan lists (the device loaded first when this process has not: `ensure_device`); returns {"seconds", "compiled", "failed": [(entry, error)], "graphs"}.
    A signature that cannot be called again is skipped and listed (the training step still compiles it).

    `compiled` maps a graph's frame id (or its name) to a callable that runs it: called with each size its churned
    dimension took (`fn(size)`: build the inputs of that size and call the compiled model), else with zero tensors
    of its recorded input shapes."""
    t0 = time.perf_counter()
    ensure_device(device)
    failed: list[tuple[str, str]] = []
    done = 0
    inputs = _Inputs(device)
    with torch.no_grad():
        for e in eager:
            try:
                call(e, inputs)
                done += 1
            except Exception as ex:  # noqa: BLE001  (one odd signature must not stop the warm-up)
                failed.append((f"{e['op']}.{e.get('overload') or 'default'} {e['dims']}", f"{type(ex).__name__}: {ex}"))
    ran_graphs = 0
    for g in graphs:
        fn = (compiled or {}).get(g["frame"]) or (compiled or {}).get(g["graph"])
        if fn is None:
            continue
        shapes = g.get("input_shapes") or []
        calls: list[tuple[Any, ...]] = [(s,) for s in g.get("sizes") or []] or [
            tuple(inputs.get(s, torch.float32) for s in shapes)]
        for args in calls:
            try:
                fn(*args)
                ran_graphs += 1
            except Exception as ex:  # noqa: BLE001
                failed.append((f"graph {g['graph']} (frame {g['frame']}) {args}", f"{type(ex).__name__}: {ex}"))
    sync = getattr(getattr(torch, str(torch.device(device).type), None), "synchronize", None)
    if callable(sync):
        sync()
    secs = time.perf_counter() - t0
    if not quiet:
        print(f"neuron-prof warm-up: compiled {done} of {len(eager)} eager signatures"
              + (f" and {ran_graphs} graph calls" if ran_graphs else "") + f" in {secs:.2f} s"
              + (f"; {len(failed)} skipped (first: {failed[0][0]}: {failed[0][1]})" if failed else ""), flush=True)
    return {"seconds": secs, "compiled": done, "graphs": ran_graphs, "failed": failed}
