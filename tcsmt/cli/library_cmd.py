"""``tcsmt discriminate --library`` and ``tcsmt hwcheck --library``: two plans of one library call.

``discriminate --library CALL --plan-a CHANGES --plan-b CHANGES`` prints (and saves) one row of A and one
column of B whose output differs under the two plans (:mod:`tcsmt.library.discriminate`; both plans are
evaluated on them by the exact simulator).  ``hwcheck --library CALL [--plan CHANGES ...]`` runs the call on
a CUDA GPU through torch and reports each plan (the recorded one, and each ``--plan``) confirmed or refuted:
on random inputs (``tcsmt.hwcheck.library_calls.make_inputs``, the validation generator) at sampled outputs, or on
the separating inputs of a ``discriminate --library`` file (``--inputs FILE``) at output (0, 0).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.arith.formats import Format
from tcsmt.errors import TcsmtError
from tcsmt.io import files, interrupts, load
from tcsmt.io.limits import require_memory, shown
from tcsmt.library.discriminate import parse_call, plan_with, plans_for, separate
from tcsmt.library.evaluate import fmt_of
from tcsmt.library.lookup import lookup
from tcsmt.library.plans import Call, Plan

DeviceRun = Callable[[dict[str, Any], dict[str, np.ndarray]], np.ndarray]
"""Runs one call (a validation-style dict) on its inputs; returns the output bit patterns."""


def _value(fmt: Format, bits: int) -> str:
    v = fmt.to_fraction(int(bits))
    return f"{float(v):.9g}" if not isinstance(v, float) else str(v)


def call_dict(call: Call) -> dict[str, Any]:
    """The call in the validation files' form (``tcsmt/hwcheck/library_calls.py``)."""
    d = dataclasses.asdict(call)
    return {k: d[k] for k in ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha",
                              "beta", "tf32", "scale", "fast_accum")}


# ------------------------------------------------------------------ discriminate --library
def discriminate_library(call_text: str, gpu: str, changes_a: str | None, changes_b: str | None, seed: int,
                         output: str | None, force: bool, no_save: bool, command: str, timeout: float = 120.0) -> int:
    """Print inputs separating the two plans; 0 when found (saved unless ``no_save``), 1 when none was found;
    a TcsmtError (exit 2) when ``timeout`` seconds pass first (``--timeout``: the whole search)."""
    call = parse_call(call_text)
    pa, pb = plans_for(call, gpu, changes_a, changes_b)
    out = None
    if not no_save:
        name = output or Path("generated") / ("library-" + files.safe_name("_".join(
            x for x in (call.op, f"{call.M}x{call.N}x{call.K}", call.a_dtype, changes_a or "recorded", "vs",
                        changes_b or "recorded")).replace("=", "").replace(",", "_").replace("+", "_")) + ".json")
        out = files.output(name, force, free=output is None)
    try:
        with interrupts.time_limit(timeout):
            s = separate(pa, pb, seed=seed)
    except interrupts.TimeLimit:
        raise TcsmtError(f"the time limit (--timeout {timeout:g} s) ended the search before an input separating the "
                         f"plans was found (each try evaluates both plans over K = {call.K:,}; raise --timeout)") from None
    click.echo(f"call   : {call.label()} on {gpu}")
    click.echo(f"plan A : {changes_a or 'the recorded plan'}")
    click.echo(f"plan B : {changes_b or 'the recorded plan'}")
    if s is None:
        if out is not None:
            out.release()
        click.echo("no separating input found (slice probes, reduction probes and random rows were tried; the "
                   "plans may agree on every input)")
        return 1
    afmt, bfmt, ofmt = fmt_of(call.a_dtype), fmt_of(call.b_dtype), fmt_of(call.out_dtype)
    click.echo(f"found  : {s.how}")
    nz = [k for k in range(call.K) if int(s.a[k]) or int(s.b[k])]
    if len(nz) <= 16:
        click.echo(f"row 0 of A and column 0 of B (the other entries 0; K = {call.K}):")
        for k in nz:
            click.echo(f"  k = {k:6d}: a = {_value(afmt, s.a[k])} (0x{int(s.a[k]):x}), "
                       f"b = {_value(bfmt, s.b[k])} (0x{int(s.b[k]):x})")
    else:
        click.echo(f"row 0 of A and column 0 of B: {len(nz)} nonzero entries of K = {call.K} (in the saved file)")
    for name, v in s.extras.items():
        fmt = ofmt if name == "C" else fmt_of("float32") if name.startswith("scale") else fmt_of(
            call.a_dtype if name == "bias" and call.op in ("addmm", "linear") else call.out_dtype)
        click.echo(f"  {name} at (0, 0): {_value(fmt, int(np.asarray(v).reshape(-1)[0]))}")
    click.echo(f"output (0, 0) under plan A: {_value(ofmt, s.out_a)} (0x{s.out_a:x})")
    click.echo(f"output (0, 0) under plan B: {_value(ofmt, s.out_b)} (0x{s.out_b:x})")
    click.echo("checked: both plans evaluated on these inputs by the exact simulator (tcsmt.library.run, full K)")
    if out is not None:
        out.write_json({"tool": "tcsmt discriminate --library", "command": command, "gpu": gpu,
                        "call_text": call_text, "call": call_dict(call), "plan_a": changes_a or "",
                        "plan_b": changes_b or "", "plans": [pa.describe(), pb.describe()], "how": s.how,
                        "a_row": [f"0x{int(x):x}" for x in s.a], "b_col": [f"0x{int(x):x}" for x in s.b],
                        "extras": {k: [f"0x{int(x):x}" for x in np.asarray(v).reshape(-1)] for k, v in s.extras.items()},
                        "outputs": {"A": f"0x{s.out_a:x}", "B": f"0x{s.out_b:x}"}})
        click.echo(f"\nwritten: {out.path}  (run on a GPU: tcsmt hwcheck --library-inputs {out.path})")
    return 0


