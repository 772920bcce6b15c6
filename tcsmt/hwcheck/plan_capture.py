"""What cuBLAS runs for one torch call, read two ways, for the plan recorder (:mod:`tcsmt.hwcheck.record`).

* Capture: the calls are made under CUDA stream capture (``torch.cuda.CUDAGraph(keep_graph=True)``), so nothing
  executes; the captured graph's nodes are read through the driver API (ctypes on ``libcuda.so.1``:
  ``cuGraphGetNodes``, ``cuGraphGetEdges_v2``, ``cuGraphNodeGetType``, ``cuGraphKernelNodeGetParams_v2`` ->
  ``cuFuncGetName``, the cluster-dimension launch attribute, ``cuGraphMemsetNodeGetParams``).  Several calls share
  one capture: before each call a 4-byte ``cuMemsetD32Async`` on a marker buffer writes the call's index, and the
  nodes between two markers (in the graph's order) belong to the call.
* Executed: the calls run under ``torch.profiler``; each call's kernels come from the profiler's trace (launches
  matched to ``record_function`` labels by correlation id).  The recorder falls back to it where capture fails.

Both read cuBLASLt's own trace of every call (``cublasLtLoggerSetCallback``, level 2), which fires when the host
calls the library, under capture too (:mod:`tcsmt.hwcheck.lt_trace`).  Standard library only; torch is passed in
by the caller.  Adapted from the
device recorder ``tools/device/plan_capture.py`` (branch rec/catalog), whose H200 run recorded 45,000 calls/s.
"""
from __future__ import annotations

import bisect
import ctypes
import heapq
import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

from tcsmt.hwcheck.gemv_launch import GEMV_PARAMS, gemv_dealing, param_info_functions
from tcsmt.hwcheck.lt_trace import LtTrace
from tcsmt.hwcheck.segment_k_launch import SEGMENT_K_ON, segment_k_launch

# ------------------------------------------------------------------------------------------------ names


def kernel_name(k: str) -> str:
    """A demangled kernel name without ``void`` and without its parameter list (the plan files' convention)."""
    if k.startswith("void "):
        k = k[5:]
    depth = 0
    for i, ch in enumerate(k):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return k[:i]
    return k


class Demangler:
    """``abi::__cxa_demangle`` of libstdc++ through ctypes, cached."""

    def __init__(self) -> None:
        self.cache: dict[str, str] = {}
        self.f: Any = None
        try:
            lib = ctypes.CDLL("libstdc++.so.6")
            f = getattr(lib, "__cxa_demangle")  # (a double-underscore name: no attribute syntax in a class)
            f.restype = ctypes.c_void_p
            f.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            self.free = ctypes.CDLL(None).free
            self.free.argtypes = [ctypes.c_void_p]
            self.f = f
        except (OSError, AttributeError):
            self.f = None

    def __call__(self, mangled: str) -> str:
        got = self.cache.get(mangled)
        if got is not None:
            return got
        out = mangled
        if self.f is not None and mangled.startswith("_Z"):
            st = ctypes.c_int(0)
            p = self.f(mangled.encode(), None, None, ctypes.byref(st))
            if p and st.value == 0:
                out = ctypes.string_at(p).decode(errors="replace")
            if p:
                self.free(p)
        self.cache[mangled] = out
        return out


# ------------------------------------------------------------------------------------------------ graph reading
NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "graph", 5: "empty", 6: "wait_event",
              7: "event_record", 8: "ext_sem_signal", 9: "ext_sem_wait", 10: "mem_alloc", 11: "mem_free",
              12: "batch_mem_op", 13: "conditional"}


class KernelParams(ctypes.Structure):
    _fields_ = [("func", ctypes.c_void_p), ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint),
                ("blockDimZ", ctypes.c_uint), ("sharedMemBytes", ctypes.c_uint), ("kernelParams", ctypes.c_void_p),
                ("extra", ctypes.c_void_p), ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p),
                ("_pad", ctypes.c_char * 64)]


class MemsetParams(ctypes.Structure):
    _fields_ = [("dst", ctypes.c_uint64), ("pitch", ctypes.c_size_t), ("value", ctypes.c_uint),
                ("elementSize", ctypes.c_uint), ("width", ctypes.c_size_t), ("height", ctypes.c_size_t),
                ("_pad", ctypes.c_char * 64)]


class AttrValue(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint), ("_pad", ctypes.c_char * 116)]


