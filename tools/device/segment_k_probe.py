"""Read how cuBLAS's tf32 ``segment_k_on`` kernels cut K, tile by tile: one swamping probe call per shape.

    python3 tools/device/segment_k_probe.py LIST.json OUT.json.gz [SECONDS]   (GPU host; torch, numpy, tcsmt)

LIST: ``calls``, each a call spec as ``tcsmt record`` takes it (float32, tf32 on; ``mm`` or ``linear``), with the
kernels and grids its recording saw.  Each call runs once through torch (:func:`tcsmt.hwcheck.library_calls.call_torch`,
its operand layouts as recorded) on these inputs, all exact in tf32: B all ones; row i of A holds 1 at every k
that is a multiple of 8 (one product per 8-k block of the tensor core's tf32 step), +L = 2^40 at k = 0 and -L at
k = x_i (a multiple of 8 in [8, K), :func:`probe_x`: the rows of every 64 cover K evenly), 0 elsewhere.  A sum that
meets +L loses every 1 it holds or later meets (fp32's unit at 2^40 is 2^17) until -L cancels it to 0 exactly; then
it counts again.  So where one K-chain computes output (i, j), it is the number of the row's 1s after x_i; where K
is cut into segments [p_0 = 0, p_1), ..., [p_(S-1), K) summed apart and their partials added in fp32 from segment 0
on, it is that number where x_i lies in segment 0 and, where x_i lies in segment s > 0, the number of 1s at or after
p_(s+1) (segment 0's partial is +L, segment s's -L, those between are lost); added from the last segment down it
would be 0 there.  Each output thus names the end of the segment holding x_i in its tile.
Kept: every row of the columns 0, 64, 128, ... and N - 1 (every output tile of 64 columns or more), as fp32 bit
patterns; the kernels torch.profiler saw.  Calls run in order until SECONDS (default 300) have passed.
"""
import base64
import gzip
import json
import sys
import time

import numpy as np

L_EXP = 40
ROWS_PER_SCAN = 64
COL_STEP = 64


def probe_x(M: int, K: int) -> np.ndarray:
    """x_i of each row: multiples of 8 in [8, K), the rows of each 64 spread evenly over them."""
    k8 = (K + 7) // 8  # the multiples of 8 below K: 0, 8, ..., 8 (k8 - 1)
    n = max(1, k8 - 1)  # candidates 8 .. 8 (k8 - 1)
    r = np.arange(M) % ROWS_PER_SCAN
    return 8 * (1 + (r * n) // ROWS_PER_SCAN % n)


def probe_a(M: int, K: int) -> np.ndarray:
    """A's fp32 bit patterns (M, K)."""
    a = np.zeros((M, K), dtype=np.float32)
    a[:, 0::8] = 1.0
    a[:, 0] = 2.0 ** L_EXP
    a[np.arange(M), probe_x(M, K)] = -(2.0 ** L_EXP)
    return a.view(np.uint32)


def run_probes(make_a, what: str, default_seconds: float) -> int:
    """Probe each call of the list ``sys.argv[1]`` with A = ``make_a(M, K)`` (fp32 bit patterns) and B all ones, until
    ``sys.argv[3]`` (default ``default_seconds``) seconds have passed; write ``sys.argv[2]`` (module docstring)."""
    import torch

    from tcsmt.hwcheck.library_calls import build_tensors, call_torch
    from tcsmt.hwcheck.stamp import running_stamp
    from tcsmt.library.lookup import parse_record_spec

    items = json.load(open(sys.argv[1]))["calls"]
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else default_seconds
    t0 = time.time()
    done, failed, not_run = [], [], []
    for n, item in enumerate(items):
        if time.time() - t0 > budget:
            not_run = [x["spec"] for x in items[n:]]
            break
        call = parse_record_spec(item["spec"])
        vc = {k: getattr(call, k) for k in ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias",
                                            "alpha", "beta", "tf32", "scale", "fast_accum", "a_t", "b_t")}
        try:
            inputs = {"A": make_a(call.M, call.K), "B": np.full((call.K, call.N), 0x3F800000, dtype=np.uint32)}
            t = build_tensors(torch, vc, inputs, "cuda")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                out = call_torch(torch, vc, t)
                torch.cuda.synchronize()
            kernels = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
            cols = sorted({*range(0, call.N, COL_STEP), call.N - 1})
            kept = out[:, cols].contiguous().cpu().numpy().view(np.uint32)
            done.append({"spec": item["spec"], "recorded_kernels": item.get("kernels"), "recorded_grid": item.get("grid"),
                         "kernels": kernels, "cols": cols, "l_exp": L_EXP, "rows_per_scan": ROWS_PER_SCAN,
                         "out": base64.b64encode(gzip.compress(kept.tobytes())).decode()})
            del t, out
            torch.cuda.empty_cache()
        except Exception as exc:  # a device host tool: every failure is recorded, the run goes on
            failed.append({"spec": item["spec"], "error": f"{type(exc).__name__}: {exc}"[:300]})
    doc = {"what": what, "command": " ".join(sys.argv),
           "stamp": running_stamp(torch), "seconds": float(f"{time.time() - t0:.1f}"), "calls": done, "failed": failed,
           "not_run": not_run}
    with gzip.open(sys.argv[2], "wt") as f:
        json.dump(doc, f)
    print(f"{len(done)} probed, {len(failed)} failed, {len(not_run)} not run -> {sys.argv[2]}")
    return 0


def main() -> int:
    return run_probes(probe_a, "segment-K swamping probes (tools/device/segment_k_probe.py)", 300.0)


if __name__ == "__main__":
    sys.exit(main())
