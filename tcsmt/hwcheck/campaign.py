"""A whole-architecture campaign: layout checks, then random checks of every path.

``python -m tcsmt.hwcheck.campaign --arch hopper --n 1000000 --out FILE.json``
runs, on the CUDA device (or ``--device model:SPEC``), the integer layout
check of every path the device has, then ``n`` random dot products per
distribution for every path of the architecture that the device can run,
comparing with the architecture's model (and every ``--extra`` spec that
names a model of that path: a named hypothesis exists on its own path only).  It stops
starting new paths once ``--budget`` seconds have passed, and writes one JSON
document with everything (the same per-path records as ``tcsmt hwcheck
--random --save``).
"""
from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.check import ModelRunner, default_jobs, git_commit, resolve_models, result_json, run_random, summary_table
from tcsmt.hwcheck.device import get_device
from tcsmt.hwcheck.dists import DISTRIBUTIONS, generate
from tcsmt.hwcheck.paths import PATHS
from tcsmt.hwcheck.runner import check_layout
from tcsmt.io import files, load
from tcsmt.io.limits import GPU_K, JOBS, RANDOM_N
from tcsmt.io.options import NON_NEGATIVE_FLOAT, SEED, bounded_int
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--arch", required=True)
@click.option("--n", type=bounded_int(RANDOM_N), default=100_000, show_default=True, help="dot products per path and distribution")
@click.option("--k", type=bounded_int(GPU_K, "products per dot product on a GPU", lower=0), default=0, show_default=True, help="K (0: one instruction); rounded up to the path's k")
@click.option("--paths", default="", help="comma-separated labels such as f16.f32/mma (default: all)")
@click.option("--dists", default=",".join(DISTRIBUTIONS), show_default=True)
@click.option("--extra", multiple=True, help="more model specs to compare (repeatable)")
@click.option("--extra-file", default="", help="file with more model specs, one per line (# comments)")
@click.option("--device", default="cuda", show_default=True)
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--jobs", type=bounded_int(JOBS, "worker processes", lower=0), default=0, show_default=True, help="model worker processes (0: one per core)")
@click.option("--budget", type=NON_NEGATIVE_FLOAT, default=0.0, help="seconds after which no new path is started (0: none)")
@click.option("--no-layouts", is_flag=True, help="skip the fragment layout checks")
@click.option("--out", required=True, help="the campaign's JSON document")
@click.option("--dump", default="", help="also save raw tiles and device outputs of every path and distribution to this .npz")
@click.option("--dump-tiles", type=bounded_int(1 << 20), default=256, show_default=True, help="tiles per path and distribution in --dump")
@click.option("--force", is_flag=True, help="overwrite --out and --dump (regular files only)")
def campaign_cmd(**options) -> int:
    return _run(SimpleNamespace(**{**options, "extra": list(options["extra"])}))


def _run(args) -> int:
    t0 = time.perf_counter()
    out = files.output(args.out, args.force)  # claimed before the device runs; rewritten after every path
    dump_out = files.output(args.dump, args.force) if args.dump else None
    dev = get_device(args.device)
    from tcsmt.arith.registry import find_arch

    arch = find_arch(args.arch)
    if args.extra_file:
        lines = load.read_text(args.extra_file, "list of extra model specs", 1 << 20).splitlines()
        args.extra += [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]
    want = {s.strip() for s in args.paths.split(",") if s.strip()}
    doc = {"tool": "tcsmt.hwcheck.campaign", "arch": arch.name, "tcsmt_commit": git_commit(),
           "device": dev.info(), "n_per_distribution": args.n, "seed": args.seed, "layouts": [], "paths": []}
    if not args.no_layouts:
        for spec in PATHS.values():
            if dev.supports(spec) is None:
                r = check_layout(spec, dev)
                print(f"layout {spec.label:16} {'ok' if r['ok'] else 'WRONG'} ({r['wrong']}/{r['n']})",
                      file=sys.stderr, flush=True)
                doc["layouts"].append(r)
    bad_layout = {r["path"] for r in doc["layouts"] if not r["ok"]}
    dists = [d for d in args.dists.split(",") if d]
    status = 0
    dump: dict[str, np.ndarray] = {}
    with ModelRunner(args.jobs or default_jobs()) as runner:
        for spec in _hardware_paths(arch):
            if want and spec.label not in want:
                continue
            why = dev.supports(spec)
            if why or spec.label in bad_layout:
                doc["paths"].append({"path": spec.label, "skipped": why or "fragment layout check failed"})
                continue
            if args.budget and time.perf_counter() - t0 > args.budget:
                doc["paths"].append({"path": spec.label, "skipped": "time budget used up"})
                continue
            K = max(spec.instr_k, -(-args.k // spec.instr_k) * spec.instr_k) if args.k else spec.check_k
            models = resolve_models([arch.name], spec) + _extras_for(args.extra, spec)
            runner.warm_up(models[0][1])
            results = []
            for d in dists:
                results.append(run_random(dev, spec, models, d, args.n, K, args.seed, runner,
                                          progress=lambda m: print(m, file=sys.stderr, flush=True)))
            rec = result_json(dev, spec, results, args.seed)
            rec.pop("device", None)
            if spec.library:
                doc.setdefault("library", rec.get("library"))
            rec.pop("tcsmt_commit", None)
            rec["k"] = K
            doc["paths"].append(rec)
            print(f"{spec.label} ({spec.shape}, K = {K})", flush=True)
            for line in summary_table(spec, results):
                print("  " + line, flush=True)
            if any(t.mismatches for r in results for t in r.tallies):
                status = 1
            if dump_out is not None:  # args.dump given
                for d in dists:
                    rng = np.random.default_rng([args.seed, DISTRIBUTIONS.index(d), 0])
                    a, b, c = generate(d, spec, args.dump_tiles, K, rng)
                    prefix = f"{spec.in_fmt}.{spec.out_fmt}.{spec.instr}.{d}"
                    dump.update({prefix + ".a": a, prefix + ".b": b, prefix + ".c": c, prefix + ".d": dev.run_tiles(spec, a, b, c)})
                dump_out.write_with(lambda fh: np.savez_compressed(fh, **dump))  # type: ignore[arg-type]  # numpy's stub types **kwds as its own keywords
            out.write_json(doc)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    doc["device"] = dev.info()
    out.write_json(doc)
    return status


def _hardware_paths(arch) -> list:
    """The hardware paths of the architecture's model paths."""
    keys = [(p.params.in_fmt, p.params.out_fmt, p.params.instr) for p in arch.paths]
    return [PATHS[k] for k in keys if k in PATHS]


def _extras_for(extra: list[str], spec) -> list:
    """The --extra specs that name a model of this path (a named hypothesis exists on one path only)."""
    out = []
    for s in extra:
        try:
            out += resolve_models([s], spec)
        except TcsmtError:
            continue
    return out


main = script_main(campaign_cmd, "python -m tcsmt.hwcheck.campaign")

if __name__ == "__main__":
    sys.exit(main())
