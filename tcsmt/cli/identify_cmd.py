"""``tcsmt identify``: infer a matrix unit's model on one path from solver-chosen experiments.

Register with ``main.add_command(identify_cmd)``.  User errors print one line
(``tcsmt: error: ...``) and exit with status 2, also when the command is run on
its own (click.testing): it is a :class:`tcsmt.io.trap.Command`, the one trap.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from tcsmt.errors import TcsmtError
from tcsmt.identify.space import FACTOR_NAMES
from tcsmt.io import files
from tcsmt.io.limits import CANDIDATES, EXPERIMENTS, parse_int
from tcsmt.io.options import POSITIVE_FLOAT, SEED, bounded_int, progress_option, timeout_option
from tcsmt.io.progress import Progress
from tcsmt.io.trap import Command
from tcsmt.solve.options import solver_option


def _radius(text: str) -> int | None:
    """``--radius``: a number of rings (0 up to the number of factors of the space) or ``all``; the size of the
    space it spans is checked before it is enumerated (:meth:`HypothesisSpace.check_size`)."""
    if text.strip().lower() in ("all", "full", "none"):
        return None
    try:
        return parse_int(text, "--radius", len(FACTOR_NAMES), 0, "the number of factors of the space")
    except TcsmtError as exc:
        raise TcsmtError(f"{exc} (--radius takes a number of rings or 'all')") from None


def _log_directory(log_dir: str | None, target, force: bool) -> str:
    """Where the experiments go, claimed before the search; an earlier run's log is never overwritten silently.

    The default, ``generated/identify-<target>-<path>[-<instr>]``, is created by
    ``mkdir`` (``...-2``, ``...-3`` when taken), so concurrent runs never share
    one.  An explicit ``--log-dir`` is created if absent; one that exists must be
    a directory, and one that holds a log is refused unless ``--force``.  A
    claimed directory that stays empty (error, interrupt) is removed at the end.
    """
    if log_dir:
        p = Path(log_dir)
        if not os.path.lexists(p):
            return str(files.output_dir(p).path)
        if not p.is_dir():
            raise TcsmtError(f"--log-dir {log_dir} exists and is not a directory")
        if any(os.path.lexists(p / f) for f in ("experiments.json", "result.json")) and not force:
            raise TcsmtError(f"{log_dir} already holds an identify log (use --force to overwrite it, "
                             "or another --log-dir)")
        return log_dir
    path = target.path
    name = f"identify-{target.label}-{path.label}" + ("" if path.instr == "mma" else f"-{path.instr}")
    base = f"generated/{files.safe_name(name, 'identify')}"  # a token, never a path
    return str(files.output_dir(base, free=True).path)


@click.command("identify", cls=Command)
@click.option("--gpu", "use_gpu", is_flag=True, help="run the experiments on the CUDA GPU (through tcsmt.hwcheck)")
@click.option("--model", "model", default=None, metavar="SPEC",
              help="a virtual device computing with this model (ARCH, ARCH:HYP, ARCH:key=value)")
@click.option("--replay", "replay_dir", default=None, metavar="DIR",
              help="re-apply the experiments logged in DIR (no device)")
@click.option("--path", "path_text", default=None, metavar="IN.OUT",
              help="the path: f16.f32, bf16.f32, tf32.f32, e4m3.f32, e5m2.f32, f16.f16 ...")
@click.option("--instr", default=None, help="instruction family (mma, wgmma, mfma); default mma where the device has it")
@click.option("--radius", "radius_text", default="2", show_default=True,
              help="rings of the parameter product around the named models to search ('all' = whole product)")
@click.option("--max-experiments", default=30, show_default=True, type=bounded_int(EXPERIMENTS), help="experiment budget")
@solver_option()
@timeout_option(60.0, "seconds per solver query for the last, hardest pairs (and equivalence proofs)")
@timeout_option(10.0, "seconds per solver query while many hypotheses survive", name="--quick-timeout")
@click.option("--time-limit", default=1800.0, show_default=True, type=POSITIVE_FLOAT, help="seconds for the whole run")
@click.option("--candidates", default=2, show_default=True, type=bounded_int(CANDIDATES),
              help="solver inputs per round; the one that splits the survivors best is run")
@click.option("--readable/--no-readable", default=False, show_default=True,
              help="make each solver input readable (few products, powers of two; costs solver time)")
@click.option("--seed", default=0, show_default=True, type=SEED, help="random seed (pair choice, fallback search)")
@click.option("--log-dir", default=None, metavar="DIR",
              help="where to keep the experiments (default generated/identify-<target>-<path>/)")
@click.option("--no-log", is_flag=True, help="keep no experiment log")
@click.option("--write", "write_file", default=None, metavar="FILE", help="write the [[paths]] TOML entry to FILE")
@click.option("--force", is_flag=True, help="overwrite the --write and --json files and an earlier log in --log-dir")
@click.option("--json", "json_out", default=None, metavar="FILE", help="write the result (table, classes) as JSON")
@click.option("--quiet", "-q", is_flag=True, help="no per-experiment lines on stdout")
@progress_option()
def identify_cmd(use_gpu: bool, model: str | None, replay_dir: str | None, path_text: str | None,
                 instr: str | None, radius_text: str, max_experiments: int, solver: str, timeout: float,
                 quick_timeout: float, time_limit: float, candidates: int, readable: bool, seed: int,
                 log_dir: str | None, no_log: bool, write_file: str | None, force: bool, json_out: str | None,
                 quiet: bool, progress: bool) -> None:
    """Infer a GPU's matrix-unit model on one path from solver-chosen experiments.

    Exactly one of --gpu, --model SPEC (a virtual device) or --replay DIR.
    Prints the experiments, a feature table in the style of FTTN's Table IV,
    and the surviving model as a models/*.toml [[paths]] entry.
    """
    _run(use_gpu, model, replay_dir, path_text, instr, radius_text, max_experiments, solver, timeout,
         quick_timeout, time_limit, candidates, readable, seed, log_dir, no_log, write_file, force, json_out,
         quiet, Progress.for_cli(progress))


def _run(use_gpu, model, replay_dir, path_text, instr, radius_text, max_experiments, solver, timeout,
         quick_timeout, time_limit, candidates, readable, seed, log_dir, no_log, write_file, force, json_out,
         quiet, prog: Progress) -> None:
    from tcsmt import identify as idf
    from tcsmt.identify.target import GpuTarget, ModelTarget

    modes = [m for m, on in (("--gpu", use_gpu), ("--model", model is not None), ("--replay", replay_dir is not None))
             if on]
    if len(modes) != 1:
        raise TcsmtError("give exactly one of --gpu, --model SPEC or --replay DIR"
                         + (f" (got {', '.join(modes)})" if modes else ""))
    outputs = {f: files.output(f, force) for f in (write_file, json_out) if f}  # claimed before the search
    say = (lambda s: None) if quiet else (lambda s: click.echo(s))
    if replay_dir is not None:
        if path_text:
            raise TcsmtError("--replay takes the path from the log; leave out --path")
        logged = idf.load_log(replay_dir)
        res = idf.replay(replay_dir, solver=solver, timeout=timeout, progress=say, time_limit=time_limit)
    else:
        if not path_text:
            raise TcsmtError("--path IN.OUT is required (e.g. --path f16.f32)")
        radius = _radius(radius_text)
        if use_gpu:
            target: idf.Target = GpuTarget(path_text, instr or "mma")
        else:
            target = ModelTarget(model, path_text, instr)
        directory = None if no_log else _log_directory(log_dir, target, force)
        res = idf.identify(target, radius=radius, max_experiments=max_experiments, solver=solver, timeout=timeout,
                           quick_timeout=quick_timeout, time_limit=time_limit, candidates=candidates,
                           readable=readable, seed=seed, log_dir=directory, progress=say,
                           query_progress=prog if prog.enabled else None)
    if res.status == "budget" and not res.experiments and replay_dir is None:
        raise TcsmtError(f"the time limit (--time-limit {time_limit:g} s) ended the run before its first "
                         "experiment: nothing is identified (no feature table, no models/ entry)")
    if replay_dir is not None and res.stopped and not res.survivors:
        raise TcsmtError(f"the time limit (--time-limit {time_limit:g} s) ended the replay of {replay_dir} before "
                         f"its experiments were re-applied; the log says {logged.status or 'nothing'}")
    click.echo("")
    for line in idf.summary_lines(res):
        click.echo(line)
    table = idf.feature_table(res)
    if table:
        click.echo("")
        for line in table:
            click.echo(line)
        click.echo("")
        entry = idf.toml_entry(res)
        click.echo(entry, nl=False)
        if write_file:
            outputs[write_file].write_text(entry)
            click.echo(f"(written to {write_file})")
    if res.log_dir and replay_dir is None:
        click.echo(f"experiments: {res.log_dir}/experiments.json (replay with --replay {res.log_dir})")
    if json_out:
        outputs[json_out].write_json(idf.result_json(res))
    if replay_dir is not None:
        _replay_verdict(replay_dir, logged, res, time_limit)
    if res.status == "none":
        sys.exit(1)


def _replay_verdict(replay_dir: str, logged, res, time_limit: float) -> None:
    """The replay's exit: 2 when the time limit ended it (what it reached is printed), 1 when it ends
    elsewhere than the log (another status or another number of survivors), else on as a run would."""
    got = f"{res.status}, {len(res.survivors)} hypothes{'is' if len(res.survivors) == 1 else 'es'} surviving"
    want = logged.status + (f", {logged.survivors} surviving" if logged.survivors is not None else "")
    if res.stopped:
        raise TcsmtError(f"the time limit (--time-limit {time_limit:g} s) ended the replay of {replay_dir} "
                         f"before its end ({got} so far); the log says {want}")
    differs = (logged.status and logged.status != "running" and res.status != logged.status) or (
        logged.survivors is not None and logged.status != "running" and len(res.survivors) != logged.survivors)
    if differs:
        click.echo(f"tcsmt: the replay does not reach the logged result: the log says {want}, the replay gives {got} "
                   f"(the models or the space changed since the log was written)", err=True)
        sys.exit(1)
