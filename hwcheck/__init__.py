"""GPU harness: CUDA sources and the CuPy runner that executes matrix-unit instructions."""
