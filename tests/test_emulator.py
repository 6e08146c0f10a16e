"""The emulated neuron device: numbers match CPU, compile/fallback/sync/memory behave like TorchNeuron.

The emulator is enabled once for the whole test process (PyTorch cannot undo the registration) with zero
compile cost; tests that need other costs use emulator.reconfigure() and restore the fast config after.
Tests needing a fresh process (disk cache across runs, enable() refusals, DDP) run subprocesses.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
import torch

from neuron_prof import emulator
from neuron_prof.emulator import EmulatorConfig

# The device is registered before the session's first backward (tests/conftest.py); see the marker.
pytestmark = pytest.mark.emulator_inprocess


@pytest.fixture(scope="module")
def tnx(emulated_torch_neuronx):  # type: ignore[no-untyped-def]
    return emulated_torch_neuronx


@pytest.fixture
def cfg(tnx) -> Iterator[EmulatorConfig]:  # type: ignore[no-untyped-def]
    """The fast config; whatever a test reconfigures is undone afterwards, and so is the Dynamo config a
    "neuron" compile sets for the process (other test modules share this process)."""
    import torch._dynamo

    base = EmulatorConfig.fast()
    emulator.reconfigure(base)
    keys = ("automatic_dynamic_shapes", "assume_static_by_default")
    saved = {k: getattr(torch._dynamo.config, k) for k in keys}
    yield base
    torch.neuron.synchronize()
    emulator.reconfigure(base)
    for k, v in saved.items():
        setattr(torch._dynamo.config, k, v)


def _activity(clear: bool = False) -> dict:  # type: ignore[type-arg]
    """The emulated runtime's own record of device work (what its capture writes; the profiler reads the
    capture folder, never this)."""
    from neuron_prof.emulator import _state

    assert _state.RUNTIME is not None
    return _state.RUNTIME.activity.snapshot(clear)


def _layer() -> torch.nn.Module:
    # bias=False: the key projection's bias has a mathematically zero gradient (softmax ignores a constant
    # shift), so its rounding noise, divided by Adam's eps, would dominate the comparison.
    return torch.nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True, bias=False
    )


def _train(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, steps: int = 2) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        # A loss with O(1) gradients: with near-zero gradients Adam divides rounding noise by eps.
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_transformer_training_step_matches_cpu(cfg: EmulatorConfig) -> None:
    torch.manual_seed(0)
    cpu_model = _layer()
    dev_model = _layer()
    dev_model.load_state_dict(cpu_model.state_dict())
    dev_model.to("neuron")
    x = torch.randn(2, 8, 32)
    target = torch.randn(2, 8, 32)
    assert next(dev_model.parameters()).device.type == "neuron"

    cpu_losses = _train(cpu_model, x, target)
    dev_losses = _train(dev_model, x.to("neuron"), target.to("neuron"))

    assert dev_losses == pytest.approx(cpu_losses, rel=1e-5, abs=1e-6)
    for (name, p_cpu), p_dev in zip(cpu_model.named_parameters(), dev_model.parameters(), strict=True):
        assert p_dev.device.type == "neuron"
        torch.testing.assert_close(
            p_dev.cpu(), p_cpu, rtol=1e-4, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}"
        )


def test_factories_and_seeded_random_match_cpu(cfg: EmulatorConfig) -> None:
    torch.manual_seed(3)
    a = torch.randn(5, 3)
    torch.manual_seed(3)
    b = torch.randn(5, 3, device="neuron")
    torch.testing.assert_close(b.cpu(), a)
    assert torch.arange(2, 11, 3, device="neuron").cpu().tolist() == [2, 5, 8]
    assert torch.eye(3, device="neuron").shape == (3, 3)
    assert torch.tensor([1.5, 2.5], device="neuron").sum().item() == 4.0
    assert "device='neuron:0'" in repr(torch.ones(2, device="neuron"))


def test_autocast_runs_matmuls_in_bf16(cfg: EmulatorConfig) -> None:
    lin = torch.nn.Linear(8, 4).to("neuron")
    x = torch.randn(3, 8, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        y = lin(x)
        s = torch.softmax(y, dim=-1)
    assert y.dtype == torch.bfloat16
    assert s.dtype == torch.float32
    torch.testing.assert_close(y.float().cpu(), lin(x).cpu(), rtol=2e-2, atol=2e-2)


def test_first_call_compile_only_on_first_call_of_a_signature(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    emulator.reconfigure(replace(cfg, eager_compile_base_ms=40.0))
    gt = emulator.ground_truth()
    x = torch.ones(7, 13, device="neuron")
    y = torch.ones(7, 13, device="neuron")
    n0 = len(gt.records("compile"))

    t0 = time.perf_counter()
    x.mul(y)  # new signature: pays the compile
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    x.mul(y)  # same signature, new values: cached
    second = time.perf_counter() - t0
    x.mul(2.5)  # the scalar overload is a new signature...
    x.mul(3.5)  # ...but a different runtime scalar is not

    compiles = gt.records("compile")[n0:]
    # (7,13)x(7,13) once, then (7,13) x scalar once: 3.5 reuses the NEFF compiled for 2.5
    assert [c["name"] for c in compiles] == ["aten::mul.Tensor", "aten::mul.Tensor"]
    assert first >= 0.040 and second < 0.020
    keys = {c["detail"]["cache_key"] for c in compiles}
    entries = [e for e in tnx._C._get_compilation_cache_entries() if e["cache_key"] in keys]
    assert all(k.startswith("aten::mul.Tensor_") for k in keys) and len(entries) == 2
    assert sorted(e["access_count"] for e in entries) == [2, 2]
    assert all(e["compilation_time_ms"] >= 40 for e in entries)
    stats = tnx._C._get_compilation_cache_stats()
    assert stats["total_compilations"] >= len(compiles) and stats["cache_hits"] >= 2


def test_launch_blocking_modes(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    """NEURON_LAUNCH_BLOCKING=1 (release default): the op waits for its compile. 0: the background compile
    thread compiles while the host goes on; the op's device work waits for the NEFF, and the host pays at
    the next sync (torch-neuronx-facts, "Corrections and additions")."""
    assert EmulatorConfig.from_env().launch_blocking  # unset: blocking, as release builds
    gt = emulator.ground_truth()
    for blocking, shape in ((True, (3, 17)), (False, (3, 19))):
        emulator.reconfigure(replace(cfg, eager_compile_base_ms=300.0, launch_blocking=blocking))
        x = torch.ones(*shape, device="neuron")
        torch.neuron.synchronize()
        n0, e0 = len(gt.records("compile")), len(gt.records("exec"))
        t0 = time.perf_counter()
        x.mul(x)  # a new signature
        call = time.perf_counter() - t0
        t0 = time.perf_counter()
        torch.neuron.synchronize()
        wait = time.perf_counter() - t0
        (c,) = gt.records("compile")[n0:]
        ex = [r for r in gt.records("exec")[e0:] if r["name"] == "aten::mul.Tensor"][0]
        assert c["detail"]["blocking"] is blocking
        assert c["host_end_ns"] - c["host_start_ns"] >= 300_000_000
        if blocking:
            assert call >= 0.3 and wait < 0.15
        else:  # the host is not held by the compile; the device op starts after it
            assert call < 0.15 and wait >= 0.2 and ex["device_start_ns"] >= c["host_end_ns"]


def test_fallback_ops_run_on_host_and_are_tracked_like_torchneuron(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    gt = emulator.ground_truth()
    tnx.clear_op_tracking()
    n0 = len(gt.records("fallback"))
    torch.manual_seed(1)
    a = torch.randn(6, 6)
    d = a.to("neuron")

    s_vals, s_idx = torch.sort(d, dim=1)
    u = torch.unique(torch.tensor([3, 1, 3, 2], device="neuron"))
    q, r = torch.linalg.qr(d)

    torch.testing.assert_close(s_vals.cpu(), torch.sort(a, dim=1).values)
    assert s_idx.device.type == "neuron" and u.cpu().tolist() == [1, 2, 3]
    torch.testing.assert_close((q @ r).cpu(), a, rtol=1e-4, atol=1e-4)
    fallback = tnx.get_fallback_ops()
    assert "aten::sort" in fallback and "aten::_unique2" in fallback
    assert not any("qr" in name for name in fallback)  # like the real backend: qr falls back unrecorded
    assert fallback == torch.neuron.get_fallback_ops()
    assert all(isinstance(n, str) for n in fallback)
    names = [r["name"] for r in gt.records("fallback")[n0:]]
    assert {"aten::sort", "aten::_unique2", "aten::linalg_qr"} <= set(names)
    # sparse tensors are not in TorchNeuron's first release: they stay on the host, and ops on them fall back
    sp = torch.eye(3, device="neuron").to_sparse()
    assert sp.device.type == "cpu" and sp.layout == torch.sparse_coo
    prod = sp @ torch.ones(3, 2, device="neuron")
    assert prod.device.type == "neuron" and prod.tolist() == [[1.0, 1.0]] * 3
    assert {"aten::_to_sparse", "aten::mm"} <= set(tnx.get_fallback_ops())
    assert "aten::mm" in tnx.get_executed_ops() or "aten::mm" in set(tnx._C._get_executed_ops())
    tnx.clear_op_tracking()
    assert tnx.get_fallback_ops() == [] and tnx.get_executed_ops() == []


def test_float64_is_computed_in_float32_with_a_warning(cfg: EmulatorConfig) -> None:
    third = torch.tensor([1.0 / 3.0], dtype=torch.float64)
    with pytest.warns(UserWarning, match="float64"):
        d = third.to("neuron") * 3
    assert d.dtype == torch.float64
    stored = third.to("neuron")
    # the device keeps float32 precision: 1/3 loses its float64 digits
    assert stored.cpu().item() == torch.tensor(1.0 / 3.0, dtype=torch.float32).item()
    assert stored.cpu().item() != third.item()
    assert d.cpu().item() == (torch.tensor([1.0 / 3.0], dtype=torch.float32) * 3).item()
    assert emulator.ground_truth().records("f64")


def test_memory_stats_follow_live_tensors(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    t = torch.empty(1000, 250, device="neuron")  # 1,000,000 bytes
    view = t[10:20]
    assert torch.neuron.memory_allocated() - base == 1_000_000
    del t
    assert torch.neuron.memory_allocated() - base == 1_000_000  # the view keeps the storage alive
    del view
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.max_memory_allocated() - base == 1_000_000
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes"]["peak"] == torch.neuron.max_memory_allocated()
    assert set(stats["allocated_bytes"]) == {"current", "peak", "allocated", "freed"}
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    assert tnx._C._get_memory_stats(0) == torch.neuron.memory_stats(0)


def test_out_of_memory_past_capacity(cfg: EmulatorConfig) -> None:
    torch.neuron.synchronize()
    emulator.reconfigure(replace(cfg, memory_capacity_bytes=torch.neuron.memory_allocated() + (4 << 20)))
    ooms = torch.neuron.memory_stats()["num_ooms"]
    keep = torch.empty(512, 1024, device="neuron")  # 2 MiB fits
    with pytest.raises(torch.OutOfMemoryError, match="Neuron out of memory"):
        torch.empty(1024, 1024, device="neuron")  # 4 MiB more does not
    assert torch.neuron.memory_stats()["num_ooms"] == ooms + 1
    with pytest.raises(torch.OutOfMemoryError, match="Neuron out of memory"):
        torch.empty(1 << 40, device="neuron")  # 4 TiB: refused before the host tries to allocate it
    del keep


def test_the_device_is_the_extension_where_a_compiler_is(tnx) -> None:  # type: ignore[no-untyped-def]
    from neuron_prof.emulator import _ext_build

    forced = os.environ.get("NEURON_PROF_EMULATE_DEVICE", "")
    subclass = forced == "subclass" or (forced != "extension" and _ext_build.compiler() is None)
    assert emulator.device_impl() == ("subclass" if subclass else "extension")
    assert (type(torch.ones(2, device="neuron")) is torch.Tensor) is not subclass


def test_op_results_are_device_memory_and_host_made_views_share_it(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    torch.neuron.synchronize()
    x = torch.ones(250, 1000, device="neuron")
    base = torch.neuron.memory_allocated()
    y = x * 2  # computed on the host, held as device memory: 1,000,000 bytes more
    assert torch.neuron.memory_allocated() - base == 1_000_000
    u = y.unfold(1, 10, 10)  # a view the host kernel makes: the same memory, nothing more
    assert torch.neuron.memory_allocated() - base == 1_000_000 and u.data_ptr() == y.data_ptr()
    u.add_(1)  # writes through the view
    assert y[0, 0].item() == 3.0
    del y
    assert torch.neuron.memory_allocated() - base == 1_000_000  # the view keeps it alive
    del u
    assert torch.neuron.memory_allocated() == base


def test_host_waits_at_item_until_the_device_catches_up(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    # GIVEN a slow device: every op takes 30 ms of device time, far more than the host needs to issue it
    emulator.reconfigure(replace(cfg, op_launch_us=30_000.0))
    x = torch.ones(16, 16, device="neuron")
    torch.neuron.synchronize()
    _activity(clear=True)
    t0 = time.time_ns()
    for _ in range(5):
        x = x + 1
    issued = time.time_ns()
    # WHEN the host reads a value
    v = x.sum().item()
    done = time.time_ns()
    # THEN it returned only after the last queued op ended on the device clock
    act = _activity()
    last_end = int(act["end_ns"].max())
    assert v == 16 * 16 * 6
    assert (issued - t0) < 6 * 30e6 * 0.5  # the host ran ahead: issuing took far less than the device work
    assert done >= last_end
    assert last_end - t0 >= 6 * 30e6  # six ops of 30 ms each, one after another
    syncs = [r for r in emulator.ground_truth().records("sync") if r["host_start_ns"] >= issued]
    assert syncs and syncs[0]["name"] == "item" and syncs[0]["detail"] > 0.5 * (last_end - issued)
    # Device activity is one queue: ordered, non-overlapping, each op 30 ms
    starts, ends = act["start_ns"], act["end_ns"]
    assert (starts[1:] >= ends[:-1]).all() and ((ends - starts) >= 30e6).all()
    assert act["name"][:5] == ["aten::add.Tensor"] * 5
    assert (act["host_ns"] >= t0).all() and (act["th_id"] > 0).all()


def test_compile_backend_recompiles_per_shape_and_skips_eager_compiles(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    import torch._dynamo

    torch._dynamo.reset()
    tnx.reset_dynamo_metrics()
    emulator.reconfigure(replace(cfg, graph_compile_base_ms=5.0, eager_compile_base_ms=1.0))
    gt = emulator.ground_truth()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to("neuron")
    compiled = torch.compile(model, backend="neuron")
    inputs = [torch.randn(n, 8, device="neuron") for n in (3, 5, 3, 7)]
    torch.neuron.synchronize()
    n0 = len(gt.records("compile"))

    outs = [compiled(x) for x in inputs]
    compiles = gt.records("compile")[n0:]

    for x, y in zip(inputs, outs, strict=True):
        assert y.device.type == "neuron"
        torch.testing.assert_close(y.cpu(), model(x).cpu())
    metrics = tnx.get_dynamo_metrics()
    assert len(metrics) == 3  # shapes 3, 5, 7: one forward graph each, none for the repeated 3
    assert not torch._dynamo.config.automatic_dynamic_shapes  # what dynamic=False does
    assert all("_forward_" in m.graph_name and m.graph_node_count > 0 for m in metrics)
    assert all(m.torch_neuronx_compile_us >= 5000 for m in metrics)
    # the compiled calls paid one NEFF compile per graph and no per-op eager compile
    assert sorted(c["detail"]["cache_key"] for c in compiles) == sorted(m.graph_id for m in metrics)
    graphs = [r for r in gt.records("graph") if r["name"] in {m.graph_name for m in metrics}]
    assert len(graphs) == 4  # four calls, four device executions
    entry_keys = {e["cache_key"] for e in tnx._C._get_compilation_cache_entries()}
    assert {m.graph_id for m in metrics} <= entry_keys


def test_int64_operands_fall_back_for_ops_without_int64_kernels(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    tnx.clear_op_tracking()
    a = torch.arange(6, device="neuron").reshape(2, 3)
    prod = a @ a.T  # int64 matmul: no device kernel
    added = a + a  # int64 add: runs on the device
    assert prod.cpu().tolist() == [[5, 14], [14, 50]] and added.cpu().tolist() == [[0, 2, 4], [6, 8, 10]]
    assert "aten::mm" in tnx.get_fallback_ops()
    assert "aten::add.Tensor" in tnx.get_executed_ops() and "aten::add.Tensor" not in tnx.get_fallback_ops()


def test_fallback_logs_the_real_debug_line(
    tnx, cfg: EmulatorConfig, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level("DEBUG"):
        torch.sort(torch.randn(5, device="neuron"))
        torch.linalg.qr(torch.randn(3, 3, device="neuron"))
    lines = [r.getMessage() for r in caplog.records]
    assert "No implementation could handle operation aten::sort. Falling back on CPU" in lines
    assert not any("qr" in line for line in lines)


def test_recorded_device_activity_links_to_the_host_ops_of_a_real_profile(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    from torch.profiler import ProfilerActivity, profile

    emulator.reconfigure(replace(cfg, op_launch_us=200.0))
    x = torch.randn(32, 32, device="neuron", requires_grad=True)
    w = torch.randn(32, 32, device="neuron")
    torch.neuron.synchronize()
    _activity(clear=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        y = (x @ w).relu().sum()
        y.backward()
        torch.neuron.synchronize()
    act = _activity()
    host = [e for e in prof.profiler.kineto_results.events() if e.name().startswith("aten::")]

    # Every device op has a host op of the same name, on the issuing thread, whose span contains host_ns
    # (the host ops' span = Kineto's clock; a few tens of µs of skew are allowed).
    for i, name in enumerate(act["name"]):
        h_ns = int(act["host_ns"][i])
        matches = [
            e for e in host if e.name() == name and e.start_ns() - 50_000 <= h_ns <= e.end_ns() + 50_000
        ]
        assert matches, name
        assert int(act["start_ns"][i]) >= h_ns  # the device starts only after the host issued it
    main = threading.get_native_id()
    fwd = {
        n: int(s)
        for n, s, t in zip(act["name"], act["seq_nr"], act["th_id"], strict=True)
        if t == main and n in ("aten::mm", "aten::relu", "aten::sum")
    }
    kineto_seq = {e.name(): e.sequence_nr() for e in host if e.name() in fwd and e.sequence_nr() >= 0}
    assert fwd and all(fwd[n] == kineto_seq[n] for n in kineto_seq)
    assert (
        len(set(act["th_id"].tolist())) == 2
    )  # forward on the main thread, backward on autograd's device thread
    seqs = act["nrt_sequence_id"]
    assert (seqs[1:] > seqs[:-1]).all()
    # The CPU kernels that compute a device op's values are hidden from the host profile
    mm_spans = [e for e in host if e.name() == "aten::mm"]
    assert len(mm_spans) == len([n for n in act["name"] if n == "aten::mm"])


def test_compiled_graph_runs_as_one_device_execution_with_no_host_ops_inside(
    tnx, cfg: EmulatorConfig
) -> None:  # type: ignore[no-untyped-def]
    from torch.profiler import ProfilerActivity, profile

    lin = torch.nn.Linear(8, 8).to("neuron")
    f = torch.compile(lambda x: torch.relu(lin(x)) * 2, backend="neuron")
    x = torch.randn(4, 8, device="neuron")
    with torch.no_grad():
        f(x)  # compile outside the profile
        _activity(clear=True)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            y = f(x)
            torch.neuron.synchronize()
    names = [e.name() for e in prof.profiler.kineto_results.events()]
    act = _activity()
    assert "aten::addmm" not in names and "aten::relu" not in names
    assert [act["kind_names"][k] for k in act["kind"]] == ["graph"]
    assert act["name"][0].startswith("model_") and "_inference_" in act["name"][0]
    torch.testing.assert_close(y.cpu(), (torch.relu(lin(x)) * 2).cpu())


def test_activity_and_ground_truth_are_bounded_ring_buffers(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    emulator.reconfigure(replace(cfg, max_device_events=50, max_ground_truth_events=40))
    _activity(clear=True)
    dropped0 = _activity()["dropped"]
    x = torch.zeros(4, device="neuron")
    for _ in range(200):
        x = x + 1
    act = _activity()
    assert len(act["name"]) == 50 and act["dropped"] - dropped0 == 201 - 50  # zero_ and 200 adds
    seqs = act["nrt_sequence_id"]
    assert (seqs[1:] - seqs[:-1] == 1).all()  # the newest 50, in order
    assert len(emulator.ground_truth().records()) == 40
    assert x.sum().item() == 800.0


def test_checkpoints_load_back_on_the_device_or_where_map_location_says(cfg: EmulatorConfig, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """As torch saves a PrivateUse1 tensor without storage (Tensor._reduce_ex_internal): a host copy and its
    device; torch.load brings it back on "neuron", map_location="cpu" on the host, with or without the
    emulator in the loading process (a CUDA checkpoint on a CPU-only machine needs the same)."""
    import copy
    import subprocess
    import sys

    lin = torch.nn.Linear(3, 2).to("neuron")
    path = tmp_path / "ck.pt"
    torch.save(lin.state_dict(), path)
    sd = torch.load(path, weights_only=True)
    assert all(v.device.type == "neuron" for v in sd.values())
    torch.testing.assert_close(sd["weight"], lin.weight.detach())
    host = torch.load(path, weights_only=True, map_location="cpu")
    assert all(type(v) is torch.Tensor and v.device.type == "cpu" for v in host.values())
    torch.testing.assert_close(host["weight"], lin.weight.detach().cpu())
    code = (f"import torch; sd = torch.load({str(path)!r}, weights_only=True, map_location='cpu'); "
            "print(sorted((k, v.device.type) for k, v in sd.items()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[('bias', 'cpu'), ('weight', 'cpu')]", out.stderr
    twin = copy.deepcopy(lin)
    assert twin.weight.device.type == "neuron" and twin.weight.requires_grad
    assert twin.weight.data_ptr() != lin.weight.data_ptr()
    torch.testing.assert_close(twin.weight, lin.weight)


def test_config_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NEURON_PROF_EMULATE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NEURON_PROF_EMULATE_COMPILE_SCALE", "0.5")
    monkeypatch.setenv("NEURON_PROF_EMULATE_DEVICE_SCALE", "3")
    cfg = EmulatorConfig.from_env()
    default = EmulatorConfig()
    assert cfg.cache_dir == str(tmp_path) and cfg.device_time_scale == 3.0
    assert cfg.eager_compile_base_ms == default.eager_compile_base_ms / 2
    assert cfg.graph_compile_ms_per_node == default.graph_compile_ms_per_node / 2
    assert EmulatorConfig.fast().eager_compile_base_ms == 0 == EmulatorConfig.fast().graph_compile_base_ms
    monkeypatch.delenv("NEURON_PROF_EMULATE_CACHE_DIR")
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    assert EmulatorConfig.from_env().cache_dir == str(tmp_path / "neff")  # the real variable works too


def test_module_has_torch_neuronx_names_and_shapes(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    import dataclasses
    import sys

    # Names and keys as in torch_neuronx's __init__.py and its _C bindings (aws-neuron/torch-neuronx)
    assert sys.modules["torch_neuronx"] is tnx and sys.modules["torch_neuronx._C"] is tnx._C
    for name in (
        "get_fallback_ops",
        "get_executed_ops",
        "clear_op_tracking",
        "get_dynamo_metrics",
        "reset_dynamo_metrics",
        "synchronize",
        "device_count",
        "current_device",
        "memory_stats",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "reset_peak_memory_stats",
    ):
        assert callable(getattr(tnx, name)) and callable(getattr(torch.neuron, name)), name
    torch.ones(3, device="neuron").add(1)
    stats = tnx._C._get_compilation_cache_stats()
    assert set(stats) == {
        "total_entries",
        "in_memory_hits",
        "in_memory_misses",
        "persistent_hits",
        "persistent_misses",
        "cache_hits",
        "cache_misses",
        "hit_rate",
        "memory_usage_bytes",
        "total_compilation_time_ms",
        "evictions_performed",
        "total_compilations",
        "max_cache_size_bytes",
        "max_cache_entries",
        "memory_utilization_ratio",
    }
    entry = tnx._C._get_compilation_cache_entries()[0]
    assert set(entry) == {"cache_key", "neff_size_bytes", "access_count", "compilation_time_ms"}
    assert set(torch.neuron.memory_stats()) == {
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "num_alloc_retries",
        "num_ooms",
        "num_tensor_frees",
        "allocation_requests",
    }
    fields = {
        f.name for f in dataclasses.fields(tnx.get_dynamo_metrics.__globals__["NeuronCompilationMetrics"])
    }
    assert fields == {
        "graph_id",
        "graph_name",
        "model_name",
        "has_collectives",
        "graph_node_count",
        "timestamp",
        "torch_neuronx_fx_passes_us",
        "torch_neuronx_lower_us",
        "torch_neuronx_compile_us",
    }
    assert torch.neuron.device_count() == 1 and torch.neuron.get_device_properties(0).total_memory > 0



def test_metrics_are_off_unless_enabled_through_the_real_api(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    """torch-neuronx-facts, corrections: counters and samples stay empty unless TORCH_NEURONX_METRICS_ENABLED=1
    or ``torch_neuronx.metrics.set_enabled(True)``; get_dynamo_metrics timestamps are local-time strings."""
    from datetime import datetime

    assert "TORCH_NEURONX_METRICS_ENABLED" not in os.environ
    assert tnx._C._neuron_metrics_enabled() is False  # as the runtime started: off by default
    torch.ones(5, 7, device="neuron").mul(3)
    assert tnx._C._neuron_metric_data("CompilationCache.CompilationTime") is None
    assert tnx._C._get_compilation_cache_stats()["total_compilations"] >= 1  # the cache's own stats are kept
    tnx.metrics.set_enabled(True)
    try:
        torch.ones(5, 9, device="neuron").mul(3)
        samples = tnx._C._neuron_metric_data("CompilationCache.CompilationTime")
        assert samples is not None and {"timestamp_ns", "value"} == set(samples["samples"][0])
    finally:
        tnx.metrics.set_enabled(False)
    f = torch.compile(lambda x: x * 2 + 1, backend="neuron")
    f(torch.ones(3, device="neuron"))
    stamp = tnx.get_dynamo_metrics()[-1].timestamp
    assert abs(datetime.strptime(stamp, "%Y%m%d_%H%M%S_%f").timestamp() - time.time()) < 60


def test_module_to_neuron_inside_a_profiled_region(cfg) -> None:  # type: ignore[no-untyped-def]
    """torch.profiler holds weak refs to tensors it saw; moving a model must still work (was: "Couldn't swap")."""
    torch.manual_seed(0)
    ref = torch.nn.Linear(8, 4)
    lin = torch.nn.Linear(8, 4)
    lin.load_state_dict(ref.state_dict())
    x = torch.randn(3, 8)
    with torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True):
        lin(x)  # the profiler sees the CPU parameters first
        lin.to("neuron")
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        lin(x.to("neuron")).sum().backward()
        opt.step()
    assert lin.weight.device.type == "neuron" and isinstance(lin.weight, torch.nn.Parameter)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref(x).sum().backward()
    opt_ref.step()
    torch.testing.assert_close(lin.weight.cpu(), ref.weight.detach())


def test_a_stock_release_build_blocks_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Release builds default to NEURON_LAUNCH_BLOCKING=1 (torch-neuronx-facts, "Corrections"); dev builds do not;
    a value set wins either way."""
    monkeypatch.delenv("NEURON_LAUNCH_BLOCKING", raising=False)
    monkeypatch.setenv("NEURON_PROF_EMULATE_BUILD", "release")
    cfg = EmulatorConfig.from_env()
    assert cfg.build == "release" and cfg.blocking_execution and cfg.launch_blocking
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "0")
    assert not EmulatorConfig.from_env().blocking_execution
    monkeypatch.delenv("NEURON_LAUNCH_BLOCKING")
    monkeypatch.delenv("NEURON_PROF_EMULATE_BUILD")
    assert not EmulatorConfig.from_env().blocking_execution
