"""``tcsmt verify``: accuracy of fp32 emulation on fp16 tensor cores (Markidis, Ootomo-Yokota).

Register with ``main.add_command(verify_cmd)``.  The ``--compare`` forms print through
:mod:`tcsmt.cli.verify_compare`.  Every user error is a
TcsmtError (one line, exit status 2 through the CLI group; this command also
does that itself when invoked on its own, e.g. from click's test runner).
"""
from __future__ import annotations

from fractions import Fraction

import click

from tcsmt import verify as V
from tcsmt.arith.values import format_value, parse_value
from tcsmt.cli.verify_lines import _num, _pow2, _witness_lines
from tcsmt.errors import TcsmtError
from tcsmt.io import files
from tcsmt.io.limits import STATS_K, STATS_N
from tcsmt.io.options import POSITIVE_FLOAT, SEED, bounded_int, k_option, progress_option, timeout_option
from tcsmt.io.progress import NO_PROGRESS, Progress
from tcsmt.io.trap import Command
from tcsmt.solve.options import solver_option
from tcsmt.verify.schemes import ALGOS, input_format, scheme_key, tensor_core_calls
from tcsmt.verify.stages import StageLemma


def _kind(relative: bool) -> str:
    return "relative error |D - A.B| / (|A|.|B|)" if relative else "absolute error |D - A.B|"


def _header(algo: str, K: int, dom: V.Domain, relative: bool) -> str:
    return (f"verify {algo}: K = {K}, fp32 inputs {format_value(dom.lo)} <= |a_k|, |b_k| <= "
            f"{format_value(dom.hi)}, C = 0; {_kind(relative)}, exact A.B")


def _status_of(r: V.WorstResult) -> str:
    if r.unbounded:
        return "unbounded (relative error >= 1/2 reached)"
    composed = r.proof is not None and r.proof.bound is not None and r.bound == r.proof.bound
    how = " (composed proof)" if composed else ""
    if r.bound is not None and r.witness is not None:
        return "proven max in [found, bound]" + how
    if r.bound is not None:
        return "proven bound (no witness)"
    return "searched only (" + r.stopped + ")"


def _incomplete(r: V.WorstResult) -> bool:
    """Whether a worst-case search ended because time ran out (solver timeouts, budget), not by converging."""
    return r.stopped == "budget spent" or "timeout" in r.stopped


