"""The fp32 partial of each output of a ``segment_k_on`` plan (:attr:`tcsmt.library.plans.Plan.segment_k`), before the
reduction, epilogue and output rounding that :mod:`tcsmt.library.evaluate` applies to any fp32 partial.

An output (i, j) in a tile the launch keeps whole (:func:`tcsmt.library.segment_k.split_outputs`) is one K-chain of
the plan's ``chain`` over k = 0 .. K-1 from +0, as for a plan without split-K.  An output in a split tile is S
K-chains from +0, chain u over k in [e_(u-1), e_u) (e_0 = 0, :func:`tcsmt.library.segment_k.segment_ends`), whose fp32
sums are joined by :func:`tcsmt.library.segment_k.reduction_tree`: each node's value is RN32(left + right), the
exact sum rounded once with RNE, IEEE conventions (:data:`tcsmt.library.evaluate.IEEE32`'s, through
:func:`tcsmt.arith.semantics.add_rounded`).  The chains run through the caller's chain function (the compiled
kernels where present), the split outputs of a grid on the rectangle of their rows and columns only.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32
from tcsmt.arith.params import ModelParams, validate
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.errors import TcsmtError
from tcsmt.library.segment_k import (
    SegmentKLaunch,
    Tree,
    launch_problem,
    reduction_tree,
    segment_ends,
    split_outputs,
)

_B = NumpyBackend()
IEEE32 = validate(ModelParams(in_fmt="fp32", out_fmt="fp32", name="IEEE 754 binary32 arithmetic"))
"""The fp32 join's conventions (those of the library's other fp32 steps): +0 for exact cancellation, RNE overflow."""
Chain = Callable[[ModelParams, Any, Any], Any]


def check_problem(la: SegmentKLaunch, M: int, N: int, K: int) -> None:
    """TcsmtError where the launch was not recorded for a call of this M x N x K (a plan given to another call)."""
    why = launch_problem(la, M, N, K)
    if why:
        raise TcsmtError(f"the segment-K plan does not fit this call: {why}")


def output_indices(given: Any, count: int, full: int, what: str) -> np.ndarray:
    """The call's output indices (``rows`` of M, ``cols`` of N) of ``count`` rows or columns passed: the ones given
    (checked), or 0 .. full-1 where all ``full`` are passed and none named."""
    if given is None:
        if count != full:
            raise TcsmtError(f"a segment-K plan computes each output by its tile: pass {what}= (the call's indices "
                             f"of the {count} given; the call has {full})")
        return np.arange(full, dtype=np.int64)
    idx = np.asarray(given, dtype=np.int64).reshape(-1)
    if idx.size != count or (idx.size and (idx.min() < 0 or idx.max() >= full)):
        raise TcsmtError(f"{what} must hold {count} indices in 0..{full - 1}")
    return idx


def join(parts: list[np.ndarray], tree: Tree) -> np.ndarray:
    """The segments' fp32 partials (int64 patterns, one array each) joined as ``tree``: RN32(left + right) per node."""
    if isinstance(tree, int):
        return parts[tree]
    left, right = join(parts, tree[0]), join(parts, tree[1])
    return np.asarray(sem.add_rounded(_B, IEEE32, left, FP32, right, FP32, FP32, "rne")).astype(np.int64)


def segment_partials(la: SegmentKLaunch, p: ModelParams, A: np.ndarray, B: np.ndarray, chain: Chain) -> np.ndarray:
    """The joined partials of A (r, K) against B (K, c) through ``chain`` (grid or pairs, by the caller)."""
    ends = [0, *segment_ends(la.k, la.segments)]
    parts = [np.asarray(chain(p, A[:, lo:hi], B[lo:hi])).astype(np.int64) for lo, hi in itertools.pairwise(ends)]
    return join(parts, reduction_tree(la.segments))


def grid_partials(la: SegmentKLaunch, p: ModelParams, A: np.ndarray, B: np.ndarray, rows: np.ndarray,
                  cols: np.ndarray, chain: Chain) -> np.ndarray:
    """(r, c) fp32 partials (int64 patterns) of rows A (r, K) with columns B (K, c) at the call's outputs
    ``rows`` x ``cols``: one chain in whole tiles, the joined segments in split ones."""
    out = np.asarray(chain(p, A, B)).astype(np.int64)
    mask = split_outputs(la, rows[:, None], cols[None, :])
    if mask.any():
        ri, ci = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        sub = segment_partials(la, p, A[ri], B[:, ci], chain)
        block = np.ix_(ri, ci)
        out[block] = np.where(mask[block], sub, out[block])
    return out


def pair_partials(la: SegmentKLaunch, p: ModelParams, A: np.ndarray, B: np.ndarray, rows: np.ndarray,
                  cols: np.ndarray, chain: Chain) -> np.ndarray:
    """(n,) fp32 partials of the pairs (row i of A (n, K), column i of B (K, n)) at the call's outputs
    (rows[i], cols[i])."""
    mask = split_outputs(la, rows, cols)
    out = np.zeros(mask.shape, dtype=np.int64)
    for at, how in ((np.flatnonzero(~mask), chain), (np.flatnonzero(mask), None)):
        if at.size:
            out[at] = (np.asarray(chain(p, A[at], B[:, at])).astype(np.int64) if how is not None else
                       segment_partials(la, p, A[at], B[:, at], chain)).reshape(-1)
    return out
