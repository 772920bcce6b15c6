"""The ``tcsmt`` command line (click).  Every user error is one line on stderr and exit status 2."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import REFERENCES, architectures, find_arch, resolve
from tcsmt.errors import TcsmtError
from tcsmt.io import files
from tcsmt.io.limits import COUNT, SMT_K
from tcsmt.io.options import SEED, bounded_int, k_option, progress_option, timeout_option
from tcsmt.io.progress import Progress
from tcsmt.io.trap import Group
from tcsmt.solve.options import solver_option


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tcsmt")
def main() -> None:
    """Bit-exact models of GPU matrix units: simulate, discriminate, check on hardware."""


# ------------------------------------------------------------------ models
@main.command("models")
@click.argument("arch", required=False)
@click.option("--table", is_flag=True, help="print the README's table of built-in models (markdown; ARCH: its rows only), made from the model files")
def models_cmd(arch: str | None, table: bool) -> None:
    """List architectures, or one architecture's paths with parameters and sources."""
    if table:
        from tcsmt.cli.models_table import table as models_table

        click.echo(models_table(find_arch(arch).name if arch else None))
        return
    if arch is None:
        for a in architectures().values():
            paths = ", ".join(f"{p.params.in_fmt}->{p.params.out_fmt}" + (f" ({p.params.instr})" if p.params.instr != "mma" else "") for p in a.paths)
            if a.mixed_paths:
                paths += f"; and {len(a.mixed_paths)} mixed-format or block-scaled paths (tcsmt models {a.name})"
            click.echo(f"{a.name:10} {a.title}  [aliases: {', '.join(a.aliases)}]")
            click.echo(f"{'':10} paths: {paths}")
        click.echo(f"references: {', '.join(REFERENCES)}")
        return
    a = find_arch(arch)
    click.echo(f"{a.name}: {a.title}  (GPUs: {', '.join(a.gpus)}; aliases: {', '.join(a.aliases)})")
    for s in a.sources:
        click.echo(f"  source: {s}")
    for path in a.every_path():
        p = path.params
        click.echo(f"\n  {p.in_fmt} -> {p.out_fmt}  ({p.instr} {p.instr_shape})")
        for k, v in p.describe().items():
            if k in ("name", "in_fmt", "out_fmt", "instr", "instr_shape"):
                continue
            click.echo(f"    {k:17} = {v}")
        for s in p.sources:
            click.echo(f"    source: {s}")
        for h, over in path.hypotheses.items():
            ov = ", ".join(f"{k}={v}" for k, v in over.items())
            click.echo(f"    hypothesis {a.name}:{h}  ({ov})  {path.hypothesis_sources.get(h, '')}")
    from tcsmt.library.plans import tables_for_arch

    for t in tables_for_arch(a.name):
        click.echo(f"\n  library plan table models/library/{Path(t.path).name} ({t.gpu}, {t.library}): {len(t.plans)} plans, "
                   f"{len(t.unknown)} recorded calls without a plan (tcsmt explain ...)")


# ---------------------------------------------------------------- simulate
@main.command("simulate")
@click.option("--arch", required=True, help="model spec: ARCH, ARCH:HYP, ARCH:key=value, or a reference")
@click.option("--in", "in_fmt", required=True, help="input format (fp16, bf16, tf32, e4m3, e5m2, fp64, e2m1, e3m2, e2m3, e4m3fnuz, e5m2fnuz)")
@click.option("--out", "out_fmt", required=True, help="output format (fp32, fp16, fp64)")
@click.option("--instr", default=None, help="instruction (mma, wgmma, mfma) where an architecture has several")
@click.option("--force", is_flag=True, help="overwrite OUT if it exists")
@progress_option()
@click.argument("infile", type=click.Path(dir_okay=False))
@click.argument("outfile", type=click.Path(dir_okay=False))
def simulate_cmd(arch, in_fmt, out_fmt, instr, force, progress, infile, outfile) -> None:
    """Run the model on IN.npz (a, b: n x K; c: n) and write d (output bit patterns) to OUT.npz.

    a, b and c hold float values (float16, float32, float64) or the formats' bit
    patterns as unsigned integers of their width (uint16 for fp16/bf16, uint32
    for fp32/tf32, uint8 for fp8, fp6, fp4).  A block-scaled path also reads the
    scale factors sa and sb (n x ceil(K / block): uint8 patterns or values).
    """
    from tcsmt.sim.block_scale import scale_patterns
    from tcsmt.sim.inputs import read_dot_npz, read_npz

    p = resolve(arch, in_fmt, out_fmt, instr)
    a, b, c = read_dot_npz(infile, get_format(p.in_fmt), get_format(p.c_fmt), get_format(p.b_format))
    data = read_npz(infile)
    sa, sb = scale_patterns(p, data.get("sa"), data.get("sb"), a.shape[0], a.shape[1], source=str(infile))
    out = files.output(outfile, force)  # claimed (or checked replaceable) before the work
    d = _simulate_with_progress(p, a, b, c, Progress.for_cli(progress), sa, sb)
    out.write_with(lambda fh: np.savez(fh, d=d))
    click.echo(f"{p.name}: {len(d)} dot products of length {a.shape[-1]} -> {outfile}")


