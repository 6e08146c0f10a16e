"""The device and the host's waits on it: idle gaps and what the host did meanwhile (`idle`, `gap_host`,
`runqueue`), sync points (`sync`), CPU fallbacks (`fallback`), float64 demotions (`dtype`), the memory peak
(`memory`) and a Neuron device profile's totals (`profile`)."""
