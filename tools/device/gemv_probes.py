"""Read the K order of cuBLAS's CUDA-core GEMV kernels through torch (FPRev-style swamping probes,
Xie et al., arXiv 2411.00442).  Output: one json.gz per run.

    python3 gemv_probes.py SPECS.json OUT.json.gz [SECONDS]   (on a GPU host with torch; shipped alone)

SPECS: calls (op bmm/mm/linear, batch, N, K, a_dtype, b_t; ``M``: rows of A, 1 unless given, every output read from
row 0 of each batch (the probes' A is ones, so every row sums the same); ``bias``: a linear call with a bias of zeros, which runs
the kernel cuBLAS picks for a bias and adds +0 to every sum; a spec's ``out_dtype`` is not applied: every call gives
torch's default output, a_dtype, unless ``apply_out_dtype`` asks for it: ``torch.mm`` / ``torch.bmm`` with ``out_dtype``,
the result's ``out_dtype`` then names it; ``a_dtype`` float32 runs fp32 inputs with ``allow_tf32`` as the spec's ``tf32``
says) with the leaves i whose rows to reveal (``reveal_i``,
within ``budget`` launches), and how many random-input (``n_normal``) and random-probe (``n_windowed``) calls to
sample; for each call the kernels (names, grid, block) are read with torch.profiler.  Random inputs are bit
patterns from numpy seeds (:func:`random_bits`, :func:`windowed_params`) so that ``tools/library/gemv_orders.py``
rebuilds them; the first CAP outputs of each sampled call are kept.  The committed runs' specs are in their results
(``evidence/library/<gpu>_gemv_probes.json.gz``, each result's ``spec``); ``gemv_probes_next.json`` beside this file
lists calls of the GEMV kernel variants the recordings hold and no probe read yet (two K values each, made from the
H100 recordings against ``models/library/h100_gemv_orders.json.gz``), for the next device run.

Probe of one output: product +B at k = i, -B at k = j, "one" at every k of a window W (not i, j), 0 elsewhere, the
vector x = 1.  With fp32 additions the output counts the ones of W outside the subtree of lca(i, j) (ones inside it
are swamped by B before i and j cancel).  |W| <= 256 keeps the count exact in a bf16 / fp16 output.
"""
import base64
import gzip
import json
import sys
import time

import numpy as np

BF16_B, FP16_B = 2.0 ** 40, 2.0 ** 15
ONE = {"bfloat16": 1.0, "float16": 2.0 ** -24, "float32": 1.0}
BIG = {"bfloat16": BF16_B, "float16": FP16_B, "float32": BF16_B}
WIN = 256
CAP = 4096


def b64(a):
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


def random_bits(rng, dtype, shape):
    """Random normal-range bit patterns: sign, exponent bias-6..bias+1, every mantissa bit (uint16; float32: uint32)."""
    n = int(np.prod(shape))
    if dtype == "float32":
        e = rng.integers(127 - 6, 127 + 2, n)
        m = rng.integers(0, 1 << 23, n)
        s = rng.integers(0, 2, n)
        return ((s << 31) | (e << 23) | m).astype(np.uint32).reshape(shape)
    if dtype == "bfloat16":
        e = rng.integers(127 - 6, 127 + 2, n)
        m = rng.integers(0, 1 << 7, n)
        s = rng.integers(0, 2, n)
        return ((s << 15) | (e << 7) | m).astype(np.uint16).reshape(shape)
    e = rng.integers(15 - 6, 15 + 2, n)
    m = rng.integers(0, 1 << 10, n)
    s = rng.integers(0, 2, n)
    return ((s << 15) | (e << 10) | m).astype(np.uint16).reshape(shape)