def _run_worst(algo: str, archs: list[str], K: int, dom: V.Domain, relative: bool, solver: str,
               timeout: float, budget: float | None, verbose: bool = False, progress: Progress = NO_PROGRESS) -> None:
    click.echo(_header(algo, K, dom, relative))
    limit = f", {budget:g} s per model" if budget else ""
    click.echo(f"worst-case search: iterative tightening, {timeout:g} s per solver query{limit}; "
               "thresholds depend only on answers (a query timeout stops that model's search)")
    rows = []
    for arch in archs:
        r = V.search_worst(algo, arch, K, dom, relative, solver, per_query=timeout, budget=budget)
        rows.append(r)
        progress(f"{arch}: {len(r.queries)} queries, worst found {_num(r.found)}, bound "
                 f"{_num(r.bound)}; stopped: {r.stopped}")
    w1 = max([len(r.arch) for r in rows] + [4])
    click.echo(f"{'arch':{w1}}  {'TC calls':>8}  {'worst found':>22}  {'proven bound':>22}  {'queries':>7}  {'time':>7}  status")
    for r in rows:
        p = V.params_for(algo, r.arch)
        calls = tensor_core_calls(algo, K, p) if p is not None else 0
        found = f"{_num(r.found)} {_pow2(r.found)}"
        bound = f"<= {_num(r.bound)} {_pow2(r.bound)}" if r.bound is not None else "-"
        nq = len(r.queries) + (r.proof.queries if r.proof is not None else 0)
        click.echo(f"{r.arch:{w1}}  {calls:>8}  {found:>22}  {bound:>22}  {nq:>7}  "
                   f"{r.seconds:>6.1f}s  {_status_of(r)}")
    click.echo("proven = no input in the domain has a larger error: an unsat answer to the whole query, or a "
               "composed proof (small lemmas, each an unsat answer, combined exactly: docs/verify.md); found = "
               "the worst input of a fixed simulator candidate set, a seeded local search from it, or a solver "
               "answer, replayed in the simulator")
    if verbose:
        for r in rows:
            if r.proof is not None:
                pr = r.proof
                head = (f"bound {_num(pr.bound)} = split {_num(pr.split_part)} + chain {_num(pr.chain_part)}"
                        if pr.bound is not None else f"no composed bound: {pr.missing}")
                click.echo(f"{r.arch} composed proof: {head}")
                for lem in pr.lemmas:
                    if isinstance(lem, StageLemma):
                        click.echo(f"  {lem.name}: {lem.status} {lem.seconds:.1f}s: {lem.statement}")
                    else:
                        click.echo(f"  {lem.name} <= {_num(lem.bound)} (witness {_num(lem.found)}, {len(lem.steps)} "
                                   f"queries, {lem.seconds:.1f}s): {lem.statement}")
            qs = ", ".join(f"> {format_value(q.threshold)}: {q.status} {q.seconds:.1f}s" for q in r.queries)
            click.echo(f"{r.arch} queries: {qs or 'none'}; stopped: {r.stopped}")
    for r in rows:
        if r.unbounded:
            bk = (f"the largest K with a proven bound below 1/2 is {r.bounded_k[0]} (<= {_num(r.bounded_k[1])} "
                  f"{_pow2(r.bounded_k[1])})" if r.bounded_k else "no smaller K has a proven bound below 1/2"
                  + (" (LO = 0: a relative bound needs LO > 0)" if dom.lo == 0 else ""))
            click.echo(f"{r.arch}: unbounded at K = {K}: the input below has relative error >= 1/2; {bk}")
    for r in rows:
        if r.witness is not None:
            click.echo(f"\n{r.arch}: worst input found")
            for line in _witness_lines(r.witness, [algo]):
                click.echo(line)
    open_ = [r for r in rows if _incomplete(r)]
    if open_:
        raise TcsmtError("solver timeout: the search did not converge for " + ", ".join(
            f"{r.arch} ({r.stopped}; {sum(q.status not in ('sat', 'unsat') for q in r.queries)} of "
            f"{len(r.queries)} queries unanswered)" for r in open_)
            + f"; converged: {', '.join(r.arch for r in rows if not _incomplete(r)) or 'none'}")


def _run_bound(algo: str, archs: list[str], K: int, dom: V.Domain, eps: Fraction, relative: bool,
               solver: str, timeout: float, progress: Progress = NO_PROGRESS) -> None:
    click.echo(_header(algo, K, dom, relative))
    click.echo(f"claim: error <= {format_value(eps)} ({_num(eps)}) for every input in the domain")
    unknown: list[str] = []
    for arch in archs:
        r = V.prove_bound(algo, arch, K, dom, eps, relative, solver, timeout)
        label = arch if algo != "fp32" else "fp32 SIMT"
        progress(f"{label}: {r.status} ({r.seconds:.1f} s)")
        if r.status == "proven":
            click.echo(f"{label}: PROVEN (unsat, {r.seconds:.1f} s): no input exceeds the bound")
        elif r.status == "counterexample":
            assert r.witness is not None  # prove_bound sets this status together with the replayed witness
            click.echo(f"{label}: REFUTED ({r.seconds:.1f} s): counterexample with error "
                       f"{_num(r.witness.errors[algo])} {_pow2(r.witness.errors[algo])}")
            for line in _witness_lines(r.witness, [algo]):
                click.echo(line)
        else:
            click.echo(f"{label}: UNKNOWN (no answer within {timeout:g} s)")
            unknown.append(label)
    if unknown:
        raise TcsmtError(f"solver timeout: UNKNOWN for {', '.join(unknown)} ({len(archs) - len(unknown)} of "
                         f"{len(archs)} answered; raise --timeout)")


