"""Benchmarks for neuron-prof (`make bench`; never part of `make test`). Run each as `python -m bench.<name>`."""
