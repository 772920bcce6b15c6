"""Replay the GEMM calls of a captured PyTorch program (``tcsmt.hwcheck.gemm_capture``) under the recorded plans.

Each captured call becomes a library :class:`~tcsmt.library.plans.Call` from what torch passed to cuBLAS: the op,
M, N, K (and the batch), the dtypes, alpha and beta, a 1-D ``addmm`` input as a bias, the operand layouts
(``a_t``/``b_t`` from the strides: a row-major operand or the transposed view of one; a recorded layout variant
where the GPU's recordings show it planned as its row-major twin at that call (:mod:`tcsmt.library.layouts`); any
other layout is refused), the ``_scaled_mm`` scaling (one value each: per tensor; (M, 1) and (1, N): row-wise), tf32 for
float32 inputs where torch allowed it, and the settings key of the capture (:mod:`tcsmt.library.settings`).
Its plan comes from :func:`tcsmt.library.lookup.answer`; two calls torch makes through the same cuBLAS call are
looked up under either key: ``mm(x, w.t())`` is ``linear(x, w)`` without a bias and ``addmm(b, x, w.t())``
(alpha = beta = 1, 1-D b) is ``linear(x, w, b)`` (``at::linear`` calls exactly these).  The sampled outputs
are computed with :func:`tcsmt.library.run` from the captured rows and columns and compared bit for bit.

A call without a plan, or one whose evaluation is refused, is a miss, reported with its reason.  The replay
goes call by call (``--progress``); an interrupted run writes the calls it finished (``"complete": false``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.io.trap import script_main
from tcsmt.library.api import run
from tcsmt.library.checks import make_call
from tcsmt.library.layouts import DESCRIBED, VARIANTS, covered, describe, operand_layout
from tcsmt.library.lookup import Answer, answer
from tcsmt.library.plans import C_STEPS, Call
from tcsmt.library.settings import settings_from_values

ALIASES = "mm(x, w.t()) is linear(x, w); addmm(b, x, w.t()) with alpha = beta = 1 and a 1-D b is linear(x, w, b)"


def load(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A capture: its ``.json`` document and the arrays of its ``.npz``."""
    js = Path(path).with_suffix(".json")
    try:
        doc = json.loads(js.read_text())
        with np.load(js.with_name(doc.get("arrays") or js.with_suffix(".npz").name)) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError) as exc:
        raise TcsmtError(f"cannot read the capture {js}: {exc}") from None
    if doc.get("tool") != "tcsmt.hwcheck.gemm_capture":
        raise TcsmtError(f"{js} is not a capture written by tcsmt.hwcheck.gemm_capture")
    return doc, arrays


def layout(meta: dict[str, Any]) -> str:
    """``"n"``: the operand (last two dims R x C) is row-major; ``"t"``: the transposed view of a row-major (C, R)
    tensor; a variant of :data:`tcsmt.library.layouts.VARIANTS`; ``""``: another layout (strides cuBLAS sees
    another way, not modelled).  :func:`tcsmt.library.layouts.operand_layout` on the captured strides."""
    return operand_layout(meta["shape"], meta["stride"])


