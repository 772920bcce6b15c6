"""Build a plan catalog (:mod:`tcsmt.library.catalog`) from raw device recordings.

    python -m tcsmt.library.catalog_build REC.json.gz [REC ...] [--rules RULES.json] [--decisions DEC.json]
        [--same-as PLANS.json --confirmed CONF.json] [--probes PROBES.json] [--gpu NAME] -o OUT.sqlite [--force]

Each recording (``tcsmt record``, ``tools/device/record_plans.py run``: a header with the GPU, its SM count, the
driver, the library versions and the settings; interned kernel names, cuBLASLt trace summaries and plans; tasks of
calls, each a run of token counts or a list) is read call by call; every distinct recorded plan of a call family is
converted once by the plan tables' own conversion (:class:`tcsmt.library.call_plans.ConvertContext`, with the
rules of :mod:`tcsmt.library.rules`: the shipped ones unless ``--rules``/``--decisions`` name others, and for a GPU
that borrows another's rules ``--same-as``/``--confirmed``), into plan fields or the reason it has none (also where
its fields do not load or the rules are not certain at its shape and layout: ``rules.checked_entry``).  The GPU is
the recordings' (``--gpu`` names another); they must agree in their stamps.  ``--progress`` prints a line per
recording (a build from every shipped recording takes minutes); an interrupted build leaves the catalog it would
replace as it was (it writes a temporary file and renames it at the end).
"""
from __future__ import annotations

import gzip
import json
import re
import sqlite3
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
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
from tcsmt.library.catalog import SCHEMA, VARIES, family_text, fixed_dims
from tcsmt.library.catalog_runs import plan_runs, progressions  # noqa: F401 (progressions: re-exported)
from tcsmt.library.checks import make_call
from tcsmt.library.families import SAME_KEYS, class_of
from tcsmt.library.plans import OPS, Call
from tcsmt.library.rules import RULES_NAME, VariantRules, checked_entry, classed, gemv_kernel, k_tiled, make_context
from tcsmt.library.settings import settings_key

CALL_FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32",
               "scale", "fast_accum", "a_t", "b_t")
DEFAULTS = {"batch": 1, "bias": False, "alpha": 1.0, "beta": 0.0, "tf32": False, "scale": None, "fast_accum": False,
            "a_t": False, "b_t": False}
def read_recording(path: Path) -> dict[str, Any]:
    try:
        with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise TcsmtError(f"cannot read recording {path}: {exc}") from None
    if not isinstance(data, dict) or "tables" not in data or "tasks" not in data:
        raise TcsmtError(f"{path}: not a plan recording (tables and tasks expected)")
    return data


def stamp_of(rec: dict[str, Any], where: str) -> dict[str, Any]:
    """GPU name, SM count, driver and library versions of a recording (its header's ``device``)."""
    dev = dict(rec.get("device") or {})
    dev.setdefault("gpu_name", dev.get("gpu"))  # the recorder names the GPU ``gpu``
    stamp = {k: dev.get(k) for k in STAMP_FIELDS}
    missing = [k for k in ("gpu_name", "torch", "cublas") if not stamp.get(k)]
    if missing:
        raise TcsmtError(f"{where}: the recording's device header lacks {', '.join(missing)}")
    return stamp


def setting_of(rec: dict[str, Any], a_dtype: str) -> str:
    """The settings key (:func:`settings_key`) of a recording's ``setting`` for calls on ``a_dtype``."""
    s = rec.get("setting") or {}
    env = s.get("env") or {}
    return settings_key(a_dtype, blas=s.get("blas", "cublas"), reduced=tuple(s.get("reduced", (True, True))),
                        cublas_workspace=str(env.get("CUBLAS_WORKSPACE_CONFIG", "")),
                        cublaslt_workspace=str(env.get("CUBLASLT_WORKSPACE_SIZE", "")),
                        deterministic=bool(s.get("deterministic", False)))


MAX_T = 16384
NOT_RECORDED = "not recorded"


