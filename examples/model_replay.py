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


def capture_llama(torch, out: Path, layers: int, rows: int, cols: int) -> None:
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


def capture_fp8(torch, out: Path, rows: int, cols: int) -> None:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python examples/model_replay.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture", help="run the models on the GPU and capture their GEMMs")
    c.add_argument("--out", required=True)
    c.add_argument("--what", default="llama,fp8")
    c.add_argument("--layers", type=int, default=2)
    c.add_argument("--rows", type=int, default=4)
    c.add_argument("--cols", type=int, default=4)
    ns = ap.parse_args(argv)
    import torch

    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    log(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    what = ns.what.split(",")
    if "fp8" in what:
        capture_fp8(torch, out, ns.rows, ns.cols)
    if "llama" in what:
        capture_llama(torch, out, ns.layers, ns.rows, ns.cols)
    for f in sorted(out.glob("*.npz")):
        log(f"{f.name}: {f.stat().st_size / 2 ** 20:.1f} MiB, {len(json.loads(f.with_suffix('.json').read_text())['calls'])} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
