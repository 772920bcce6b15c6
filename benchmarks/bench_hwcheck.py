"""Throughput of the hardware check for fp16 -> fp32 mma.sync m16n8k16 (K = 16).

Measures dot products checked per second end to end (random generation,
host->device transfer, kernel, device->host transfer, model simulation,
bitwise comparison) and the split between the stages, plus the device alone
(transfer + kernel) on a larger batch.  Usage::

    python benchmarks/bench_hwcheck.py [--n 2000000] [--device cuda|model:SPEC] [--jobs J] [--out FILE.json]

The model runs in ``--jobs`` worker processes (default: one per CPU core).
"""
from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace

import click
import numpy as np

from tcsmt.io.options import NON_NEGATIVE_INT, POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main


def _main(args: SimpleNamespace) -> int:
    from tcsmt.arith.registry import resolve
    from tcsmt.hwcheck.check import ModelRunner, ModelTally, compare, default_jobs
    from tcsmt.hwcheck.device import expand_tiles, get_device
    from tcsmt.hwcheck.dists import generate
    from tcsmt.hwcheck.paths import find_path
    from tcsmt.io import files

    args.out = files.output(args.out, args.force) if args.out else None  # claimed before the measurement
    if args.gpu_model:
        return gpu_resident(args)

    spec = find_path("fp16", "fp32", "mma")
    dev = get_device(args.device)
    p = resolve(args.arch, "fp16", "fp32", "mma")
    jobs = args.jobs or default_jobs()
    rng = np.random.default_rng(0)

    # warm-up: compile/load the kernel, start the worker processes
    a, b, c = generate("wide", spec, 64, 16, rng)
    dev.run_tiles(spec, a, b, c)
    split = {"generate": 0.0, "device": 0.0, "expand": 0.0, "model": 0.0, "compare": 0.0}
    with ModelRunner(jobs) as runner:
        runner.warm_up(p)
        tally = ModelTally(args.arch, p)
        per_batch_tiles = max(1, args.batch // spec.per_tile)
        tiles = -(-args.n // spec.per_tile)
        t_all = time.perf_counter()
        done = 0
        while done < tiles:
            T = min(per_batch_tiles, tiles - done)
            t0 = time.perf_counter()
            a, b, c = generate("wide", spec, T, 16, rng)
            t1 = time.perf_counter()
            d = dev.run_tiles(spec, a, b, c).reshape(-1)
            t2 = time.perf_counter()
            aa, bb, cc = expand_tiles(a, b, c)
            t3 = time.perf_counter()
            dm = runner.simulate(p, aa, bb, cc)
            t4 = time.perf_counter()
            compare(spec, tally, aa, bb, cc, d, dm, done * spec.per_tile, 3)
            t5 = time.perf_counter()
            for k, v in zip(split, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                split[k] += v
            done += T
        total = time.perf_counter() - t_all
    n = tiles * spec.per_tile

    # device alone on a bigger batch (transfer both ways + kernel)
    Td = max(1, args.device_n // spec.per_tile)
    a, b, c = generate("wide", spec, Td, 16, rng)
    dev.run_tiles(spec, a[:8], b[:8], c[:8])
    t0 = time.perf_counter()
    dev.run_tiles(spec, a, b, c)
    dev_only = time.perf_counter() - t0
    nd = Td * spec.per_tile

    res = {
        "device": dev.info(), "path": spec.label, "shape": spec.shape, "k": 16, "model": p.name,
        "model_jobs": jobs, "n": n, "mismatches": tally.mismatches,
        "end_to_end_seconds": round(total, 3), "end_to_end_per_second": round(n / total),
        "split_seconds": {k: round(v, 3) for k, v in split.items()},
        "stage_rates_per_second": {k: (round(n / v) if v > 0 else None) for k, v in split.items()},
        "device_only": {"n": nd, "seconds": round(dev_only, 4), "per_second": round(nd / dev_only)},
    }
    print(json.dumps(res, indent=1))
    if args.out:
        args.out.write_json(res)
    return 0


def gpu_resident(args) -> int:
    """End to end on the GPU: draw finite fp16/fp32 patterns, run the kernel, run the model, compare."""
    import cupy as cp

    from tcsmt.arith.registry import resolve
    from tcsmt.backends.cupy import simulate_on_gpu
    from tcsmt.hwcheck.device import get_device
    from tcsmt.hwcheck.paths import find_path

    spec = find_path("fp16", "fp32", "mma")
    dev = get_device(args.device)
    p = resolve(args.arch, "fp16", "fp32", "mma")
    rng = cp.random.default_rng(0)

    def finite16(shape):
        x = rng.integers(0, 1 << 16, size=shape, dtype=cp.int64)
        exp_all_ones = (x & 0x7C00) == 0x7C00
        return cp.where(exp_all_ones, x & ~0x4000, x).astype(cp.uint16)  # exponent 31 -> 15

    def finite32(shape):
        x = rng.integers(0, 1 << 32, size=shape, dtype=cp.int64)
        exp_all_ones = (x & 0x7F800000) == 0x7F800000
        return cp.where(exp_all_ones, x & ~0x40000000, x).astype(cp.uint32)

    per_batch_tiles = max(1, args.batch // spec.per_tile)
    tiles = -(-args.n // spec.per_tile)
    # warm-up: compile kernels and CuPy element-wise code
    a, b, c = finite16((4, 16, 16)), finite16((4, 8, 16)), finite32((4, 16, 8))
    dev.run_tiles_on_device(spec, a, b, c)
    dm = simulate_on_gpu(p, a.reshape(-1, 16)[:8], b.reshape(-1, 16)[:8], c.reshape(-1)[:8])
    int((dm != dm).sum())  # compiles the comparison's reduction too
    cp.cuda.Device().synchronize()
    mismatches = 0
    stage = {"generate": 0.0, "device": 0.0, "model": 0.0, "compare": 0.0}
    t_all = time.perf_counter()
    done = 0
    while done < tiles:
        T = min(per_batch_tiles, tiles - done)
        t0 = time.perf_counter()
        a, b, c = finite16((T, 16, 16)), finite16((T, 8, 16)), finite32((T, 16, 8))
        cp.cuda.Device().synchronize()
        t1 = time.perf_counter()
        d = dev.run_tiles_on_device(spec, a, b, c).reshape(-1)
        cp.cuda.Device().synchronize()
        t2 = time.perf_counter()
        aa = cp.broadcast_to(a[:, :, None, :], (T, 16, 8, 16)).reshape(-1, 16)
        bb = cp.broadcast_to(b[:, None, :, :], (T, 16, 8, 16)).reshape(-1, 16)
        dm = simulate_on_gpu(p, aa, bb, c.reshape(-1))
        cp.cuda.Device().synchronize()
        t3 = time.perf_counter()
        mismatches += int((dm != d).sum())
        t4 = time.perf_counter()
        for k, v in zip(stage, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            stage[k] += v
        done += T
    total = time.perf_counter() - t_all
    n = tiles * spec.per_tile
    res = {"mode": "gpu-resident", "device": dev.info(), "path": spec.label, "k": 16, "model": p.name, "n": n,
           "mismatches": mismatches, "end_to_end_seconds": round(total, 3),
           "end_to_end_per_second": round(n / total),
           "split_seconds": {k: round(v, 3) for k, v in stage.items()}}
    print(json.dumps(res, indent=1))
    if args.out:
        args.out.write_json(res)
    return 0 if mismatches == 0 else 1


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--n", type=POSITIVE_INT, default=2_000_000, show_default=True, help="dot products for the end-to-end measurement")
@click.option("--device-n", type=POSITIVE_INT, default=1 << 24, show_default=True, help="dot products for the device-only measurement")
@click.option("--device", default="cuda", show_default=True)
@click.option("--jobs", type=NON_NEGATIVE_INT, default=0, show_default=True, help="model worker processes (0: one per core)")
@click.option("--batch", type=POSITIVE_INT, default=1 << 18, show_default=True)
@click.option("--arch", default="hopper", show_default=True)
@click.option("--out", default=None)
@click.option("--force", is_flag=True, help="overwrite --out (a regular file only)")
@click.option("--gpu-model", is_flag=True,
              help="everything on the GPU: inputs drawn there, the model run there (tcsmt.backends.cupy)")
def bench_cmd(**options) -> int:
    return _main(SimpleNamespace(**options))


main = script_main(bench_cmd, "python benchmarks/bench_hwcheck.py")

if __name__ == "__main__":
    sys.exit(main())