def _run_stats(archs: list[str], algos: list[str], K: int, n: int, dom: V.Domain, dist: str, relative: bool,
               seed: int, plot: files.Output | None, progress: Progress = NO_PROGRESS) -> None:
    click.echo(f"statistics: {n} random dot products of length K = {K}, |x| {dist} in "
               f"[{format_value(dom.lo)}, {format_value(dom.hi)}], random signs, seed {seed}; "
               f"{_kind(relative)} (fp64-rounded exact errors)")
    w1 = max(len(a) for a in [*archs, "arch"])
    click.echo(f"{'arch':{w1}}  {'algorithm':18}  {'median':>10}  {'95th pct':>10}  {'max':>10}  {'time':>7}")
    allres = []
    for arch in archs:
        res = V.stats(arch, algos, K, n, dom, dist, relative, seed, progress=progress)
        allres.extend(res)
        progress(f"{arch}: {n} dot products x {len(algos)} schemes simulated")
        for s in res:
            click.echo(f"{arch:{w1}}  {s.algo:18}  {s.median:>10.3e}  {s.p95:>10.3e}  {s.max:>10.3e}  {s.seconds:>6.1f}s")
    click.echo("fp32 = sequential fp32 FMAs on ordinary cores (the same on every architecture)")
    if plot:
        click.echo(V.write_plot(allres, plot, relative))


def spell_compare_all(args: list[str]) -> list[str]:
    """The arguments with ``--compare all`` (or ``--compare=all``) written as the two values click reads for
    ``--compare`` (``--compare all all``), where the word after ``all`` is missing or an option.  Anything else is
    left as written: ``--compare all X`` reaches the command as the pair (all, X), which it refuses; arguments
    after ``--`` are not options."""
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return out + args[i:]
        if a.lower() == "--compare=all":
            out += ["--compare", "all", "all"]
        elif a == "--compare" and i + 1 < len(args) and args[i + 1].lower() == "all" and (
                i + 2 == len(args) or args[i + 2].startswith("-")):
            out += ["--compare", "all", "all"]
            i += 1
        else:
            out.append(a)
        i += 1
    return out