def token_counts(spec: str) -> list[int]:
    """The token counts of a recorded run list (the recorder's ``ms``): ``all`` = 1..16384, ``p2`` = powers of
    two, else ``A-B`` ranges and ``Sx``/``SxHI`` multiples of S above the previous part, joined by ``+``."""
    if spec == "all":
        return list(range(1, MAX_T + 1))
    if spec == "p2":
        return [1 << i for i in range(15)]
    ms: list[int] = []
    for part in spec.split("+"):
        if "x" in part:
            step_s, hi_s = part.split("x")
            step, hi = int(step_s), int(hi_s or MAX_T)
            start = (ms[-1] // step + 1) * step if ms else step
            ms += list(range(start, hi + 1, step))
        elif "-" in part:
            lo, hi = (int(x) for x in part.split("-"))
            ms += list(range(lo, hi + 1))
        else:
            ms.append(int(part))
    return sorted(set(ms))


def _runs(task: dict[str, Any]) -> Iterator[tuple[int, int, int]]:
    """(t_first, t_last, plan) of a token-count task, in any of the recorder's layouts: rows, or columns
    (``runs``: ``t_first``/``t_last``, or ``t_gap``/``t_span``: t_first minus the previous t_last, t_last minus
    t_first)."""
    if "rows" in task:
        for r in task["rows"]:
            yield int(r[0]), int(r[1]), int(r[2])
        return
    c = task["runs"]
    if "t_first" in c:
        yield from ((int(a), int(b), int(p)) for a, b, p in zip(c["t_first"], c["t_last"], c["plan"]))
        return
    t_last = 0
    for gap, span, pid in zip(c["t_gap"], c["t_span"], c["plan"]):
        t_first = t_last + int(gap)
        t_last = t_first + int(span)
        yield t_first, t_last, int(pid)


def _list(task: dict[str, Any], fields: Sequence[str]) -> Iterator[tuple[dict[str, Any], int]]:
    """(call fields, plan) of each call of a list task: rows of (index into ``calls``, plan, ...), or columns."""
    if "rows" in task:
        for r in task["rows"]:
            yield dict(zip(fields, task["calls"][int(r[0])])), int(r[1])
        return
    cols = task["calls"]
    for i, pid in enumerate(task["plan"]):
        yield {f: cols[f][i] for f in fields if f in cols}, int(pid)


def recorded_calls(rec: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, list[int], int]]:
    """(call template, vary, the recorded token counts of one run, plan index) for every run of a recording, and
    for every single call of its lists (vary M, one count); in a template the varying dimension is None."""
    fields = rec.get("fields") or CALL_FIELDS
    for task in rec["tasks"]:
        if task.get("view"):  # an operand layout beyond the catalog's keys (the recorder's layout-variant tasks)
            continue
        if task.get("kind") == "mrange":
            tmpl = {**DEFAULTS, **task["call"]}
            vary = task["vary"]
            ms = token_counts(task["ms"])
            pos = {t: i for i, t in enumerate(ms)}
            for t0, t1, pid in _runs(task):
                yield tmpl, vary, ms[pos[t0]: pos[t1] + 1], pid
        else:
            for values, pid in _list(task, fields):
                c = {**DEFAULTS, **values}
                yield c, "M", [int(c["M"])], pid


def _recorded_there(ctx: ConvertContext, tmpl: dict[str, Any], vary: str, t: int) -> bool:
    """Whether the GPU whose rules are borrowed recorded this very call (its entry then depends on that record)."""
    c = {**tmpl, **dict.fromkeys(vary, t)}
    return tuple(c.get(k) for k in SAME_KEYS) in ctx.ref


def _unsourced(text: str) -> str:
    d = json.loads(text)
    d.pop("sources", None)
    return json.dumps(d, sort_keys=True)


