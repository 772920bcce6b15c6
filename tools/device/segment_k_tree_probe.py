"""Read the join of the segments' partials of cuBLAS's tf32 ``segment_k_on`` kernels where segment 0 is not involved:
swamping probes with +L at a row's p_i and -L at its x_i (p_i < x_i), both anywhere in K.

    python3 tools/device/segment_k_tree_probe.py LIST.json OUT.json.gz [SECONDS]   (GPU host; torch, numpy, tcsmt)

As ``segment_k_probe.py`` (its docstring has the method), but row i of A holds 1 at every multiple of 8, +L = 2^40 at
p_i and -L at x_i (multiples of 8, drawn from numpy's ``default_rng(M * 1_000_003 + K)``, :func:`probe_px`).  Where
the tile is cut, an output is the number of 1s outside the smallest subtree of the join holding the segments of p_i
and x_i (the 1s inside it meet +L or -L before they cancel); one K-chain gives the 1s before p_i and after x_i.
Kept: as ``segment_k_probe.py``, with p and x.
"""
import base64
import gzip
import json
import sys
import time

import numpy as np

try:
    from tools.device.segment_k_probe import COL_STEP, L_EXP
except ImportError:  # run as a script from tools/device's sibling path
    from segment_k_probe import COL_STEP, L_EXP


def probe_px(M: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """(p_i, x_i) of each row: two distinct multiples of 8 below K, p_i < x_i."""
    k8 = (K + 7) // 8
    rng = np.random.default_rng(M * 1_000_003 + K)
    a, b = rng.integers(0, k8, size=M), rng.integers(0, k8 - 1, size=M)
    b = np.where(b >= a, b + 1, b)
    return 8 * np.minimum(a, b), 8 * np.maximum(a, b)


def probe_a(M: int, K: int) -> np.ndarray:
    a = np.zeros((M, K), dtype=np.float32)
    a[:, 0::8] = 1.0
    p, x = probe_px(M, K)
    a[np.arange(M), p] = 2.0 ** L_EXP
    a[np.arange(M), x] = -(2.0 ** L_EXP)
    return a.view(np.uint32)


def main() -> int:
    import torch

    from tcsmt.hwcheck.library_calls import build_tensors, call_torch
    from tcsmt.hwcheck.stamp import running_stamp
    from tcsmt.library.lookup import parse_record_spec

    items = json.load(open(sys.argv[1]))["calls"]
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 120.0
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
            inputs = {"A": probe_a(call.M, call.K), "B": np.full((call.K, call.N), 0x3F800000, dtype=np.uint32)}
            t = build_tensors(torch, vc, inputs, "cuda")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                out = call_torch(torch, vc, t)
                torch.cuda.synchronize()
            kernels = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
            cols = sorted({*range(0, call.N, COL_STEP), call.N - 1})
            kept = out[:, cols].contiguous().cpu().numpy().view(np.uint32)
            done.append({"spec": item["spec"], "kernels": kernels, "cols": cols, "l_exp": L_EXP,
                         "out": base64.b64encode(gzip.compress(kept.tobytes())).decode()})
            del t, out
            torch.cuda.empty_cache()
        except Exception as exc:  # a device host tool: every failure is recorded, the run goes on
            failed.append({"spec": item["spec"], "error": f"{type(exc).__name__}: {exc}"[:300]})
    doc = {"what": "segment-K tree probes (tools/device/segment_k_tree_probe.py)", "command": " ".join(sys.argv),
           "stamp": running_stamp(torch), "seconds": float(f"{time.time() - t0:.1f}"), "calls": done, "failed": failed,
           "not_run": not_run}
    with gzip.open(sys.argv[2], "wt") as f:
        json.dump(doc, f)
    print(f"{len(done)} probed, {len(failed)} failed, {len(not_run)} not run -> {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