class VerifyCommand(Command):
    """``tcsmt verify``: one-line errors, and ``--compare all`` as one word (:func:`spell_compare_all`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spell_compare_all(list(args)))


@click.command("verify", cls=VerifyCommand)
@click.option("--algo", default=None, help=f"scheme: {', '.join(ALGOS)} (fp32 = plain fp32 FMAs; "
              "--stats takes a comma-separated list)")
@click.option("--arch", default=None, help="model spec with an fp16->fp32 path (default: every built-in one)")
@k_option(f"dot-product length K (default {V.DEFAULT_K}; stats: 16)", limit=STATS_K)
@click.option("--range", "range_text", default=None, help=f"input magnitudes LO..HI (default {V.DEFAULT_RANGE})")
@click.option("--bound", "bound_text", default=None, help="prove error <= EPS (e.g. 2^-22, 1e-7) or find a counterexample")
@click.option("--abs", "absolute", is_flag=True, help="absolute error |D - A.B| instead of relative")
@click.option("--compare", nargs=2, default=None, metavar="ALGO1 ALGO2 | all",
              help="inputs where ALGO1 is less accurate than ALGO2 (absolute errors), and the converse; "
              "with the word all instead: every pair of schemes that run on the architecture, in one process")
@click.option("--stats", "do_stats", is_flag=True, help="error distribution on random inputs (simulator)")
@click.option("--n", "n", type=bounded_int(STATS_N, "dot products of one statistics run"), default=100000, show_default=True, help="--stats: number of dot products")
@click.option("--dist", type=click.Choice(["loguniform", "uniform"]), default="loguniform", show_default=True,
              help="--stats: distribution of |x|")
@click.option("--seed", type=SEED, default=0, show_default=True, help="--stats: random seed")
@click.option("--plot", default=None, help="--stats: write a histogram to this file (needs matplotlib)")
@click.option("--force", is_flag=True, help="overwrite the --plot file (a regular file only)")
@solver_option()
@timeout_option(10.0, "seconds per solver query")
@click.option("--budget", type=POSITIVE_FLOAT, default=None, help="worst-case search: wall-clock seconds per model (default none: the search stops only at "
              "convergence, 14 queries or a query timeout, so its answers do not depend on machine load)")
@click.option("-v", "--verbose", is_flag=True, help="worst-case search and --compare: list every solver query")
@progress_option()
def verify_cmd(algo, arch, k, range_text, bound_text, absolute, compare, do_stats, n, dist, seed, plot, force,
               solver, timeout, budget, verbose, progress) -> None:
    """Accuracy of fp32 matrix products emulated with tensor cores (Markidis, Ootomo-Yokota, vendor schemes).

    \b
    tcsmt verify --algo markidis                 worst case on every architecture
    tcsmt verify --algo ootomo --arch volta --bound 2^-22
    tcsmt verify --compare ootomo markidis --arch volta
    tcsmt verify --compare all --arch hopper     every pair of schemes, one process
    tcsmt verify --stats --arch volta --n 100000
    tcsmt verify --stats --arch hopper --algo markidis,ootomo,bf16x9,bf16x3,tf32x3,fp32

    Exit status: 0 every query answered (or the worst-case search converged),
    2 an error or a solver timeout / UNKNOWN (what was answered is printed).
    """
    prog = Progress.for_cli(progress)
    every_pair = bool(compare) and "all" in [c.strip().lower() for c in compare]
    if every_pair and [c.strip().lower() for c in compare] != ["all", "all"]:
        raise TcsmtError("--compare all takes no scheme: write --compare all (every pair of schemes) or "
                         "--compare ALGO1 ALGO2")
    if every_pair:
        wanted = ["markidis"]  # the architectures with an fp16 path; each runs the pairs of its own schemes
    elif compare:
        wanted = [compare[0], compare[1]]
    elif do_stats:
        wanted = [a.strip() for a in algo.split(",") if a.strip()] if algo else ["markidis", "ootomo", "fp32"]
    else:
        wanted = [algo] if algo else []
    fmts = sorted({input_format(a) for a in wanted if scheme_key(a) != "fp32"}) or ["fp16"]
    piece_fmt = "fp16" if "fp16" in fmts else fmts[0]  # the narrowest range among the schemes' pieces
    if arch:
        for f in fmts:  # an unknown spec or one without the scheme's path is a user error
            V.model_for(arch, f)
        archs = [arch]
    else:
        archs = [a for a, _ in V.fp16_paths(fmts[0]) if all(a in dict(V.fp16_paths(f)) for f in fmts)]
    relative = not absolute
    modes = sum([bool(compare), do_stats, algo is not None and not compare and not do_stats])
    if compare and do_stats:
        raise TcsmtError("choose one of --compare and --stats")
    if compare and algo is not None:
        raise TcsmtError("--algo does not apply to --compare (it compares its two schemes ALGO1 ALGO2)")
    if plot is not None and not do_stats:
        raise TcsmtError("--plot applies to --stats only")

    if do_stats:
        algos = [scheme_key(a) for a in wanted]
        if bound_text:
            raise TcsmtError("--bound does not apply to --stats")
        dom = V.parse_range(range_text or V.DEFAULT_RANGE, piece_fmt)
        plot_out = files.output(plot, force) if plot else None  # claimed before the statistics run
        if plot_out is not None and not V.plot_available():
            raise TcsmtError("--plot needs matplotlib, which is not installed (pip install 'tcsmt[plot]'); "
                             "nothing was run")
        _run_stats(archs, algos, k or 16, n, dom, dist, relative, seed, plot_out, prog)
        return
    K = k if k is not None else V.DEFAULT_K
    if K < 1 or K > 64:
        raise TcsmtError("--k must be between 1 and 64")
    if compare:
        from tcsmt.cli.verify_compare import run_compare, run_compare_all  # (it imports this module)

        if bound_text:
            raise TcsmtError("--bound does not apply to --compare")
        ranges = [V.parse_range(range_text, piece_fmt)] if range_text else [V.parse_range(r) for r in V.COMPARE_RANGES]
        if every_pair:
            run_compare_all(archs, K, ranges, solver, timeout, prog, verbose)
            return
        a1, a2 = scheme_key(compare[0]), scheme_key(compare[1])
        if a1 == a2:
            raise TcsmtError("--compare needs two different algorithms")
        run_compare(a1, a2, archs, K, ranges, solver, timeout, prog, verbose)
        return
    if modes == 0 or algo is None:
        raise TcsmtError(f"give --algo ({', '.join(ALGOS)}), --compare ALGO1 ALGO2, or --stats")
    algo = scheme_key(algo)
    dom = V.parse_range(range_text or V.DEFAULT_RANGE, piece_fmt)
    if algo == "fp32":
        archs = archs[:1]
    if bound_text is not None:
        eps = V.check_eps(parse_value(bound_text))
        _run_bound(algo, archs, K, dom, eps, relative, solver, timeout, prog)
        return
    _run_worst(algo, archs, K, dom, relative, solver, timeout, budget, verbose, prog)
