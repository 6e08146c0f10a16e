"""Neuron Explorer profiles: a processed profile folder of Parquet tables (`reader`, with `_schema`, `_tables`,
`_events`, `_device`, `_counters`, `_instructions`, `_summary`, `_profiles`, `_clock`), a runtime output folder
with its torch.profiler trace (`capture`, `copies`), the framework mapping (`framework_mapping`) and the
legacy JSON export (`legacy_json`)."""