def call_of(rec: dict[str, Any], settings: dict[str, Any], gpu: str = "h100") -> tuple[list[Call], str, str]:
    """(the library calls (the key torch's call has, then its alias), '', a layout note) of one captured call, or
    ([], why not, '').  An operand in a recorded layout variant is keyed as its row-major twin where ``gpu``'s
    recordings show the two planned alike at this call (:func:`tcsmt.library.layouts.covered`): the note says so."""
    op, A, B, out = rec["op"], rec["A"], rec["B"], rec["out"]
    la, lb = layout(A), layout(B)
    if not la or not lb:
        return [], (f"operand layout not modelled: A strides {A['stride']} of shape {A['shape']}, B strides "
                    f"{B['stride']} of shape {B['shape']} (row-major or the transposed view of one are)"), ""
    variants = [(name, v) for name, v in (("A", la), ("B", lb)) if v in VARIANTS]
    la, lb = VARIANTS.get(la, la), VARIANTS.get(lb, lb)
    M, K = A["shape"][-2:]
    N = B["shape"][-1]
    a_dtype, out_dtype = A["dtype"], out["dtype"]
    kw: dict[str, Any] = {"a_dtype": a_dtype, "out_dtype": out_dtype, "a_t": la == "t", "b_t": lb == "t",
                          "settings": settings_from_values(a_dtype, settings)}
    if a_dtype == "float32":
        kw["tf32"] = bool(settings.get("allow_tf32"))
    try:
        if op in ("mm", "bmm"):
            call = make_call(op, M, N, K, batch=A["shape"][0] if op == "bmm" else 1, **kw)
        elif op == "addmm":
            bias = len(rec["C"]["shape"]) == 1
            call = make_call("addmm", M, N, K, alpha=rec["alpha"], beta=rec["beta"], bias=bias, **kw)
        elif op == "_scaled_mm":
            if rec.get("scale_result"):
                return [], "_scaled_mm with scale_result (fp8 output scaling) is not modelled", ""
            sa, sb = rec["scale_a"]["shape"], rec["scale_b"]["shape"]
            na, nb = int(np.prod(sa)), int(np.prod(sb))
            scale = "tensor" if na == nb == 1 else "row" if (na, nb) == (M, N) else None
            if scale is None:
                return [], f"_scaled_mm scales of shapes {sa} and {sb} are neither per tensor nor row-wise", ""
            if la != "n" or lb != "t":
                return [], f"_scaled_mm with layouts A {la}, B {lb} (torch requires row-major A, column-major B)", ""
            call = make_call("scaled_mm", M, N, K, b_dtype=B["dtype"], out_dtype=out_dtype, a_dtype=a_dtype,
                             scale=scale, bias=rec.get("bias") is not None, fast_accum=bool(rec.get("use_fast_accum")),
                             settings=kw["settings"])
        else:
            return [], f"{op} is not modelled (the library ops are mm, addmm, linear, bmm, scaled_mm)", ""
    except TcsmtError as exc:
        return [], str(exc), ""
    notes = []
    for name, v in variants:
        note = covered(v, call, gpu) if op in ("bmm",) else None
        if note is None:
            meta = A if name == "A" else B
            return [], (f"operand layout not modelled: {name} is {DESCRIBED[v]} ({describe(meta['shape'], meta['stride'])}"
                        f"); no recording of {gpu} shows it planned as the row-major layout at {call.label()}"), ""
        notes.append(note)
    calls = [call]
    plain = call.b_t and not call.a_t and call.out_dtype == call.a_dtype and not call.tf32
    if op == "mm" and plain:
        calls.append(make_call("linear", M, N, K, a_dtype=a_dtype, settings=call.settings))
    if op == "addmm" and plain and call.bias and call.alpha == 1.0 and call.beta == 1.0:
        calls.append(make_call("linear", M, N, K, a_dtype=a_dtype, bias=True, settings=call.settings))
    return calls, "", "; ".join(notes)


def plan_of(calls: list[Call], gpu: str, plans_dirs: tuple[str, ...] | None = None) -> tuple[Answer | None, str, str]:
    """(the answer, the key that answered, '') or (None, '', why): the keys in order; two that answer must
    agree on the arithmetic."""
    answers, whys = [], []
    for c in calls:
        try:
            answers.append((answer(c, gpu, plans_dirs=plans_dirs), c))
        except TcsmtError as exc:
            whys.append(str(exc))
    if not answers:
        return None, "", whys[0]
    first, c0 = answers[0]
    for other, c1 in answers[1:]:
        if other.plan.arithmetic() != first.plan.arithmetic():
            return None, "", (f"the plans recorded for {c0.label()} and {c1.label()} (one cuBLAS call) disagree: "
                              "refused")
    return first, ("" if c0 is calls[0] else f"as {c0.op}: {ALIASES}"), ""


