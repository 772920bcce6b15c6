"""Read the launch parameters cuBLAS passes its GEMV kernels: each call captured once (nothing runs), its kernel
nodes' parameter bytes read through the driver.  Output: one json.gz per run.

    python3 gemv_params.py POINTS.json[.gz] OUT.json.gz   (on a GPU host with torch; run from tools/device)

POINTS: calls as ``gemv_probes.py`` takes them (op, batch, N, K, M, a_dtype, b_t, bias).  Each call is built as
``gemv_scan.py`` builds it (fresh contiguous operands) and captured under ``torch.cuda.CUDAGraph(keep_graph=True)``;
for every kernel node: its name, grid, block, and each parameter's offset, size and bytes (``cuFuncGetParamInfo``
or ``cuKernelGetParamInfo`` on the node's function, the values read from the node's ``kernelParams``), as hex.
With ``"offset_a"`` / ``"offset_b"`` in a point (elements), the vector or the matrix starts that many elements into
a larger buffer (the pointer's alignment is then not the allocator's).
"""
import ctypes
import gzip
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from gemv_probes import Call  # its sibling, shipped with it

from tcsmt.hwcheck.gemv_launch import kernel_params
from tcsmt.hwcheck.plan_capture import GraphReader, KernelParams, graph_handle


def param_bytes(gr, node):
    """[(offset, size, hex)] of a kernel node's parameters."""
    p = KernelParams()
    gr.chk(gr.kparams(ctypes.c_void_p(node), ctypes.byref(p)), "cuGraphKernelNodeGetParams")
    info = gr.param_info["func" if p.func else "kern"]
    return [[off, size, raw.hex()] for off, size, raw in kernel_params(info, p.func or p.kern, p.kernelParams) or []]


def build(torch, spec, dev):
    call = Call(torch, spec, dev)
    oa, ob = int(spec.get("offset_a", 0)), int(spec.get("offset_b", 0))
    if oa:
        big = torch.ones(call.a.numel() + oa, dtype=call.a.dtype, device=dev)
        call.a = big[oa:].view(call.a.shape)
    if ob:
        big = torch.zeros(call.buf.numel() + ob, dtype=call.buf.dtype, device=dev)
        call.buf = big[ob:].view(call.buf.shape)
        if call.op == "bmm":
            call.view = call.buf.transpose(-1, -2) if call.bt else call.buf
    return call


def main():
    import torch
    points_path, out_path = sys.argv[1], sys.argv[2]
    op = gzip.open if points_path.endswith(".gz") else open
    with op(points_path, "rt") as f:
        points = json.load(f)
    points = points["points"] if isinstance(points, dict) else points
    dev = torch.device("cuda")
    gr = GraphReader()
    stream = torch.cuda.Stream()
    results, names, t0 = [], {}, time.time()
    for spec in points:
        r = {"spec": spec}
        try:
            call = build(torch, spec, dev)
            call.run()  # warm: cuBLAS handle, workspace
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph(keep_graph=True)
            with torch.cuda.stream(stream):
                g.capture_begin(capture_error_mode="thread_local")
                try:
                    out = call.run()
                finally:
                    g.capture_end()
            del out
            nodes, _chain = gr.ordered_nodes(graph_handle(g.raw_cuda_graph()))
            ks = []
            for nd in nodes:
                if gr.node_type(nd) != 0:
                    continue
                k = gr.kernel(nd)
                k["name"] = names.setdefault(k["full"], len(names))
                del k["full"]
                k["params"] = param_bytes(gr, nd)
                ks.append(k)
            r["kernels"] = ks
            del g, call
        except Exception as exc:  # one line per failed call
            r["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        results.append(r)
    with gzip.open(out_path, "wt") as f:
        json.dump({"device": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                              "cuda": torch.version.cuda},
                   "kernel_names": [k for k, _ in sorted(names.items(), key=lambda kv: kv[1])],
                   "results": results, "seconds": round(time.time() - t0, 1)}, f, separators=(",", ":"))
    print(f"{len(results)} calls, {sum('error' in r for r in results)} failed, {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
