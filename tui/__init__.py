"""The Textual terminal UI (`neuron-prof tui`)."""