def answer_of(rec: dict[str, Any], settings: dict[str, Any], gpu: str, plans_dirs: tuple[str, ...] | None = None
              ) -> tuple[Answer | None, dict[str, Any]]:
    """(the answer for a captured call or None, the fields a report row takes from the lookup: ``call`` (its label,
    where the record makes a call), ``via``, ``layout``, or ``refused`` with the reason)."""
    calls, why, note = call_of(rec, settings, gpu)
    row: dict[str, Any] = {}
    ans = None
    if calls:
        row["call"] = calls[0].label()
        ans, via, why = plan_of(calls, gpu, plans_dirs)
        if via:
            row["via"] = via
        if note:
            row["layout"] = note
    if ans is None:
        row["refused"] = why
    return ans, row


def replay_call(rec: dict[str, Any], arrays: dict[str, np.ndarray], ans: Answer) -> tuple[int, list[list[Any]]]:
    """(outputs checked, mismatches [batch, row, col, GPU bits, model bits]) of one call's sample."""
    key = f"c{rec['n']}_"
    s = rec["sample"]
    plan = ans.plan
    checked, bad = 0, []
    steps = set(plan.epilogue)
    for bi, b in enumerate(s["batches"]):
        A, B, gpu_out = arrays[key + "A"][bi], arrays[key + "B"][bi], arrays[key + "out"][bi]
        kw: dict[str, Any] = {}
        if rec["op"] == "addmm":
            C = arrays[key + "C"][bi]  # the input at the sampled (i, j): a 1-D input expanded
            if plan.call.bias:  # added by the bias epilogue, expanded to C (beta != 1), or ignored (beta = 0)
                kw["bias"] = C[0] if steps & ({"bias"} | C_STEPS) else None
            else:
                kw["C"] = C if steps & C_STEPS else None
        if rec["op"] == "_scaled_mm":
            kw["scale_a"], kw["scale_b"] = arrays[key + "scale_a"], arrays[key + "scale_b"]
            if key + "bias" in arrays:
                kw["bias"] = arrays[key + "bias"]
        if plan.segment_k is not None:  # its outputs differ by tile: the sampled rows' and columns' indices
            kw["rows"], kw["cols"] = np.asarray(s["rows"]), np.asarray(s["cols"])
        got = np.asarray(run(plan, A, B, **{k: v for k, v in kw.items() if v is not None}))
        for r, i in enumerate(s["rows"]):
            for c, j in enumerate(s["cols"]):
                checked += 1
                if int(got[r, c]) != int(gpu_out[r, c]):
                    bad.append([b, i, j, f"0x{int(gpu_out[r, c]):x}", f"0x{int(got[r, c]):x}"])
    return checked, bad


def _reason(why: str) -> str:
    """A refusal's reason without the call's own label and numbers, to count refusals by kind."""
    why = re.sub(r"^no recorded cuBLAS plan for .*? on \S+: ", "", why)
    why = why.split("; record it")[0]
    return re.sub(r"\d+x\d+x\d+(x\d+)?", "MxNxK", why)