# ------------------------------------------------------------------ hwcheck --library
def call_bytes(call: Call) -> int:
    """Host memory for one call's full inputs and output (A, B, C, the output and their copies on the way
    to torch): an estimate for :func:`tcsmt.io.limits.require_memory`."""
    itemsize = 4  # the widest input dtype (float32) bounds every other
    elements = call.batch * (call.M * call.K + call.K * call.N + 2 * call.M * call.N)
    return 3 * elements * itemsize


def torch_device_run() -> DeviceRun:
    """The GPU runner (torch on CUDA); a TcsmtError naming why it cannot run."""
    try:
        import torch
    except ImportError:
        raise TcsmtError("skipped: torch is not installed (tcsmt hwcheck --library runs the call through torch on a "
                         "CUDA GPU); nothing was checked") from None
    if not torch.cuda.is_available():
        raise TcsmtError("skipped: no CUDA GPU visible to torch (torch.cuda.is_available() is False); nothing was "
                         "checked")
    from tcsmt.hwcheck.library_calls import run_call

    def run_on_gpu(call: dict[str, Any], inputs: dict[str, np.ndarray]) -> np.ndarray:
        return run_call(torch, call, inputs, "cuda")

    return run_on_gpu


def _device_info() -> dict[str, Any]:
    try:
        import torch

        return {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
                "cublas": torch._C._cuda_getCompiledVersion() if hasattr(torch._C, "_cuda_getCompiledVersion") else None}
    except Exception:
        return {}


LIBRARY_INPUTS = "tcsmt discriminate --library"
"""The ``tool`` of a file that ``hwcheck --library-inputs`` reads."""
EXTRAS = ("C", "bias", "scale_a", "scale_b")


