"""Products per second of each library op on the CPU (tcsmt.library, one numba thread), before and after.

    python benchmarks/bench_library_ops.py [--rows 256] [--cols 256] [--repeats 3] [--before 64]

Each op's recorded H100 plan of the 4096^3 call (bmm: 2 x 4096^3) is run with ``tcsmt.library.run`` on
``--rows`` rows of A and ``--cols`` columns of B (a corner of the full call: its outputs are bit for bit
those of the full call, at the same cost per product), on random patterns of the op's dtype.  Reported:
the median wall and CPU time of ``--repeats`` runs (after one warm-up), products per CPU second (the
per-core rate), and, with ``--before N``, the N x N corner with the compiled kernel switched off (the numpy
simulator computes the chains: what every CPU call did before the kernel import was fixed; one run, a
smaller corner because it is slow), whose bits must equal the compiled kernel's on the same corner.
The fp32 -> tf32 input rounding runs in the numpy semantics (O((rows + cols) K)): small corners of tf32
calls are slower per product.  On a machine with a CUDA GPU (and CuPy) the numpy API runs its chains on the GPU:
hide it (``CUDA_VISIBLE_DEVICES=``) to time the CPU.  torch's CPU time of the same shape is given where torch is installed (``torch.mm`` etc.
of the corner in the op's dtype: a speed reference only, not the GPU's bits).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

OPS = [  # (name, op, plan keywords, batch)
    ("mm bf16 -> fp32", "mm", {"a_dtype": "bfloat16", "out_dtype": "float32"}),
    ("mm bf16", "mm", {"a_dtype": "bfloat16"}),
    ("mm fp16", "mm", {"a_dtype": "float16"}),
    ("mm fp32 (tf32)", "mm", {"a_dtype": "float32", "tf32": True}),
    ("linear bf16", "linear", {"a_dtype": "bfloat16"}),
    ("linear bf16 + bias", "linear", {"a_dtype": "bfloat16", "bias": True}),
    ("addmm bf16 alpha 1.5 beta 0.75", "addmm", {"a_dtype": "bfloat16", "alpha": 1.5, "beta": 0.75}),
    ("bmm bf16 (batch 2)", "bmm", {"a_dtype": "bfloat16", "batch": 2}),
    ("scaled_mm e4m3 -> bf16, tensor scales", "scaled_mm", {"a_dtype": "float8_e4m3fn", "out_dtype": "bfloat16",
                                                             "scale": "tensor"}),
    ("scaled_mm e4m3 -> bf16, row-wise scales", "scaled_mm", {"a_dtype": "float8_e4m3fn", "out_dtype": "bfloat16",
                                                               "scale": "row"}),
]
FMT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "e4m3"}


def patterns(rng, fmt_name, shape):
    from tcsmt.arith.formats import get_format

    f = get_format(fmt_name)
    n = int(np.prod(shape))
    e = rng.integers(f.bias - 4, f.bias + 4, n)
    m = rng.integers(0, 1 << f.frac_bits, n)
    if f.specials == "fn":
        m = np.where(e == (1 << f.exp_bits) - 1, np.minimum(m, 6), m)
    word = (((rng.integers(0, 2, n) << f.exp_bits) | e) << f.frac_bits | m) << f.pad_bits
    return word.astype(f.dtype).reshape(shape)


def case(name, op, kw, r, c, rng):
    from tcsmt import library as L

    p = L.plan(op, 4096, 4096, 4096, **kw)
    K = 4096
    fin = FMT[kw["a_dtype"]]
    batch = kw.get("batch", 1)
    A = [patterns(rng, fin, (r, K)) for _ in range(batch)]
    B = [patterns(rng, fin, (K, c)) for _ in range(batch)]
    extra = {}
    if {"beta_c", "alpha_beta_c"} & set(p.epilogue):
        extra["C"] = patterns(rng, FMT[p.call.out_dtype], (r, c))
    if "bias" in p.epilogue:
        extra["bias"] = patterns(rng, fin, (c,))
    if p.call.scale:
        n_a, n_b = (r, c) if p.call.scale == "row" else (1, 1)
        extra["scale_a"] = (rng.random(n_a) + 0.5).astype(np.float32)
        extra["scale_b"] = (rng.random(n_b) + 0.5).astype(np.float32)

    def run():
        return [L.run(p, A[i], B[i], **extra) for i in range(batch)]

    return p, run, r * c * K * batch, (A, B, extra)


def torch_time(op, kw, A, B, extra, repeats):
    try:
        import torch
    except ImportError:
        return None
    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}.get(kw["a_dtype"])
    if dt is None:  # fp8 matrix products do not run on torch's CPU back end
        return None
    a = torch.from_numpy(A[0].view({2: np.int16, 4: np.int32}[A[0].itemsize])).view(dt)
    b = torch.from_numpy(B[0].view({2: np.int16, 4: np.int32}[B[0].itemsize])).view(dt)
    torch.set_num_threads(1)
    ts = []
    for _ in range(repeats + 1):
        t = time.perf_counter()
        for _ in range(kw.get("batch", 1)):
            torch.mm(a, b)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts[1:])


def timed(fn, repeats):
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--cols", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before", type=int, default=0, metavar="N", help="also time the N x N corner with the "
                    "compiled kernel off")
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    from tcsmt.library import evaluate

    rng = np.random.default_rng(7)
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"CPU: {cpu}; {os.cpu_count()} CPUs, affinity {sorted(os.sched_getaffinity(0))}; NUMBA_NUM_THREADS="
          f"{os.environ['NUMBA_NUM_THREADS']}; corner {args.rows} x {args.cols} of K = 4096; median of {args.repeats}"
          + (f"; before: {args.before} x {args.before}, one run" if args.before else ""))
    print("| op | products | wall (s) | CPU (s) | products per CPU second | before (kernel off) | after / before "
          "| torch CPU time | bits equal |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    ok = True
    for name, op, kw in OPS:
        _, run, products, (A, B, extra) = case(name, op, kw, args.rows, args.cols, rng)
        got = run()  # warm-up: compile or cache load
        w, c = timed(run, args.repeats)
        before, same = "", ""
        if args.before:
            _, run_small, products_b, _ = case(name, op, kw, args.before, args.before, rng)
            got = run_small()
            kernel = evaluate._gemm_kernel
            evaluate._gemm_kernel = None
            try:
                _, cb = timed(run_small, 1)
                ref = run_small()
            finally:
                evaluate._gemm_kernel = kernel
            eq = all(np.array_equal(x, y) for x, y in zip(got, ref))
            ok = ok and eq
            before, same = f"{products_b / cb:.3g}", "yes" if eq else "NO"
            ratio = f"{products / c / (products_b / cb):.0f}x"
        else:
            ratio = ""
        tt = torch_time(op, kw, A, B, extra, args.repeats)
        print(f"| {name} | {products:.3g} | {w:.2f} | {c:.2f} | {products / c:.3g} | {before} | {ratio} | "
              f"{'' if tt is None else f'{tt * 1e3:.1f} ms'} | {same} |", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
