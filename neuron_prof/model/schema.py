"""The trace model's vocabulary: track kinds, categories and argument keys, defined once.

Producers (loaders, capture, probes) and consumers (analysis, exporters, tui) use these names,
never string literals of their own, so a probe and the analysis that reads it cannot drift apart.

Probe event conventions (slices unless noted; all times Unix ns):

* ``compile`` track: one slice per compile. name = op (eager) or graph/frame name (torch.compile).
  args: ``compile_kind`` ("eager" | "torch.compile" | "backward"), ``signature``, ``cache`` ("miss" | "hit" |
  "disk"), ``call_site`` ("file.py:LINE"), ``module``, ``compile_id``, ``recompile_reason``, ``phases``
  (dict name -> ns), ``step``. Graph breaks and "recompile limit hit" are instants on the same track.
* ``fallback`` track: one slice per fallen-back call. name = op. args: ``shapes``, ``dtypes``,
  ``copy_bytes`` (host<->device bytes forced), ``call_site``, ``module``, ``stack``.
* ``sync`` track: one slice per host wait on the device. name = what waited (``aten::item``, ...).
  args: ``sync_kind`` ("item" | "cpu" | "synchronize" | "print" | ...), ``call_site``, ``module``.
* ``device`` tracks (one per device queue/stream): device executions. args: ``seq`` (links to the host
  op), ``stream``; flows from the launching host op.
* ``collective`` track: one slice per collective. name = op ("all_reduce"). args: ``bytes_in``,
  ``bytes_out``, ``dtype``, ``group``, ``ranks``, ``world_size``, ``seq``, ``algbw_gbps``, ``busbw_gbps``.
* ``dtype`` track: instants "float64 -> float32" with ``call_site``, ``shape``, ``op``.
* ``memory`` tracks: counters in bytes ("neuron:0 allocated", "neuron:0 reserved", "host allocated").
* ``findings`` track: instants, one per finding, args = the finding's dict.
"""

from __future__ import annotations

from typing import Final

FORMAT_VERSION: Final = 1
"""Version of the neuron-prof additions to the trace (metadata key ``neuron_prof``)."""

META_KEY: Final = "neuron_prof"
"""Top-level key (JSON) / metadata track (pftrace) holding neuron-prof's own metadata."""


class TrackKind:
    """What a track holds. Stable strings: they are written into trace files."""

    THREAD: Final = "thread"  # host thread (CPU ops, python functions, annotations)
    DEVICE: Final = "device"  # a device queue / stream (kernels, memcpy, neuron executions)
    COMPILE: Final = "compile"
    FALLBACK: Final = "fallback"
    SYNC: Final = "sync"
    COLLECTIVE: Final = "collective"
    DTYPE: Final = "dtype"
    MEMORY: Final = "memory"  # counter track, bytes
    COUNTER: Final = "counter"  # other counter track
    FINDINGS: Final = "findings"
    ASYNC: Final = "async"  # async (b/e) spans from JSON
    OTHER: Final = "other"

    ALL: Final = (THREAD, DEVICE, COMPILE, FALLBACK, SYNC, COLLECTIVE, DTYPE, MEMORY, COUNTER, FINDINGS,
                  ASYNC, OTHER)
    COUNTERS: Final = (MEMORY, COUNTER)


class ProcessKind:
    HOST: Final = "host"
    DEVICE: Final = "device"


class Cat:
    """Categories neuron-prof writes (Kineto's own are kept as they come)."""

    COMPILE: Final = "neuron_prof.compile"
    FALLBACK: Final = "neuron_prof.fallback"
    SYNC: Final = "neuron_prof.sync"
    DEVICE: Final = "neuron_prof.device"
    COLLECTIVE: Final = "neuron_prof.collective"
    DTYPE: Final = "neuron_prof.dtype"
    FINDING: Final = "neuron_prof.finding"
    MEMORY: Final = "neuron_prof.memory"
    ENGINE_BUSY: Final = "neuron_explorer.active"
    """A device engine's merged busy intervals (Neuron Explorer's ActiveTime): utilisation, not work items."""
    DEVICE_ERROR: Final = "neuron_explorer.error"
    """A hardware error the device profile recorded (Neuron Explorer's Error table: NaN, out-of-bounds...)."""


