"""On a CUDA machine: check tcsmt.kernels.cuda against the numpy simulator, then time it against torch.mm.

python benchmarks/gemm_cuda_device.py OUT.json

1. Correctness: for every supported Hopper library path and several input distributions (random
   bit patterns of narrow and wide exponent ranges, subnormal/tiny values near align_floor,
   cancellation, overflowing blocks, NaN/inf sprinkled in), odd shapes (padding) and K values
   (partial blocks, partial promotion runs), a few hundred sampled outputs (and every output of
   small cases) compared bit for bit with tcsmt.sim.simulator.simulate_params.
2. Speed: the bf16 -> fp32 cuBLAS path at 4096^3, 8192x8192x1024 and 1024^3 (medians of CUDA-event
   timings), with torch.mm(out_dtype=float32) of the same call, and the emulated bits compared
   with torch.mm's on every output (these shapes are split-free on the H100: evidence/h100_cublas_plans.json.gz).
"""
from __future__ import annotations

import json
import sys
import time

import cupy as cp
import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import resolve
from tcsmt.kernels.cuda import gemm
from tcsmt.sim.simulator import simulate_params

PATHS = [("hopper", "fp16", "fp32", "cublas"), ("hopper", "bf16", "fp32", "cublas"), ("hopper", "fp16", "fp16", "cublas"),
         ("hopper", "tf32", "fp32", "cublas"), ("hopper", "e4m3", "fp32", "scaled_mm_fast"),
         ("hopper", "e4m3", "fp32", "scaled_mm"), ("hopper:block8", "bf16", "fp32", "cublas"),
         ("hopper:promote64", "e4m3", "fp32", "scaled_mm")]
DISTS = ("narrow", "wide", "tiny", "cancel", "overflow", "specials")


def patterns(rng, fmt, shape, dist):
    """Random bit patterns of ``fmt`` (finite unless dist == 'specials')."""
    n = int(np.prod(shape))
    top = (1 << fmt.exp_bits) - 1
    bias = (1 << (fmt.exp_bits - 1)) - 1
    if dist in ("narrow", "cancel", "specials"):
        expf = rng.integers(bias - 4, bias + 4, n)
    elif dist == "wide":
        expf = rng.integers(0, top, n)
    elif dist == "tiny":
        expf = rng.integers(0, min(8, top), n)
    else:  # overflow: the largest exponents
        expf = rng.integers(max(1, top - 6), top, n)
    frac = rng.integers(0, 1 << fmt.frac_bits, n)
    sign = rng.integers(0, 2, n)
    if fmt.specials == "fn":  # e4m3: exponent field 15 with fraction 7 is NaN: keep finite
        frac = np.where((expf == top) & (frac == (1 << fmt.frac_bits) - 1), frac - 1, frac)
        expf = np.minimum(expf, top)
    zero = rng.random(n) < 0.05
    expf = np.where(zero, 0, expf)
    frac = np.where(zero, 0, frac)
    bits = (sign << (fmt.exp_bits + fmt.frac_bits)) | (expf << fmt.frac_bits) | frac
    if dist == "specials":
        pick = rng.random(n) < 0.01
        if fmt.specials == "fn":
            sp = np.full(n, fmt.nan_pattern() >> fmt.pad_bits)
        else:
            kind = rng.integers(0, 3, n)
            inf = top << fmt.frac_bits
            sp = np.where(kind == 0, inf | 1, inf) | (rng.integers(0, 2, n) << (fmt.exp_bits + fmt.frac_bits))
        bits = np.where(pick, sp, bits)
    bits = bits.astype(np.uint64) << np.uint64(fmt.pad_bits)
    return bits.astype(fmt.dtype).reshape(shape)


def check_case(p, fmt, rng, M, N, K, dist, n_samples):
    A = patterns(rng, fmt, (M, K), dist)
    B = patterns(rng, fmt, (K, N), dist)
    if dist == "cancel":  # the second half of each column repeats the first with its sign flipped
        h = K // 2
        sign = np.asarray(1 << (fmt.storage_bits - 1), dtype=fmt.dtype)
        B[h:2 * h] = B[:h] ^ sign
        A[:, h:2 * h] = A[:, :h]
    got = gemm(p, A, B)
    if M * N <= n_samples:
        ii, jj = np.divmod(np.arange(M * N), N)
    else:
        ii, jj = rng.integers(0, M, n_samples), rng.integers(0, N, n_samples)
    want = simulate_params(p, A[ii], B[:, jj].T, np.zeros(len(ii), dtype=np.uint32), bits=True)
    g = got[ii, jj]
    bad = np.nonzero(g.astype(np.uint64) != want.astype(np.uint64))[0]
    return len(ii), [{"i": int(ii[b]), "j": int(jj[b]), "got": hex(int(g[b])), "want": hex(int(want[b]))} for b in bad[:5]], len(bad)