def read_library_inputs(path: str) -> dict[str, Any]:
    """A ``discriminate --library`` file, every field checked (:mod:`tcsmt.io.load`): ``call_text``,
    ``gpu``, ``plan_a``, ``plan_b``, ``how`` and the separating ``a_row``, ``b_col`` and ``extras`` as
    patterns of the call's dtypes (K of each), with the parsed ``call``."""
    doc = load.document(path, "library inputs file")
    tool = doc.get("tool")
    if tool is None or tool.value != LIBRARY_INPUTS:
        raise TcsmtError(f"{doc.file} is not a file written by {LIBRARY_INPUTS} (its 'tool' is "
                         f"{shown(None if tool is None else tool.value, 40)})")
    text = doc["call_text"].as_str(200)
    try:
        call = parse_call(text)
    except TcsmtError as exc:
        raise doc["call_text"].error(str(exc)) from None
    out: dict[str, Any] = {"call_text": text, "call": call,
                           "gpu": doc["gpu"].as_str(40) if doc.has("gpu") else "h100",
                           "plan_a": doc["plan_a"].as_str(1000), "plan_b": doc["plan_b"].as_str(1000),
                           "how": doc["how"].as_str(1000) if doc.has("how") else ""}
    afmt, bfmt = fmt_of(call.a_dtype), fmt_of(call.b_dtype)
    for key, fmt in (("a_row", afmt), ("b_col", bfmt)):
        out[key] = np.array([x.as_hex(fmt.storage_bits, fmt.name) for x in doc[key].as_list(call.K, call.K)],
                            dtype=fmt.dtype)
    extras: dict[str, list[int]] = {}
    ex = doc.get("extras")
    for name, node in (ex.as_dict() if ex is not None else {}).items():
        if name not in EXTRAS:
            raise node.error(f"unknown extra (known: {', '.join(EXTRAS)})")
        fmt = _extra_format(call, name)
        extras[name] = [x.as_hex(fmt.storage_bits, fmt.name) for x in node.as_list(1, 1)]
    out["extras"] = extras
    return out


def _extra_format(call: Call, name: str) -> Format:
    """The format of the C, bias or scale value at (0, 0) of a separating input."""
    if name == "C":
        return fmt_of(call.out_dtype)
    if name.startswith("scale"):
        return fmt_of("float32")
    return fmt_of(call.a_dtype if call.op in ("addmm", "linear") else call.out_dtype)


def separating_inputs(doc: dict[str, Any], call: Call) -> dict[str, np.ndarray]:
    """Full inputs of the call (validation layout) holding a discriminate file's row and column at (0, 0),
    zeros elsewhere (scales 1 elsewhere); ``doc`` as :func:`read_library_inputs` gives it."""
    afmt, bfmt, ofmt = fmt_of(call.a_dtype), fmt_of(call.b_dtype), fmt_of(call.out_dtype)
    a, b = doc["a_row"], doc["b_col"]
    if a.shape != (call.K,) or b.shape != (call.K,):
        raise TcsmtError(f"the file's row and column must hold K = {call.K} values each")
    require_memory(call_bytes(call), f"the inputs of {call.label()}")
    lead = (call.batch,) if call.op == "bmm" else ()
    A = np.zeros((*lead, call.M, call.K), dtype=afmt.dtype)
    B = np.zeros((*lead, call.K, call.N), dtype=bfmt.dtype)
    (A[0, 0] if lead else A[0])[:] = a
    (B[0][:, 0] if lead else B[:, 0])[:] = b
    out: dict[str, np.ndarray] = {"A": A, "B": B}
    ex = {k: np.array(v) for k, v in doc.get("extras", {}).items()}
    if call.op == "addmm" and not call.bias:
        C = np.zeros((call.M, call.N), dtype=ofmt.dtype)
        C[0, 0] = ex.get("C", [0])[0]
        out["C"] = C
    if call.bias:
        bfmt2 = fmt_of(call.a_dtype if call.op in ("addmm", "linear") else call.out_dtype)
        bias = np.zeros(call.N, dtype=bfmt2.dtype)
        bias[0] = ex.get("bias", [0])[0]
        out["bias"] = bias
    if call.op == "scaled_mm":
        one = 0x3F800000
        sa, sb = int(ex.get("scale_a", [one])[0]), int(ex.get("scale_b", [one])[0])
        if call.scale == "tensor":
            out["scale_a"], out["scale_b"] = np.array(sa, np.uint32), np.array(sb, np.uint32)
        else:
            out["scale_a"] = np.full((call.M, 1), one, np.uint32)
            out["scale_b"] = np.full((1, call.N), one, np.uint32)
            out["scale_a"][0, 0], out["scale_b"][0, 0] = sa, sb
    return out