def raw_call(tmpl: dict[str, Any], vary: str, t: int, plan: list[Any], tables: dict[str, list]) -> dict[str, Any]:
    """The call at token count ``t`` as the converter reads a recorded call (kernels, split_k, reductionScheme,
    trace, torch's refusal)."""
    c = {k: tmpl.get(k) for k in CALL_FIELDS}
    for d in vary:
        c[d] = t
    kernels, blocks, _clusters, _gz, _other, S, red, lt, err, cap_err = plan
    c["kernels"] = [tables["kernels"][k] for k in kernels]
    c["blocks"] = blocks
    c["split_k"] = S
    c["reduction_scheme"] = red or "none"
    c["lt_algo"] = [tables["lt"][i] for i in lt]
    c["split_k_source"] = "cublaslt_trace"
    if err is not None:
        c["torch_error"] = tables["errors"][err]
    if cap_err is not None:
        c["capture_error"] = tables["errors"][cap_err]
    return c


def kernel_class(call: dict[str, Any], ctx: ConvertContext) -> str:
    """What a catalog keeps of a call's kernels: the plan class its slice and reduction rules come from
    (:func:`class_of`: ``family NAME`` or ``no split: nvjet_sm90_KIND``), else the kernels' names less their tile
    fields (the tile changes with the shape and not the arithmetic of a plan without split-K)."""
    cls = class_of(call, ctx.families)
    if cls:
        return cls
    return " + ".join(sorted({re.sub(r"_\d+x\d+.*$", "", k) for k in call.get("kernels") or []})) or "no kernel"


def convert_one(ctx: ConvertContext, name: str, tmpl: dict[str, Any], vary: str, t: int, plan: list[Any],
                tables: dict[str, list], probed: VariantRules | None = None) -> dict[str, Any] | None:
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
    ident, fields, why = ctx.entry(name, 0, c)
    if why:
        return {**ident, "why": classed(why, kernel_class(c, ctx))}
    cls = kernel_class(c, ctx)
    srcs = [f"{name}: split_k {c['split_k']} from cuBLASLt's trace of the call under CUDA graph capture; "
            f"kernels of class {cls}", *(classed(x, cls) for x in fields.get("sources", [])[1:])]
    entry = {**ident, **{k: v for k, v in fields.items() if k not in ("kernels", "sources")},
             "kernels": [cls], "sources": srcs}
    return checked_entry(entry, ident, [c["M"], c["N"], c["K"], c["batch"]], c["kernels"], ctx.gpu, name, probed,
                         blocks=c.get("blocks"))


