"""Read the join of the segments' partials of cuBLAS's tf32 ``segment_k_on`` kernels where segment 0 is not involved:
swamping probes with +L at a row's p_i and -L at its x_i (p_i < x_i), both anywhere in K.

    python3 tools/device/segment_k_tree_probe.py LIST.json OUT.json.gz [SECONDS]   (GPU host; torch, numpy, tcsmt)

As ``segment_k_probe.py`` (its docstring has the method), but row i of A holds 1 at every multiple of 8, +L = 2^40 at
p_i and -L at x_i (multiples of 8, drawn from numpy's ``default_rng(M * 1_000_003 + K)``, :func:`probe_px`).  Where
the tile is cut, an output is the number of 1s outside the smallest subtree of the join holding the segments of p_i
and x_i (the 1s inside it meet +L or -L before they cancel); one K-chain gives the 1s before p_i and after x_i.
Kept: as ``segment_k_probe.py`` (its :func:`run_probes` makes the calls).
"""
import sys

import numpy as np

try:
    from tools.device.segment_k_probe import L_EXP, run_probes
except ImportError:  # run as a script from tools/device's sibling path
    from segment_k_probe import L_EXP, run_probes


def probe_px(M: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """(p_i, x_i) of each row: two distinct multiples of 8 below K, p_i < x_i."""
    k8 = (K + 7) // 8
    rng = np.random.default_rng(M * 1_000_003 + K)
    a, b = rng.integers(0, k8, size=M), rng.integers(0, k8 - 1, size=M)
    b = np.where(b >= a, b + 1, b)
    return 8 * np.minimum(a, b), 8 * np.maximum(a, b)


def probe_a(M: int, K: int) -> np.ndarray:
    a = np.zeros((M, K), dtype=np.float32)
    a[:, 0::8] = 1.0
    p, x = probe_px(M, K)
    a[np.arange(M), p] = 2.0 ** L_EXP
    a[np.arange(M), x] = -(2.0 ** L_EXP)
    return a.view(np.uint32)


def main() -> int:
    return run_probes(probe_a, "segment-K tree probes (tools/device/segment_k_tree_probe.py)", 120.0)


if __name__ == "__main__":
    sys.exit(main())
