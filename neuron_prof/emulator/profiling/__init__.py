"""The emulated runtime's profiling extras: the CPU_UTIL / HOST_MEMORY capture modes (`host_usage`) and the
stand-in ``neuron-explorer``'s Perfetto and summary-json outputs (`explorer_outputs`)."""
