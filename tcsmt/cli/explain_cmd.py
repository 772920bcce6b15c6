"""``tcsmt explain``: the recorded plan of one library GEMM call, with its provenance, readable at a glance.

One fact per line, each shorter than a terminal line; kernel names once; the provenance as a short list (which
table or catalog, which recording, which rules).  ``--json`` writes the same facts as one JSON object.
"""
from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import click

from tcsmt.io.limits import LIBRARY_BATCH, LIBRARY_DIM
from tcsmt.io.options import bounded_int
from tcsmt.io.trap import Command
from tcsmt.library.lookup import Answer, Target
from tcsmt.library.plans import EPILOGUE_STEPS, OPS, Plan
from tcsmt.library.segment_k import describe_launch, launch_facts

WIDTH = 100


def _short_source(text: str) -> str:
    """A source without the kernel names the kernels line already gives."""
    text = re.sub(r"[,;]?\s*kernels (?!of )[^;)]*", "", text)
    return re.sub(r"\s+", " ", text).strip().rstrip(";")


def facts(ans: Answer) -> dict[str, Any]:
    """The plan and its provenance as plain data (the ``--json`` object)."""
    p: Plan = ans.plan
    c = p.call
    return {
        "call": c.label(), "op": c.op, "M": c.M, "N": c.N, "K": c.K, "batch": c.batch, "a_dtype": c.a_dtype,
        "b_dtype": c.b_dtype, "out_dtype": c.out_dtype, "tf32": c.tf32, "bias": c.bias, "alpha": c.alpha,
        "beta": c.beta, "scale": c.scale, "fast_accum": c.fast_accum, "a_t": c.a_t, "b_t": c.b_t,
        "settings": c.settings, "gpu": p.gpu, "library": p.library, "answer": ans.kind, "evidence": list(ans.evidence),
        "kernels": list(p.kernels), "chain": p.chain_spec, "in_round": p.in_round, "k_tile": p.k_tile,
        "segment": p.segment,
        "segment_k": None if p.segment_k is None else launch_facts(p.segment_k),
        "split_k": p.split_k, "grain": p.grain if p.split_k > 1 else None,
        "slices": p.slices if p.split_k > 1 else None, "remainder": p.remainder if p.split_k > 1 else None,
        "slice_lengths": [len(r) for r in p.slice_ranges()] if p.split_k > 1 else None,
        "reduce": p.reduce if p.split_k > 1 else None, "epilogue": list(p.epilogue),
        "output": "fp32" if c.out_dtype == "float32" else f"RNE fp32 -> {c.out_dtype}",
        "sources": [_short_source(s) for s in p.sources],
    }


def _line(label: str, text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=f"{label:<9}", subsequent_indent=" " * 9) or [label]


def render(ans: Answer) -> str:
    f = facts(ans)
    p = ans.plan
    out = _line("call", f["call"]) + _line("gpu", f"{f['gpu']} ({f['library']})")
    out += _line("answer", f"{f['answer']}" + (" (the arithmetic of the recorded counts below; the kernels are "
                                                "theirs, this call's may differ)" if ans.kind == "predicted" else ""))
    for k in dict.fromkeys(f["kernels"]):
        out += _line("kernel", k)
    if p.call.tf32:
        out += _line("inputs", f"fp32 -> tf32 with {p.in_round.upper()}" if p.in_round else
                     "no rounding recorded: the inputs must already be tf32 values")
    ch = p.chain
    out += _line("chain", f"{f['chain']}: blocks of {ch.block_k} products through {ch.acc_fmt}"
                 + (f", promoted every {ch.instr_k}" if ch.instr_k else ""))
    if p.k_tile:
        out += _line("K tiles", f"{p.k_tile} k's, residue first")
    if p.segment:
        out += _line("segments", f"each slice's chain restarts from +0 after every {p.segment} of its k's; the "
                                 "restarts' sums are added in order (RN32)")
    if p.segment_k is not None:
        for i, text in enumerate(describe_launch(p.segment_k)):
            out += _line("segmentK" if i == 0 else "", text.strip().removeprefix("segment-K: "))
    elif p.split_k == 1:
        out += _line("split-K", "none (S = 1)")
    else:
        lengths = f["slice_lengths"]
        shown = ", ".join(map(str, lengths[:8])) + (", ..." if len(lengths) > 8 else "")
        out += _line("split-K", f"S = {p.split_k}, grain {p.grain}, {p.slices} slices, remainder {p.remainder}")
        out += _line("slices", f"lengths {shown}")
        out += _line("reduce", p.reduce)
    out += _line("epilogue", "; ".join(f"{s}: {EPILOGUE_STEPS[s]}" for s in p.epilogue) or "none")
    out += _line("output", f["output"])
    out.append("evidence")
    for e in list(f["evidence"]) + f["sources"]:
        out += textwrap.wrap(e, WIDTH, initial_indent="  - ", subsequent_indent="    ")
    return "\n".join(out)


