"""The trace model: columnar events on one clock (Unix ns), the same for a capture and a loaded file.

    Trace
      processes  tuple[Process]   host processes (one per rank) and devices
      tracks     tuple[Track]     threads, device queues, compile/fallback/sync/collective/dtype, counters
      slices     SliceTable       ts_ns, dur_ns, track, name, cat, args   (numpy columns)
      instants   InstantTable     ts_ns, track, name, cat, args
      counters   CounterTable     ts_ns, track, value
      flows      FlowTable        src, dst (slice rows), flow_id, cat, name
      strings    StringTable      every name/cat is an int32 id into it
      args       ArgsStore        per-event argument dicts, stored as one JSON blob + offsets
      metadata   dict             see schema.Meta
      findings   tuple[dict]      filled by analysis

Names used by producers and consumers are in `neuron_prof.model.schema`.
"""

from neuron_prof.model._args import ArgsBuilder, ArgsStore, drop_mapped, dumps_args, number_pattern
from neuron_prof.model._builder import TraceBuilder
from neuron_prof.model._select import select_processes, split_ranks
from neuron_prof.model._strings import StringTable
from neuron_prof.model._tables import CounterTable, FlowTable, InstantTable, SliceTable
from neuron_prof.model._trace import Process, Trace, Track
from neuron_prof.model.schema import Arg, Cat, KinetoCat, Meta, ProcessKind, TrackKind
from neuron_prof.model.windows import ROW_WINDOW, row_windows

__all__ = [
    "ROW_WINDOW", "Arg", "ArgsBuilder", "ArgsStore", "Cat", "CounterTable", "FlowTable", "InstantTable", "KinetoCat", "Meta",
    "Process", "ProcessKind", "SliceTable", "StringTable", "Trace", "TraceBuilder", "Track", "TrackKind",
    "drop_mapped", "dumps_args", "number_pattern", "row_windows", "select_processes", "split_ranks",
]
