"""Build a plan catalog (:mod:`tcsmt.library.catalog`) from raw device recordings.

    python -m tcsmt.library.catalog_build REC.json.gz [REC ...] [--rules RULES.json] [--decisions DEC.json]
        [--same-as PLANS.json --confirmed CONF.json [--same-as-recording REC ...]] [--probes PROBES.json]
        [--gpu NAME] -o OUT.sqlite [--force]

Each recording (``tcsmt record``, ``tools/device/record_plans.py run``: a header with the GPU, its SM count, the
driver, the library versions and the settings; interned kernel names, cuBLASLt trace summaries and plans; tasks of
calls, each a run of token counts or a list) is read call by call; every distinct recorded plan of a call family is
converted once by the plan tables' own conversion (:class:`tcsmt.library.call_plans.ConvertContext`, with the
rules of :mod:`tcsmt.library.rules`: the shipped ones unless ``--rules``/``--decisions`` name others, and for a GPU
that borrows another's rules ``--same-as``/``--confirmed``; ``--same-as-recording``: that GPU's recordings, whose
plans whose kernels, split-K count and reductionScheme that GPU also ran borrow its rules), into plan fields or the reason it has none (also where
its fields do not load or the rules are not certain at its shape and layout: ``rules.checked_entry``).  The GPU is
the recordings' (``--gpu`` names another); they must agree in their stamps.  ``--progress`` prints a line per
recording (a build from every shipped recording takes minutes); an interrupted build leaves the catalog it would
replace as it was (it writes a temporary file and renames it at the end).
"""
from __future__ import annotations

import base64
import json
import re
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from tcsmt.arith.registry import gpu_of_device
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.stamp import STAMP_FIELDS
from tcsmt.io.options import progress_option
from tcsmt.io.progress import Progress
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.call_plans import ConvertContext
from tcsmt.library.catalog import (
    KEY_FORMAT,
    PLAN_DICT,
    SCHEMA,
    VARIES,
    family_text,
    fixed_dims,
    pack_plan,
    plan_dictionary,
)
from tcsmt.library.catalog_runs import plan_runs, progressions  # noqa: F401 (progressions: re-exported)
from tcsmt.library.checks import make_call
from tcsmt.library.families import SAME_KEYS, class_of, gemv_kernel
from tcsmt.library.plans import OPS, Call
from tcsmt.library.recordings import (  # noqa: F401
    CALL_FIELDS,
    DEFAULTS,
    RecordedPlans,
    raw_call,
    read_recording,
    recorded_calls,
    recorded_signature,
    setting_of,
    stamp_of,
    token_counts,
)
from tcsmt.library.rules import RULES_NAME, SEGMENT_K, VariantRules, checked_entry, classed, k_tiled, make_context

NOT_RECORDED = "not recorded"

def _recorded_there(ctx: ConvertContext, tmpl: dict[str, Any], vary: str, t: int) -> bool:
    """Whether the GPU whose rules are borrowed recorded this very call (its entry then depends on that record)."""
    c = {**tmpl, **dict.fromkeys(vary, t)}
    return tuple(c.get(k) for k in SAME_KEYS) in ctx.ref


def _unsourced(text: str) -> str:
    d = json.loads(text)
    d.pop("sources", None)
    return json.dumps(d, sort_keys=True)


def kernel_class(call: dict[str, Any], ctx: ConvertContext) -> str:
    """What a catalog keeps of a call's kernels: the plan class its slice and reduction rules come from
    (:func:`class_of`: ``family NAME`` or ``no split: nvjet_sm90_KIND``), else the kernels' names less their tile
    fields (the tile changes with the shape and not the arithmetic of a plan without split-K)."""
    cls = class_of(call, ctx.families)
    if cls:
        return cls
    return " + ".join(sorted({re.sub(r"_\d+x\d+.*$", "", k) for k in call.get("kernels") or []})) or "no kernel"


