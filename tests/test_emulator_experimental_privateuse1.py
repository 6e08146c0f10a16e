"""The experimental PrivateUse1 extension (neuron_prof.emulator.experimental_privateuse1), measured on the
same idioms as the emulated device (tests/_idioms.py): what a real PrivateUse1 tensor fixes and what the
prototype still lacks. README "The emulated neuron device" states the decision these numbers support.

The extension is built by torch.utils.cpp_extension on first use (about 2 minutes on 2 shared cores) into the
user cache, and only loaded afterwards. Each backend runs in a process of its own.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests._idioms import IDIOMS, run_backend, same

SUBCLASS_ONLY = {"type_is_tensor", "exact_parameter_type", "load_map_location_device"}
"""Idioms a tensor subclass cannot pass and a real PrivateUse1 tensor does (test_emulator_idioms.DIFFERENT
holds a fourth, device_generator, which needs C++ hooks the prototype does not register)."""

NOT_PORTED = {
    "device_generator": "no C++ PrivateUse1 hooks with a generator in the prototype",
    "rnn_gru_lstm": "no host kernels for the fused RNN cells (the emulator's _rnn_cells)",
    "embedding_layernorm_conv": "convolution has no PrivateUse1 kernel (convolution_overrideable)",
    "autocast_bf16": "no AutocastPrivateUse1 policies (the emulator's _autocast)",
    "grad_scaler": "follows from autocast (float32 instead of bfloat16 rounding)",
    "dataloader_workers_pin_memory": "pin_memory needs pinned-memory hooks (the emulator returns pageable "
                                     "memory)",
    "ddp_one_process": "no c10d backend for the device (the emulator's _c10d)",
}
"""Idioms the prototype fails, each for an emulator part not ported to it (measured)."""

SLOW = {"ddp_two_processes", "torch_compile", "checkpointing"}  # ~40 s together; left out here


@pytest.mark.slow
def test_prototype_passes_what_the_subclass_cannot_and_lacks_only_unported_parts(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    names = [n for n in IDIOMS if n not in SLOW]
    d = tmp_path_factory.mktemp("proto")
    with ThreadPoolExecutor(2) as pool:
        futs = {b: pool.submit(run_backend, b, d / f"{b}.jsonl", names)
                for b in ("cpu", "neuron-experimental")}
        res: dict[str, dict[str, dict[str, Any]]] = {b: f.result() for b, f in futs.items()}
    cpu, proto = res["cpu"], res["neuron-experimental"]
    differ = {n for n in names if not ("ok" in proto[n] and same(cpu[n]["ok"], proto[n]["ok"]))}
    assert all("ok" in cpu[n] for n in names)
    assert not SUBCLASS_ONLY & differ, {n: proto[n] for n in SUBCLASS_ONLY & differ}
    assert differ == set(NOT_PORTED), {n: proto[n] for n in differ ^ set(NOT_PORTED)}
