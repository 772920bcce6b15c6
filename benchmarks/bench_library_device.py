"""tcsmt.torch end to end on a CUDA GPU, each call beside torch's own: time, products/s, and every output compared.

    python benchmarks/bench_library_device.py --out RESULT.json [--label after] [--repeats 5] [--cases a,b,...]
    python benchmarks/bench_library_device.py --table BEFORE.json AFTER.json   # the README table

For each case (op, shape, dtype; every shape has a recorded H100 plan) it makes random inputs on the GPU
(torch.randn from a fixed seed, fp8 from scaled normals), runs torch's call (``torch.mm``, ``F.linear``,
``torch.addmm``, ``torch.bmm``, ``torch.baddbmm``, ``torch.matmul``, ``torch._scaled_mm``) and the same call
through ``tcsmt.torch``, and records:

* tcsmt's time: wall clock from the call to its result on the GPU (``torch.cuda.synchronize`` before and
  after), the median of ``--repeats`` runs after one warm-up run (``--repeats 1``: one run, no warm-up, for
  slow code; the CUDA kernels are compiled first on a tiny call of the same chain);
* torch's time: the median of 20 CUDA-event timings after 3 warm-up calls;
* products/s = M x N x K x batch / tcsmt's time, and tcsmt's time / torch's;
* mismatches: outputs whose bits differ from torch's, over every output.

It imports only what both tcsmt versions have (``tcsmt.torch`` and ``tcsmt.kernels.cuda.gemm``), so the
code before a change can be timed by the same script (``PYTHONPATH=OLD_TREE``); a case the code lacks
(baddbmm) is recorded as missing.  Results in ``--out`` (JSON, one entry per case, written after each case).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

CASES = {
    # name: (op, dims, dtype, extra)
    "mm_bf16_fp32": ("mm", (4096, 4096, 4096), "bfloat16", {"out_dtype": "float32"}),
    "mm_bf16": ("mm", (4096, 4096, 4096), "bfloat16", {}),
    "mm_fp16": ("mm", (4096, 4096, 4096), "float16", {}),
    "mm_tf32": ("mm", (4096, 4096, 4096), "float32", {"tf32": True}),
    "linear_bf16": ("linear", (4096, 4096, 4096), "bfloat16", {}),
    "linear_bias_bf16": ("linear", (4096, 4096, 4096), "bfloat16", {"bias": True}),
    "addmm_bf16": ("addmm", (4096, 4096, 4096), "bfloat16", {"alpha": 1.5, "beta": 0.75}),
    "bmm_bf16": ("bmm", (4096, 4096, 4096), "bfloat16", {"batch": 2}),
    "baddbmm_bf16": ("baddbmm", (4096, 4096, 4096), "bfloat16", {"batch": 2}),
    "matmul_bf16": ("matmul", (4096, 4096, 4096), "bfloat16", {"lead": (4, 1024)}),
    "scaled_mm_e4m3": ("scaled_mm", (4096, 4096, 4096), "float8_e4m3fn", {"scale": "tensor", "out_dtype": "bfloat16"}),
    "scaled_mm_e4m3_row": ("scaled_mm", (4096, 4096, 4096), "float8_e4m3fn", {"scale": "row", "out_dtype": "bfloat16"}),
    "mm_bf16_2048x8192x8192": ("mm", (2048, 8192, 8192), "bfloat16", {}),
    "mm_tf32_2048": ("mm", (2048, 2048, 2048), "float32", {"tf32": True}),
}


def make_case(torch, name: str, seed: int):
    """(torch_fn, tcsmt_fn, products, chain_warmup) of one case, inputs on the GPU."""
    import tcsmt.torch as tt

    op, (M, N, K), dtype, extra = CASES[name]
    g = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"

    def randn(*shape, dt=dtype):
        return torch.randn(*shape, device=dev, generator=g, dtype=torch.float32).to(getattr(torch, dt))

    batch = extra.get("batch", 1)
    products = M * N * K * batch
    torch.backends.cuda.matmul.allow_tf32 = bool(extra.get("tf32", False))
    if op == "mm":
        a, b = randn(M, K), randn(K, N)
        od = extra.get("out_dtype")
        if od:
            odt = getattr(torch, od)
            return (lambda: torch.mm(a, b, out_dtype=odt)), (lambda: tt.mm(a, b, out_dtype=odt)), products
        return (lambda: torch.mm(a, b)), (lambda: tt.mm(a, b)), products
    if op == "linear":
        x, w = randn(M, K), randn(N, K)
        bias = randn(N) if extra.get("bias") else None
        F = torch.nn.functional
        return (lambda: F.linear(x, w, bias)), (lambda: tt.linear(x, w, bias)), products
    if op == "addmm":
        a, b, c = randn(M, K), randn(K, N), randn(M, N)
        al, be = extra["alpha"], extra["beta"]
        return ((lambda: torch.addmm(c, a, b, beta=be, alpha=al)),
                (lambda: tt.addmm(c, a, b, beta=be, alpha=al)), products)
    if op == "bmm":
        a, b = randn(batch, M, K), randn(batch, K, N)
        return (lambda: torch.bmm(a, b)), (lambda: tt.bmm(a, b)), products
    if op == "baddbmm":
        a, b, c = randn(batch, M, K), randn(batch, K, N), randn(batch, M, N)
        if not hasattr(tt, "baddbmm"):
            return (lambda: torch.baddbmm(c, a, b, beta=0.0, alpha=1.0)), None, products
        return ((lambda: torch.baddbmm(c, a, b, beta=0.0, alpha=1.0)),
                (lambda: tt.baddbmm(c, a, b, beta=0.0, alpha=1.0)), products)
    if op == "matmul":
        lead = extra["lead"]
        x, w = randn(*lead, K), randn(K, N)
        return (lambda: torch.matmul(x, w)), (lambda: tt.matmul(x, w)), products
    if op == "scaled_mm":
        a = (randn(M, K, dt="float32") * 8).to(torch.float8_e4m3fn)
        b = (randn(N, K, dt="float32") * 8).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm needs
        if extra["scale"] == "tensor":
            sa = torch.tensor(0.375, device=dev)
            sb = torch.tensor(1.25, device=dev)
        else:
            sa = (torch.rand(M, 1, device=dev, generator=g) + 0.5).float()
            sb = (torch.rand(1, N, device=dev, generator=g) + 0.5).float()
        od = torch.bfloat16
        return ((lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=od)),
                (lambda: tt.scaled_mm(a, b, sa, sb, out_dtype=od)), products)
    raise ValueError(op)


def bits(torch, t):
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def warm_kernels(name: str) -> None:
    """Compile the GPU chain kernel of the case's plan on a tiny call (NVRTC), so that a single timed run
    does not include it."""
    import numpy as np

    from tcsmt import library as L
    from tcsmt.kernels.cuda import gemm

    op, (M, N, K), dtype, extra = CASES[name]
    kw = {"a_dtype": dtype}
    if op == "baddbmm":
        op = "bmm"
    if op == "matmul":
        op = "mm"
    for key in ("out_dtype", "tf32", "scale", "bias", "alpha", "beta", "batch"):
        if key in extra:
            kw[key] = extra[key]
    p = L.plan(op, M, N, K, **kw)
    fmt = {"bf16": np.uint16, "fp16": np.uint16, "tf32": np.uint32, "e4m3": np.uint8}[p.chain.in_fmt]
    gemm(p.chain, np.zeros((2, 64), fmt), np.zeros((64, 2), fmt))


def run_case(torch, name: str, repeats: int, seed: int) -> dict:
    torch_fn, tcsmt_fn, products = make_case(torch, name, seed)
    op, dims, dtype, extra = CASES[name]
    res = {"case": name, "op": op, "M": dims[0], "N": dims[1], "K": dims[2], "batch": extra.get("batch", 1),
           "dtype": dtype, "extra": {k: v for k, v in extra.items() if k != "lead"}, "products": products}
    ref = torch_fn()
    for _ in range(3):
        torch_fn()
    torch.cuda.synchronize()
    tt = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch_fn()
        e.record()
        e.synchronize()
        tt.append(s.elapsed_time(e) / 1e3)
    res["torch_s"] = statistics.median(tt)
    if tcsmt_fn is None:
        res["missing"] = "this tcsmt has no such function"
        return res
    try:
        warm_kernels(name)
    except Exception as exc:
        res["warmup_error"] = f"{type(exc).__name__}: {exc}"
    times = []
    out = None
    if repeats > 1:
        out = tcsmt_fn()
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = tcsmt_fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    res["tcsmt_s"] = statistics.median(times)
    res["tcsmt_s_all"] = times
    res["products_per_s"] = products / res["tcsmt_s"]
    res["ratio_to_torch"] = res["tcsmt_s"] / res["torch_s"]
    res["out_device"] = str(out.device)
    res["out_dtype"] = str(out.dtype)
    res["outputs"] = ref.numel()
    same_shape = tuple(out.shape) == tuple(ref.shape) and out.dtype == ref.dtype
    res["mismatches"] = int((bits(torch, out.to(ref.device)) != bits(torch, ref)).sum()) if same_shape else ref.numel()
    return res


def table(before_path: str, after_path: str) -> str:
    before = {r["case"]: r for r in json.load(open(before_path))["cases"]}
    after = json.load(open(after_path))
    dev = after.get("device", "?")
    lines = ["| op | shape | dtype | products/s before | products/s after | torch's time | after / torch | "
             "outputs differing from torch | device |", "|---|---|---|---:|---:|---:|---:|---|---|"]
    for r in after["cases"]:
        if "products_per_s" not in r:
            lines.append(f"| {r['case']} | | | | {r.get('error') or r.get('missing')} | | | | {dev} |")
            continue
        b = before.get(r["case"], {})
        shape = (f"{r['batch']}x" if r["batch"] > 1 else "") + f"{r['M']}x{r['N']}x{r['K']}"
        dt = r["dtype"] + (" -> " + r["extra"]["out_dtype"] if "out_dtype" in r["extra"] else "")
        if r["extra"].get("tf32"):
            dt += " (tf32)"
        note = {k: v for k, v in r["extra"].items() if k not in ("out_dtype", "tf32", "batch")}
        op = r["op"] + (f" {note}" if note else "")
        pb = f"{b['products_per_s']:.2g}" if "products_per_s" in b else ("-" if not b else "n/a")
        lines.append(f"| {op} | {shape} | {dt} | {pb} | {r['products_per_s']:.2g} | {r['torch_s'] * 1e3:.2f} ms | "
                     f"{r['ratio_to_torch']:.0f}x | {r['mismatches']} of {r['outputs']} | {dev} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--label", default="after")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--table", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.table:
        print(table(*args.table))
        return 0
    import torch

    import tcsmt

    res = {"label": args.label, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "tcsmt_file": tcsmt.__file__, "repeats": args.repeats, "cases": []}
    for name in args.cases.split(","):
        t0 = time.perf_counter()
        try:
            r = run_case(torch, name, args.repeats, args.seed)
        except Exception as exc:
            r = {"case": name, "error": f"{type(exc).__name__}: {exc}"}
        r["wall_s"] = round(time.perf_counter() - t0, 2)
        res["cases"].append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "tcsmt_s_all"}), flush=True)
        torch.cuda.empty_cache()
        if args.out:
            with open(args.out, "w") as f:
                json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
