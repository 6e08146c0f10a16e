"""A Neuron Explorer profile that lacks its system or its device profile says so in the summary, rather than showing
the missing part as zero; memory snapshots are neither requested nor read.

Documents: how-to-profile-workload.rst, "Processing-time filtering" / "Skip system or device profiles":
``neuron-explorer view -d ./output --ignore-device-profile`` ("Skip device profiles (faster, system-only view)")
and ``--ignore-system-profile`` ("Skip system profiles (device-only view)"), for Parquet (the default) and JSON;
get-started.rst "Useful flags" (``--ignore-device-profile``: "Skip device-level traces"); troubleshooting.rst
(either flag to "process only what you need"). They do not list which tables each flag leaves out: the profiles
here drop the system profile's tables (``SystemProfile*``, ``CpuUsage``, ``HostMemUsage``) or the device
profile's (`tests.fakes.explorer_profile`, ``system=False`` / ``device=False``); the Perfetto output drops
``system_profile.pftrace`` or the ``device_profile_model_*.pftrace`` files (view-perfetto.rst's names).

Memory snapshots: the TorchNeuron memory-profiling guide (2026-10-08) says torch-neuronx records allocation
snapshots that open in Neuron Explorer or in PyTorch's memory visualizer, and how-to-profile-pytorch.rst
(2026-10-26) lists memory snapshots among what a PyTorch capture can hold. **The documents read here stop
there**: neither the call that records one with a profile, nor its file name in the profile folder, nor its
layout. So neuron-prof requests none and reads none; a PyTorch memory snapshot is a pickle
(``torch.cuda.memory._dump_snapshot("x.pickle")``, PyTorch's "Understanding CUDA Memory Usage"), and a profile
folder holding one loads without it being unpickled.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from neuron_prof.cli import main
from neuron_prof.loaders import load
from neuron_prof.loaders.explorer.perfetto import SYSTEM_FILE
from neuron_prof.loaders.explorer.reader import EXPLORER_KEY
from tests.fakes.explorer_perfetto import device_profile, system_profile
from tests.fakes.explorer_profile import T0, write_profile


def _summary(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, dict]:
    assert main(["summary", str(path)]) == 0
    text = capsys.readouterr().out
    assert main(["summary", str(path), "--json"]) == 0
    return text, json.loads(capsys.readouterr().out)["totals"]["neuron_explorer"]


def test_a_system_only_profile_says_it_has_no_device_profile(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    write_profile(tmp_path / "p", device=False)  # --ignore-device-profile, or none captured
    assert load(tmp_path / "p").metadata[EXPLORER_KEY]["lacks"] == ["device profile"]
    text, ex = _summary(tmp_path / "p", capsys)
    assert "No device profile" in text and "--ignore-device-profile" in text and "MFU" in text
    assert "Device profile: MFU" not in text and "No system profile" not in text
    assert set(ex["lacks"]) == {"device profile"} and "summary" not in ex  # no MFU of 0: none at all


def test_a_device_only_profile_says_it_has_no_system_profile(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    write_profile(tmp_path / "p", system=False)  # --ignore-system-profile
    tr = load(tmp_path / "p")
    assert tr.metadata[EXPLORER_KEY]["lacks"] == ["system profile"]
    assert not [r for r in tr.slices_on("device") if tr.slice_name(int(r)) == "nrt_execute"]
    text, ex = _summary(tmp_path / "p", capsys)
    assert "No system profile" in text and "--ignore-system-profile" in text
    assert "No device profile" not in text and "Device profile: MFU" in text
    assert set(ex["lacks"]) == {"system profile"}


def test_a_whole_profile_lacks_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_profile(tmp_path / "p")
    assert "lacks" not in load(tmp_path / "p").metadata[EXPLORER_KEY]
    text, ex = _summary(tmp_path / "p", capsys)
    assert "No system profile" not in text and "No device profile" not in text and "lacks" not in ex


def test_the_perfetto_output_says_which_files_it_lacks(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    (tmp_path / "dev").mkdir()
    system_profile(tmp_path / "sys", [(T0 + 1_000_000, 500_000)])
    device_profile(tmp_path / "dev", 0, 1_000, [("tensor", 0, 100)])
    assert load(tmp_path / "sys" / SYSTEM_FILE).metadata[EXPLORER_KEY]["lacks"] == ["device profile"]
    assert load(tmp_path / "dev").metadata[EXPLORER_KEY]["lacks"] == ["system profile"]


class _Unpickled:
    """Unpickling this makes a folder: proof that a loader unpickled a file it found."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.mkdir, (str(self.marker),)


def test_a_memory_snapshot_beside_the_tables_is_not_read(tmp_path: Path) -> None:
    """The documents give no memory snapshot layout in a profile (module docstring): a PyTorch-style pickled
    snapshot beside the tables is not unpickled, and the profile claims no memory snapshot."""
    write_profile(tmp_path / "p")
    marker = tmp_path / "unpickled"
    for name in ("memory_snapshot.pickle", "snapshot.pkl"):
        (tmp_path / "p" / name).write_bytes(pickle.dumps(_Unpickled(marker)))
    own = load(tmp_path / "p").metadata[EXPLORER_KEY]
    assert not marker.exists()
    assert not any("snapshot" in k for k in own)