class Arg:
    """Argument keys of probe events (see the module docstring)."""

    COMPILE_KIND: Final = "compile_kind"
    SIGNATURE: Final = "signature"
    CACHE: Final = "cache"
    CALL_SITE: Final = "call_site"
    MODULE: Final = "module"
    STACK: Final = "stack"
    COMPILE_ID: Final = "compile_id"
    RECOMPILE_REASON: Final = "recompile_reason"
    PHASES: Final = "phases"
    STEP: Final = "step"
    SHAPES: Final = "shapes"
    DTYPES: Final = "dtypes"
    COPY_BYTES: Final = "copy_bytes"
    SYNC_KIND: Final = "sync_kind"
    SEQ: Final = "seq"
    STREAM: Final = "stream"
    BYTES_IN: Final = "bytes_in"
    BYTES_OUT: Final = "bytes_out"
    DTYPE: Final = "dtype"
    GROUP: Final = "group"
    RANKS: Final = "ranks"
    WORLD_SIZE: Final = "world_size"
    ALGBW: Final = "algbw_gbps"
    BUSBW: Final = "busbw_gbps"
    SHAPE: Final = "shape"
    OP: Final = "op"
    # added by the backend probes (see neuron_prof/backends/probes/)
    SILENT: Final = "silent"  # fallback the backend did not report (found from device-to-host transfers)
    FOUND_BY: Final = "found_by"  # how an unreported fallback was found (its span's structure, a transfer)
    INFERRED: Final = "inferred"  # compile stall inferred from op durations (the backend reported none)
    REPORTED_AS: Final = "reported_as"  # the backend's own name for a fallen-back op ("aten::sort.stable")
    INPUT_BYTES: Final = "input_bytes"
    DEVICE_TS: Final = "device_ts_ns"  # a collective's device span (NCCL kernel), when the backend gives one
    DEVICE_DUR: Final = "device_dur_ns"
    WORK_TS: Final = "work_ts_ns"  # a collective's backend work span (gloo:/nccl: annotation)
    WORK_DUR: Final = "work_dur_ns"
    REASON: Final = "reason"  # graph break / recompile-limit reason
    DEEP: Final = "deep"  # recorded by the opt-in dispatch-level fallback mode
    BYTES: Final = "bytes"
    DEVICE: Final = "device"


class EventName:
    """Names of probe instants that analyses look for."""

    RECOMPILE_LIMIT: Final = "recompile limit hit"
    GRAPH_BREAK: Final = "graph break"
    MEMORY_PEAK: Final = "memory peak"
    DTYPE_DEMOTION: Final = "float64 -> float32"
    INT64_DEMOTION: Final = "int64 -> int32"
    CACHE_CLEARED: Final = "compile cache cleared"
    """The user's program emptied the compile cache (args: call, entries dropped, call_site, stack, step)."""


class KinetoCat:
    """Kineto categories the loaders and analyses look at."""

    CPU_OP: Final = "cpu_op"
    PYTHON: Final = "python_function"
    USER_ANNOTATION: Final = "user_annotation"
    GPU_USER_ANNOTATION: Final = "gpu_user_annotation"
    KERNEL: Final = "kernel"
    GPU_MEMCPY: Final = "gpu_memcpy"
    GPU_MEMSET: Final = "gpu_memset"
    CUDA_RUNTIME: Final = "cuda_runtime"
    CUDA_DRIVER: Final = "cuda_driver"
    CPU_INSTANT: Final = "cpu_instant_event"
    PRIVATEUSE1_DRIVER: Final = "privateuse1_driver"
    PROFILER_SPAN: Final = "Trace"
    """Kineto's span of the whole capture (``PyTorch Profiler (0)`` on pid "Spans"): the window, not work."""
    DEVICE_CATS: Final = (KERNEL, GPU_MEMCPY, GPU_MEMSET, "mtia_ccp_events", PRIVATEUSE1_DRIVER)