class Call:
    def __init__(self, torch, spec, dev):
        self.t, self.spec = torch, spec
        self.dt = getattr(torch, spec["a_dtype"])
        self.tf32 = bool(spec.get("tf32"))
        out = spec.get("out_dtype") or spec["a_dtype"]
        self.out_kw = ({"out_dtype": getattr(torch, out)} if spec.get("apply_out_dtype") and out != spec["a_dtype"]
                       and spec["op"] in ("mm", "bmm") else {})
        self.out_dtype = out if self.out_kw else spec["a_dtype"]
        self.op, self.bt = spec["op"], bool(spec["b_t"])
        self.batch, self.N, self.K = int(spec["batch"]), int(spec["N"]), int(spec["K"])
        bs = (self.batch,) if self.op == "bmm" else ()
        self.M = int(spec.get("M", 1))
        self.a = torch.ones(*bs, self.M, self.K, dtype=self.dt, device=dev)
        self.bias = torch.zeros(self.N, dtype=self.dt, device=dev) if spec.get("bias") else None
        if self.op == "linear":
            self.buf = torch.zeros(self.N, self.K, dtype=self.dt, device=dev)
            self.view = self.buf.t().unsqueeze(0)
        elif self.bt:
            self.buf = torch.zeros(*bs, self.N, self.K, dtype=self.dt, device=dev)
            self.view = self.buf.transpose(-1, -2) if self.op == "bmm" else self.buf.t().unsqueeze(0)
        else:
            self.buf = torch.zeros(*bs, self.K, self.N, dtype=self.dt, device=dev)
            self.view = self.buf if self.op == "bmm" else self.buf.unsqueeze(0)

    def b(self):
        if self.op == "linear":
            return self.buf
        if self.op == "bmm":
            return self.view
        return self.buf.t() if self.bt else self.buf

    def run(self):
        """Row 0 of each batch's output (batch, 1, N) or (1, N)."""
        t = self.t
        t.backends.cuda.matmul.allow_tf32 = self.tf32
        if self.op == "bmm":
            return t.bmm(self.a, self.b(), **self.out_kw)[:, :1, :]
        if self.op == "linear":
            return t.nn.functional.linear(self.a, self.buf, self.bias)[:1]
        return t.mm(self.a, self.b(), **self.out_kw)[:1]

    def bits(self, out):
        """The output's bit patterns (uint16, or uint32 for a float32 output)."""
        t = self.t
        if out.dtype == t.float32:
            return out.reshape(-1).contiguous().view(t.int32).cpu().numpy().view(np.uint32)
        return out.reshape(-1).contiguous().view(t.int16).cpu().numpy().view(np.uint16)


def kernels_of(torch, call):
    from torch.profiler import ProfilerActivity, profile
    call.run()
    torch.cuda.synchronize()
    path = "/tmp/gemv_trace.json"
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call.run()
        torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    ev = json.load(open(path))["traceEvents"]
    return [{"name": e["name"], "grid": e.get("args", {}).get("grid"), "block": e.get("args", {}).get("block")}
            for e in ev if e.get("cat") == "kernel"]


