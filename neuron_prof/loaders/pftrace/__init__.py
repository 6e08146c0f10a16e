"""neuron-prof's own Perfetto `.pftrace`: `reader.load_pftrace`; the packet walk in C (`_pfscan`, optional) or
in Python (`_scan`), interned data and annotations (`_decode`), track descriptors (`_tracks`)."""
