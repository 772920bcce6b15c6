"""``tcsmt.simulate`` and ``tcsmt.simulate_params`` through the compiled CPU kernel where it implements the path.

The same calls as :func:`tcsmt.sim.simulator.simulate_params` / :func:`~tcsmt.sim.simulator.simulate`
(arguments, checks, errors, output): the inputs are read by the simulator's own
:func:`tcsmt.sim.inputs.dot_patterns`, then every row runs through :func:`tcsmt.kernels.cpu.pairs` (numba,
exact int64 arithmetic) where :func:`tcsmt.kernels.cpu.check_supported` accepts the model, C is fp32 and no
block scales are given, and the call holds at least :data:`MIN_PRODUCTS` products (below that the numpy
semantics is as fast as loading the compiled kernel).  Otherwise, and without numba, the numpy semantics
(:mod:`tcsmt.sim.simulator`) computes it: it stays the reference, and ``tests/test_gemm_kernel.py`` ties the
two together bit for bit on every supported path.
"""
from __future__ import annotations

import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import resolve
from tcsmt.errors import TcsmtError
from tcsmt.kernels import cpu
from tcsmt.sim import simulator
from tcsmt.sim.inputs import dot_patterns

MIN_PRODUCTS = 1 << 18
"""Rows x K below which the numpy semantics runs (about 10 ms there; loading the compiled kernel from numba's
cache takes longer, compiling it the first time 5-7 s)."""


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
    return cpu.pairs_of_patterns(p, ab, bb, cb.astype(np.int64))


def simulate_params(p: ModelParams, a: np.ndarray, b: np.ndarray, c: np.ndarray, *, bits: bool = False,
                    sa: np.ndarray | None = None, sb: np.ndarray | None = None) -> np.ndarray:
    """D = A.B + C row by row under model ``p``: :func:`tcsmt.sim.simulator.simulate_params` (its arguments
    and output), on the compiled kernel where it implements ``p`` (see the module docstring)."""
    if isinstance(p, ModelParams) and sa is None and sb is None and not p.scale_fmt:
        shape_a: tuple[int, ...] = tuple(getattr(a, "shape", ()))  # arrays only: the simulator reads the rest
        if len(shape_a) == 2 and shape_a[0] * shape_a[1] >= MIN_PRODUCTS:
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
