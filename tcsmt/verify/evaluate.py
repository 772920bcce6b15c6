"""The schemes on numpy arrays and their exact errors (the simulator side of ``tcsmt verify``).

Errors of a computed D against the exact dot product P = sum_k a_k b_k (an exact rational: every
fp32 product is exact): absolute |D - P|; relative |D - P| / sum_k |a_k b_k| (the usual measure for
dot products, bounds of the form gamma_K |a|.|b|; it equals |D - P| / |P| when the products do not
cancel, and stays finite under cancellation).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from tcsmt.arith.formats import FP32
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import architectures, resolve
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.errors import TcsmtError
from tcsmt.verify.domain import Domain
from tcsmt.verify.schemes import check_path, input_format, scheme, scheme_key

NB = NumpyBackend()
CHUNK = 1 << 14


def simulate_scheme(algo: str, p: ModelParams | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp32 result patterns of ``algo`` for fp32 patterns a, b of shape (n, K)."""
    fn = scheme(algo)
    a = np.asarray(a, dtype=np.uint32)
    b = np.asarray(b, dtype=np.uint32)
    if a.ndim != 2 or a.shape != b.shape or a.shape[1] == 0:
        raise TcsmtError(f"a and b must have one shape (n, K) with K >= 1; got {a.shape} and {b.shape}")
    n, K = a.shape
    out = np.empty(n, dtype=np.uint32)
    for s in range(0, n, CHUNK):
        e = min(n, s + CHUNK)
        cols_a = [a[s:e, k].astype(np.int64) for k in range(K)]
        cols_b = [b[s:e, k].astype(np.int64) for k in range(K)]
        d = fn(NB, p, cols_a, cols_b)
        out[s:e] = np.broadcast_to(np.asarray(d), (e - s,)).astype(np.uint32)
    return out


def exact_dot(a: Sequence[int], b: Sequence[int]) -> Fraction:
    """sum_k a_k b_k exactly, for fp32 patterns."""
    return sum((Fraction(FP32.to_fraction(x)) * Fraction(FP32.to_fraction(y)) for x, y in zip(a, b)), Fraction(0))


def abs_products(a: Sequence[int], b: Sequence[int]) -> Fraction:
    """sum_k |a_k b_k| exactly, for fp32 patterns."""
    return sum((abs(Fraction(FP32.to_fraction(x)) * Fraction(FP32.to_fraction(y))) for x, y in zip(a, b)), Fraction(0))


def error_of(d_bits: int, a: Sequence[int], b: Sequence[int], relative: bool) -> Fraction | float:
    """Exact error of the fp32 result ``d_bits`` (inf when D is not finite; see module docstring)."""
    d = FP32.to_fraction(int(d_bits))
    if isinstance(d, float):
        return math.inf
    err = abs(d - exact_dot(a, b))
    if not relative:
        return err
    norm = abs_products(a, b)
    if norm == 0:
        return Fraction(0) if err == 0 else math.inf
    return err / norm


def random_inputs(rng: np.random.Generator, n: int, K: int, dom: Domain, dist: str) -> tuple[np.ndarray, np.ndarray]:
    """fp32 patterns (n, K) for A and B, random signs, magnitudes in the domain.

    ``loguniform``: log2|x| uniform over [log2 max(LO, 2^-126), log2 HI];
    ``uniform``: |x| uniform over [LO, HI].  Values are rounded to fp32 and
    clipped to the domain's extreme fp32 values.
    """
    out = []
    lo_v = float(FP32.to_fraction(dom.lo_pattern))
    hi_v = float(FP32.to_fraction(dom.hi_pattern))
    for _ in range(2):
        if dist == "loguniform":
            l0 = math.log2(max(lo_v, 2.0 ** -126))
            mag = np.exp2(rng.uniform(l0, math.log2(hi_v), size=(n, K)))
        elif dist == "uniform":
            mag = rng.uniform(lo_v, hi_v, size=(n, K))
        else:
            raise TcsmtError(f"unknown distribution {dist!r} (known: loguniform, uniform)")
        x = np.clip(mag, lo_v, hi_v).astype(np.float32)
        x = np.clip(x, np.float32(lo_v), np.float32(hi_v))
        sign = rng.integers(0, 2, size=(n, K)).astype(np.uint32) << np.uint32(31)
        out.append(x.view(np.uint32) | sign)
    return out[0], out[1]


def errors_fp64(d: np.ndarray, a: np.ndarray, b: np.ndarray, relative: bool) -> np.ndarray:
    """Errors of fp32 results ``d`` for many rows, each the fp64 rounding of the exact value.

    fp32 products are exact in fp64; |D - P| and sum|a_k b_k| are summed with
    math.fsum (correctly rounded), so each error is within 2^-52 of the exact one.
    """
    av = a.view(np.float32).astype(np.float64)
    bv = b.view(np.float32).astype(np.float64)
    prods = av * bv
    dv = d.view(np.float32).astype(np.float64)
    out = np.empty(len(d))
    for i in range(len(d)):
        if not math.isfinite(dv[i]):
            out[i] = math.inf
            continue
        err = abs(math.fsum([dv[i], *(-prods[i])]))
        if relative:
            norm = math.fsum(np.abs(prods[i]))
            out[i] = err / norm if norm else (0.0 if err == 0 else math.inf)
        else:
            out[i] = err
    return out


def fp16_paths(in_fmt: str = "fp16") -> list[tuple[str, ModelParams]]:
    """Every built-in architecture with an ``in_fmt`` -> fp32 path (its first such path)."""
    out = []
    for name, arch in architectures().items():
        cands = arch.find_paths(in_fmt, "fp32", None)
        if cands:
            out.append((name, cands[0].params))
    return out


def model_for(arch: str, in_fmt: str = "fp16") -> ModelParams:
    """The ``in_fmt`` -> fp32 model of a spec (``volta``, ``volta:carry2``, ``hopper:extra_bits=3`` ...)."""
    p = resolve(arch, in_fmt, "fp32")
    check_path(p, in_fmt)
    return p


def params_for(algo: str, arch: str) -> ModelParams | None:
    """The model a scheme runs on: the architecture's path for the scheme's input format (fp16 for
    Markidis and Ootomo-Yokota, bf16 or tf32 for the vendor schemes; None for plain fp32 FMAs)."""
    return None if scheme_key(algo) == "fp32" else model_for(arch, input_format(algo))
