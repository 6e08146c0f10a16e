"""C++ sources of the emulated device's extension, as Python strings (`_ext_build` compiles them)."""
