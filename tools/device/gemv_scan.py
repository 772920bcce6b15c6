"""Scan the K order of cuBLAS's CUDA-core GEMV kernels at many K values: one launch of swamping probes per call.
Output: one json.gz per run.

    python3 gemv_scan.py POINTS.json[.gz] OUT.json.gz [SECONDS]   (on a GPU host with torch; numpy and torch only)

POINTS: calls as ``gemv_probes.py`` takes them (op bmm/mm/linear, batch, N, K, M, a_dtype, b_t, bias), each
run once.  Every output of the launch is one probe (Xie et al., arXiv 2411.00442, as in ``gemv_probes.py``): the
vector x = 1 (A of ones), and in the matrix column of output p the product +B at k = i_p, -B at k = j_p, "one" at
each k of the window [w_p, w_p + n_p) other than i_p, j_p, 0 elsewhere.  With fp32 additions the output is one
times the number of window k's outside the subtree where i_p and j_p first meet (the ones inside are swamped by B
before the two cancel; n_p <= 255 keeps the count exact in a bf16 or fp16 output).  The pairs are drawn by
:func:`scan_params` from the call's seed so that ``tools/library/gemv_scan_fit.py`` rebuilds them: a quarter at
random, a quarter a few k's apart, a quarter a power of two times a small multiple apart (the same thread under a
round-robin dealing), a quarter with the window around i.  The first ``KEEP`` outputs are kept, as counts (uint8),
or as the raw output patterns (uint16) where an output is not a count times one.

Kernels (names, grid, block) are read with torch.profiler over chunks of calls, a fill of a marker tensor
between calls telling which kernels belong to which call.
"""
import base64
import gzip
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemv_probes import BIG, ONE, Call  # its sibling, shipped with it

KEEP = 64
CHUNK = 16
MARK = "fill"


def scan_params(seed, K, P):
    """(i, j, w0, n) per output p < P (K >= 2): module docstring."""
    rng = np.random.default_rng(seed)
    kind = np.arange(P) % 4
    i = rng.integers(0, K, P)
    far = rng.integers(1, max(K, 2), P)
    near = rng.integers(1, 65, P) * rng.choice([-1, 1], P)
    pow2 = (1 << rng.integers(1, 9, P)) * rng.integers(1, 9, P) * rng.choice([-1, 1], P)
    d = np.where(kind == 1, near, np.where(kind == 2, pow2, far))
    j = (i + d) % K
    j = np.where(j == i, (i + 1) % K, j)
    n = rng.integers(1, min(K, 255) + 1, P)
    lo = np.where(kind == 3, i - rng.integers(0, n), rng.integers(0, K, P))
    w0 = np.clip(lo, 0, K - n)
    return i, j, w0, n


def probe_matrix(torch, call, seed):
    """Write the probes into the call's zeroed matrix: the window's ones, then +B at i and -B at j (scattered:
    every other entry stays 0)."""
    t, K, P = torch, call.K, call.batch * call.N
    one, big = ONE[call.spec["a_dtype"]], BIG[call.spec["a_dtype"]]
    i, j, w0, n = scan_params(seed, K, P)
    dev, v = call.view.device, call.view
    p = np.arange(P)
    b_of, n_of = p // call.N, p % call.N
    width = int(n.max())
    off = np.arange(width)[None, :]
    inside = off < n[:, None]
    rows = np.broadcast_to(p[:, None], inside.shape)[inside]
    ks = (w0[:, None] + off)[inside]

    def put(pp, kk, value):
        idx = [t.as_tensor(x, device=dev) for x in (b_of[pp], kk, n_of[pp])]
        v[idx[0], idx[1], idx[2]] = t.tensor(value, dtype=v.dtype, device=dev)

    put(rows, ks, one)
    put(p, i, big)
    put(p, j, -big)


def kept(torch, call, out):
    """The first KEEP outputs as counts (uint8, base64) or raw patterns where one is not a count times one."""
    one = ONE[call.spec["a_dtype"]]
    head = out.reshape(-1)[:KEEP]
    c = (head.double() / one)
    if bool(((c == c.round()) & (c >= 0) & (c <= 255)).all()):
        return {"counts": base64.b64encode(c.round().to(torch.uint8).cpu().numpy().tobytes()).decode()}
    raw = head.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
    return {"raw": base64.b64encode(raw.tobytes()).decode()}


def kernels_by_call(path, n):
    """Kernels of the traced chunk, cut at the marker fills: one list per call."""
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
    ev.sort(key=lambda e: e["ts"])
    out, cur = [], None
    for e in ev:
        if MARK in e["name"].lower() and "gemv" not in e["name"]:
            if cur is not None:
                out.append(cur)
            cur = []
        elif cur is not None:
            cur.append({"name": e["name"], "grid": e.get("args", {}).get("grid"),
                        "block": e.get("args", {}).get("block")})
    if cur is not None:
        out.append(cur)
    return out if len(out) == n else None


def main():
    import torch
    from torch.profiler import ProfilerActivity, profile
    with (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt") as f:
        points = json.load(f)
    budget_s = float(sys.argv[3]) if len(sys.argv) > 3 else 240
    dev = torch.device("cuda")
    res = {"device": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                      "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
           "method": __doc__, "big": BIG, "one": ONE, "keep": KEEP, "results": []}
    marker = torch.zeros(1, device=dev)
    names = {}
    t0 = time.time()
    for c0 in range(0, len(points), CHUNK):
        chunk = points[c0:c0 + CHUNK]
        if time.time() - t0 > budget_s:
            res["results"] += [{"spec": s, "skipped": "time"} for s in chunk]
            continue
        calls, outs = [], []
        for n, spec in enumerate(chunk):
            try:
                call = Call(torch, spec, dev)
                probe_matrix(torch, call, 100000 + c0 + n)
                call.run()  # warm: the traced launch below is not the first of its kernel
                calls.append(call)
            except Exception as exc:  # one spec's failure is recorded, the others run
                calls.append(None)
                print("ERROR", c0 + n, repr(exc)[:300], flush=True)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for call in calls:
                marker.fill_(1.0)
                outs.append(call.run() if call is not None else None)
            marker.fill_(1.0)
            torch.cuda.synchronize()
        prof.export_chrome_trace("/tmp/gemv_scan_trace.json")
        ks = kernels_by_call("/tmp/gemv_scan_trace.json", len(calls) + 1)
        for n, (spec, call, out) in enumerate(zip(chunk, calls, outs)):
            r = {"spec": spec, "seed": 100000 + c0 + n}
            if call is None:
                r["error"] = "the call could not be made"
            else:
                r["rows"] = call.M
                r["kernels"] = [{**k, "name": names.setdefault(k["name"], len(names))} for k in ks[n]] if ks else None
                r.update(kept(torch, call, out))
            res["results"].append(r)
        del calls, outs
        torch.cuda.empty_cache()
        print(c0 + len(chunk), round(time.time() - t0, 1), flush=True)
    res["kernel_names"] = sorted(names, key=names.get)
    res["seconds"] = round(time.time() - t0, 2)
    with gzip.open(sys.argv[2], "wt", compresslevel=9) as f:
        json.dump(res, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
