"""``torch_neuronx.profiling`` look-alike with the documented shapes, and a fake ``neuron-explorer`` on PATH.

Sources: shared/design/torch-neuronx-facts.md ("Profiler": ``NeuronConfig(modes, max_events_per_nc,
capture_enabled_for_nc, profile_output_dir, neff_cache_dir)`` passed as ``experimental_config``,
``NeuronProfiler(cfg).export_trace`` as ``on_trace_ready``, the framework mapping document) and
neuron-explorer-facts.md ("Capture": ``<profile_output_dir>/<instance-id>_pid_<pid>/<timestamp>/`` with
trace.json and, per mode, .neff + .ntff (DEVICE), ntrace.pb + trace_info.pb (RUNTIME); "Processing":
``neuron-explorer view -d <dir> --output-format parquet``). The fake explorer writes the documented schema
(`explorer_profile`) for the aten::mm ops of the capture's trace.json, and prints the dropped-events line
AWS's troubleshooting guide quotes.
"""

from __future__ import annotations

import enum
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

import orjson
from torch._C._profiler import _ExperimentalConfig

INSTANCE = "i-0fake"
REPO = Path(__file__).resolve().parents[2]
DROPPED_LINE = ("WARN[0000] Warning: 1001 trace events were dropped during capture (stored 530560 out of "
                "531561 total events).")


class ProfileMode(enum.Enum):
    DEVICE = "device"
    RUNTIME = "runtime"
    CPU_UTIL = "cpu_util"
    HOST_MEMORY = "host_memory"


class NeuronConfig(_ExperimentalConfig):  # torch.profiler's experimental_config must be one
    def __init__(self, modes: list[ProfileMode] | None = None, max_events_per_nc: int = 1_000_000,
                 capture_enabled_for_nc: str | None = None, profile_output_dir: str = "./output",
                 neff_cache_dir: str | None = None, precache_node_info: bool = True) -> None:
        super().__init__()
        self.modes = list(modes) if modes is not None else [ProfileMode.DEVICE, ProfileMode.RUNTIME]
        self.max_events_per_nc = max_events_per_nc
        self.capture_enabled_for_nc = capture_enabled_for_nc
        self.profile_output_dir = profile_output_dir
        self.neff_cache_dir = neff_cache_dir
        self.precache_node_info = precache_node_info


class NeuronProfiler:
    exports: list[Path] = []
    configs: list[NeuronConfig] = []
    """The config of each export, in order (a test reads which modes each cycle had)."""
    with_modules: list[bool] = []
    """torch.profiler's ``with_modules`` at each export: not among the documented profiler arguments with a
    ``NeuronConfig`` (issue 33)."""

    def __init__(self, config: NeuronConfig) -> None:
        self.config = config

    def export_trace(self, prof: Any) -> None:
        ts = time.strftime("%Y%m%d_%H%M%S") + f"_{len(NeuronProfiler.exports)}"
        folder = Path(self.config.profile_output_dir) / f"{INSTANCE}_pid_{os.getpid()}" / ts
        folder.mkdir(parents=True)
        prof.export_chrome_trace(str(folder / "trace.json"))
        if ProfileMode.RUNTIME in self.config.modes:
            (folder / "ntrace.pb").write_bytes(b"\0")
            (folder / "trace_info.pb").write_bytes(b"\0")
        if ProfileMode.DEVICE in self.config.modes:
            (folder / "neff_1.neff").write_bytes(b"\0")
            (folder / "1_instid_0_vnc_0.ntff").write_bytes(b"\0")
        mapping = orjson.dumps({"version": 1, "data": []})
        (folder / f"framework_mapping_{int(time.time())}.json").write_bytes(mapping)
        NeuronProfiler.exports.append(folder)
        NeuronProfiler.configs.append(self.config)
        NeuronProfiler.with_modules.append(bool(getattr(prof, "with_modules", False)))


def install(module: types.ModuleType) -> types.ModuleType:
    """Give a fake torch_neuronx its ``profiling`` submodule."""
    prof = types.ModuleType("torch_neuronx.profiling")
    prof.NeuronConfig, prof.NeuronProfiler, prof.ProfileMode = NeuronConfig, NeuronProfiler, ProfileMode  # type: ignore[attr-defined]
    module.profiling = prof  # type: ignore[attr-defined]
    return prof


EXPLORER = '''#!{python}
import sys
sys.path.insert(0, {repo!r})
from tests.fakes.fake_neuron_profiling import explorer_main
sys.exit(explorer_main(sys.argv[1:]))
'''


def write_explorer(bin_dir: Path) -> Path:
    """A ``neuron-explorer`` executable in `bin_dir` (put it first on PATH)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "neuron-explorer"
    exe.write_text(EXPLORER.format(python=sys.executable, repo=str(REPO)))
    exe.chmod(0o755)
    return exe


CALLS = "neuron-explorer-calls.txt"
"""Each call's arguments, one line each, appended in the run directory's parent (a test counts the calls)."""


def explorer_main(argv: list[str]) -> int:
    """``view -d RUN_DIR --output-format parquet --output-file OUT [--ignore-device-profile]``: a processed profile
    of the run directory's capture (its one ``<instance>_pid_<pid>/<ts>/trace.json``); no device tables with
    ``--ignore-device-profile``."""
    from tests.fakes.explorer_profile import write_profile

    if argv[:1] != ["view"] or "-d" not in argv or "--output-file" not in argv:
        print(f"neuron-explorer: unsupported arguments {argv}", file=sys.stderr)
        return 2
    run, out = Path(argv[argv.index("-d") + 1]), Path(argv[argv.index("--output-file") + 1])
    if argv[argv.index("--output-format") + 1] != "parquet":
        return 2
    with open(run.parent / CALLS, "a") as f:
        f.write(" ".join(argv) + "\n")
    found = sorted(run.glob("*_pid_*/*/trace.json"))
    if not found:
        return 1
    src = found[0].parent
    doc = orjson.loads((src / "trace.json").read_bytes())
    base = int(doc.get("baseTimeNanoseconds") or 0)  # Kineto: ts in µs after this Unix-ns base
    ops = [("aten::mm", base + round(float(e["ts"]) * 1000), int(e["tid"])) for e in doc["traceEvents"]
           if e.get("name") == "aten::mm" and e.get("cat") == "cpu_op"]
    pid = int(src.parent.name.rsplit("_pid_", 1)[1])
    instance = src.parent.name.rsplit("_pid_", 1)[0]  # the documented folder name <instance-id>_pid_<pid>
    write_profile(out, ops=ops, pid=pid, instance=instance, t0=min(t for _, t, _ in ops) - 1_000_000,
                  device="--ignore-device-profile" not in argv)  # "Skip device profiles" (how-to-profile-workload)
    print(DROPPED_LINE, file=sys.stderr)
    return 0