@click.command("explain", cls=Command)
@click.argument("op", type=click.Choice(OPS))
@click.argument("M", type=bounded_int(LIBRARY_DIM, "the largest library call tcsmt models"))
@click.argument("N", type=bounded_int(LIBRARY_DIM, "the largest library call tcsmt models"))
@click.argument("K", type=bounded_int(LIBRARY_DIM, "the largest library call tcsmt models"))
@click.option("--dtype", "a_dtype", required=True, help="input dtype as torch names it: float16, bfloat16, float32, float8_e4m3fn, float8_e5m2")
@click.option("--b-dtype", default=None, help="B's dtype where it differs (scaled_mm)")
@click.option("--out-dtype", default=None, help="output dtype (default: torch's for the call)")
@click.option("--gpu", default="h100", show_default=True, help="GPU whose recorded plans to use")
@click.option("--batch", default=1, show_default=True, type=bounded_int(LIBRARY_BATCH, "bmm batches"), help="batch count (bmm)")
@click.option("--alpha", default=1.0, show_default=True, type=float)
@click.option("--beta", default=0.0, show_default=True, type=float)
@click.option("--bias", is_flag=True, help="the call adds a bias (addmm with 1-D input, linear, scaled_mm)")
@click.option("--tf32", is_flag=True, help="float32 inputs with torch.backends.cuda.matmul.allow_tf32 = True")
@click.option("--scale", type=click.Choice(["tensor", "row"]), default=None, help="scaled_mm scaling")
@click.option("--fast-accum", is_flag=True, help="scaled_mm with use_fast_accum=True")
@click.option("--a-t", is_flag=True, help="A is a transposed view (autograd's grad_out.t() of a weight gradient)")
@click.option("--b-t", is_flag=True, help="B is a transposed view of an (N, K) tensor (weight.t())")
@click.option("--settings", default="default", show_default=True,
              help="library settings key, e.g. blas=cublaslt,reduced=off or CUBLAS_WORKSPACE_CONFIG=:0:0")
@click.option("--json", "as_json", is_flag=True, help="one JSON object instead of lines")
def explain_cmd(op: str, m: int, n: int, k: int, a_dtype: str, b_dtype: str | None, out_dtype: str | None, gpu: str,
                batch: int, alpha: float, beta: float, bias: bool, tf32: bool, scale: str | None,
                fast_accum: bool, a_t: bool, b_t: bool, settings: str, as_json: bool) -> None:
    """Show what the GPU's library does for one call: chain, split-K, reduction, epilogue, output, evidence."""
    from tcsmt.library.api import explain

    ans = explain(op, m, n, k, gpu=Target(gpu.lower()), a_dtype=a_dtype, b_dtype=b_dtype, out_dtype=out_dtype,
                  batch=batch, alpha=alpha, beta=beta, bias=bias, tf32=tf32, scale=scale, fast_accum=fast_accum,
                  a_t=a_t, b_t=b_t, settings=settings)
    click.echo(json.dumps(facts(ans), indent=1) if as_json else render(ans))
