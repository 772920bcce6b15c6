"""``tcsmt hwcheck``: check models against a GPU's matrix units (or a virtual device).

Three modes:

* ``tcsmt hwcheck FILE [--model SPEC ...]`` runs the dot products of FILE (a
  ``generated/*.json`` file or an .npz with a, b, c) on the device and prints,
  for every model named in the file or with --model, *confirmed* (its output
  bits equal the device's on every input) or *refuted*, with counterexamples.
* ``tcsmt hwcheck --random N --arch SPEC --path IN.OUT [...]`` checks N random
  dot products per distribution against the model(s) (bulk differential test).
* ``tcsmt hwcheck --layouts`` checks every path's fragment layout with exact
  small-integer inputs.

``--save FILE`` is claimed before anything runs and never replaced without
``--force`` (and then only if it is a regular file): see :mod:`tcsmt.io.files`.

Exit status: 0 when every model is confirmed (every layout right), 1 when one
is refuted, 2 on errors (no CUDA device, bad file, unknown model, ...).
"""
from __future__ import annotations

import click

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.paths import INSTRUCTION_FAMILIES
from tcsmt.io import files
from tcsmt.io.limits import GPU_BATCH, GPU_K, JOBS, LIBRARY_SAMPLES, RANDOM_N, SHOW
from tcsmt.io.options import SEED, bounded_int, k_option


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


def _save(out: files.Output | None, doc: dict) -> None:
    if out is None:
        return
    out.write_json(doc)
    _echo_err(f"results written to {out.path}")