def convert_one(ctx: ConvertContext, name: str, tmpl: dict[str, Any], vary: str, t: int, plan: list[Any],
                tables: dict[str, list], probed: VariantRules | None = None, same_on: str = "") -> dict[str, Any] | None:
    """The catalog entry of one recorded call: its plan fields (kernels as their class, sources naming the
    recording and the rules), or {'why': ...}; None for a call torch refuses that the library refuses itself."""
    c = raw_call(tmpl, vary, t, plan, tables)
    try:  # a call the library's own checks refuse first needs no catalog entry, whatever the recorder did
        if c.get("torch_error"):
            make_call(c["op"], c["M"], c["N"], c["K"], a_dtype=c["a_dtype"], b_dtype=c["b_dtype"],
                      out_dtype=c["out_dtype"], batch=c["batch"], alpha=c["alpha"], beta=c["beta"], bias=c["bias"],
                      tf32=c["tf32"], scale=c["scale"], fast_accum=c["fast_accum"])
    except TcsmtError:
        return None
    if c.get("torch_error") and "make_fn:" in str(c["torch_error"]):  # the recorder's own failure
        return {"why": f"{NOT_RECORDED}: the recorder could not make the call ({str(c['torch_error'])[:200]})"}
    if c.get("torch_error") and "OutOfMemoryError" in str(c["torch_error"]):  # the recorder's buffers, not torch
        return {"why": f"{NOT_RECORDED}: the recorder ran out of device memory ({str(c['torch_error'])[:120]})"}
    if c.get("torch_error"):
        msg = " ".join(str(c["torch_error"]).split())[:300]
        return {"why": f"torch refuses this call: {msg}"}
    if c.get("capture_error"):
        return {"why": f"{NOT_RECORDED}: the call failed under capture ({str(c['capture_error'])[:200]})"}
    ident, fields, why = ctx.entry(name, 0, c, same_on=same_on)
    if why:
        return {**ident, "why": classed(why, kernel_class(c, ctx))}
    cls = kernel_class(c, ctx)
    srcs = [f"{name}: split_k {c['split_k']} from cuBLASLt's trace of the call under CUDA graph capture; "
            f"kernels of class {cls}", *(classed(x, cls) for x in fields.get("sources", [])[1:])]
    entry = {**ident, **{k: v for k, v in fields.items() if k not in ("kernels", "sources")},
             "kernels": [cls], "sources": srcs}
    return checked_entry(entry, ident, [c["M"], c["N"], c["K"], c["batch"]], c["kernels"], ctx.gpu, name, probed,
                         blocks=c.get("blocks"), b_t=bool(c.get("b_t")), dealing=c.get("gemv_dealing"),
                         segment_k=c.get("segment_k_launch"))