def replay(path: str | Path, gpu: str, *, plans_dirs: tuple[str, ...] | None = None,
           progress: Callable[[str], None] | None = None, done: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Replay every call of a capture under ``gpu``'s plans; the summary (totals, by op and phase, refusals by
    reason, each call's result).  ``done``: a list the per-call results are appended to as they finish."""
    doc, arrays = load(path)
    results = done if done is not None else []
    for rec in doc["calls"]:
        ans, found = answer_of(rec, doc["settings"], gpu, plans_dirs)
        r: dict[str, Any] = {"n": rec["n"], "phase": rec["phase"], "op": rec["op"],
                             "shapes": [rec["A"]["shape"], rec["B"]["shape"]], "call": "", **found}
        if ans is not None:
            r["plan"] = f"{ans.kind}: S = {ans.plan.split_k}" + (f", {ans.plan.reduce}" if ans.plan.split_k > 1 else "")
            try:
                r["checked"], r["mismatches"] = replay_call(rec, arrays, ans)
            except TcsmtError as exc:
                r["refused"] = f"evaluation refused: {exc}"
        results.append(r)
        if progress is not None:
            state = r.get("refused") or f"{r['checked'] - len(r['mismatches'])} of {r['checked']} bit-exact"
            progress(f"call {rec['n'] + 1} of {len(doc['calls'])} ({rec['op']} {r['call']}): {state}")
    return summary(doc, results, gpu, Path(path).with_suffix(".json").name)


def summary(doc: dict[str, Any], results: list[dict[str, Any]], gpu: str, name: str) -> dict[str, Any]:
    def tally(rows: list[dict[str, Any]]) -> dict[str, int]:
        ans = [r for r in rows if "checked" in r]
        return {"calls": len(rows), "answered": len(ans),
                "bit_exact_calls": sum(1 for r in ans if not r["mismatches"]),
                "outputs_checked": sum(r["checked"] for r in ans),
                "outputs_differ": sum(len(r["mismatches"]) for r in ans),
                "refused": len(rows) - len(ans)}

    by_op: dict[str, list[dict[str, Any]]] = {}
    by_phase: dict[str, list[dict[str, Any]]] = {}
    reasons: dict[str, int] = {}
    for r in results:
        by_op.setdefault(r["op"], []).append(r)
        by_phase.setdefault(r["phase"] or "(none)", []).append(r)
        if "refused" in r:
            key = f"{r['op']}: {_reason(r['refused'])}"
            reasons[key] = reasons.get(key, 0) + 1
    from tcsmt.library.lookup import catalogs
    from tcsmt.library.plans import tables

    sources = [Path(t.path).name for t in tables() if t.gpu == gpu] + [c.name for c in catalogs() if c.gpu == gpu]
    return {"capture": name, "device": doc.get("device"), "settings": doc.get("settings"), "info": doc.get("info"),
            "plans_of": gpu, "plans_from": sources, "complete": len(results) == len(doc["calls"]), "totals": tally(results),
            "by_op": {k: tally(v) for k, v in by_op.items()}, "by_phase": {k: tally(v) for k, v in by_phase.items()},
            "refusals": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
            "not_sampled": doc.get("not_sampled", {}), "calls": results}


@click.command(help="Replay a captured program's GEMM calls (FILE: the .json of tcsmt.hwcheck.gemm_capture) under "
                    "the recorded plans of --gpu; prints the totals; exit 1 on any differing bit, 2 on errors.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--gpu", default="h100", show_default=True, help="the GPU whose recorded plans replay the calls")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the summary (totals, by op and phase, refusals by reason, every call) here")
@click.option("--force", is_flag=True, help="replace the --json file")
@click.option("--progress", is_flag=True, help="one line per call on stderr")
def gemm_replay_cmd(file: Path, gpu: str, json_file: Path | None, force: bool, progress: bool) -> int:
    from tcsmt.io import files
    from tcsmt.io.progress import Progress

    out = files.output(json_file, force) if json_file else None
    say = Progress(progress)
    done: list[dict[str, Any]] = []
    try:
        doc = replay(file, gpu, progress=say, done=done)
    except KeyboardInterrupt:
        if out is not None:
            d, _ = load(file)
            out.write_text(json.dumps(summary(d, done, gpu, file.name), indent=1) + "\n")
            click.echo(f"written (incomplete: {len(done)} of {len(d['calls'])} calls): {out.path}", err=True)
        raise
    t = doc["totals"]
    click.echo(f"{file.name} under the {gpu} plans: {t['calls']} calls, {t['answered']} answered, "
               f"{t['bit_exact_calls']} bit-exact ({t['outputs_checked'] - t['outputs_differ']} of "
               f"{t['outputs_checked']} sampled outputs), {t['refused']} refused")
    for op, v in doc["by_op"].items():
        click.echo(f"  {op:10}: {v['calls']} calls, {v['answered']} answered, {v['bit_exact_calls']} bit-exact, "
                   f"{v['refused']} refused")
    for why, n in doc["refusals"].items():
        click.echo(f"  refused x{n}: {why}")
    if out is not None:
        out.write_text(json.dumps(doc, indent=1) + "\n")
        click.echo(f"written: {out.path}")
    return 1 if t["outputs_differ"] else 0


main = script_main(gemm_replay_cmd, "python -m tcsmt.library.gemm_replay")

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
