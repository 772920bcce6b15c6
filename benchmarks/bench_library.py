"""Products per second of the compiled CPU GEMM (tcsmt.kernels.cpu) on a library path.

Usage:

    python benchmarks/bench_library.py [--shape 256 4096 256] [--repeats 5] [--path bf16.fp32.cublas]

It times ``gemm`` on one thread (``threads=1``) and on all of numba's threads,
and the numpy simulator (``simulate_params``, one row-column pair per row) on a
sample of the same call's output pairs (the simulator's cost is linear in the
pairs); it reports the median wall and CPU time of the repeats as products/s (products =
rows x cols x K), the ratio of the compiled kernel to the simulator, and checks
that both give the same bits on the sampled pairs.  The first call's time
(JIT compile or cache load, plus the run) is reported separately.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from types import SimpleNamespace

import click
import numpy as np

from tcsmt import resolve
from tcsmt.arith.formats import get_format
from tcsmt.io.options import POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.kernels.cpu import gemm
from tcsmt.sim.simulator import simulate_params


def random_bits(fmt_name: str, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Finite patterns with exponents spread over +-8 binades around 1 (cancellation and carries happen)."""
    f = get_format(fmt_name)
    s = rng.integers(0, 2, shape)
    e = rng.integers(f.bias - 8, f.bias + 8, shape)
    m = rng.integers(0, 1 << f.frac_bits, shape)
    return ((((s << f.exp_bits) | e) << f.frac_bits | m) << f.pad_bits).astype(f.dtype)


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


CPU_SECONDS: dict[int, float] = {}


def median_time(fn, repeats: int, key: int = 0) -> float:
    """Median wall time of ``fn``; the median CPU time of this process (all threads) goes to CPU_SECONDS[key]."""
    times, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    CPU_SECONDS[key] = statistics.median(cpu)
    return statistics.median(times)


def _main(args: SimpleNamespace) -> None:
    fin, fout, instr = args.path.split(".")
    p = resolve("hopper", fin, fout, instr)
    M, K, N = args.shape
    rng = np.random.default_rng(0)
    A = random_bits(p.in_fmt, rng, (M, K))
    B = random_bits(p.in_fmt, rng, (K, N))
    import numba

    t = time.perf_counter()
    gemm(p, A[:2, :64], B[:64, :2])
    first = time.perf_counter() - t
    products = M * N * K
    t1 = median_time(lambda: gemm(p, A, B, threads=1), args.repeats, 1)
    nthreads = numba.get_num_threads()
    tall = median_time(lambda: gemm(p, A, B), args.repeats, 2)
    D = gemm(p, A, B)

    pairs = min(args.sim_pairs, M * N)
    idx = rng.choice(M * N, pairs, replace=False)
    ri, cj = idx // N, idx % N
    rows, cols = A[ri], B[:, cj].T.copy()
    zeros = np.zeros(pairs, dtype=get_format(p.c_fmt).dtype)
    tsim = median_time(lambda: simulate_params(p, rows, cols, zeros), max(1, args.repeats // 2))
    ref = simulate_params(p, rows, cols, zeros)
    same = np.array_equal(ref, D[ri, cj])
    sim_rate = pairs * K / tsim

    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}; numba {numba.__version__}, {nthreads} threads")
    print(f"path: {p.name}; M x K x N = {M} x {K} x {N} ({products:.3g} products); median of {args.repeats}")
    print(f"first call (compile or cache load + tiny run): {first:.2f} s")
    print(f"simulator bits == kernel bits on {pairs} sampled outputs: {same}")
    print()
    print("| engine | threads | wall (s) | CPU (s) | products/s | products per CPU second | x simulator |")
    print("|---|---|---|---|---|---|---|")
    print(f"| numpy simulator (simulate_params) | 1 | {products / sim_rate:.1f} (extrapolated from {pairs} outputs) | | {sim_rate:.3g} | | 1 |")
    for n, t in ((1, t1), (nthreads, tall)):
        cpu = CPU_SECONDS[1 if t is t1 else 2]
        print(f"| gemm_kernel (numba) | {n} | {t:.3f} | {cpu:.3f} | {products / t:.3g} | {products / cpu:.3g} | {products / t / sim_rate:.0f} |")
    if not same:
        raise SystemExit("kernel and simulator disagree")


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--shape", type=POSITIVE_INT, nargs=3, default=(256, 4096, 256), show_default=True, metavar="M K N")
@click.option("--repeats", type=POSITIVE_INT, default=5, show_default=True)
@click.option("--path", default="bf16.fp32.cublas", show_default=True, help="in.out.instr of a hopper path")
@click.option("--sim-pairs", type=POSITIVE_INT, default=2048, show_default=True,
              help="output pairs the numpy simulator is timed on (it vectorises over pairs: too few understate it)")
def bench_cmd(**options) -> None:
    return _main(SimpleNamespace(**options))


main = script_main(bench_cmd, "python benchmarks/bench_library.py")

if __name__ == "__main__":
    sys.exit(main())
