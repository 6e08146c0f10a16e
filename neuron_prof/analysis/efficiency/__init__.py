"""Efficiency: FLOPs and bytes per op and user line from the recorded shapes (`work`), the device's peaks
(`peaks`), achieved rates and share of peak per op and line (`rates`), and the critical path of a step
(`critical_path`). Pure: numpy, no torch."""