def reveal(torch, call, i_list, budget):
    """counts[i] = for every j: K - |subtree(lca(i, j))| (j = i: -1), summed over windows of WIN ones."""
    t, v, K = torch, call.view, call.K
    P = call.batch * call.N
    one, big = ONE[call.spec["a_dtype"]], BIG[call.spec["a_dtype"]]
    bidx = t.arange(call.batch, device=v.device).repeat_interleave(call.N)
    nidx = t.arange(call.N, device=v.device).repeat(call.batch)
    rows, launches = {}, 0
    for i in i_list:
        need = -(-K // WIN) * -(-K // P)
        if launches + need > budget:
            continue
        acc = t.zeros(K, dtype=t.float64, device=v.device)
        for w0 in range(0, K, WIN):
            w1 = min(K, w0 + WIN)
            v[:, w0:w1, :] = one
            for j0 in range(0, K, P):
                js = t.arange(j0, min(K, j0 + P), device=v.device)
                n = js.numel()
                v[bidx[:n], js, nidx[:n]] = -big
                v[:, i, :] = big
                out = call.run().reshape(-1)[:n].double()
                acc[j0:j0 + n] += out / one
                v[bidx[:n], js, nidx[:n]] = t.where((js >= w0) & (js < w1), one, 0.0).to(v.dtype)
                v[:, i, :] = one if w0 <= i < w1 else 0.0
                launches += 1
            v[:, w0:w1, :] = 0
        acc[i] = -1
        rows[str(i)] = b64(acc.round().to(t.int32).cpu().numpy().astype(np.int16))
    return rows, launches


def windowed_params(seed, K, P):
    rng = np.random.default_rng(seed)
    i = rng.integers(0, K, P)
    j = (i + 1 + rng.integers(0, max(K - 1, 1), P)) % K
    ln = rng.integers(1, min(K, 255) + 1, P)
    w0 = rng.integers(0, K - ln + 1, P)
    return i, j, w0, ln


def windowed(torch, call, seed):
    """One call of random probes: per output random i != j, window start and length (<= 255), from ``seed``
    (:func:`windowed_params`); the first CAP outputs are kept."""
    t, K, P = torch, call.K, call.batch * call.N
    one, big = ONE[call.spec["a_dtype"]], BIG[call.spec["a_dtype"]]
    i, j, w0, ln = windowed_params(seed, K, P)
    dev = call.view.device
    k = t.arange(K, device=dev).view(1, K, 1)
    shp = (call.batch, 1, call.N)
    at_i, at_j, start, length = (t.tensor(x, device=dev).view(shp) for x in (i, j, w0, ln))
    val = t.where((k >= start) & (k < start + length), one, 0.0)
    val = t.where(k == at_i, big, val)
    val = t.where(k == at_j, -big, val)
    if K == 1:
        val = t.full_like(val, one)
    call.view.copy_(val.to(call.view.dtype))
    out = call.bits(call.run())
    call.view.zero_()
    return {"seed": seed, "out": b64(out[:CAP])}


def as_dtype(t, bits, dt):
    """A tensor of dtype ``dt`` from unsigned bit patterns (uint16 or uint32)."""
    signed = bits.view(np.int32) if bits.dtype == np.uint32 else bits.view(np.int16)
    return t.from_numpy(signed).view(dt)


def normal(torch, call, seed):
    rng = np.random.default_rng(seed)
    t = torch
    a = random_bits(rng, call.spec["a_dtype"], tuple(call.a.shape))
    b = random_bits(rng, call.spec["a_dtype"], (call.batch, call.K, call.N))  # logical (batch, K, N)
    call.a.copy_(as_dtype(t, a, call.dt).to(call.a.device))
    call.view.copy_(as_dtype(t, b, call.dt).to(call.a.device).reshape(call.view.shape))
    out = call.bits(call.run())
    call.a.fill_(1)
    call.view.zero_()
    return {"seed": seed, "out": b64(out[:CAP])}


def main():
    import torch
    specs = json.load(open(sys.argv[1]))
    out_path = sys.argv[2]
    budget_s = float(sys.argv[3]) if len(sys.argv) > 3 else 200
    dev = torch.device("cuda")
    res = {"device": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                      "cublas": torch.backends.cuda.preferred_blas_library().name if hasattr(torch.backends.cuda, "preferred_blas_library") else None,
                      "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
           "method": __doc__, "big": BIG, "one": ONE, "window": WIN, "results": []}
    t0 = time.time()
    for n, spec in enumerate(specs):
        if time.time() - t0 > budget_s:
            res["results"].append({"spec": spec, "skipped": "time"})
            continue
        r = {"spec": spec}
        try:
            call = Call(torch, spec, dev)
            r["rows"] = call.M  # rows of A run (runs before this field ran 1, whatever the spec's M said)
            r["out_dtype"] = call.out_dtype  # the outputs' dtype (runs before this field: a_dtype)
            r["kernels"] = kernels_of(torch, call)
            i_list = spec.get("reveal_i", [])
            r["reveal"], r["launches"] = reveal(torch, call, i_list, spec.get("budget", 2000))
            r["windowed"] = [windowed(torch, call, 1000 + 10 * n + s) for s in range(spec.get("n_windowed", 2))]
            r["normal"] = [normal(torch, call, 7000 + 10 * n + s) for s in range(spec.get("n_normal", 2))]
            del call
        except Exception:  # one spec's failure is recorded, the others run
            import traceback
            r["error"] = traceback.format_exc()[-2000:]
            print("ERROR", n, r["error"], flush=True)
        r["seconds"] = round(time.time() - t0, 2)
        res["results"].append(r)
        print(n, spec["op"], spec["a_dtype"], spec["batch"], spec["N"], spec["K"], spec["b_t"], (r.get("kernels") or [{}])[0].get("name", "")[:80], (r.get("kernels") or [{}])[0].get("block"), r.get("launches"), r["seconds"], flush=True)
        torch.cuda.empty_cache()
    res["seconds"] = round(time.time() - t0, 2)
    with gzip.open(out_path, "wt", compresslevel=6) as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
