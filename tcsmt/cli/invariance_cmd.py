"""``tcsmt invariance``: which token counts give a row of one layer's GEMM the same bits on a GPU.

Presentation only: the study is :mod:`tcsmt.library.invariance`.  With ``--json FILE`` the result is written
there; an interrupted run (Ctrl-C, SIGTERM) writes what it finished (``"complete": false``, the witness pairs
not tried) before it ends.
"""
from __future__ import annotations

import click

from tcsmt.errors import TcsmtError
from tcsmt.io import files
from tcsmt.io.options import NON_NEGATIVE_INT, POSITIVE_INT, progress_option
from tcsmt.io.progress import Progress
from tcsmt.io.trap import Command
from tcsmt.library.plans import Call

WITNESS_CHOICES = ("all", "adjacent", "first", "none")


def parse_tokens(text: str) -> tuple[int, int]:
    """``LO..HI`` (or ``LO-HI``, or one count) as a range of token counts."""
    t = str(text).strip().replace("..", "-")
    lo_s, _, hi_s = t.partition("-")
    try:
        lo, hi = int(lo_s), int(hi_s or lo_s)
    except ValueError:
        raise TcsmtError(f"--tokens is LO..HI (e.g. 1..16384) or one count, not {text!r}") from None
    if not 1 <= lo <= hi:
        raise TcsmtError(f"--tokens {text}: the counts run from 1 up, LO <= HI")
    return lo, hi


def _call(model: str | None, layer: str | None, op: str | None, n: int | None, k: int | None, dtype: str,
          product: str, bias: bool, layout: str, settings: str, b_dtype: str | None, out_dtype: str | None,
          beta: float, b_t: bool, scale: str | None, fast_accum: bool) -> tuple[Call, str]:
    from tcsmt.library.checks import make_call
    from tcsmt.library.invariance import find_layer, layer_call

    if model or layer:
        if not (model and layer):
            raise TcsmtError("give --model and --layer together (e.g. --model llama-3-8b --layer down_proj)")
        if op or n or k:
            raise TcsmtError("--model/--layer name the layer: leave out --op, --n and --k")
        r = find_layer(model, layer)
        what = f"{r['model']} {r['layer']} (N = {r['N']}, K = {r['K']}{', bias' if r['bias'] else ''}, " \
               f"{r['layout']} layout), {product}"
        return layer_call(int(r["N"]), int(r["K"]), dtype, product=product, bias=bool(r["bias"]), layout=r["layout"],
                          settings=settings), what
    if n is None or k is None:
        raise TcsmtError("give the layer (--model NAME --layer NAME) or its shape (--n N --k K)")
    if op is None:
        return layer_call(n, k, dtype, product=product, bias=bias, layout=layout, settings=settings), \
            f"a layer of N = {n}, K = {k}{', bias' if bias else ''} ({layout} layout), {product}"
    call = make_call(op, 1, n, k, a_dtype=dtype, b_dtype=b_dtype, out_dtype=out_dtype, beta=beta, bias=bias,
                     scale=scale, fast_accum=fast_accum, b_t=b_t, settings=settings)
    return call, f"{op} with N = {n}, K = {k} (M = the token count)"


@click.command("invariance", cls=Command)
@click.option("--model", default=None, help="a model of the model-layer list (models/library/model_layers.json)")
@click.option("--layer", default=None, help="one of its layers (e.g. down_proj, q_proj, lm_head)")
@click.option("--n", "n", type=POSITIVE_INT, default=None, help="the layer's output features N (without --model)")
@click.option("--k", "k", type=POSITIVE_INT, default=None, help="the layer's input features K (without --model)")
@click.option("--product", type=click.Choice(["forward", "input-grad"]), default="forward", show_default=True,
              help="forward: linear M x N x K; input-grad: mm M x K x N (the weight gradient's token count is K)")
@click.option("--dtype", default="bfloat16", show_default=True, help="input dtype as torch names it")
@click.option("--bias", is_flag=True, help="the layer (or --op call) adds a bias")
@click.option("--layout", type=click.Choice(["linear", "conv1d"]), default="linear", show_default=True,
              help="the weight's layout without --model: nn.Linear (N, K) or GPT-2's Conv1D (K, N)")
@click.option("--op", type=click.Choice(["mm", "addmm", "linear", "scaled_mm"]), default=None,
              help="a raw call instead of a layer: OP with N and K as the call's (M = the token count)")
@click.option("--b-dtype", default=None, help="with --op: B's dtype where it differs (scaled_mm)")
@click.option("--out-dtype", default=None, help="with --op: the output dtype")
@click.option("--beta", type=float, default=0.0, show_default=True, help="with --op addmm: beta")
@click.option("--b-t", "b_t", is_flag=True, help="with --op mm/addmm: B is the transposed view of an (N, K) tensor")
@click.option("--scale", type=click.Choice(["tensor", "row"]), default=None, help="with --op scaled_mm: scaling")
@click.option("--fast-accum", is_flag=True, help="with --op scaled_mm: use_fast_accum=True")
@click.option("--settings", default="default", show_default=True,
              help="the library settings key (tcsmt.library.settings.settings_key, e.g. blas=cublaslt,reduced=off)")
