"""Read the launch parameters cuBLAS passes its tf32 ``segment_k_on`` kernels: each call captured once under a CUDA
graph (nothing runs but one warm call before), every node of the graph read through the driver.

    python3 tools/device/segment_k_params.py LIST.json OUT.json.gz [SECONDS]   (GPU host; torch, numpy, tcsmt)

LIST: ``calls``, each a call spec as ``tcsmt record`` takes it (float32, tf32 on; ``mm`` or ``linear``), as
``segment_k_probe.py`` takes them (``tools/library/segment_k_param_list.py`` writes one: the probed calls and calls of
the same shapes with M, N or K varied one at a time).  Each call is built as the probe builds it
(:func:`tcsmt.library.lookup.parse_record_spec`, :func:`tcsmt.hwcheck.library_calls.build_tensors` /
:func:`~tcsmt.hwcheck.library_calls.call_torch`, operands all zero: the values do not reach the launch), run once
(cuBLAS handle, workspace), then captured under ``torch.cuda.CUDAGraph(keep_graph=True)``.  Kept per call: for every
kernel node its name (an index into ``kernel_names``, the full demangled names), grid, block, cluster, dynamic shared
memory and each parameter's offset, size and bytes as hex (``cuFuncGetParamInfo`` / ``cuKernelGetParamInfo``, the
values from the node's ``kernelParams``); for every memset node its destination, value, element size, width and
height; the other nodes' types; the operands' and the output's device addresses (to tell pointer fields).  The device
stamp (:func:`tcsmt.hwcheck.stamp.running_stamp`) and the command are in the file.  Calls run in order until SECONDS
(default 240) have passed.
"""
import ctypes
import gzip
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import numpy as np

from tcsmt.hwcheck.gemv_launch import kernel_params
from tcsmt.hwcheck.library_calls import build_tensors, call_torch
from tcsmt.hwcheck.plan_capture import NODE_TYPES, GraphReader, KernelParams, graph_handle
from tcsmt.hwcheck.stamp import running_stamp
from tcsmt.library.lookup import parse_record_spec

FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32", "scale",
          "fast_accum", "a_t", "b_t")


def capture_call(torch, stream, vc, t):
    """(graph, output) of the call ``vc`` on tensors ``t`` captured on ``stream``, not run (kept for reading)."""
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.stream(stream):
        g.capture_begin(capture_error_mode="thread_local")
        try:
            out = call_torch(torch, vc, t)
        finally:
            g.capture_end()
    return g, out


def param_bytes(gr, node):
    """[(offset, size, hex)] of a kernel node's parameters."""
    p = KernelParams()
    gr.chk(gr.kparams(ctypes.c_void_p(node), ctypes.byref(p)), "cuGraphKernelNodeGetParams")
    info = gr.param_info["func" if p.func else "kern"]
    return [[off, size, raw.hex()] for off, size, raw in kernel_params(info, p.func or p.kern, p.kernelParams) or []]


def read_graph(gr, g, names):
    """The nodes of a captured graph, in dependency order (module docstring)."""
    nodes, chain = gr.ordered_nodes(graph_handle(g.raw_cuda_graph()))
    out = []
    for nd in nodes:
        kind = gr.node_type(nd)
        if kind == 0:
            k = gr.kernel(nd)
            k["name"] = names.setdefault(k.pop("full"), len(names))
            k.pop("gemv_dealing", None)
            k["params"] = param_bytes(gr, nd)
            out.append({"node": "kernel", **k})
        elif kind == 2:
            m = gr.memset(nd)
            out.append({"node": "memset", "dst": m.dst, "value": m.value, "element_size": m.elementSize,
                        "width": m.width, "height": m.height})
        else:
            out.append({"node": NODE_TYPES.get(kind, str(kind))})
    return out, chain


def capture(torch, gr, stream, spec, names, dev):
    """One call's graph, read (module docstring)."""
    call = parse_record_spec(spec)
    vc = {k: getattr(call, k) for k in FIELDS}
    a_shape = (call.M, call.K)
    inputs = {"A": np.zeros(a_shape, dtype=np.uint32), "B": np.zeros((call.K, call.N), dtype=np.uint32)}
    t = build_tensors(torch, vc, inputs, dev)
    del inputs
    call_torch(torch, vc, t)  # warm: cuBLAS handle, workspace
    torch.cuda.synchronize()
    g, out = capture_call(torch, stream, vc, t)
    nodes, chain = read_graph(gr, g, names)
    ptrs = {k: int(v.data_ptr()) for k, v in t.items()}
    ptrs["out"] = int(out.data_ptr())
    del out, g, t
    return {"nodes": nodes, "chain": chain, "pointers": ptrs}


def main() -> int:
    import torch

    items = json.load(open(sys.argv[1]))["calls"]
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 240.0
    dev = torch.device("cuda")
    gr = GraphReader()
    stream = torch.cuda.Stream()
    names: dict[str, int] = {}
    results, not_run, t0 = [], [], time.time()
    for n, item in enumerate(items):
        if time.time() - t0 > budget:
            not_run = [x["spec"] for x in items[n:]]
            break
        r = {"spec": item["spec"]}
        try:
            r.update(capture(torch, gr, stream, item["spec"], names, dev))
        except Exception as exc:  # a device host tool: every failure is recorded, the run goes on
            r["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        results.append(r)
        torch.cuda.empty_cache()
    doc = {"what": "launch parameters of cuBLAS's tf32 segment_k_on calls (tools/device/segment_k_params.py)",
           "command": " ".join(sys.argv), "stamp": running_stamp(torch), "seconds": float(f"{time.time() - t0:.1f}"),
           "kernel_names": [k for k, _ in sorted(names.items(), key=lambda kv: kv[1])], "results": results,
           "not_run": not_run}
    with gzip.open(sys.argv[2], "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{len(results)} captured, {sum('error' in r for r in results)} failed, {len(not_run)} not run, "
          f"{time.time() - t0:.0f} s -> {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