@click.command("hwcheck")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--model", "models", multiple=True, help="model spec to check (repeatable; adds to the file's list)")
@click.option("--random", "n_random", type=bounded_int(RANDOM_N, "random dot products per distribution"), default=None, help="check N random dot products per distribution")
@click.option("--arch", "archs", multiple=True, help="with --random: model spec(s) to check, e.g. hopper or 'hopper:extra_bits=3'")
@click.option("--path", "path_text", default=None, help="with --random (or an .npz FILE): IN.OUT such as f16.f32, e4m3.f32, f64.f64")
@click.option("--instr", type=click.Choice(list(INSTRUCTION_FAMILIES)), default=None,
              help="instruction family, or a library GEMM call (cublas: torch.mm; scaled_mm[_fast]: torch._scaled_mm "
                   "without/with fast accumulation); default mma")
@k_option("dot-product length, a multiple of the instruction's k (default: one instruction; library paths: their GEMM depth)",
          limit=GPU_K, why="products per dot product on a GPU")
@click.option("--dist", type=click.Choice(["wide", "narrow", "subnormal", "cancel", "overflow", "tiny", "all"]),
              default="all", show_default=True, help="input distribution")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--save", "save", default=None, help="write the results as JSON to this file")
@click.option("--force", is_flag=True, help="overwrite the --save file (a regular file only)")
@click.option("--device", "device_spec", default="cuda", show_default=True,
              help="cuda, cuda:N, or model:SPEC (a virtual device computing with a model)")
@click.option("--layouts", is_flag=True, help="check the fragment layouts of every path the device has")
@click.option("--show", type=bounded_int(SHOW, lower=0), default=3, show_default=True, help="counterexamples printed per model")
@click.option("--jobs", type=bounded_int(JOBS, "worker processes", lower=0), default=0, help="model worker processes (0: one per CPU core)")
@click.option("--batch", type=bounded_int(GPU_BATCH, "dot products per batch"), default=1 << 17, show_default=True, help="dot products per GPU batch")
@click.option("--library", "library", default=None,
              help="one library GEMM call OP:MxNxK:DTYPE[:key=value,...]: run it through torch on the GPU and report "
                   "its recorded plan (and each --plan) confirmed or refuted")
@click.option("--plan", "plans", multiple=True, help="with --library: a plan to check too, as changes to the recorded "
              "plan (e.g. split_k=4); repeatable")
@click.option("--library-inputs", default=None, type=click.Path(dir_okay=False),
              help="a file of tcsmt discriminate --library: run its separating inputs and report its two plans")
@click.option("--library-dist", default="normal", show_default=True,
              type=click.Choice(["normal", "wide", "tiny", "cancel", "smallint"]),
              help="with --library: input distribution (tcsmt.hwcheck.library_calls.make_inputs)")
@click.option("--samples", type=bounded_int(LIBRARY_SAMPLES, "outputs compared"), default=256, show_default=True, help="with --library: outputs compared")
def hwcheck_cmd(file, models, n_random, archs, path_text, instr, k, dist, seed, save, force, device_spec, layouts,
                show, jobs, batch, library, plans, library_inputs, library_dist, samples) -> None:
    """Check models bit for bit against a GPU: FILE, --random N, --layouts, or --library CALL.

    --library (or --library-inputs FILE): exit 0 when every plan is confirmed, 1 when one is refuted, 2 on
    bad input or when no CUDA GPU can run the call (a one-line "skipped: ..." message; nothing is checked).
    """
    from tcsmt.hwcheck.check import ModelRunner, default_jobs
    from tcsmt.hwcheck.device import get_device

    modes = [file is not None, n_random is not None, layouts, library is not None or library_inputs is not None]
    if sum(modes) != 1:
        raise TcsmtError("give exactly one of FILE, --random N, --layouts or --library CALL (--library-inputs FILE)")
    if plans and library is None:
        raise TcsmtError("--plan needs --library CALL")
    if modes[3]:
        from tcsmt.cli.library_cmd import hwcheck_library

        status = hwcheck_library(library, "h100", plans, library_inputs, seed, samples, library_dist, save, force)
        if status:
            raise click.exceptions.Exit(status)
        return
    if n_random is not None:
        if not archs and not models:
            raise TcsmtError("--random needs --arch SPEC (the model to check)")
        if not path_text:
            raise TcsmtError("--random needs --path IN.OUT, e.g. --path f16.f32")
    save = files.output(save, force) if save else None  # claimed before the device runs (tcsmt/io/files.py)
    if file is not None:  # the file is read (and its plan known) before a device is asked for
        status = _file_mode(device_spec, file, list(models), path_text, instr, save, show, jobs)
        if status:
            raise click.exceptions.Exit(status)
        return
    device = get_device(device_spec)
    njobs = jobs or (default_jobs() if not device_spec.startswith("model:") else 1)
    with ModelRunner(njobs) as runner:
        if layouts:
            status = _layouts(device, save)
        else:
            status = _random(device, list(archs) + list(models), n_random, path_text, instr or "mma", k, dist,
                             seed, save, runner, show, batch)
    if status:
        raise click.exceptions.Exit(status)


def _device_or_plan(device_spec: str, plan: list[str]):
    """The device; where there is none, the plan (what a GPU would run) on stdout, then the one-line error."""
    from tcsmt.hwcheck.device import get_device

    try:
        return get_device(device_spec)
    except TcsmtError as exc:
        for line in plan:
            click.echo(line)
        raise TcsmtError(f"{exc}: nothing was run (above: what a GPU would run and what each model predicts)") from None


def _plan_lines(label: str, spec, n: int, expected: dict[str, str] | None) -> list[str]:
    lines = [f"would run {label}: {n} dot products through {spec.shape} {spec.label} (needs {spec.requirement()})"]
    for model, bits in (expected or {}).items():
        lines.append(f"    {model} predicts {bits} for the first input")
    return lines


def _file_mode(device_spec, file, extra_models, path_text, instr, save, show, jobs) -> int:
    from tcsmt.hwcheck.check import ModelRunner, default_jobs
    from tcsmt.io.load import read_json
    from tcsmt.solve.decisions import is_bundle

    data = read_json(file, "JSON input file") if str(file).endswith(".json") else None
    njobs = jobs or (default_jobs() if not device_spec.startswith("model:") else 1)
    if isinstance(data, dict) and is_bundle(data):
        if path_text or instr or extra_models:
            raise TcsmtError(f"{file} is a decision bundle: every question names its path and models "
                             "(--path, --instr and --model do not apply)")
        return _bundle(device_spec, file, data, save, show, njobs)
    with ModelRunner(njobs) as runner:
        return _file(device_spec, file, extra_models, path_text, instr, save, runner, show)


def _file(device_spec, file, extra_models, path_text, instr, save, runner, show) -> int:
    from tcsmt.hwcheck.check import check_inputs, format_example, git_commit, load_inputs, resolve_models

    in_fmt = out_fmt = None
    if path_text:
        parts = path_text.split(".")
        if len(parts) != 2:
            raise TcsmtError(f"--path takes IN.OUT such as f16.f32, not {path_text!r}")
        in_fmt, out_fmt = parts
    inputs = load_inputs(file, in_fmt, out_fmt, instr)
    specs = list(dict.fromkeys(inputs.models + extra_models))
    if not specs:
        raise TcsmtError(f"{file} names no models; give --model SPEC")
    spec = inputs.spec
    models = resolve_models(specs, spec)
    device = _device_or_plan(device_spec, _plan_lines(str(file), spec, len(inputs.a), _first_outputs(file)))
    why = device.supports(spec)
    if why:
        raise TcsmtError(why)
    tallies = check_inputs(device, inputs, models, runner, keep=max(show, 1))
    click.echo(f"{file}: {len(inputs.a)} dot products on {device.name}, path {spec.label} ({spec.shape})")
    for t in tallies:
        click.echo(f"{t.label}: {t.verdict} ({t.mismatches} of {t.checked} outputs differ)")
        for ex in t.examples[:show]:
            for line in format_example(ex):
                click.echo(line)
    _save(save, {"tool": "tcsmt hwcheck", "file": str(file), "tcsmt_commit": git_commit(),
                 "device": device.info(), "path": spec.label, "shape": spec.shape,
                 "models": [t.as_json() for t in tallies]})
    return 1 if any(t.mismatches for t in tallies) else 0


def _random(device, specs, n, path_text, instr, k, dist, seed, save, runner, show, batch) -> int:
    from tcsmt.hwcheck.check import format_example, resolve_models, result_json, run_random, summary_table
    from tcsmt.hwcheck.dists import DISTRIBUTIONS
    from tcsmt.hwcheck.paths import default_k, parse_path

    spec = parse_path(path_text, instr)
    models = resolve_models(list(dict.fromkeys(specs)), spec)
    why = device.supports(spec)
    if why:
        raise TcsmtError(why)
    K = default_k(spec, k)
    dists = DISTRIBUTIONS if dist == "all" else (dist,)
    runner.warm_up(models[0][1])
    results = []
    for d in dists:
        results.append(run_random(device, spec, models, d, n, K, seed, runner, batch=batch, keep=max(show, 5),
                                  progress=_echo_err))
    click.echo(f"{spec.label} ({spec.shape}, K = {K}) on {device.name}, seed {seed}")
    for line in summary_table(spec, results):
        click.echo(line)
    for r in results:
        for t in r.tallies:
            for ex in t.examples[:show]:
                click.echo(f"{r.dist} / {t.label}:")
                for line in format_example(ex):
                    click.echo(line)
    _save(save, result_json(device, spec, results, seed))
    refuted = sorted({t.label for r in results for t in r.tallies if t.mismatches})
    for s in [s for s, _ in models]:
        click.echo(f"{s}: {'refuted' if s in refuted else 'confirmed'}")
    return 1 if refuted else 0


def _layouts(device, save) -> int:
    from tcsmt.hwcheck.check import git_commit
    from tcsmt.hwcheck.paths import PATHS
    from tcsmt.hwcheck.runner import check_layout

    results = []
    for spec in PATHS.values():
        why = device.supports(spec)
        if why:
            click.echo(f"{spec.label:18} {spec.shape:9} skipped: {why}")
            results.append({"path": spec.label, "shape": spec.shape, "skipped": why})
            continue
        r = check_layout(spec, device)
        click.echo(f"{spec.label:18} {spec.shape:9} K={r['k']:<3} {'ok' if r['ok'] else 'WRONG'} "
                   f"({r['wrong']} of {r['n']} outputs wrong)")
        for w in r["first_wrong"][:3]:
            click.echo(f"    tile {w['tile']} row {w['row']} col {w['col']}: got {w['got']}, want {w['want']}")
        results.append(r)
    _save(save, {"tool": "tcsmt hwcheck --layouts", "tcsmt_commit": git_commit(), "device": device.info(),
                 "layouts": results})
    return 1 if any(r.get("ok") is False for r in results) else 0


def _first_outputs(file) -> dict[str, str] | None:
    """The outputs a discriminate/query record predicts for its first input, per model (None: not recorded)."""
    from tcsmt.io.load import read_json

    if not str(file).endswith(".json"):
        return None
    data = read_json(file, "JSON input file")
    items = data.get("inputs") if isinstance(data, dict) else None
    if isinstance(items, list) and items and isinstance(items[0], dict) and isinstance(items[0].get("outputs"), dict):
        return {str(k): str(v) for k, v in items[0]["outputs"].items()}
    return None


def _bundle(device_spec, file, data: dict, save, show, njobs) -> int:
    """Every question of a decision bundle (tcsmt/solve/decisions.py): which reading the GPU confirms.

    Exit 0: every question that could run confirmed its primary reading; 1: some question's primary
    reading was refuted; 2: no question could run here (no GPU, or no kernel for any of its paths)."""
    from tcsmt.hwcheck.check import ModelRunner, check_inputs, format_example, git_commit, inputs_from_doc, resolve_models
    from tcsmt.hwcheck.paths import NoKernel

    questions = data.get("questions")
    if not isinstance(questions, list) or not questions:
        raise TcsmtError(f"{file}: a decision bundle needs a non-empty 'questions' list")
    runnable, skipped, plan = [], [], []
    for i, q in enumerate(questions):
        where = f"{file}: questions[{i}]"
        if not isinstance(q, dict) or not isinstance(q.get("primary"), str) or not isinstance(q.get("hypothesis"), str):
            raise TcsmtError(f"{where} needs string keys primary and hypothesis")
        title = f"[{q.get('class', '?')}] {q['primary']} vs {q['hypothesis']}"
        if not q.get("inputs"):
            skipped.append((title, f"no input separates them ({q.get('status', 'no inputs')}): nothing to run"))
            continue
        try:
            inputs = inputs_from_doc(where, q)
        except NoKernel:
            instr = q.get("instr")
            instr = ", ".join(instr) if isinstance(instr, list) else instr
            skipped.append((title, f"hwcheck has no kernel for {q.get('in_fmt')} -> {q.get('out_fmt')} ({instr}) "
                                   "yet; the inputs and each reading's output are in the file"))
            continue
        models = resolve_models([q["primary"], q["hypothesis"]], inputs.spec)
        runnable.append((title, q, inputs, models))
        plan += _plan_lines(title, inputs.spec, len(inputs.a), q["inputs"][0].get("outputs"))
    for title, why in skipped:
        plan.append(f"skip {title}: {why}")
    if not runnable:
        for title, why in skipped:
            click.echo(f"skip {title}: {why}")
        raise TcsmtError(f"{file}: no question can run through tcsmt hwcheck (nothing was run)")
    raw_gpus = data.get("gpus")
    gpus = [str(g) for g in raw_gpus] if isinstance(raw_gpus, list) else []
    plan.insert(0, f"{file}: the open questions of {data.get('arch', '?')} ({', '.join(gpus)}): "
                   "meaningful on a GPU of that generation only")
    device = _device_or_plan(device_spec, plan)
    click.echo(f"{plan[0]}; this device: {device.name}")
    results, status = [], 0
    with ModelRunner(njobs) as runner:
        for title, q, inputs, models in runnable:
            why = device.supports(inputs.spec)
            if why:
                skipped.append((title, why))
                continue
            t_primary, t_hyp = check_inputs(device, inputs, models, runner, keep=max(show, 1))
            if not t_primary.mismatches and t_hyp.mismatches:
                verdict = f"settled: the primary reading {q['primary']}"
            elif t_primary.mismatches and not t_hyp.mismatches:
                verdict = f"settled: the hypothesis {q['hypothesis']} (the model file's primary reading is refuted)"
                status = 1
            else:
                verdict = "neither reading fits every input" if t_primary.mismatches else "not separated here"
                status = max(status, 1 if t_primary.mismatches else 0)
            click.echo(f"{title} on {inputs.spec.label}: {verdict} ({t_primary.mismatches} / {t_hyp.mismatches} "
                       f"of {t_primary.checked} outputs differ from {q['primary']} / {q['hypothesis']})")
            for ex in t_primary.examples[:show]:  # where the primary reading is refuted
                for line in format_example(ex):
                    click.echo(line)
            results.append({"question": title, "verdict": verdict, "models": [t_primary.as_json(), t_hyp.as_json()]})
    for title, why in skipped:
        click.echo(f"skipped {title}: {why}")
    if not results:
        raise TcsmtError(f"{file}: no question could run on {device.name}")
    _save(save, {"tool": "tcsmt hwcheck (decision bundle)", "file": str(file), "tcsmt_commit": git_commit(),
                 "device": device.info(), "arch": data.get("arch"), "results": results,
                 "skipped": [{"question": t, "why": w} for t, w in skipped]})
    return status
