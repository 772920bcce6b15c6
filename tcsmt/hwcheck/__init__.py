"""GPU harness, the runtime users import: CUDA sources, the CuPy/PyTorch runner that executes matrix-unit
instructions and library calls, input distributions, and the differential checks against the models."""
