"""Capture every GEMM of a model on the GPU, then replay them with tcsmt on the CPU, bit for bit.

On the GPU host (torch, transformers; no other tcsmt dependency):

    python examples/model_replay.py capture --out DIR [--what llama,fp8] [--layers 2]

writes ``DIR/llama_fwd.{npz,json}`` (forward passes at several batch x sequence sizes, and single-token decode
steps with a KV cache), ``DIR/llama_bwd.{npz,json}`` (one forward and backward pass) and ``DIR/fp8.{npz,json}``
(a stack of fp8 ``torch._scaled_mm`` linear layers).  The LLaMA model is transformers' ``LlamaForCausalLM`` at
LLaMA-3-8B widths (hidden 4096, intermediate 14336, 32 heads, 8 KV heads, vocabulary 128256), ``--layers``
decoder layers, random weights from a fixed seed, eager attention (its two products are cuBLAS calls too), bf16.

Then, anywhere tcsmt is installed:

    python -m tcsmt.library.gemm_replay DIR/llama_fwd.json --gpu h100 --json replay.json

Your own model: wrap what you run in the capture mode (``tcsmt/hwcheck/gemm_capture.py``, torch only)::

    from tcsmt.hwcheck.gemm_capture import GemmCapture
    with GemmCapture(rows=4, cols=4) as cap:      # 4 rows x 4 columns of each GEMM's output are sampled
        cap.phase = "forward"
        loss = model(batch).loss
        cap.phase = "backward"
        loss.backward()
    cap.save("my_model")                          # my_model.npz, my_model.json

and replay ``my_model.json`` as above, with ``--gpu`` naming the GPU it ran on.  A call without a recorded plan is
reported as refused, with its reason (``tcsmt record`` records plans on your GPU).

On a GPU host with tcsmt (and CuPy), the same programs can be checked whole instead of sampled:

    python examples/model_replay.py facade --out DIR [--what llama,fp8] [--gpu h100]

runs them again and, for every GEMM, takes the plan the CPU replay would take (``tcsmt.library.gemm_replay``'s
``answer_of``), computes the call's every output through the torch facade on the GPU
(``tcsmt.torch`` with ``plan=``), and compares them bit for bit with torch's; ``DIR/facade_<program>.json`` holds
the counts and each call's result.  Both commands print a line per phase and write each program's file as soon
as that program is done.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

LLAMA3_8B = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
             "vocab_size": 128256}
PREFILL = [(1, 1), (1, 7), (2, 64), (4, 250), (8, 512)]  # (batch, sequence): tokens 1, 7, 128, 1000, 4096
DECODE = [(1, 5, 3), (4, 33, 3)]  # (batch, prompt length, decode steps)
BACKWARD = (2, 128)
FP8_LAYERS = [(4096, 4096), (14336, 4096), (4096, 14336), (4096, 4096)]  # (N, K) in order: x goes through each
FP8_TOKENS = [1, 16, 128, 1000, 4096]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def llama(torch, layers: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    try:
        cfg = LlamaConfig(**LLAMA3_8B, num_hidden_layers=layers, max_position_embeddings=8192,
                          attn_implementation="eager")
    except TypeError:  # a transformers that takes it only on the model
        cfg = LlamaConfig(**LLAMA3_8B, num_hidden_layers=layers, max_position_embeddings=8192)
    try:
        cfg._attn_implementation = "eager"
    except Exception:
        pass
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model = model.to(torch.bfloat16).eval()
    log(f"LlamaForCausalLM: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, attention "
        f"{model.config._attn_implementation}, {model.dtype}")
    return model


def capture_llama(torch, out: Path, layers: int, rows: int, cols: int, GemmCapture=None) -> None:
    if GemmCapture is None:
        from tcsmt.hwcheck.gemm_capture import GemmCapture

    model = llama(torch, layers)
    gen = torch.Generator(device="cuda").manual_seed(1)

    def ids(b: int, s: int):
        return torch.randint(0, LLAMA3_8B["vocab_size"], (b, s), device="cuda", generator=gen)

    info = {"model": "LlamaForCausalLM", "config": {**LLAMA3_8B, "num_hidden_layers": layers,
                                                    "attn_implementation": "eager", "dtype": "bfloat16"},
            "seed": 0}
    cap = GemmCapture(rows=rows, cols=min(cols, 2), seed=0)  # two columns: the file stays under 16 MiB
    with torch.no_grad(), cap:
        for b, s in PREFILL:
            cap.phase = f"prefill {b}x{s}"
            try:
                model(input_ids=ids(b, s), use_cache=False)
            except Exception:
                traceback.print_exc()
            log(f"{cap.phase}: {len(cap.calls)} calls so far")
        for b, s, steps in DECODE:
            try:
                cap.phase = f"decode prompt {b}x{s}"
                o = model(input_ids=ids(b, s), use_cache=True)
                past = o.past_key_values
                nxt = o.logits[:, -1:].argmax(-1)
                for t in range(steps):
                    cap.phase = f"decode {b}x1 step {t + 1} (past {s + t})"
                    o = model(input_ids=nxt, past_key_values=past, use_cache=True)
                    past, nxt = o.past_key_values, o.logits[:, -1:].argmax(-1)
            except Exception:
                traceback.print_exc()
            log(f"decode {b}x{s}: {len(cap.calls)} calls so far")
    cap.save(out / "llama_fwd", {**info, "prefill": PREFILL, "decode": DECODE})
    log(f"llama_fwd: {len(cap.calls)} calls")
    cap = GemmCapture(rows=rows, cols=cols, seed=1)
    b, s = BACKWARD
    x = ids(b, s)
    with cap:
        try:
            cap.phase = f"train forward {b}x{s}"
            loss = model(input_ids=x, labels=x).loss
            cap.phase = "backward"
            loss.backward()
        except Exception:
            traceback.print_exc()
    cap.save(out / "llama_bwd", {**info, "train": BACKWARD})
    log(f"llama_bwd: {len(cap.calls)} calls")


def capture_fp8(torch, out: Path, rows: int, cols: int, GemmCapture=None) -> None:
    if GemmCapture is None:
        from tcsmt.hwcheck.gemm_capture import GemmCapture

    e4m3 = torch.float8_e4m3fn
    fmax = torch.finfo(e4m3).max
    g = torch.Generator(device="cuda").manual_seed(2)
    weights = [(torch.randn(N, K, device="cuda", generator=g) * K ** -0.5).to(torch.bfloat16) for N, K in FP8_LAYERS]

    def quant_tensor(x):
        s = (x.abs().amax().float() / fmax).clamp(min=1e-12)
        return (x.float() / s).clamp(-fmax, fmax).to(e4m3), s

    def quant_rows(x):
        s = (x.abs().amax(dim=1, keepdim=True).float() / fmax).clamp(min=1e-12)
        return (x.float() / s).clamp(-fmax, fmax).to(e4m3), s

    wq_t = [quant_tensor(w) for w in weights]
    wq_r = [quant_rows(w) for w in weights]
    configs = [("tensor", False, torch.bfloat16), ("tensor", True, torch.bfloat16), ("row", False, torch.bfloat16),
               ("tensor", False, torch.float32)]
    cap = GemmCapture(rows=rows, cols=cols, seed=2)
    with torch.no_grad(), cap:
        for scale, fast, odt in configs:
            for M in FP8_TOKENS:
                cap.phase = f"fp8 {scale} fast_accum={fast} out={str(odt).removeprefix('torch.')} M={M}"
                x = torch.randn(M, FP8_LAYERS[0][1], device="cuda", generator=g).to(torch.bfloat16)
                try:
                    for n in range(len(FP8_LAYERS)):
                        if scale == "tensor":
                            xq, sx = quant_tensor(x)
                            wq, sw = wq_t[n]
                        else:
                            xq, sx = quant_rows(x)
                            wq, sw = wq_r[n][0], wq_r[n][1].reshape(1, -1)
                        y = torch._scaled_mm(xq, wq.t(), scale_a=sx, scale_b=sw, out_dtype=odt, use_fast_accum=fast)
                        x = y.to(torch.bfloat16)
                except Exception:
                    traceback.print_exc()
            log(f"fp8 {scale} fast={fast} {odt}: {len(cap.calls)} calls so far")
    cap.save(out / "fp8", {"model": "fp8 _scaled_mm stack", "layers": FP8_LAYERS, "tokens": FP8_TOKENS,
                           "configs": [[s, f, str(o)] for s, f, o in configs]})
    log(f"fp8: {len(cap.calls)} calls")


class FacadeCheck:
    """A ``GemmCapture`` look-alike (``phase``, ``calls``, ``save``) that checks every GEMM whole: the plan the CPU
    replay takes for the call, every output computed by ``tcsmt.torch`` on the GPU under it, compared bit for bit
    with torch's output."""

    def __init__(self, rows: int = 0, cols: int = 0, batches: int = 0, seed: int = 0, gpu: str = "h100"):
        import torch

        from tcsmt.hwcheck.gemm_capture import gemm_mode, settings

        self.torch, self.gpu = torch, gpu
        self.calls: list[dict] = []
        self.phase = ""
        self.settings = settings(torch)
        self._mode = gemm_mode(self.check)

    def __enter__(self):
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)

    def check(self, name: str, args: tuple, kwargs: dict, out) -> None:
        import time as _time

        import tcsmt.torch as tt
        from tcsmt.errors import TcsmtError
        from tcsmt.hwcheck.gemm_capture import _tensor_meta
        from tcsmt.library.gemm_replay import answer_of

        torch = self.torch
        rec: dict = {"n": len(self.calls), "op": name, "phase": self.phase, "out": _tensor_meta(out)}
        extra: dict = {}
        if name in ("mm", "bmm"):
            A, B, C = args[0], args[1], None
        elif name in ("addmm", "baddbmm"):
            C, A, B = args[0], args[1], args[2]
            rec["beta"] = float(kwargs.get("beta", args[3] if len(args) > 3 else 1))
            rec["alpha"] = float(kwargs.get("alpha", args[4] if len(args) > 4 else 1))
            rec["C"] = _tensor_meta(C)
        else:
            A, B = args[0], args[1]
            extra = dict(zip(("scale_a", "scale_b", "bias", "scale_result", "out_dtype", "use_fast_accum"), args[2:]))
            extra.update(kwargs)
            C = extra.get("bias")
            rec["scale_a"], rec["scale_b"] = _tensor_meta(extra["scale_a"]), _tensor_meta(extra["scale_b"])
            rec["bias"] = None if C is None else _tensor_meta(C)
            rec["scale_result"] = extra.get("scale_result") is not None
            rec["use_fast_accum"] = bool(extra.get("use_fast_accum", False))
        rec["A"], rec["B"] = _tensor_meta(A), _tensor_meta(B)
        row = {"n": rec["n"], "phase": self.phase, "op": name, "shapes": [list(A.shape), list(B.shape)]}
        ans, found = answer_of(rec, self.settings, self.gpu)
        row.update(found)
        if ans is None:
            self.calls.append(row)
            return
        p = ans.plan
        row["plan"] = f"{ans.kind}: S = {p.split_k}"
        t0 = _time.perf_counter()
        try:
            if name == "mm":
                got = tt.mm(A, B, plan=p)
            elif name == "bmm":
                got = tt.bmm(A, B, plan=p)
            elif name == "addmm":
                got = tt.addmm(C, A, B, beta=rec["beta"], alpha=rec["alpha"], plan=p)
            elif name == "_scaled_mm":
                got = tt.scaled_mm(A, B, extra["scale_a"], extra["scale_b"], extra.get("bias"), None,
                                   extra.get("out_dtype"), bool(extra.get("use_fast_accum", False)), plan=p)
            else:
                raise TcsmtError(f"{name} is not run through the facade here")
            torch.cuda.synchronize()
        except TcsmtError as exc:
            row["refused"] = f"facade refused: {exc}"
            self.calls.append(row)
            return
        except Exception as exc:  # a failure of the facade itself: counted against it, and the run goes on
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            self.calls.append(row)
            return
        ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[out.element_size()]
        differ = int((got.reshape(out.shape).contiguous().view(ints) != out.contiguous().view(ints)).sum().item())
        row.update({"outputs": int(out.numel()), "differ": differ, "seconds": round(_time.perf_counter() - t0, 3)})
        self.calls.append(row)

    def save(self, path, info=None) -> None:
        rows = self.calls
        ans = [r for r in rows if "outputs" in r or "error" in r]
        reasons: dict = {}
        for r in rows:
            if "refused" in r:
                reasons[r["refused"][:300]] = reasons.get(r["refused"][:300], 0) + 1
        doc = {"tool": "examples/model_replay.py facade", "plans_of": self.gpu, "settings": self.settings,
               "device": self.torch.cuda.get_device_name(0), "torch": self.torch.__version__, "info": info or {},
               "totals": {"calls": len(rows), "answered": len(ans),
                          "bit_exact_calls": sum(1 for r in ans if r.get("differ") == 0),
                          "facade_errors": sum(1 for r in ans if "error" in r),
                          "outputs_compared": sum(r.get("outputs", 0) for r in ans),
                          "outputs_differ": sum(r.get("differ", 0) for r in ans), "refused": len(rows) - len(ans),
                          "seconds": round(sum(r.get("seconds", 0) for r in ans), 1)},
               "refusals": reasons, "calls": rows}
        target = Path(path).with_name("facade_" + Path(path).name).with_suffix(".json")
        target.write_text(json.dumps(doc, indent=1) + "\n")
        t = doc["totals"]
        log(f"{target.name}: {t['calls']} calls, {t['answered']} answered, {t['bit_exact_calls']} bit-exact "
            f"({t['outputs_compared'] - t['outputs_differ']} of {t['outputs_compared']} outputs), {t['refused']} refused, "
            f"{t['facade_errors']} facade errors")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python examples/model_replay.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture", help="run the models on the GPU and capture their GEMMs")
    c.add_argument("--out", required=True)
    c.add_argument("--what", default="llama,fp8")
    c.add_argument("--layers", type=int, default=2)
    c.add_argument("--rows", type=int, default=4)
    c.add_argument("--cols", type=int, default=4)
    f = sub.add_parser("facade", help="run the models on the GPU and check every GEMM whole through tcsmt.torch")
    f.add_argument("--out", required=True)
    f.add_argument("--what", default="llama,fp8")
    f.add_argument("--layers", type=int, default=2)
    f.add_argument("--gpu", default="h100")
    ns = ap.parse_args(argv)
    import torch

    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    log(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    what = ns.what.split(",")
    if ns.cmd == "facade":
        def mode(rows=0, cols=0, batches=0, seed=0):
            return FacadeCheck(gpu=ns.gpu)
        if "fp8" in what:
            capture_fp8(torch, out, 0, 0, mode)
        if "llama" in what:
            capture_llama(torch, out, ns.layers, 0, 0, mode)
        return 0
    if "fp8" in what:
        capture_fp8(torch, out, ns.rows, ns.cols)
    if "llama" in what:
        capture_llama(torch, out, ns.layers, ns.rows, ns.cols)
    for f in sorted(out.glob("*.npz")):
        log(f"{f.name}: {f.stat().st_size / 2 ** 20:.1f} MiB, {len(json.loads(f.with_suffix('.json').read_text())['calls'])} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