def build(recordings: Sequence[tuple[str, dict[str, Any]]], ctx: ConvertContext, out: Path,
          sources: Sequence[str], probed: VariantRules | None = None,
          progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write the catalog of ``recordings`` to ``out`` (a new file); return its counts.  Neighbouring runs of one
    call family whose entries are equal are merged; a run over K is cut where its entry changes (a K-dependent
    grain).  With ``probed`` (:func:`tcsmt.library.rules.variant_rules`), a split-K plan takes the slice rule read
    for its kernels' layout, and one whose layout no rule was read for is refused."""
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
        converted: dict[tuple[int, int, int, int], int] = {}
        for tmpl, vary, ts, pid in recorded_calls(rec):
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
            # an entry depends on the token count through a K-dependent grain, CUTLASS tile or GEMV order (vary K), the
            # other GPU's record (borrowed rules), or whether the library refuses a call torch (or the recorder) failed on
            ks, refused = [tables["kernels"][k] for k in plan[0]], plan[rec["plan_fields"].index("torch_error")] is not None
            per_t = refused or ("K" in vary and (int(plan[5] or 1) > 1 or k_tiled(ks) or gemv_kernel(ks)))
            for t in ts:
                key = (fam, pid, d1, d2)
                borrowed = bool(ctx.same_as) and _recorded_there(ctx, tmpl, vary, t)
                entry = convert_one(ctx, name, tmpl, vary, t, plan, tables, probed) \
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
                slot.setdefault(t, converted[key])  # the first recording's entry (another's agrees but for sources)
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
    db.executemany("INSERT INTO plans (id, fields) VALUES (?, ?)",
                   [(i, zlib.compress(t.encode(), 9)) for t, i in plan_ids.items()])
    db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", runs)
    meta = {"gpu": ctx.gpu, "arch": ctx.arch.name, "device": stamp["gpu_name"],
            "library": f"cuBLAS {stamp['cublas']}, cuBLASLt {stamp.get('cublaslt')}, torch {stamp['torch']}, "
                       f"CUDA {stamp.get('cuda')}",
            "stamp": json.dumps(stamp, sort_keys=True), "sources": json.dumps(list(sources)), "calls": str(calls),
            "left_out": json.dumps(skipped, sort_keys=True)}
    db.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
    db.commit()
    db.execute("VACUUM")
    db.close()
    tmp.replace(out)
    return {"runs": len(runs), "plans": len(plan_ids), "families": len(family_ids), "calls": calls,
            "left_out": sum(skipped.values())}


def recording_gpu(recordings: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The GPU name of the first recording's device (:func:`build` checks that the others agree)."""
    if not recordings:
        raise TcsmtError("no recordings given")
    return gpu_of_device(str(stamp_of(recordings[0][1], recordings[0][0])["gpu_name"]))


def build_catalog(recordings: Sequence[tuple[str, dict[str, Any]]], out: Path, *, gpu: str | None = None,
                  rules: Path | None = None, decisions: Path | None = None, same_as: Sequence[Path] = (),
                  confirmed: Path | None = None, probes: Sequence[Path] = (),
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """:func:`build` under :func:`tcsmt.library.rules.make_context` for ``gpu`` (default: :func:`recording_gpu`)."""
    ctx, rule_srcs, probed = make_context(gpu or recording_gpu(recordings), rules, decisions, same_as, confirmed, probes)
    srcs = [f"{n}: {r.get('method', '?')} recording, setting {r.get('setting')}" for n, r in recordings] + rule_srcs
    return {**build(recordings, ctx, out, srcs, probed, progress), "gpu": ctx.gpu}


_IN = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("recordings", nargs=-1, required=True, type=_IN)
@click.option("--rules", type=_IN, default=None,
              help=f"a rules file or the recorded plan file whose split-K families apply (default: models/library/{RULES_NAME})")
@click.option("--decisions", type=_IN, default=None, help="decisions made from recorded outputs (default: the rules')")
@click.option("--same-as", type=_IN, multiple=True, help="another GPU's plan file (first) and call files")
@click.option("--confirmed", type=_IN, default=None, help="with --same-as: the confirmation file")
@click.option("--probes", type=_IN, multiple=True, help="layout-probe files (evidence/library/*_layout_probes.json)")
@click.option("--gpu", default=None, help="the catalog's GPU name (default: from the recordings' device name)")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--force", is_flag=True, help="replace an existing catalog")
@progress_option()
def catalog_build_cmd(recordings: tuple[Path, ...], rules: Path | None, decisions: Path | None,
                      same_as: tuple[Path, ...], confirmed: Path | None, probes: tuple[Path, ...], gpu: str | None,
                      out: Path, force: bool, progress: bool) -> int:
    if out.exists() and not force:
        raise TcsmtError(f"{out} exists (pass --force to replace it)")
    say = Progress.for_cli(progress)
    recs = []
    for p in recordings:
        say(f"reading {p.name}")
        recs.append((p.name, read_recording(p)))
    counts = build_catalog(recs, out, gpu=gpu, rules=rules, decisions=decisions, same_as=same_as,
                           confirmed=confirmed, probes=probes, progress=say)
    print(f"wrote {out}: {counts['calls']} recorded calls in {counts['runs']} runs of {counts['families']} call "
          f"families, {counts['plans']} distinct plans ({out.stat().st_size} bytes); {counts['left_out']} calls of ops "
          "without a library model left out")
    return 0


main = script_main(catalog_build_cmd, "python -m tcsmt.library.catalog_build")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
