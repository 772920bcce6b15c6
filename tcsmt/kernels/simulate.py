"""``tcsmt.simulate`` and ``tcsmt.simulate_params`` through the compiled CPU kernel where it implements the path.

The same calls as :func:`tcsmt.sim.simulator.simulate_params` / :func:`~tcsmt.sim.simulator.simulate`
(arguments, checks, errors, output): the inputs are read by the simulator's own
:func:`tcsmt.sim.inputs.dot_patterns`, then every row runs through :func:`tcsmt.kernels.cpu.pairs_of_patterns`
(:mod:`tcsmt.kernels.cpu_rows`, numba, exact int64 arithmetic) where :func:`tcsmt.kernels.cpu.check_supported`
accepts the model, C is fp32 and no block scales are given, and the call holds enough products: at least
:data:`MIN_PRODUCTS` once the kernel has run in this process, :data:`MIN_PRODUCTS_COLD` before (the first call
imports numba and loads the kernel from numba's cache, about 0.3 s of CPU; the first call on a new machine or
after a change of the kernel compiles it, about 6 s of CPU).  Otherwise, and without numba, the numpy semantics
(:mod:`tcsmt.sim.simulator`) computes it: it stays the reference, and ``tests/test_gemm_kernel.py`` ties the
two together bit for bit on every supported path.
"""
from __future__ import annotations

import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import resolve
from tcsmt.errors import TcsmtError
from tcsmt.io.limits import SIM_K, at_most
from tcsmt.kernels import cpu
from tcsmt.sim import simulator
from tcsmt.sim.inputs import dot_patterns

MIN_PRODUCTS = 1 << 12
"""Rows x K from which the compiled kernel runs once it has run in this process (at 4,096 products the numpy
semantics takes about 2 ms, the kernel 0.06 ms; below, a call costs the numpy semantics about 2 ms)."""
MIN_PRODUCTS_COLD = 1 << 18
"""Rows x K from which the first call of a process loads the compiled kernel (0.3 s of CPU, once)."""
_loaded = False  # the compiled kernel has run in this process


def compiled_pairs(p: ModelParams, a, b, c, *, bits: bool = False) -> np.ndarray:
    """:func:`tcsmt.sim.simulator.simulate_params` (no block scales) on the compiled kernel; TcsmtError where
    the kernel does not implement ``p`` (or numba is missing).  For tests and benchmarks: no size threshold."""
    if p.scale_fmt:
        raise TcsmtError(f"{p.name}: block-scaled paths are not compiled")
    cpu.check_supported(p)
    if p.c_fmt != "fp32":
        raise TcsmtError(f"{p.name}: the compiled kernel takes C in fp32 only, not {p.c_fmt}")
    fin, fc = get_format(p.in_fmt), get_format(p.c_fmt)
    ab, bb, cb = dot_patterns(a, b, c, fin, fc, bits, b_fmt=get_format(p.b_format))
    if ab.shape[1] == 0:
        raise TcsmtError("K = 0: nothing to compile")
    at_most(ab.shape[1], SIM_K, "K", "products per dot product in the simulator")
    out = cpu.pairs_of_patterns(p, ab, bb, cb)
    global _loaded
    _loaded = True
    return out


def simulate_params(p: ModelParams, a: np.ndarray, b: np.ndarray, c: np.ndarray, *, bits: bool = False,
                    sa: np.ndarray | None = None, sb: np.ndarray | None = None) -> np.ndarray:
    """D = A.B + C row by row under model ``p``: :func:`tcsmt.sim.simulator.simulate_params` (its arguments
    and output), on the compiled kernel where it implements ``p`` (see the module docstring)."""
    if isinstance(p, ModelParams) and sa is None and sb is None and not p.scale_fmt:
        shape_a: tuple[int, ...] = tuple(getattr(a, "shape", ()))  # arrays only: the simulator reads the rest
        if len(shape_a) == 2 and shape_a[0] * shape_a[1] >= (MIN_PRODUCTS if _loaded else MIN_PRODUCTS_COLD):
            try:
                return compiled_pairs(p, a, b, c, bits=bits)
            except TcsmtError:
                pass  # not compiled (or bad input, which the simulator words in its own terms below)
    return simulator.simulate_params(p, a, b, c, bits=bits, sa=sa, sb=sb)


def simulate(arch: str, a, b, c, in_fmt: str, out_fmt: str, instr: str | None = None, *,
             bits: bool = False, sa=None, sb=None) -> np.ndarray:
    """Simulate ``arch`` (a model spec: ``volta``, ``volta:carry_bits=2``, ``exact`` ...) on one path:
    :func:`tcsmt.sim.simulator.simulate`, on the compiled kernel where it implements the path."""
    p = resolve(arch, in_fmt, out_fmt, instr)
    return simulate_params(p, a, b, c, bits=bits, sa=sa, sb=sb)
