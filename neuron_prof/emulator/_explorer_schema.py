"""The schema the stand-in ``neuron-explorer`` declares: the tables and fields it writes, with the types, units
and Required flags of Neuron Explorer's schema 7.4.0 (shared/design/neuron-explorer-schema-7.4.0.txt), written
into every processed profile as ``SchemaFields`` (one row per table and field) and printed by
``--show-profile-schema``. A subset of 7.4.0: the fields the emulated runtime can fill; nothing is invented.
"""

from __future__ import annotations

from typing import Any

VERSION = "7.4.0"

# table: (description, "field:type[unit]" with '?' = not required), as in the 7.4.0 reference
_SPEC: dict[str, tuple[str, str]] = {
    "Metadata": ("Profile-wide facts; device-profile times are on the device clock",
                 "profile_schema_version:str, ntff_version:i32, num_physical_cores:i32, vnc_enabled:bool, "
                 "first_hw_timestamp:i64[ns], last_hw_timestamp:i64[ns], first_ts:str, last_ts:str, "
                 "hbm_ddr_bandwidth:f32[B/s], neuroncore_clock_freq:f32[GHz], ticks_per_nanosec:i64, "
                 "instance_type:str?, runtime_version:str?, driver_version:str?, explorer_version:str?, "
                 "compiler_version:str?, neuroncore_idx:i64?, neuron_device_idx:i64?, profile_name:str?, "
                 "is_simulation:bool?"),
    "SystemProfileMetadata": ("The system profile's span (Unix ns strings) and HBM capacity per NeuronCore",
                              "first_ts:str, last_ts:str, first_ts_ns:str, last_ts_ns:str, ntff_version:i64, "
                              "hbm_capacity_bytes:i64[bytes]"),
    "SystemProfileEvents": ("Framework, runtime and hardware events on the host clock",
                            "id:i64, name:str, start_ts:i64[ns], end_ts:i64[ns], duration_ns:i64[ns], "
                            "trace_event_source:str, instance_id:str, process_id:i64, thread_id:i64, nc_idx:i64?, "
                            "pcore_idx:i64?, worker_gid:i64?, flow_id:list<str>?, framework_stream_id:str?, "
                            "extra_attributes_json:str?"),
    "SystemProfileHbmUsage": ("Device memory by kind over time (host clock)",
                              "timestamp:i64[ns], total_bytes:i64[bytes], tensors_bytes:i64[bytes], "
                              "unknown_bytes:i64[bytes], device_idx:i64, hbm_idx:i64, instance_id:str"),
    "CpuUsage": ("Host CPU utilisation per core (host clock; ProfileMode CPU_UTIL)",
                 "timestamp:i64[ns], util_percent:f32[%], cpu_id:str, instance_id:str"),
    "HostMemUsage": ("Host memory in use (host clock; ProfileMode HOST_MEMORY)",
                     "timestamp:i64[ns], used_bytes:i64[bytes], used_percent:f32[%], instance_id:str"),
    "ExecutionInfo": ("One row per NEFF execution of the device profile, times relative to its start",
                      "execution_index:i32, neff_name:str?, execution_start_ts:i64[ns]?, "
                      "execution_end_ts:i64[ns]?, num_subgraphs:i32?, row_count:i64?"),
    "ActiveTime": ("Merged busy intervals per engine and physical core (device clock)",
                   "start_ts:i64[ns], end_ts:i64[ns], engine:str, pcore_idx:i64, duration_ns:i64[ns]"),
    "HbmUsage": ("HBM bandwidth series (device clock)",
                 "timestamp:i64[ns], current_throughput:f32[B/s], total_transfer_bytes:i64[bytes], pcore_idx:i64?"),
    "CcOp": ("Collective operations (device clock)",
             "start_ts:i64[ns], end_ts:i64[ns], duration_ns:i64[ns], operation:str, algorithm:str, "
             "num_elements:i64, dtype:str, op_id:i64, stream_id:i64, stream_index:i64, trigger_engine:str, "
             "input_size:i64[bytes]?, output_size:i64[bytes]?, algorithm_bandwidth:f32[B/s]?, "
             "bus_bandwidth:f32[B/s]?, replica_group:str?"),
    "Summary": ("Whole-profile metrics of the device profile",
                "total_time:f32[s]?, model_flops:i64[flops]?, hardware_flops:i64[flops]?, "
                "mfu_estimated_percent:f32[%]?, hfu_estimated_percent:f32[%]?, mbu_estimated_percent:f32[%]?, "
                "tensor_engine_active_time:f32[s]?, tensor_engine_active_time_percent:f32[%]?, "
                "vector_engine_active_time:f32[s]?, vector_engine_active_time_percent:f32[%]?, "
                "dma_active_time:f32[s]?, dma_active_time_percent:f32[%]?, cc_op_active_time:f32[s]?, "
                "cc_op_active_time_percent:f32[%]?, cc_op_count:i64?, total_active_time:f32[s]?, "
                "total_active_time_percent:f32[%]?"),
    "OpcodeSummary": ("Instructions per engine and opcode",
                      "engine:str, opcode:str, instruction_count:i64, instruction_time_ns:i64[ns], "
                      "active_time_ns:i64[ns], active_time_percent:f32"),
    "DeviceProfileList": ("The device profiles (NTFF files) of the run",
                          "device_profile_name:str, instance_id:str, process_id:i64, nc_id:i64, session_id:i64?"),
    "Warning": ("Ingestion problems (lost data)", "message:str, category:str"),
    "SchemaFields": ("Every table and field of this profile",
                     "table_name:str, table_description:str, field_name:str, field_description:str, "
                     "field_type:str, field_required:bool, field_unit:str?"),
}


def fields(table: str) -> list[tuple[str, str, str | None, bool]]:
    """(name, type, unit, required) of each field of `table`, in order."""
    out = []
    for part in _SPEC[table][1].split(", "):
        name, _, rest = part.partition(":")
        required = not rest.endswith("?")
        rest = rest.rstrip("?")
        typ, _, unit = rest.partition("[")
        out.append((name, typ, unit.rstrip("]") or None, required))
    return out


def arrow_type(typ: str) -> Any:
    import pyarrow as pa

    return {"i64": pa.int64(), "i32": pa.int32(), "f32": pa.float32(), "f64": pa.float64(), "str": pa.string(),
            "bool": pa.bool_(), "list<str>": pa.list_(pa.string())}[typ]


def tables() -> list[str]:
    return list(_SPEC)


def schema_rows() -> dict[str, list[Any]]:
    """The SchemaFields table's columns."""
    cols: dict[str, list[Any]] = {k: [] for k, _, _, _ in fields("SchemaFields")}
    for t in _SPEC:
        for name, typ, unit, req in fields(t):
            for k, v in (("table_name", t), ("table_description", _SPEC[t][0]), ("field_name", name),
                         ("field_description", ""), ("field_type", typ), ("field_required", req),
                         ("field_unit", unit)):
                cols[k].append(v)
    return cols


def as_yaml() -> str:
    """The schema as ``--show-profile-schema`` prints it."""
    lines = [f"profile_schema_version: {VERSION}", "tables:"]
    for t in _SPEC:
        lines.append(f"  {t}:")
        for name, typ, unit, req in fields(t):
            lines.append(f"    {name}: {{type: {typ}, required: {str(req).lower()}"
                         + (f", unit: {unit}" if unit else "") + "}")
    return "\n".join(lines) + "\n"
