"""Fresh GPU outputs of calls the plan catalogs answer, replayed bit for bit: the catalogs' answers checked on the GPU.

    python -m tools.library.catalog_samples pick --gpu G [--before OLD.sqlite | --refused REGEX] [--calls N] -o LIST.json
    python3 tools/device/catalog_sample_run.py LIST.json RAW.json.gz [SECONDS]     (on the GPU: torch, tcsmt)
    python -m tools.library.catalog_samples replay RAW.json.gz --gpu G [--plans DIR] [--json SUMMARY.json]
    python -m tools.library.catalog_samples as-more RAW.json.gz --kernel-regex RE -o MORE.json.gz

``as-more`` writes the calls of RAW whose one kernel (copies aside) matches RE as sampled calls that
``python -m tools.library.decide --more`` asks its questions of (``runs`` and ``calls``, the fields
``tools/device/library_plans.py`` writes), each with ``split_k`` 1: RE must name kernels that split nothing (one
launch, no reduction kernel, cuBLASLt's trace S = 1 in the recordings).

``pick`` draws calls that the catalog of ``G`` (``models/library/<G>_cublas13_catalog.sqlite``, or ``--catalog``)
answers: one stratum per (plan class: the kernel class a catalog plan keeps, call family: op, dtypes, flags, operand
layouts, settings), one call per stratum at a token count drawn inside one of its runs (seeded), strata drawn
uniformly until ``--calls``; only calls small enough to make their inputs quickly ((M + N) K batch <= 2^25) and
under settings a running process can switch (the BLAS library and torch's split-K switch: environment variables
act at process start).  ``--before OLD`` keeps only the calls OLD refuses (what a rebuilt catalog newly answers).
``--refused REGEX`` draws refused calls instead, one stratum per (refusal reason matching REGEX, call family): the
GPU runs that a refusal's open question is decided from (``as-more``, then ``tools.library.decide --more``).
Each call gets an input distribution (``normal``, ``wide``, ``cancel`` in turn; fp16 outputs never ``wide``) and
a seed.

``replay`` asks the library (:func:`tcsmt.library.lookup.answer`: the shipped tables, then catalogs, and the user
folders ``--plans`` only) for each call's plan, rebuilds its inputs (:func:`tcsmt.hwcheck.library_calls.make_inputs`) and
evaluates its first :data:`MAX_SAMPLES` sampled outputs under the plan (:func:`tcsmt.library.replay.replay_call`): a call is bit-exact when
every sample equals the GPU's bits.  A call the library now refuses is counted apart, with its reason.
"""
from __future__ import annotations

import collections
import gzip
import json
import random
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.library_calls import make_inputs
from tcsmt.io.load import read_json
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.catalog import call_at, read_plans
from tcsmt.library.families import kernel_key
from tcsmt.library.lookup import answer, parse_record_spec, record_spec
from tcsmt.library.plans import Call, plans_dir
from tcsmt.library.recordings import CALL_FIELDS
from tcsmt.library.replay import replay_call
from tcsmt.library.settings import parse_settings_key

MAX_SAMPLES = 256
"""Samples replayed per call (the first ones the device kept: for bmm, its first and last batches first)."""
MAX_ELEMENTS = 1 << 25
"""Largest (M + N) K batch of a picked call: its inputs are made on the GPU host's CPU in seconds."""
SWITCHABLE = {"blas", "reduced"}
"""Settings fields a running process can change (:func:`tcsmt.hwcheck.stamp.apply_setting`)."""
DISTS = ("normal", "wide", "cancel")
SHOWN = 40


def _switchable(settings: str) -> bool:
    return set(parse_settings_key(settings)) <= SWITCHABLE


def _size_ok(c: Call) -> bool:
    return (c.M + c.N) * c.K * c.batch <= MAX_ELEMENTS