COMPILE_PHASES: Final = ("entire_frame_compile", "backend_compile", "inductor_compile", "entire_backward_compile")
"""torch.compile's phase spans (cpu_op, torch-facts.md); Dynamo's and AOTAutograd's others end in "(dynamo_timed)"."""


def is_compile_span(name: str) -> bool:
    """A span of torch.compile compiling (Dynamo tracing, AOTAutograd's ``aot_collect_metadata`` and
    ``aot_trace_joint_graph``, the backend): the ops inside ran on fake or meta tensors or compiled the graph;
    none of them is the program's own work on the device (a compiled graph runs in ``Torch-Compiled Region``)."""
    return name.endswith("(dynamo_timed)") or name in COMPILE_PHASES


AUTOGRAD_EVALUATE = "autograd::engine::evaluate_function: "
"""The prefix of the span autograd's engine opens around each node it runs in the backward pass (not an op)."""


class Meta:
    """Keys of ``Trace.metadata`` that neuron-prof itself sets."""

    SOURCE: Final = "source"  # path the trace was loaded from
    SOURCE_FORMAT: Final = "source_format"  # "kineto_json" | "pftrace" | "capture"
    CLOCK: Final = "clock"  # "unix" | "relative" (no Unix base known)
    HOST_NAME: Final = "host"  # the capturing machine's name
    BOOT_ID: Final = "boot_id"
    """The capturing kernel's boot id (Linux `/proc/sys/kernel/random/boot_id`): ranks under one kernel share
    its Unix clock, containers included, whatever their host names (every container may be `localhost`)."""
    RANK: Final = "rank"
    WORLD_SIZE: Final = "world_size"
    BACKEND: Final = "backend"  # adapter that captured it: "cpu" | "cuda" | "neuron" | ...
    PROBE_ERRORS: Final = "probe_errors"  # list of {"probe", "error"}
    OVERHEAD_NS: Final = "profiler_overhead_ns"
    PROBE_OVERHEAD: Final = "probe_overhead_ns"  # {probe: ns} each probe cost the user's program (hooks + start/stop)
    PROBE_HOOKS: Final = "probe_hook_ns"  # {probe: ns} spent inside hooks while user code ran
    WARNINGS: Final = "load_warnings"
    PARTIAL: Final = "partial"  # events of this file were lost as it was read: {truncated, problems, bytes_read}
    KINETO: Final = "kineto"  # Kineto's own top-level keys (deviceProperties, distributedInfo, ...)
    WALL: Final = "wall_ns"  # (start, end) of the profiled region when known
    STEPS: Final = "steps"  # list of [step, start_ns, end_ns]
    RUNQUEUE: Final = "host_runqueue_ns"
    """[[ts_ns, on_cpu_ns, runqueue_wait_ns], ...]: cumulative Linux schedstat counters of the profiled thread at
    start, each step boundary and stop (the time it ran, and the time it was runnable but waited for a CPU that
    other processes held; kernel docs Documentation/scheduler/sched-stats.rst)."""
    LOADAVG: Final = "host_loadavg"  # [[ts_ns, 1-minute load average], ...] at start and stop (/proc/loadavg)
    CAPTURE_REDUCED: Final = "capture_reduced"
    """What a capture left out to stay small: {"python": {"python_slices", "dropped", "merged"}} (op-free Python
    work folded, `capture._prune`), and under ``profile(max_events=N)`` "max_events", "events_before",
    "python_frames_deeper_than"/"python_frames_dropped", "steps_sampled" {"every", "kept", "steps_dropped",
    "events_dropped"}, "ends_early_ns"/"events_cut_at_end" (`capture._cap`)."""
    EXIT_SITE: Final = "capture_exit_site"
    """"path:LINE" of the user's line where the exception that ended the profiled block was raised (the innermost
    user frame of its traceback); absent when the block ended otherwise."""