def correctness(rng):
    rows = []
    for spec, fin, fout, instr in PATHS:
        p = resolve(spec, fin, fout, instr)
        fmt = get_format(fin)
        for dist in DISTS:
            for M, N, K in ((67, 70, 1), (100, 90, 37), (130, 129, 256), (64, 64, 300), (20, 30, 1000)):
                t0 = time.perf_counter()
                n, ex, nbad = check_case(p, fmt, rng, M, N, K, dist, 300)
                rows.append({"path": f"{spec} {fin}->{fout} {instr}", "dist": dist, "M": M, "N": N, "K": K, "checked": n,
                                 "mismatches": nbad, "examples": ex, "seconds": round(time.perf_counter() - t0, 2)})
                if nbad:
                    print("MISMATCH", rows[-1], flush=True)
    return rows


def timed(fn, reps):
    ts = []
    for _ in range(reps):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3)
    return float(np.median(ts)), ts


def bench():
    import torch
    p = resolve("hopper", "bf16", "fp32", "cublas")
    out = []
    for M, N, K in ((4096, 4096, 4096), (8192, 8192, 1024), (1024, 1024, 1024)):
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=g)
        A = cp.asarray(a.view(torch.int16)).view(cp.uint16)
        B = cp.asarray(b.view(torch.int16)).view(cp.uint16)
        gemm(p, A, B)  # compile and warm up
        cp.cuda.Device().synchronize()
        t_emu, ts = timed(lambda p=p, A=A, B=B: gemm(p, A, B), 5)
        try:
            ref = torch.mm(a, b, out_dtype=torch.float32)
            call = "torch.mm(a, b, out_dtype=torch.float32)"
            fn = lambda a=a, b=b: torch.mm(a, b, out_dtype=torch.float32)  # noqa: E731
        except (TypeError, RuntimeError):
            ref = torch.mm(a.float(), b.float())
            call = "unavailable"
            fn = None
        torch.cuda.synchronize()
        t_torch = None
        if fn is not None:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            tt = []
            for _ in range(20):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                e.synchronize()
                tt.append(s.elapsed_time(e) / 1e3)
            t_torch = float(np.median(tt))
        got = gemm(p, A, B)
        hw = cp.asarray(ref.view(torch.int32)).view(cp.uint32)
        mism = int((got != hw).sum())
        out.append({"M": M, "N": N, "K": K, "path": "hopper bf16->fp32 cublas", "emulation_s_median": t_emu,
                        "emulation_s_all": ts, "products_per_s": M * N * K / t_emu, "torch_call": call,
                        "torch_mm_s_median": t_torch, "ratio_emulation_to_torch": (t_emu / t_torch) if t_torch else None,
                        "outputs": M * N, "mismatches_vs_torch_mm": mism})
        print(out[-1], flush=True)
    # the other paths once each at 4096^3 (random patterns of the narrow distribution)
    rng = np.random.default_rng(5)
    for spec, fin, fout, instr in PATHS[:6]:
        p = resolve(spec, fin, fout, instr)
        fmt = get_format(fin)
        A = cp.asarray(patterns(rng, fmt, (4096, 4096), "narrow"))
        B = cp.asarray(patterns(rng, fmt, (4096, 4096), "narrow"))
        gemm(p, A, B)
        t, ts = timed(lambda p=p, A=A, B=B: gemm(p, A, B), 3)
        out.append({"M": 4096, "N": 4096, "K": 4096, "path": f"{spec} {fin}->{fout} {instr}", "emulation_s_median": t,
                        "products_per_s": 4096 ** 3 / t})
        print(out[-1], flush=True)
    return out


def main():
    rng = np.random.default_rng(2026)
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cupy": cp.__version__}
    t0 = time.perf_counter()
    res["correctness"] = corr = correctness(rng)
    res["correctness_summary"] = {"cases": len(corr), "outputs_checked": sum(r["checked"] for r in corr),
                                      "mismatches": sum(r["mismatches"] for r in corr),
                                      "seconds": round(time.perf_counter() - t0, 1)}
    print(res["correctness_summary"], flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)
    import torch  # only the benchmark needs it

    res["torch"] = torch.__version__
    res["benchmark"] = bench()
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