def hwcheck_library(call_text: str | None, gpu: str, changes: tuple[str, ...], inputs_file: str | None, seed: int,
                    samples: int, dist: str, save: str | None, force: bool,
                    device_run: DeviceRun | None = None) -> int:
    """Run one library call on the GPU and report each plan confirmed or refuted (0: every plan confirmed,
    1: one refuted); a TcsmtError (exit 2) for bad input or when no GPU can run it ("skipped: ...")."""
    from tcsmt.library.replay import replay_call

    doc = None
    if inputs_file is not None:
        doc = read_library_inputs(inputs_file)
        if call_text is not None and call_text != doc["call_text"]:
            raise TcsmtError(f"{inputs_file} holds inputs for {doc['call_text']}, not {call_text} (give one of them)")
        call_text = doc["call_text"]
        gpu = doc.get("gpu", gpu)
    if not call_text:
        raise TcsmtError("give --library CALL (e.g. mm:64x64x4096:bfloat16) or --library-inputs FILE")
    call = parse_call(call_text)
    plans: list[tuple[str, Plan]] = []
    if doc is not None:
        pa, pb = plans_for(call, gpu, doc["plan_a"] or None, doc["plan_b"] or None)
        plans = [(f"plan A ({doc['plan_a'] or 'recorded'})", pa), (f"plan B ({doc['plan_b'] or 'recorded'})", pb)]
    else:
        try:
            plans.append(("recorded plan", lookup(call, gpu)))
        except TcsmtError:
            if not changes:
                raise
        for ch in changes:
            base = plans[0][1] if plans else None
            if base is None:
                from tcsmt.library.discriminate import default_plan

                base = default_plan(call, gpu)
            plans.append((f"plan {ch}", plan_with(base, ch)))
    out = files.output(save, force) if save else None
    runner = device_run or torch_device_run()
    cd = call_dict(call)
    if doc is not None:
        inputs = separating_inputs(doc, call)
        cd["samples"] = [[0, 0, 0, "0x0"]] if call.op == "bmm" else [[0, 0, "0x0"]]
    else:
        from tcsmt.hwcheck.library_calls import make_inputs, sample_positions

        require_memory(call_bytes(call), f"the inputs of {call.label()}")
        cd["dist"] = dist
        inputs = make_inputs(cd, seed)
        cd["samples"] = [[*pos, "0x0"] for pos in sample_positions(cd, seed, samples)]
    got = np.asarray(runner(cd, inputs))
    for s in cd["samples"]:
        s[-1] = f"0x{int(got[tuple(s[:-1])]):x}"
    click.echo(f"{call.label()} on the GPU: {len(cd['samples'])} outputs read"
               + (f" (inputs of {inputs_file}: {doc['how']})" if doc else f" ({dist} inputs, seed {seed})"))
    results = []
    refuted = False
    for label, p in plans:
        r = replay_call(cd, inputs, p)
        if r.run_error:
            raise TcsmtError(f"{label}: {r.run_error}")
        verdict = "refuted" if r.mismatches else "confirmed"
        refuted |= bool(r.mismatches)
        click.echo(f"{label}: {verdict} ({len(r.mismatches)} of {r.checked} outputs differ)")
        for m in r.mismatches[:3]:
            where = f"({m[1]}, {m[2]})" if m[0] is None else f"(batch {m[0]}, {m[1]}, {m[2]})"
            click.echo(f"    output {where}: GPU {m[3]}, plan {m[4]}")
        results.append({"plan": label, "verdict": verdict, "checked": r.checked,
                        "mismatches": [list(m) for m in r.mismatches[:20]], "describe": p.describe()})
    if out is not None:
        out.write_json({"tool": "tcsmt hwcheck --library", "call_text": call_text, "call": call_dict(call),
                        "device": _device_info(), "inputs": inputs_file or {"dist": dist, "seed": seed},
                        "samples": cd["samples"], "plans": results})
        click.echo(f"results written to {out.path}", err=True)
    return 1 if refuted else 0