def build(recordings: Sequence[tuple[str, dict[str, Any]]], ctx: ConvertContext, out: Path,
          sources: Sequence[str], probed: VariantRules | None = None,
          progress: Callable[[str], None] | None = None, same_recorded: RecordedPlans | None = None) -> dict[str, Any]:
    """Write the catalog of ``recordings`` to ``out`` (a new file); return its counts.  Neighbouring runs of one
    call family whose entries are equal are merged; a run over K is cut where its entry changes (a K-dependent
    grain).  With ``probed`` (:func:`tcsmt.library.rules.variant_rules`), a split-K plan takes the slice rule read
    for its kernels' layout, and one whose layout no rule was read for is refused.  With ``same_recorded`` (the
    recordings of the GPU whose rules ``ctx`` borrows), a call whose kernels, split-K count and reductionScheme that
    GPU also ran (on any call) is converted by its rules, as a call of its plan file is."""
    stamp: dict[str, Any] | None = None
    for name, rec in recordings:
        s = stamp_of(rec, name)
        if stamp is None:
            stamp = s
        elif s != stamp:
            diff = [k for k in STAMP_FIELDS if s.get(k) != stamp.get(k)]
            raise TcsmtError(f"{name}: recorded on another GPU or library version than the first recording "
                             f"({', '.join(f'{k} {s.get(k)!r} vs {stamp.get(k)!r}' for k in diff)})")
    if stamp is None:
        raise TcsmtError("no recordings given")
    plan_ids: dict[str, int] = {}
    family_ids: dict[str, int] = {}
    # (family id, vary, d1, d2) -> {token count: plan id}
    cover: dict[tuple[int, str, int, int], dict[int, int]] = {}
    calls = 0
    skipped: dict[str, int] = {}
    failed: set[int] = set()  # entries of calls that failed under capture: any recording of the call wins
    for name, rec in recordings:
        if progress is not None:
            progress(f"{name}: converting ({calls} calls read so far, {len(plan_ids)} distinct entries)")
        tables = rec["tables"]
        converted: dict[tuple[int, int, int, int, str], int] = {}
        same_pid: dict[int, str] = {}  # plan -> the recording of the borrowed GPU that ran its kernels and S
        for tmpl, vary, ts, pid in recorded_calls(rec):
            if same_recorded is not None and pid not in same_pid:
                same_pid[pid] = same_recorded.recorded_with(recorded_signature(rec, pid))
            if tmpl["op"] not in OPS:  # recorded, but no library model of the op (e.g. baddbmm): left out, counted
                skipped[tmpl["op"]] = skipped.get(tmpl["op"], 0) + len(ts)
                continue
            settings = setting_of(rec, tmpl["a_dtype"])
            if tmpl["op"] in ("linear", "scaled_mm"):
                tmpl = {**tmpl, "b_t": False}  # the op fixes the layout (Call.b_t)
            t0 = ts[0]
            a = tmpl["a_dtype"]
            dims = {d: tmpl[d] for d in "MNK"}
            if vary not in ("M", "K"):  # a sequence length: every dimension the template names by it
                vary = "".join(d for d in "MNK" if dims[d] == vary)
            for d in vary:
                dims[d] = None
            if vary not in VARIES:
                raise TcsmtError(f"{name}: a run varies {vary or 'nothing'}, not one of {', '.join(VARIES)}")
            tmpl = {**tmpl, **dims}
            probe = Call(tmpl["op"], int(tmpl["M"] or t0), int(tmpl["N"] or t0), int(tmpl["K"] or t0), a,
                         tmpl["b_dtype"] or a, tmpl["out_dtype"] or a, int(tmpl["batch"]), float(tmpl["alpha"]),
                         float(tmpl["beta"]), bool(tmpl["bias"]), bool(tmpl["tf32"]), tmpl["scale"] or None,
                         bool(tmpl["fast_accum"]), bool(tmpl["a_t"]), bool(tmpl["b_t"]), settings)
            fam = family_ids.setdefault(family_text(probe), len(family_ids) + 1)
            d1, d2 = fixed_dims(probe, vary)
            slot = cover.setdefault((fam, vary, d1, d2), {})
            plan = tables["plans"][pid]
            # an entry depends on the token count through a K-dependent grain or CUTLASS tile (vary K), a GEMV order
            # (read per call shape: any varied dimension, gemv_rules.dealt_per_call), the other GPU's record (borrowed
            # rules), a segment-K launch (its words are the shape's), or whether the library refuses a call torch (or
            # the recorder) failed on
            ks, refused = [tables["kernels"][k] for k in plan[0]], plan[rec["plan_fields"].index("torch_error")] is not None
            per_t = refused or gemv_kernel(ks) or any(SEGMENT_K.search(k) for k in ks) or \
                ("K" in vary and (int(plan[5] or 1) > 1 or k_tiled(ks)))
            for t in ts:
                borrowed = bool(ctx.same_as) and _recorded_there(ctx, tmpl, vary, t)
                same_on = same_pid.get(pid, "")
                key = (fam, pid, d1, d2, same_on)
                entry = convert_one(ctx, name, tmpl, vary, t, plan, tables, probed, same_on) \
                    if (per_t or borrowed or key not in converted) else {}
                if entry is None:
                    continue
                if entry:
                    text = json.dumps(entry, sort_keys=True, separators=(",", ":"))
                    pid_t = plan_ids.setdefault(text, len(plan_ids) + 1)
                    if entry.get("why", "").startswith(NOT_RECORDED):
                        failed.add(pid_t)
                    if borrowed:  # this call's own entry (the other GPU recorded it): not for its neighbours
                        if t not in slot:
                            slot[t] = pid_t
                            calls += 1
                        continue
                    converted[key] = pid_t
                if t in slot and slot[t] in failed and converted[key] not in failed:
                    del slot[t]  # a call that failed under capture and was recorded again
                    calls -= 1
                if t in slot and slot[t] != converted[key] and converted[key] not in failed:
                    texts = {i: x for x, i in plan_ids.items()}
                    if _unsourced(texts[slot[t]]) != _unsourced(texts[converted[key]]):
                        raise TcsmtError(f"{name}: two recordings disagree on {family_text(probe)} at {vary} = {t} "
                                         f"(d1, d2 = {d1}, {d2}): {texts[slot[t]]} vs {texts[converted[key]]}")
                if t not in slot:  # a call two recordings hold counts once
                    slot[t] = converted[key]  # the first recording's entry (another's agrees but for sources)
                    calls += 1
    if progress is not None:
        progress(f"{calls} calls read; cutting runs")
    runs = []
    for (fam, vary, d1, d2), by_t in cover.items():
        runs += [(fam, vary, d1, d2, lo, hi, step, pid) for lo, hi, step, pid in plan_runs(by_t)]
    tmp = out.with_suffix(".sqlite.tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    db.executescript(SCHEMA)
    db.executemany("INSERT INTO families (id, key) VALUES (?, ?)", [(i, t) for t, i in family_ids.items()])
    zdict = plan_dictionary(plan_ids)
    db.executemany("INSERT INTO plans (id, fields) VALUES (?, ?)", [(i, pack_plan(t, zdict)) for t, i in plan_ids.items()])
    db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", runs)
    meta = {"gpu": ctx.gpu, "arch": ctx.arch.name, "device": stamp["gpu_name"],
            "library": f"cuBLAS {stamp['cublas']}, cuBLASLt {stamp.get('cublaslt')}, torch {stamp['torch']}, "
                       f"CUDA {stamp.get('cuda')}",
            "stamp": json.dumps(stamp, sort_keys=True), "sources": json.dumps(list(sources)), "calls": str(calls),
            "left_out": json.dumps(skipped, sort_keys=True), "key_format": KEY_FORMAT,
            PLAN_DICT: base64.b64encode(zdict).decode()}
    db.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
    prune_unreferenced(db)
    db.commit()
    db.execute("VACUUM")
    db.close()
    tmp.replace(out)
    return {"runs": len(runs), "plans": len(plan_ids), "families": len(family_ids), "calls": calls,
            "left_out": sum(skipped.values())}


def prune_unreferenced(db: sqlite3.Connection) -> int:
    """Delete the plans no run names (an entry a later recording replaced: a call the recorder could not make, whose
    refusal text differs call by call, recorded again); returns how many.  The preset dictionary is kept (it was made
    from every entry and still decompresses the rest)."""
    cur = db.execute("DELETE FROM plans WHERE id NOT IN (SELECT DISTINCT plan FROM runs)")
    return int(cur.rowcount)


def recording_gpu(recordings: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The GPU name of the first recording's device (:func:`build` checks that the others agree)."""
    if not recordings:
        raise TcsmtError("no recordings given")
    return gpu_of_device(str(stamp_of(recordings[0][1], recordings[0][0])["gpu_name"]))


def build_catalog(recordings: Sequence[tuple[str, dict[str, Any]]], out: Path, *, gpu: str | None = None,
                  rules: Path | None = None, decisions: Path | None = None, same_as: Sequence[Path] = (),
                  confirmed: Path | None = None, probes: Sequence[Path] = (),
                  progress: Callable[[str], None] | None = None,
                  same_recordings: Sequence[tuple[str, dict[str, Any]]] = ()) -> dict[str, Any]:
    """:func:`build` under :func:`tcsmt.library.rules.make_context` for ``gpu`` (default: :func:`recording_gpu`);
    ``same_recordings``: recordings of the GPU whose rules ``same_as`` borrows (same torch, CUDA and library
    versions): a call whose kernels, split-K count and reductionScheme it also ran borrows its rules too."""
    ctx, rule_srcs, probed = make_context(gpu or recording_gpu(recordings), rules, decisions, same_as, confirmed, probes)
    srcs = [f"{n}: {r.get('method', '?')} recording, setting {r.get('setting')}" for n, r in recordings] + rule_srcs
    same = None
    if same_recordings:
        if not same_as:
            raise TcsmtError("recordings of the GPU whose rules are borrowed need --same-as (its plan file)")
        mine = stamp_of(recordings[0][1], recordings[0][0]) if recordings else {}
        for n, r in same_recordings:
            theirs = stamp_of(r, n)
            diff = [k for k in ("torch", "cuda", "cublas", "cublaslt") if theirs.get(k) != mine.get(k)]
            if diff:
                raise TcsmtError(f"{n}: recorded under other versions than the catalog's recordings "
                                 f"({', '.join(f'{k} {theirs.get(k)!r} vs {mine.get(k)!r}' for k in diff)})")
        if progress is not None:
            progress(f"indexing {len(same_recordings)} recordings of {ctx.rules_gpu}")
        same = RecordedPlans(same_recordings)
        srcs.append(f"kernels, split-K counts and reductionSchemes {ctx.rules_gpu} ran: "
                    f"{', '.join(n for n, _ in same_recordings)}")
    return {**build(recordings, ctx, out, srcs, probed, progress, same), "gpu": ctx.gpu}


_IN = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("recordings", nargs=-1, required=True, type=_IN)
@click.option("--rules", type=_IN, default=None,
              help=f"a rules file or the recorded plan file whose split-K families apply (default: models/library/{RULES_NAME})")
@click.option("--decisions", type=_IN, default=None, help="decisions made from recorded outputs (default: the rules')")
@click.option("--same-as", type=_IN, multiple=True, help="another GPU's plan file (first) and call files")
@click.option("--confirmed", type=_IN, default=None, help="with --same-as: the confirmation file")
@click.option("--same-as-recording", "same_recs", type=_IN, multiple=True,
              help="with --same-as: a recording of that GPU; calls running kernels and S it ran borrow its rules")
@click.option("--probes", type=_IN, multiple=True, help="layout-probe files (evidence/library/*_layout_probes.json)")
@click.option("--gpu", default=None, help="the catalog's GPU name (default: from the recordings' device name)")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--force", is_flag=True, help="replace an existing catalog")
@progress_option()
def catalog_build_cmd(recordings: tuple[Path, ...], rules: Path | None, decisions: Path | None,
                      same_as: tuple[Path, ...], confirmed: Path | None, same_recs: tuple[Path, ...],
                      probes: tuple[Path, ...], gpu: str | None, out: Path, force: bool, progress: bool) -> int:
    if out.exists() and not force:
        raise TcsmtError(f"{out} exists (pass --force to replace it)")
    say = Progress.for_cli(progress)
    recs = []
    for p in recordings:
        say(f"reading {p.name}")
        recs.append((p.name, read_recording(p)))
    theirs = []
    for p in same_recs:
        say(f"reading {p.name}")
        theirs.append((p.name, read_recording(p)))
    counts = build_catalog(recs, out, gpu=gpu, rules=rules, decisions=decisions, same_as=same_as,
                           confirmed=confirmed, probes=probes, progress=say, same_recordings=theirs)
    print(f"wrote {out}: {counts['calls']} recorded calls in {counts['runs']} runs of {counts['families']} call "
          f"families, {counts['plans']} distinct plans ({out.stat().st_size} bytes); {counts['left_out']} calls of ops "
          "without a library model left out")
    return 0


main = script_main(catalog_build_cmd, "python -m tcsmt.library.catalog_build")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
