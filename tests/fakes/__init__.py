"""Fakes of the torch-neuronx API with exactly the documented shapes, and a helper to run real profiles."""