SIMULATE_PROGRESS_ROWS = 1 << 18
"""With progress on, ``simulate`` runs inputs of more rows than this in chunks of this many, one line each."""
SIMULATE_PROGRESS_PRODUCTS = 1 << 24
"""... and chunks of fewer rows where the rows are long: at most this many products per line."""


def _simulate_with_progress(p, a, b, c, progress: Progress, sa=None, sb=None) -> np.ndarray:
    """``simulate_params(p, a, b, c)``; with progress on, in chunks of rows with a line each (and lines inside
    a long chunk: :func:`tcsmt.sim.simulator.simulate_params`)."""
    from tcsmt.sim.simulator import simulate_params

    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if not progress.enabled:
        return simulate_params(p, a, b, c, sa=sa, sb=sb)
    n = len(c) if c.ndim == 1 else 0
    K = a.shape[-1] if a.ndim == 2 else 1
    step = max(1, min(SIMULATE_PROGRESS_ROWS, SIMULATE_PROGRESS_PRODUCTS // max(K, 1)))
    if n <= step or a.ndim != 2 or a.shape != b.shape or a.shape[0] != n:
        return simulate_params(p, a, b, c, sa=sa, sb=sb, progress=progress)
    parts = []
    for i in range(0, n, step):
        rows = slice(i, i + step)
        parts.append(simulate_params(p, a[rows], b[rows], c[rows], sa=None if sa is None else sa[rows],
                                     sb=None if sb is None else sb[rows], progress=progress))
        progress(f"simulated {min(i + step, n):,} of {n:,} dot products")
    return np.concatenate(parts)



# --------------------------------------------------------------------- dot
@main.command("dot")
@click.option("--arch", required=True, help="model spec (see `tcsmt models`)")
@click.option("--in", "in_fmt", default=None, help="input format (default: the architecture's first path)")
@click.option("--out", "out_fmt", default=None, help="output format")
@click.option("--instr", default=None)
@click.option("--c", "c_text", default="0", help="the addend C, e.g. 1-2^-24")
@click.option("--sa", "sa_text", default=None, help="block-scaled paths: A's scale factors, one per block (2^-3,1)")
@click.option("--sb", "sb_text", default=None, help="block-scaled paths: B's scale factors, one per block")
@click.argument("a_text")
@click.argument("b_text")
def dot_cmd(arch, in_fmt, out_fmt, instr, c_text, sa_text, sb_text, a_text, b_text) -> None:
    """One dot product a.b + c with values written as in the papers (1-2^-24, 3*2^-5, 0.75)."""
    from tcsmt.dot import dot

    for line in dot(arch, a_text, b_text, c_text, in_fmt=in_fmt, out_fmt=out_fmt, instr=instr,
                    sa_text=sa_text, sb_text=sb_text).lines():
        click.echo(line)


# ------------------------------------------------------------ discriminate
def _command_line() -> str:
    import shlex

    return "tcsmt " + " ".join(shlex.quote(a) for a in sys.argv[1:])


@main.command("discriminate")
@click.argument("model1", required=False)
@click.argument("model2", required=False)
@click.option("--in", "in_fmt", default=None, help="input format (default: the first path both models have, fp16 first)")
@click.option("--out", "out_fmt", default=None, help="output format")
@click.option("--instr", default=None, help="instruction for models that have several (mma, wgmma)")
@k_option("vector length (default: 1, 2, 4, ... up to one instruction)", limit=SMT_K,
          why="products per dot product in a solver query")
@click.option("--count", type=bounded_int(COUNT, "inputs of one query"), default=1, show_default=True, help="number of different inputs")
@click.option("--minimize", is_flag=True, help="prefer readable inputs: few terms, powers of two, positive")
@click.option("--where", default=None, help="constraints, e.g. 'c=1,a>=0,|b|<=2^-10,normal'")
@solver_option()
@timeout_option(120.0, "seconds for the whole query")
@click.option("--output", "output", default=None, help="file to write (default: generated/M1-vs-M2-IN-OUT.json)")
@click.option("--force", is_flag=True, help="overwrite the output file")
@click.option("--no-save", is_flag=True, help="print only; write nothing")
@click.option("--library", "library", default=None,
              help="a library GEMM call OP:MxNxK:DTYPE[:key=value,...] (e.g. mm:64x64x4096:bfloat16): "
                   "discriminate two plans of it instead of two models")
@click.option("--plan-a", default=None, help="with --library: plan A as changes to the recorded plan, e.g. split_k=3")
@click.option("--plan-b", default=None, help="with --library: plan B, e.g. split_k=4 (fields: tcsmt.library.discriminate)")
@click.option("--gpu", default="h100", show_default=True, help="with --library: the GPU whose plan table to use")
@click.option("--seed", type=SEED, default=0, show_default=True, help="with --library: seed of the random tries")
def discriminate_cmd(model1, model2, in_fmt, out_fmt, instr, k, count, minimize, where, solver, timeout,
                     output, force, no_save, library, plan_a, plan_b, gpu, seed) -> None:
    """Find inputs on which MODEL1 and MODEL2 give different results.

    Models are architectures (volta), hypotheses (volta:carry2, ampere:extra_bits=2)
    or references (exact, ieee-fma32).  Exit status: 0 found, 1 proven
    equivalent (unsat), 2 error or timeout (also when the time limit ends the
    search before --count inputs are found; those found are printed and saved).

    With --library CALL (and no models): inputs on which two plans of one
    library call (--plan-a, --plan-b: FIELD=VALUE changes to the recorded
    plan; fields split_k, grain, slices, remainder, reduce, k_tile, segment, in_round,
    epilogue, promote, chain.KEY) give different outputs, checked by running
    both plans on them; exit 1 when no construction separates them.
    """
    from tcsmt.solve.discriminate import choose_path, discriminate
    from tcsmt.solve.report import default_name, format_outcome, outcome_json

    if library is not None:
        if model1 is not None or model2 is not None:
            raise TcsmtError("--library discriminates two plans of one call: give no MODEL arguments")
        from tcsmt.cli.library_cmd import discriminate_library

        status = discriminate_library(library, gpu, plan_a, plan_b, seed, output, force, no_save, _command_line(),
                                      timeout)
        if status:
            sys.exit(status)
        return
    if plan_a is not None or plan_b is not None:
        raise TcsmtError("--plan-a and --plan-b need --library CALL")
    if model1 is None or model2 is None:
        raise TcsmtError("give two models (MODEL1 MODEL2), or --library CALL with --plan-a/--plan-b")

    out = None  # the file, claimed before the solver runs: concurrent runs get different names (files.py)
    if not no_save and output:
        out = files.output(output, force)
    elif not no_save:
        fin, fout = choose_path([model1, model2], in_fmt, out_fmt)
        out = files.output(Path("generated") / default_name([model1, model2], fin, fout), force, free=True)
    o = discriminate([model1, model2], in_fmt, out_fmt, instr, k, count, minimize, where, solver, timeout)
    click.echo(format_outcome(o))
    if o.status == "timeout":
        raise TcsmtError(f"solver timeout after {o.seconds:.1f} s (raise --timeout, fix --k, or try --solver bitwuzla)")
    if o.status == "equivalent":
        sys.exit(1)
    if out is not None:
        out.write_json(outcome_json(o, _command_line()))
        click.echo(f"\nwritten: {out.path}")
    if len(o.cases) < o.count:
        if o.stopped == "no more exist":
            click.echo(f"{len(o.cases)} of the {o.count} inputs asked for: no other input discriminates "
                       f"at K = {o.K} (solver proof)")
        else:
            raise TcsmtError(f"the time limit (--timeout {timeout:g} s) ended the search after {len(o.cases)} "
                             f"of the {o.count} inputs asked for (those are printed and saved)")


# ------------------------------------------------------------------- query
@main.command("query")
@click.argument("name", required=False)
@click.option("--list", "list_", is_flag=True, help="list the named queries")
@click.option("--model", default=None, help="the model to ask about (default: the query's own)")
@click.option("--instr", default=None,
              help="instruction where the model has several (default: the query's, if the model has it)")
@solver_option()
@timeout_option(300.0, "seconds for the whole query")
@click.option("--output", default=None, help="file to write (default: generated/query-NAME-MODEL.json)")
@click.option("--force", is_flag=True, help="overwrite the output file")
@click.option("--no-save", is_flag=True, help="print only; write nothing")
@progress_option()
def query_cmd(name, list_, model, instr, solver, timeout, output, force, no_save, progress) -> None:
    """Run a named query (queries/NAME.toml) or a query FILE against a model.

    A feature query finds, for each pair of neighbouring hypotheses, an input
    that tells them apart and says which hypothesis the model matches.
    Exit status: 0 every pair answered, 2 error or a pair left unanswered
    (solver timeout or unknown: the JSON then lists the unanswered pairs and
    draws no conclusion).
    """
    from tcsmt.solve.query import list_queries, load_query, run_feature, run_monotonicity, with_instr
    from tcsmt.solve.query_report import feature_report, monotonicity_report

    if list_ or not name:
        for q in list_queries():
            click.echo(f"{q.name:22} {q.question}")
            via = f" {q.instr}" if q.instr else ""
            click.echo(f"{'':22} (model {q.model}, {q.in_fmt} -> {q.out_fmt}{via}; {q.source})")
        return
    q = load_query(name)
    base = model or q.model
    q = with_instr(q, base, instr)

    out = None  # the file, claimed before the solver runs: concurrent runs get different names (files.py)
    if not no_save and output:
        out = files.output(output, force)
    elif not no_save:  # names from the file and the spec are tokens, never paths (files.safe_name)
        target = Path("generated") / f"query-{files.safe_name(q.name, 'query')}-{files.safe_name(base, 'model')}.json"
        out = files.output(target, force, free=True)
    click.echo(f"query {q.name}: {q.question}\nsource: {q.source}\nmodel: {base}"
               + (f" ({q.instr})" if q.instr else "") + "\n")
    if q.kind == "monotonicity":
        r = run_monotonicity(q, model, solver, timeout)
        lines, data = monotonicity_report(q, base, r)
        for line in lines:
            click.echo(line)
        if r.status not in ("found", "unsat"):
            raise TcsmtError(f"solver {r.status} after {r.seconds:.1f} s")
        if out is not None:
            data["command"] = _command_line()
            out.write_json(data)
            click.echo(f"\nwritten: {out.path}")
        return
    res = run_feature(q, model, solver, timeout, progress=Progress.for_cli(progress))
    lines, data = feature_report(q, base, res, _command_line())
    for line in lines:
        click.echo(line)
    if out is not None:
        out.write_json(data)
        click.echo(f"written: {out.path}" + ("" if data["complete"] else " (incomplete: lists the unanswered pairs)"))
    if not data["complete"]:
        raise TcsmtError(f"solver timeout: {len(res.unanswered)} of {len(q.hypotheses) - 1} pairs unanswered "
                         f"within --timeout {timeout:g} s (raise it)")


def _register_optional_commands() -> None:
    from tcsmt.cli.explain_cmd import explain_cmd
    from tcsmt.cli.hwcheck_cmd import hwcheck_cmd
    from tcsmt.cli.identify_cmd import identify_cmd
    from tcsmt.cli.invariance_cmd import invariance_cmd
    from tcsmt.cli.record_cmd import record_cmd
    from tcsmt.cli.verify_cmd import verify_cmd

    main.add_command(hwcheck_cmd)
    main.add_command(verify_cmd)
    main.add_command(identify_cmd)
    main.add_command(explain_cmd)
    main.add_command(record_cmd)
    main.add_command(invariance_cmd)


_register_optional_commands()

if __name__ == "__main__":  # pragma: no cover
    main()
