"""A reading of the split-K GEMV pair ``gemvx`` + ``cublasLt::splitKreduce_kernel`` (decode products at long K; not
modelled: the catalogs refuse these calls) against the committed GPU outputs of its probed calls
(evidence/library/<gpu>_gemv_probes{,_ends,_unread}.json.gz, tools/device/gemv_probes.py through torch 2.11 / cuBLAS
13.1 on the H100 and the H200: random inputs and windowed swamping probes, 192 to 384 outputs a call).

The reading (docs/open_questions.md): the ``gemvx`` grid's z is the split count S; K is cut into S contiguous
slices of ceil(K/S) k's; each slice is summed as the ``gemvx`` kernel sums a call of that length (blockDim.y lanes,
the k's dealt in tiles round-robin, each lane one chain, the lane sums joined by the halving tree); the S fp32
partials are added serially from slice 0; the sum is rounded once (RNE) to the output format.  The sums are computed
here in numpy float32: every product of two 16-bit inputs is exact in fp32 and every float32 addition is one IEEE
RNE rounding, which is the FFMA chain's arithmetic on such products."""
from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tcsmt.arith import semantics as sem
from tcsmt.arith.formats import FP32
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.library.evaluate import fmt_of, to_fp32
from tools.library.gemv_orders import out_dtype_of, sampled_inputs

LIB = Path(__file__).resolve().parents[1] / "evidence" / "library"
FILES = ("gemv_probes", "gemv_probes_ends", "gemv_probes_unread")
SAMPLES = 128


@cache
def pair_calls() -> list[tuple[str, dict]]:
    out = []
    for gpu in ("h100", "h200"):
        for name in FILES:
            with gzip.open(LIB / f"{gpu}_{name}.json.gz", "rt") as f:
                for r in json.load(f)["results"]:
                    names = [k["name"] for k in r.get("kernels") or []]
                    if any("gemvx" in n for n in names) and any("splitKreduce" in n for n in names):
                        out.append((f"{gpu}_{name}", r))
    return out


def _values(bits: np.ndarray, dtype: str) -> np.ndarray:
    """16-bit input patterns as float32 values (the library's exact conversion)."""
    return to_fp32(bits, fmt_of(dtype)).astype(np.uint32).view(np.float32)


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    """RNE of fp32 values to the 16-bit output format, as bit patterns (the library's conversion)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    return np.asarray(sem.convert(NumpyBackend(), bits, FP32, fmt_of(dtype), "rne")).astype(np.uint16)


def _slice_sum(P: np.ndarray, lanes: int, tile: int) -> np.ndarray:
    """The ``gemvx`` sum of products P (outputs, k): lane (k // tile) mod lanes chains its k's in order, the lanes
    joined by the halving tree (lane t takes lane t + h, h = lanes/2, ..., 1)."""
    lane = (np.arange(P.shape[1]) // tile) % lanes
    acc = np.zeros((P.shape[0], lanes), np.float32)
    for t in range(lanes):
        ks = np.flatnonzero(lane == t)
        if ks.size:
            acc[:, t] = np.add.accumulate(P[:, ks], axis=1, dtype=np.float32)[:, -1]
    h = lanes // 2
    while h:
        acc[:, :h] = acc[:, :h] + acc[:, h:2 * h]
        h //= 2
    return acc[:, 0]


def pair_outputs(P: np.ndarray, S: int, lanes: int, dealing: str, *, unit: int = 1, join: str = "serial",
                 out_dtype: str) -> np.ndarray:
    """The reading (module docstring) with its variants: slices of ceil(K/S) rounded up to ``unit``; ``join`` serial
    or halving over the S partials; ``dealing`` ``chunk64`` (tiles of min(64, ceil(K_s/lanes))) or ``1``."""
    K = P.shape[1]
    chunk = -(-K // S)
    step = -(-chunk // unit) * unit
    parts = []
    for s in range(S):
        block = P[:, min(K, s * step):min(K, (s + 1) * step)]
        tile = 1 if dealing == "1" else min(64, -(-block.shape[1] // lanes)) or 1
        parts.append(_slice_sum(block, lanes, tile) if block.shape[1] else np.zeros(P.shape[0], np.float32))
    if join == "serial":
        total = np.zeros(P.shape[0], np.float32)
        for p in parts:
            total = total + p
    else:
        arr = np.stack(parts, axis=1)
        h = S // 2
        while h:
            arr[:, :h] = arr[:, :h] + arr[:, h:2 * h]
            h //= 2
        total = arr[:, 0]
    return _round(total, out_dtype)


def misses(r: dict, **variant) -> int:
    """Sampled outputs of probed call ``r`` the variant does not give."""
    gemvx = next(k for k in r["kernels"] if "gemvx" in k["name"])
    S, lanes = int(gemvx["grid"][2]), int(gemvx["block"][1])
    dt, out = r["spec"]["a_dtype"], out_dtype_of(r)
    bad = 0
    for _kind, a, b, got in sampled_inputs(r, SAMPLES):
        P = _values(a, dt) * _values(b.T, dt)  # exact in fp32
        bad += int((pair_outputs(P, S, lanes, out_dtype=out, **variant) != got.astype(np.uint16)).sum())
    return bad


def test_the_probed_pairs_are_the_ones_committed():
    """20 probed calls on the two GPUs: decode p V (``bmm``, M = 1, N = 64 / 128, K = 10,121 to 16,375, S = 16) and
    ``mm 1 x 768 x K`` at K = 30,522 and 50,257 (S = 64, two lanes)."""
    calls = pair_calls()
    assert len(calls) == 20
    assert {int(next(k for k in r["kernels"] if "gemvx" in k["name"])["grid"][2]) for _f, r in calls} == {16, 64}


def _cases() -> list:
    """Every probed call; the first (an H100 fp16 decode p V at K = 10,121) in the default run, the others slow."""
    out = []
    for n, (where, r) in enumerate(pair_calls()):
        s = r["spec"]
        cid = f"{where}-{s['op']}-{s['a_dtype']}-N{s['N']}-K{s['K']}-{n}"
        out.append(pytest.param(r, id=cid, marks=[] if n == 0 else [pytest.mark.slow]))
    return out


@pytest.mark.parametrize("r", _cases())
def test_the_reading_gives_every_sampled_output(r):
    """Slices of ceil(K/S), the gemvx order in each, partials added serially: every sampled output, with one of the
    two dealings (tiles of up to 64 k's, or k by k; the random outputs separate them only at K = 50,257, where k by k
    fits and the tiles miss one)."""
    assert min(misses(r, dealing="chunk64"), misses(r, dealing="1")) == 0


def test_the_variants_miss_on_the_first_call():
    """On the first probed call (fp16 p V, K = 10,121, S = 16): slices rounded up to 64 k's and a halving join of
    the partials each miss sampled outputs, with either dealing."""
    r = pair_calls()[0][1]
    assert r["spec"]["K"] == 10121
    for dealing in ("chunk64", "1"):
        assert misses(r, dealing=dealing, unit=64) > 0
        assert misses(r, dealing=dealing, join="halving") > 0