class GraphReader:
    """The driver-API calls that read a captured graph (ctypes on libcuda)."""

    def __init__(self) -> None:
        cu = self.cu = ctypes.CDLL("libcuda.so.1")
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        cu.cuGraphGetNodes.argtypes = [vp, vp, ctypes.POINTER(sz)]
        cu.cuGraphNodeGetType.argtypes = [vp, ctypes.POINTER(ctypes.c_int)]
        self.get_edges = cu.cuGraphGetEdges_v2
        self.get_edges.argtypes = [vp, vp, vp, vp, ctypes.POINTER(sz)]
        self.kparams = getattr(cu, "cuGraphKernelNodeGetParams_v2", None) or cu.cuGraphKernelNodeGetParams
        self.kparams.argtypes = [vp, ctypes.POINTER(KernelParams)]
        cu.cuFuncGetName.argtypes = [ctypes.POINTER(ctypes.c_char_p), vp]
        self.kernel_get_name = getattr(cu, "cuKernelGetName", None)
        if self.kernel_get_name is not None:
            self.kernel_get_name.argtypes = [ctypes.POINTER(ctypes.c_char_p), vp]
        self.kattr = cu.cuGraphKernelNodeGetAttribute
        self.kattr.argtypes = [vp, ctypes.c_int, ctypes.POINTER(AttrValue)]
        cu.cuGraphMemsetNodeGetParams.argtypes = [vp, ctypes.POINTER(MemsetParams)]
        self.param_info = param_info_functions(cu)
        cu.cuMemsetD32Async.argtypes = [ctypes.c_uint64, ctypes.c_uint, sz, vp]
        self.demangle = Demangler()
        self.names: dict[int, tuple[str, str]] = {}  # CUfunction -> (demangled, kernel_name)

    def chk(self, st: int, what: str) -> None:
        if st != 0:
            raise RuntimeError(f"{what}: CUresult {st}")

    def memset32(self, ptr: int, value: int, stream: int) -> None:
        self.chk(self.cu.cuMemsetD32Async(ptr, value, 1, stream), "cuMemsetD32Async")

    def ordered_nodes(self, graph: int) -> tuple[list[int], bool]:
        """The graph's nodes in dependency order (Kahn's order, ties by the driver's node order) and whether the
        graph is one chain (every node with at most one predecessor and one successor)."""
        n = ctypes.c_size_t(0)
        self.chk(self.cu.cuGraphGetNodes(ctypes.c_void_p(graph), None, ctypes.byref(n)), "cuGraphGetNodes")
        arr = (ctypes.c_void_p * max(n.value, 1))()
        self.chk(self.cu.cuGraphGetNodes(ctypes.c_void_p(graph), arr, ctypes.byref(n)), "cuGraphGetNodes")
        nodes = [int(arr[i] or 0) for i in range(n.value)]
        e = ctypes.c_size_t(0)
        self.chk(self.get_edges(ctypes.c_void_p(graph), None, None, None, ctypes.byref(e)), "cuGraphGetEdges")
        ne = e.value
        fr = (ctypes.c_void_p * max(ne, 1))()
        to = (ctypes.c_void_p * max(ne, 1))()
        data = (ctypes.c_uint64 * max(ne, 1))()
        if ne:
            self.chk(self.get_edges(ctypes.c_void_p(graph), fr, to, data, ctypes.byref(e)), "cuGraphGetEdges")
        pos = {v: i for i, v in enumerate(nodes)}
        succ: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
        indeg = [0] * len(nodes)
        for i in range(ne):
            a, b = pos[int(fr[i] or 0)], pos[int(to[i] or 0)]
            succ[a].append(b)
            indeg[b] += 1
        chain = all(d <= 1 for d in indeg) and all(len(s) <= 1 for s in succ.values())
        ready = [i for i in range(len(nodes)) if indeg[i] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for j in succ[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    heapq.heappush(ready, j)
        return [nodes[i] for i in order], chain

    def node_type(self, node: int) -> int:
        t = ctypes.c_int(-1)
        self.chk(self.cu.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t)), "cuGraphNodeGetType")
        return t.value

    def memset(self, node: int) -> MemsetParams:
        p = MemsetParams()
        self.chk(self.cu.cuGraphMemsetNodeGetParams(ctypes.c_void_p(node), ctypes.byref(p)), "memset params")
        return p

    def kernel(self, node: int) -> dict[str, Any]:
        """Name (the plan files' convention), full demangled name, grid, block, cluster, dynamic shared memory; a
        ``gemvx`` launch's dealing and a ``segment_k_on`` launch's words (:mod:`tcsmt.hwcheck.segment_k_launch`)."""
        p = KernelParams()
        self.chk(self.kparams(ctypes.c_void_p(node), ctypes.byref(p)), "cuGraphKernelNodeGetParams")
        key = int(p.func or p.kern or 0)
        got = self.names.get(key)
        if got is None:
            nm = ctypes.c_char_p()
            if p.func:
                self.chk(self.cu.cuFuncGetName(ctypes.byref(nm), ctypes.c_void_p(p.func)), "cuFuncGetName")
            elif self.kernel_get_name is not None:
                self.chk(self.kernel_get_name(ctypes.byref(nm), ctypes.c_void_p(p.kern)), "cuKernelGetName")
            full = self.demangle((nm.value or b"?").decode(errors="replace"))
            got = self.names[key] = (full, kernel_name(full))
        a = AttrValue()
        cl = None
        if self.kattr(ctypes.c_void_p(node), 4, ctypes.byref(a)) == 0 and a.x:  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            cl = [a.x, a.y, a.z]
        out = {"name": got[1], "full": got[0], "grid": [p.gridDimX, p.gridDimY, p.gridDimZ],
               "block": [p.blockDimX, p.blockDimY, p.blockDimZ], "cluster": cl, "smem": p.sharedMemBytes}
        if GEMV_PARAMS in got[0]:
            info = self.param_info["func" if p.func else "kern"]
            out["gemv_dealing"] = gemv_dealing(info, p.func or p.kern, p.kernelParams)
        if SEGMENT_K_ON in got[0]:
            info = self.param_info["func" if p.func else "kern"]
            out["segment_k_launch"] = segment_k_launch(info, p.func or p.kern, p.kernelParams, out["grid"], cl)
        return out