@click.option("--gpu", default="h100", show_default=True, help="the GPU whose recorded plans answer")
@click.option("--tokens", default="1..16384", show_default=True, help="the token counts: LO..HI")
@click.option("--witnesses", type=click.Choice(WITNESS_CHOICES), default="all", show_default=True,
              help="which pairs of plans get a witness row: all, adjacent (each change's two sides), first "
                   "(each plan against the first count's), none")
@click.option("--seed", type=NON_NEGATIVE_INT, default=0, show_default=True, help="seed of the random witness tries")
@click.option("--json", "json_file", default=None, help="write the result (runs, changes, witness rows) here")
@click.option("--force", is_flag=True, help="replace the --json file")
@click.option("--show-runs", type=NON_NEGATIVE_INT, default=60, show_default=True,
              help="print at most this many runs and changes (all are in --json)")
@progress_option()
def invariance_cmd(model, layer, n, k, product, dtype, bias, layout, op, b_dtype, out_dtype, beta, b_t, scale,
                   fast_accum, settings, gpu, tokens, witnesses, seed, json_file, force, show_runs, progress) -> None:
    """Which token counts give the same row of a layer's GEMM the same output bits on a GPU.

    Reads the recorded cuBLAS plan of every token count in --tokens (plan tables and catalogs; a count without
    one is refused, naming `tcsmt record`), groups the counts whose plans compute the same bits for a row,
    prints the runs of counts, the counts where a row's bits change (with the plans' difference), and for each
    pair of plans one row and one column whose output differs under the two (library-level discriminate,
    evaluated under both plans by the exact simulator).
    """
    from tcsmt.library.invariance import study as run_study
    from tcsmt.library.invariance import witness

    lo, hi = parse_tokens(tokens)
    call, what = _call(model, layer, op, n, k, dtype, product, bias, layout, settings, b_dtype, out_dtype, beta,
                       b_t, scale, fast_accum)
    out = files.output(json_file, force) if json_file else None
    say = Progress.for_cli(progress)
    say(f"reading the plans of {hi - lo + 1} token counts")
    st = run_study(call, gpu, lo, hi)
    doc = {"tool": "tcsmt invariance", "layer": what, "complete": False}
    label = st.call.label().replace(f" {st.call.M}x{st.call.N}x", f" Mx{st.call.N}x", 1)
    click.echo(f"{label} on {st.gpu}, token counts M = {lo}..{hi}: {what}")
    click.echo(f"plans from: {', '.join(st.sources)}")
    click.echo(f"{len(st.classes)} distinct plan arithmetic{'s' if len(st.classes) != 1 else ''} (what decides a "
               f"row's bits):")
    for pc in st.classes:
        click.echo(f"  plan {pc.index}: {pc.counts} counts from M = {pc.first}: {pc.summary()}")
    if st.invariant:
        click.echo(f"batch-invariant: yes (every M in {lo}..{hi} computes a row with the same plan arithmetic)")
    else:
        click.echo(f"batch-invariant: no: the plan arithmetic changes at {len(st.changes)} token count"
                   f"{'s' if len(st.changes) != 1 else ''}")
        click.echo("runs (M: plan):")
        for r0, r1, ci in st.runs[:show_runs]:
            click.echo(f"  {r0}..{r1}: {ci}" if r1 > r0 else f"  {r0}: {ci}")
        if len(st.runs) > show_runs:
            click.echo(f"  ... {len(st.runs) - show_runs} more runs (--show-runs, --json)")
        click.echo("changes:")
        for ch in st.changes[:show_runs]:
            click.echo(f"  M = {ch.at}: plan {ch.before} -> {ch.after}: {ch.what}")
        if len(st.changes) > show_runs:
            click.echo(f"  ... {len(st.changes) - show_runs} more changes (--show-runs, --json)")
    pairs = st.pairs(witnesses)
    if pairs:
        click.echo("witnesses (one row a of A and one column b of B; output (0, 0) under each plan, exact simulator):")
    try:
        for num, (i, j) in enumerate(pairs):
            w = witness(st, i, j, seed=seed)
            say(f"witness {num + 1} of {len(pairs)} (plans {i} and {j}): {'found' if w else 'none found'}")
            if w is None:
                click.echo(f"  plans {i} / {j}: no separating input found (slice probes, reduction probes, random "
                           f"rows); they may compute the same bits")
                continue
            nz = int((w.a != 0).sum())
            click.echo(f"  plans {i} / {j} (M = {w.counts[0]} vs {w.counts[1]}): {w.how}; "
                       f"{nz} nonzero k of {call.K}; outputs 0x{w.outputs[0]:x} vs 0x{w.outputs[1]:x}")
        doc["complete"] = True
    except KeyboardInterrupt:
        if out is not None:
            out.write_json({**doc, **st.to_json()})
            click.echo(f"written (incomplete: {len(pairs) - len(st.witnesses)} witness pairs not tried): {out.path}",
                       err=True)
        raise
    if out is not None:
        out.write_json({**doc, **st.to_json()})
        click.echo(f"written: {out.path}")
