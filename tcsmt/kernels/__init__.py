"""The semantics of one library K-chain compiled for speed (numba on the CPU, CUDA through CuPy on the GPU):
a second implementation, tied to :mod:`tcsmt.arith.semantics` bit for bit by the tests.
"""