def graph_handle(h: Any) -> int:
    """The cudaGraph_t that ``CUDAGraph.raw_cuda_graph()`` returns, as an int (an int or a capsule)."""
    if isinstance(h, int):
        return h
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return int(get(h, None) or 0)


def _one_line(exc: BaseException, n: int) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:n]}"


class Capturer:
    """Records calls under stream capture, several to a graph, nothing executed."""

    def __init__(self, torch: Any, lt: LtTrace | None):
        self.torch = torch
        self.lt = lt
        self.gr = GraphReader()
        self.stream = torch.cuda.Stream()
        self.marker = torch.zeros(4, dtype=torch.int32, device="cuda")
        self.marker_ptr = self.marker.data_ptr()
        self.not_chain = 0
        self.anchor: Any = None
        self.begin_task(0)

    def begin_task(self, seed_bytes: int) -> None:
        """A fresh memory pool for the next captures; the first capture keeps the pool alive (torch releases a
        pool when its last graph goes) and first allocates, then frees, ``seed_bytes`` in it, so that the
        outputs of later calls are carved from that one block instead of new cudaMalloc calls."""
        self.anchor = None
        self.pool = self.torch.cuda.graph_pool_handle()
        self.seed_bytes = seed_bytes

    def end_task(self) -> None:
        self.anchor = None
        self.torch.cuda.empty_cache()

    def _capture(self, fns: list[Callable[[], Any]]) -> list[dict[str, Any]]:
        torch = self.torch
        res: list[dict[str, Any]] = [{"err": None, "lt": [], "nodes": []} for _ in fns]
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.stream(self.stream):
            sh = self.stream.cuda_stream
            g.capture_begin(pool=self.pool, capture_error_mode="thread_local")
            try:
                if self.anchor is None and self.seed_bytes:
                    try:
                        seed = torch.empty(self.seed_bytes, dtype=torch.uint8, device="cuda")
                        del seed
                    except torch.cuda.OutOfMemoryError:  # no seed: outputs are allocated one by one
                        self.seed_bytes = 0
                for i, fn in enumerate(fns):
                    self.gr.memset32(self.marker_ptr, i, sh)
                    if self.lt:
                        self.lt.start()
                    try:
                        out = fn()
                        del out
                    except Exception as exc:  # torch's refusal (host-side check): nothing was launched
                        res[i]["err"] = _one_line(exc, 300)
                    if self.lt:
                        res[i]["lt"] = self.lt.stop()
            finally:
                g.capture_end()
        graph = graph_handle(g.raw_cuda_graph())
        nodes, chain = self.gr.ordered_nodes(graph)
        if not chain:
            self.not_chain += 1
        cur = None
        for nd in nodes:
            t = self.gr.node_type(nd)
            if t == 2:
                p = self.gr.memset(nd)
                if p.dst == self.marker_ptr and p.elementSize == 4 and p.width == 1:
                    cur = p.value
                    continue
                if cur is not None:
                    res[cur]["nodes"].append({"type": "memset", "bytes": p.width * p.height * p.elementSize})
                continue
            if cur is None:
                continue
            if t == 0:
                res[cur]["nodes"].append(self.gr.kernel(nd))
            else:
                res[cur]["nodes"].append({"type": NODE_TYPES.get(t, str(t))})
        if self.anchor is None:
            self.anchor = g  # keeps the pool alive until end_task
        else:
            del g
        return res

    def record(self, fns: list[Callable[[], Any]]) -> list[dict[str, Any]]:
        """One result per zero-argument function (each makes one torch call): ``nodes`` (kernels with name, grid,
        block, cluster; other nodes by type), ``lt`` (raw trace lines), ``err`` (torch's refusal).  A batch whose
        capture fails is recorded again one call at a time; a call whose own capture fails gets ``capture_err``."""
        try:
            return self._capture(fns)
        except Exception as exc:
            first = _one_line(exc, 200)
            self._reset_pool()
        out = []
        for fn in fns:
            try:
                out.extend(self._capture([fn]))
            except Exception as exc:
                out.append({"err": None, "lt": [], "nodes": [],
                            "capture_err": f"{_one_line(exc, 200)} (batch capture: {first})"})
                self._reset_pool()
        return out

    def _reset_pool(self) -> None:
        """After a failed capture: a pool whose first graph failed is gone; the next capture takes a new one."""
        if self.anchor is None:
            self.pool = self.torch.cuda.graph_pool_handle()
        self.torch.cuda.synchronize()


