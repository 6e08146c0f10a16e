"""torch.compile backend "neuron": Dynamo -> AOTAutograd -> one NEFF per graph and shape.

Like TorchNeuron: only static shapes (dynamic=False is enforced: the first "neuron" compile turns automatic
dynamic shapes off, and a graph with symbolic shapes is refused), so every new shape recompiles; `mode`
other than "default" is ignored with a log line. The NEFF compile is lazy: the host blocks on it at the
graph's first run (Dynamo's own backend_compile time excludes it), at a cost that grows with the graph's
node count.
A compiled graph runs as one device execution; its ops pay no per-op eager compile. Per-graph records
have the shape of torch_neuronx.get_dynamo_metrics() (NeuronCompilationMetrics).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import torch

from neuron_prof.emulator import _state
from neuron_prof.emulator._operands import device_index, is_device
from neuron_prof.emulator._timing import KIND_GRAPH, device_duration_ns, op_cost
from neuron_prof.errors import EmulatorError

log = logging.getLogger("torch_neuronx.neuron_dynamo_backend")
_lock = threading.Lock()
_metrics: list[NeuronCompilationMetrics] = []
_counts: dict[str, int] = {}


@dataclass
class NeuronCompilationMetrics:
    """Per-graph compilation metrics (the real dataclass's fields and meanings)."""

    graph_id: str
    graph_name: str = ""
    model_name: str = ""
    has_collectives: bool = False
    graph_node_count: int = 0
    timestamp: str = ""
    torch_neuronx_fx_passes_us: int = 0
    torch_neuronx_lower_us: int = 0
    torch_neuronx_compile_us: int = 0


def get_dynamo_metrics() -> list[NeuronCompilationMetrics]:
    """All torch.compile graph records; synchronizes first, like the real one."""
    rt = _state.RUNTIME
    if rt is not None:
        rt.sync_all()
        times = {e["cache_key"]: e["compilation_time_ms"] for e in rt.cache.entries()}
    with _lock:
        for m in _metrics:
            if m.torch_neuronx_compile_us == 0 and rt is not None:
                m.torch_neuronx_compile_us = int(times.get(m.graph_id, 0)) * 1000
        return list(_metrics)


def reset_dynamo_metrics() -> None:
    with _lock:
        _metrics.clear()
        _counts.clear()


def _phase(name: str, seconds: float) -> None:
    from torch._dynamo.utils import compilation_time_metrics

    compilation_time_metrics.setdefault(name, []).append(seconds)


def _is_collective(node: torch.fx.Node) -> bool:
    t = str(node.target)
    return "c10d" in t or "all_reduce" in t or "all_gather" in t or "reduce_scatter" in t


def _estimate_graph_ns(gm: torch.fx.GraphModule) -> int:
    """Roofline time of the whole graph from the fake tensors Dynamo left in node.meta["val"]."""
    cfg = _state.RUNTIME.cfg  # type: ignore[union-attr]
    total = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        ins = [a.meta["val"] for a in node.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        val = node.meta.get("val")
        outs = [v for v in (val if isinstance(val, (list, tuple)) else [val]) if isinstance(v, torch.Tensor)]
        try:
            flops, nbytes, matrix, lowp = op_cost(node.target.__name__.split(".")[0], ins, outs)
        except Exception:  # noqa: BLE001 - a symbolic or exotic meta value: count it as free rather than fail the compile
            continue
        total += device_duration_ns(cfg, flops, nbytes, matrix, lowp, launch_us=0.0)
    return total


class _CompiledGraph:
    """A graph's runtime: NEFF compile on first run (host blocks), then one device execution per call."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: list[Any],
        metrics: NeuronCompilationMetrics,
        sig: Any,
        est_ns: int,
    ) -> None:
        self.gm = gm
        self.metrics = metrics
        self.sig = sig
        self.est_ns = est_ns
        self.compiled = False
        self._boxed_call = True

    def __call__(self, args: list[Any]) -> Any:
        rt = _state.RUNTIME
        assert rt is not None
        cfg = rt.cfg
        dev = next((device_index(a) for a in args if is_device(a)), rt.current_device)
        ready = 0
        if not self.compiled:
            if not rt.cache.get(self.sig):
                cost = (
                    cfg.graph_compile_base_ms + cfg.graph_compile_ms_per_node * self.metrics.graph_node_count
                )
                t0 = time.perf_counter()
                ready = rt.cache.compile(self.sig, self.metrics.graph_name, cost,
                                         65536 + 512 * self.metrics.graph_node_count, dev, cfg.launch_blocking)
                _phase("torch_neuronx_compile", time.perf_counter() - t0)
            self.compiled = True
        local = rt.local
        outer = local.in_graph
        local.in_graph, local.graph_ns = True, 0
        t0 = time.time_ns()
        hide = torch.autograd._profiler_enabled()
        if hide:  # one NEFF on the device: the host profile shows no ops inside it
            torch._C._autograd._enable_record_function(False)
        queue = rt.activity.queue
        if queue is not None:  # launch mode: the graph's ops are one launch, its own (the executor counts them)
            queue.python_only(True)
        try:
            out = self.gm(*args)
            args.clear()
        finally:
            if queue is not None:
                queue.python_only(False)
            local.in_graph = outer
            if hide:
                torch._C._autograd._enable_record_function(True)
        dur = self.est_ns + local.graph_ns + int(cfg.graph_launch_us * 1e3 * cfg.device_time_scale)
        start, end, _ = rt.clocks[dev].submit(
            self.metrics.graph_name, dur, kind=KIND_GRAPH, seq_nr=torch._C._autograd._get_sequence_nr(),
            not_before=ready,
        )
        rt.gt.add(
            "graph",
            self.metrics.graph_name,
            t0,
            time.time_ns(),
            dev,
            start,
            end,
            detail=self.metrics.graph_id,
        )
        return out


def _make_compiler(graph_type: str, model_name: str) -> Any:
    def compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        rt = _state.RUNTIME
        assert rt is not None
        t0 = time.perf_counter()
        shapes = []
        for x in example_inputs:
            if isinstance(x, torch.Tensor):
                if any(isinstance(s, torch.SymInt) for s in x.shape):
                    raise EmulatorError(
                        "torch.compile(backend='neuron') supports only static shapes (dynamic=False)"
                    )
                shapes.append((tuple(x.shape), x.dtype))
            else:
                shapes.append(x)
        nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
        has_coll = any(_is_collective(n) for n in nodes)
        est = _estimate_graph_ns(gm)
        fx_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        sig = ("graph", gm.code, tuple(shapes))
        with _lock:
            aot_id = _counts.get(model_name, 0)
            nth_key = f"{model_name}_{graph_type}"
            nth = _counts.get(nth_key, 0)
            _counts[nth_key] = nth + 1
        name = f"{model_name}_{aot_id}_{graph_type}_{nth}"
        key = rt.cache.key_for(sig, name)
        lower_s = time.perf_counter() - t1
        _phase("torch_neuronx_fx_passes", fx_s)
        _phase("torch_neuronx_lower", lower_s)
        m = NeuronCompilationMetrics(
            graph_id=key,
            graph_name=name,
            model_name=model_name,
            has_collectives=has_coll,
            graph_node_count=len(nodes),
            # a local-time string, as the real records carry (torch-neuronx-facts, "Corrections and additions")
            timestamp=datetime.now().strftime("%Y%m%d_%H%M%S_%f"),
            torch_neuronx_fx_passes_us=int(fx_s * 1e6),
            torch_neuronx_lower_us=int(lower_s * 1e6),
        )
        with _lock:
            _metrics.append(m)
        rt.gt.add(
            "graph_compile",
            name,
            int(time.time_ns() - (fx_s + lower_s) * 1e9),
            time.time_ns(),
            0,
            detail={"graph_id": key, "nodes": len(nodes)},
        )
        return _CompiledGraph(gm, example_inputs, m, sig, est)

    return compiler


def enforce_static_shapes() -> None:
    """From the first "neuron" compile on, Dynamo compiles static shapes only (what dynamic=False does).

    Process-wide, as with TorchNeuron: torch.compile gives a string backend no hook to scope Dynamo config
    to its own frames (its wrapper drops `backend_ctx_ctor`). The first compile is static anyway; this makes
    every later shape a recompile instead of a dynamic graph.
    """
    import torch._dynamo

    torch._dynamo.config.automatic_dynamic_shapes = False
    torch._dynamo.config.assume_static_by_default = True


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
    """The "neuron" Dynamo backend."""
    from torch._dynamo.backends.common import aot_autograd

    enforce_static_shapes()
    mode = kwargs.get("mode")
    if mode not in (None, "default"):
        log.info("torch.compile mode=%r is ignored by the neuron backend", mode)
    with _lock:
        model_name = "model"
        aot_id = _counts.get(model_name, -1) + 1
        _counts[model_name] = aot_id
    fw = _make_compiler("forward", model_name)
    bw = _make_compiler("backward", model_name)
    return aot_autograd(
        fw_compiler=fw, bw_compiler=bw, inference_compiler=_make_compiler("inference", model_name)
    )(gm, example_inputs)


def _register_now() -> None:
    from neuron_prof.emulator._tensor import hide_dispatch_from_dynamo

    hide_dispatch_from_dynamo()
    from torch._dynamo.backends import registry

    # Not list_backends(): it imports every backend module, which fails while torch._dynamo is importing.
    if "neuron" not in registry._COMPILER_FNS:
        registry.register_backend(name="neuron")(neuron_backend)


class _AfterDynamoImport(importlib.abc.MetaPathFinder):
    """Calls `then` right after torch._dynamo finishes importing (it costs seconds to import, and most
    programs that enable the device never compile)."""

    def __init__(self, then: Callable[[], None]) -> None:
        self.then = then

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module: types.ModuleType) -> None:
            exec_module(module)
            self.then()

        loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


def after_dynamo_import(then: Callable[[], None]) -> None:
    """Call `then` now if torch._dynamo is imported, else right after it is (once)."""
    if "torch._dynamo" in sys.modules:
        then()
    elif not any(isinstance(f, _AfterDynamoImport) and f.then is then for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterDynamoImport(then))


def register() -> None:
    """Register backend "neuron" and make Dynamo compile static shapes only (now, or when Dynamo loads)."""
    after_dynamo_import(_register_now)
