"""``tcsmt explain``: the recorded plan of one library GEMM call, with its provenance."""
from __future__ import annotations

import click

from tcsmt.io.limits import LIBRARY_BATCH, LIBRARY_DIM
from tcsmt.io.options import bounded_int
from tcsmt.io.trap import Command
from tcsmt.library.plans import OPS


@click.command("explain", cls=Command)
@click.argument("op", type=click.Choice(OPS))
@click.argument("M", type=bounded_int(LIBRARY_DIM, "the largest library call tcsmt models"))
@click.argument("N", type=bounded_int(LIBRARY_DIM, "the largest library call tcsmt models"))
@click.argument("K", type=bounded_int(LIBRARY_DIM, "the largest library call tcsmt models"))
@click.option("--dtype", "a_dtype", required=True, help="input dtype as torch names it: float16, bfloat16, float32, float8_e4m3fn, float8_e5m2")
@click.option("--b-dtype", default=None, help="B's dtype where it differs (scaled_mm)")
@click.option("--out-dtype", default=None, help="output dtype (default: torch's for the call)")
@click.option("--gpu", default="h100", show_default=True, help="GPU whose plan table to use")
@click.option("--batch", default=1, show_default=True, type=bounded_int(LIBRARY_BATCH, "bmm batches"), help="batch count (bmm)")
@click.option("--alpha", default=1.0, show_default=True, type=float)
@click.option("--beta", default=0.0, show_default=True, type=float)
@click.option("--bias", is_flag=True, help="the call adds a bias (addmm with 1-D input, linear, scaled_mm)")
@click.option("--tf32", is_flag=True, help="float32 inputs with torch.backends.cuda.matmul.allow_tf32 = True")
@click.option("--scale", type=click.Choice(["tensor", "row"]), default=None, help="scaled_mm scaling")
@click.option("--fast-accum", is_flag=True, help="scaled_mm with use_fast_accum=True")
def explain_cmd(op: str, m: int, n: int, k: int, a_dtype: str, b_dtype: str | None, out_dtype: str | None, gpu: str,
                batch: int, alpha: float, beta: float, bias: bool, tf32: bool, scale: str | None,
                fast_accum: bool) -> None:
    """Show what the GPU's library does for one call: chain, split-K, reduction, epilogue, output, sources."""
    from tcsmt.library.api import plan

    p = plan(op, m, n, k, gpu=gpu, a_dtype=a_dtype, b_dtype=b_dtype, out_dtype=out_dtype, batch=batch, alpha=alpha,
             beta=beta, bias=bias, tf32=tf32, scale=scale, fast_accum=fast_accum)
    click.echo(p.describe())