def _answered(db: sqlite3.Connection, refused: str | None = None) -> tuple[dict[int, list[Any]], dict[int, str | None]]:
    """The catalog's call families by id, and each plan's class: its kernels where it answers, None where it refuses
    (with ``refused``, a regular expression: the reason where it matches, None otherwise)."""
    families = {int(i): json.loads(k) for i, k in db.execute("SELECT id, key FROM families")}
    cls: dict[int, str | None] = {}
    for pid, f in read_plans(db).items():
        if refused is not None:
            cls[pid] = str(f["why"]) if "why" in f and re.search(refused, str(f["why"])) else None
        else:
            cls[pid] = None if "why" in f else " + ".join(f.get("kernels") or ["no kernel"])
    return families, cls


def pick(catalog: Path, n_calls: int, seed: int, before: Path | None = None,
         refused: str | None = None) -> list[dict[str, Any]]:
    """The list of calls (spec, dist, seed, stratum): module docstring."""
    if not catalog.is_file():
        raise TcsmtError(f"no plan catalog {catalog}")
    if refused is not None and before is not None:
        raise TcsmtError("--refused and --before do not combine (one draws refused calls, the other answered ones)")
    db = sqlite3.connect(f"file:{catalog}?mode=ro", uri=True)
    families, cls = _answered(db, refused)
    old = None
    if before is not None:
        if not before.is_file():
            raise TcsmtError(f"no plan catalog {before}")
        old = sqlite3.connect(f"file:{before}?mode=ro", uri=True)
        _, old_cls = _answered(old)
        old_fam = {json.dumps(json.loads(k)): int(i) for i, k in old.execute("SELECT id, key FROM families")}
    rng = random.Random(seed)
    strata: dict[tuple[str, str], list[tuple]] = collections.defaultdict(list)
    rows = db.execute("SELECT family, vary, d1, d2, lo, hi, step, plan FROM runs ORDER BY family, vary, d1, d2, lo")
    for fam, vary, d1, d2, lo, hi, step, pid in rows:
        if cls[pid] is None or not _switchable(families[fam][-1]):
            continue
        strata[(cls[pid], json.dumps(families[fam]))].append((fam, vary, d1, d2, lo, hi, step))
    keys = sorted(strata)
    rng.shuffle(keys)
    out: list[dict[str, Any]] = []
    for key in keys:
        if len(out) >= n_calls:
            break
        runs = strata[key]
        for _ in range(8):  # a few draws for a call small enough (and, with OLD, refused there)
            fam, vary, d1, d2, lo, hi, step = runs[rng.randrange(len(runs))]
            t = lo + step * rng.randrange((hi - lo) // step + 1)
            c = call_at(families[fam], vary, d1, d2, t)
            if not _size_ok(c):
                continue
            if old is not None and not _refused_in(old, old_fam, old_cls, families[fam], vary, d1, d2, t):
                continue
            d = DISTS[len(out) % len(DISTS)]
            if d == "wide" and c.out_dtype == "float16":
                d = "normal"
            out.append({"spec": record_spec(c), "dist": d, "seed": 9000 + len(out), "stratum": list(key)})
            break
    return out


def _refused_in(db: sqlite3.Connection, fam_ids: dict[str, int], cls: dict[int, str | None], family: list[Any],
                vary: str, d1: int, d2: int, t: int) -> bool:
    """Whether catalog ``db`` refuses (or does not hold) the call of ``family`` at ``t``."""
    fid = fam_ids.get(json.dumps(family))
    if fid is None:
        return True
    # runs of one family and dimensions may interleave (steps > 1 with other residues): the run holding t, as
    # Catalog.find takes it, not the one of the nearest start (which took answered calls for refused ones)
    row = db.execute("SELECT plan FROM runs WHERE family = ? AND vary = ? AND d1 = ? AND d2 = ? AND lo <= ? AND "
                     "hi >= ? AND (? - lo) % step = 0", (fid, vary, d1, d2, t, t, t)).fetchone()
    return row is None or cls[int(row[0])] is None


def sampled_call(item: dict[str, Any]) -> tuple[Call, dict[str, Any]]:
    """One sampled call of a ``catalog_sample_run.py`` file: its :class:`Call`, and the call as
    :func:`tcsmt.library.replay.replay_call` and :func:`make_inputs` take it (fields, ``dist``, the GPU's samples)."""
    call = parse_record_spec(item["spec"])
    vc = {k: getattr(call, k) for k in CALL_FIELDS}
    vc.update(dist=item["dist"], samples=item["samples"])
    return call, vc


def replay(raw: dict[str, Any], gpu: str, plans: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every run call's samples under the library's plan (the shipped tables and catalogs, and the folders
    ``plans``): module docstring."""
    tally: collections.Counter = collections.Counter()
    by_class: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    shown: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for item in raw.get("calls", []):
        call, vc = sampled_call(item)
        stratum = str(item.get("stratum", ["?"])[0])
        tally["calls"] += 1
        try:
            ans = answer(call, gpu, plans_dirs=plans)
        except TcsmtError as exc:
            tally["refused"] += 1
            refused.append({"spec": item["spec"], "why": str(exc)[:300]})
            continue
        r = replay_call(vc, make_inputs(vc, int(item["seed"])), ans.plan, MAX_SAMPLES)
        cell = by_class[stratum]
        cell["calls"] += 1
        cell["outputs"] += r.checked
        cell["outputs_differ"] += len(r.mismatches)
        tally["answered"] += 1
        tally["outputs"] += r.checked
        tally["outputs_differ"] += len(r.mismatches)
        if r.run_error:
            tally["run_errors"] += 1
        exact = not r.mismatches and not r.run_error and r.checked > 0
        tally["bit_exact_calls"] += exact
        cell["bit_exact_calls"] += exact
        if not exact and len(shown) < SHOWN:
            shown.append({"spec": item["spec"], "dist": item["dist"], "seed": item["seed"], "kind": ans.kind,
                          "kernels_run": item.get("kernels"), "checked": r.checked, "differ": len(r.mismatches),
                          "examples": [list(m) for m in r.mismatches[:3]], "run_error": r.run_error[:200]})
    return {"gpu": gpu, "device": raw.get("stamp", {}), "totals": dict(tally),
            "failed_on_device": len(raw.get("failed", [])), "not_run": len(raw.get("not_run", [])),
            "by_plan_class": {k: dict(v) for k, v in sorted(by_class.items())}, "not_bit_exact": shown,
            "refused_now": refused[:SHOWN]}


@click.group(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
def samples_cmd() -> None:
    pass


@samples_cmd.command("pick", help="draw calls the catalog answers (or refuses for a reason), one per plan class and "
                                  "call family")
@click.option("--gpu", required=True, help="the catalog's GPU (models/library/<gpu>_cublas13_catalog.sqlite)")
@click.option("--catalog", type=click.Path(dir_okay=False, path_type=Path), default=None, help="another catalog file")
@click.option("--before", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="keep only calls this (older) catalog refuses")
@click.option("--refused", default=None, metavar="REGEX",
              help="draw calls the catalog refuses with a reason matching REGEX instead (the GPU runs that decide "
                   "a refusal's open question)")
@click.option("--calls", "n_calls", type=click.IntRange(1, 100000), default=400, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def pick_cmd(gpu: str, catalog: Path | None, before: Path | None, refused: str | None, n_calls: int, seed: int,
             out: Path) -> int:
    cat = catalog or plans_dir() / f"{gpu}_cublas13_catalog.sqlite"
    if refused is not None:
        try:
            re.compile(refused)
        except re.error as exc:
            raise TcsmtError(f"--refused: not a regular expression: {exc}") from None
    calls = pick(cat, n_calls, seed, before, refused)
    what = (f"calls the {cat.name} catalog refuses for a reason matching {refused!r}" if refused else
            f"calls the {cat.name} catalog answers" + (f" and {before.name} refuses" if before else ""))
    doc = {"what": what,
           "command": "python -m tools.library.catalog_samples " + " ".join(sys.argv[1:]), "catalog": cat.name,
           "calls": calls}
    out.write_text(json.dumps(doc, indent=0) + "\n")
    print(f"{len(calls)} calls written to {out}")
    return 0


@samples_cmd.command("replay", help="evaluate the device's sampled outputs under the library's plans")
@click.argument("raw", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--gpu", required=True, help="whose plans to ask (the GPU the samples ran on)")
@click.option("--plans", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="a folder of user catalogs to ask too (a recording made on the GPU: tcsmt record --out)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def replay_cmd(raw: Path, gpu: str, plans: tuple[str, ...], json_out: Path | None) -> int:
    doc = json.load(gzip.open(raw, "rt")) if raw.suffix == ".gz" else read_json(raw, "device samples")
    res = replay(doc, gpu, tuple(plans))
    res["command"] = "python -m tools.library.catalog_samples " + " ".join(sys.argv[1:])
    print(json.dumps(res["totals"]))
    for s in res["not_bit_exact"]:
        print(f"  not bit-exact: {s['spec']} ({s['dist']}): {s['differ']} of {s['checked']} {s['run_error']}")
    if json_out is not None:
        json_out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


def as_more(raw: dict[str, Any], kernel_regex: str) -> dict[str, Any]:
    """The calls of ``raw`` whose one kernel matches ``kernel_regex``, as ``decide --more`` reads sampled calls."""
    import ast

    pattern = re.compile(kernel_regex)
    stamp = raw.get("stamp", {})
    gpu = stamp.get("gpu_name") or stamp.get("gpu")
    calls = []
    for item in raw.get("calls", []):
        kernels = item["kernels"] if isinstance(item["kernels"], list) else ast.literal_eval(item["kernels"])
        # as the recordings write them (the profiler's "void " and parameter list dropped), which the decisions' and
        # families' kernel patterns are written against
        kernels = [kernel_key(k) for k in kernels if not k.startswith("Memcpy")]
        if len(kernels) != 1 or not pattern.search(kernels[0]):
            continue
        call, vc = sampled_call(item)
        calls.append({**{k: v for k, v in vc.items() if k != "samples"}, "settings": call.settings,
                      "seed": int(item["seed"]), "samples": item["samples"], "kernels": kernels, "split_k": 1,
                      "lt_algo": [], "reduction_scheme": None, "gpu": gpu, "setting": "default"})
    run = {"gpu": gpu, **{k: stamp.get(k) for k in ("torch", "cuda", "cublas", "cublaslt")}, "driver": stamp.get("driver"),
           "setting": "default", "calls": len(calls), "rejected": 0}
    return {"what": f"sampled calls of {raw.get('command', '?')} on kernels matching {kernel_regex}",
            "runs": [run], "command": "python -m tools.library.catalog_samples " + " ".join(sys.argv[1:]),
            "generator": "tools/device/catalog_sample_run.py", "method": "tcsmt/hwcheck/library_calls.py: make_inputs",
            "calls": calls}


@samples_cmd.command("as-more", help="write sampled calls of one kernel class as decide --more reads them")
@click.argument("raw", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kernel-regex", required=True, help="the kernel class (one kernel that splits nothing)")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def as_more_cmd(raw: Path, kernel_regex: str, out: Path) -> int:
    doc = json.load(gzip.open(raw, "rt")) if raw.suffix == ".gz" else read_json(raw, "device samples")
    res = as_more(doc, kernel_regex)
    if out.exists():
        raise TcsmtError(f"{out} exists: not overwritten")
    with gzip.open(out, "wt") as f:
        json.dump(res, f)
    print(f"{len(res['calls'])} calls -> {out}")
    return 0


main = script_main(samples_cmd, "python -m tools.library.catalog_samples")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