# ------------------------------------------------------------------------------------------------ executed way


def record_executed(torch: Any, fns: list[Callable[[], Any]], lt: LtTrace | None,
                    prefix: str = "rp") -> list[dict[str, Any]]:
    """The same results for calls that really run, read from one torch.profiler session (kernel names are the
    profiler's demangled names, shortened by ``kernel_name``; ``full`` keeps the profiler's own)."""
    from torch.profiler import ProfilerActivity, profile, record_function
    res: list[dict[str, Any]] = [{"err": None, "lt": [], "nodes": []} for _ in fns]
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, fn in enumerate(fns):
            with record_function(f"{prefix}{i}"):
                if lt:
                    lt.start()
                try:
                    out = fn()
                    del out
                except Exception as exc:
                    res[i]["err"] = _one_line(exc, 300)
                if lt:
                    res[i]["lt"] = lt.stop()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    ev = trace["traceEvents"] if isinstance(trace, dict) else trace
    labels: list[tuple[float, float, int]] = []
    launches: dict[Any, float] = {}
    kernels: dict[Any, list[dict[str, Any]]] = {}
    for e in ev:
        cat = e.get("cat", "")
        if cat == "user_annotation" and e.get("name", "").startswith(prefix) and e["name"][len(prefix):].isdigit():
            labels.append((e["ts"], e["ts"] + e.get("dur", 0), int(e["name"][len(prefix):])))
        elif cat in ("kernel", "gpu_memset", "gpu_memcpy"):
            kernels.setdefault(e["args"].get("correlation"), []).append(e)
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e["ts"]
    labels.sort()
    starts = [lab[0] for lab in labels]
    per: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(fns))}
    for corr, ks in kernels.items():
        ts = launches.get(corr)
        if ts is None:
            continue
        pos = bisect.bisect_right(starts, ts) - 1
        if pos < 0 or ts > labels[pos][1]:
            continue
        for k in ks:
            per[labels[pos][2]].append(k)
    for i, ks in per.items():
        ks.sort(key=lambda k: k["ts"])
        for k in ks:
            a = k.get("args", {})
            if k.get("cat") == "kernel":
                res[i]["nodes"].append({"name": kernel_name(k["name"]), "full": k["name"], "grid": a.get("grid"),
                                        "block": a.get("block"), "cluster": a.get("cluster"),
                                        "smem": a.get("shared memory")})
            else:
                res[i]["nodes"].append({"type": "memset" if k["cat"] == "gpu_memset" else "memcpy"})
    return res
