"""Replay a recorded library validation file: rebuild each call's inputs, evaluate the sampled outputs, compare bits.

The file (written on the device; format: evidence/library_plans.md, "Files") lists calls with ``seed``
and ``samples`` = ``[i, j, "0x.."]`` (``[b, i, j, "0x.."]`` for bmm).  The
inputs come from ``make_inputs(call, seed)`` (``tcsmt/hwcheck/library_calls.py`` on
the device side), a dict of numpy bit-pattern arrays with keys ``A`` (M, K) or
(batch, M, K), ``B`` (K, N) or (batch, K, N) in the ``mm`` orientation (or
``weight`` (N, K) for linear), and where the call has them ``C`` (M, N),
``bias`` (N,), ``scale_a`` and ``scale_b`` (one value, or M and N values).
Each sampled output is evaluated under the recorded plan (or ``plans[i]``
when given) with :func:`tcsmt.library.run`, one row at a time.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.io import load
from tcsmt.io.limits import LIBRARY_SAMPLES
from tcsmt.io.options import bounded_int
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.api import plan as plan_of
from tcsmt.library.api import run_pairs
from tcsmt.library.plans import C_STEPS, Plan


@dataclass
class CallReplay:
    """One call's replay: how many samples were checked, and the ones that differ.

    ``error``: the call has no plan (the lookup's message); ``run_error``: it has one, but evaluating it
    on the call's inputs was refused (e.g. fp32 inputs for a plan that takes tf32 values only).
    """

    label: str
    checked: int = 0
    mismatches: list[tuple] = field(default_factory=list)
    error: str = ""
    run_error: str = ""
    plan: Plan | None = None


def _plan_for(call: dict[str, Any], gpu: str) -> Plan:
    return plan_of(call["op"], int(call["M"]), int(call["N"]), int(call["K"]), gpu=gpu, a_dtype=call["a_dtype"],
                   b_dtype=call.get("b_dtype"), out_dtype=call.get("out_dtype"), batch=int(call.get("batch", 1)),
                   alpha=float(call.get("alpha", 1.0)), beta=float(call.get("beta", 0.0)),
                   bias=bool(call.get("bias", False)), tf32=bool(call.get("tf32", False)), scale=call.get("scale"),
                   fast_accum=bool(call.get("fast_accum", False)))


def _cols_of(inputs: dict[str, np.ndarray], b: int | None) -> np.ndarray:
    if "B" in inputs:
        B = inputs["B"]
        return B[b] if b is not None else B
    if "weight" in inputs:
        return inputs["weight"].T
    raise TcsmtError("make_inputs gave neither B nor weight")


def replay_call(call: dict[str, Any], inputs: dict[str, np.ndarray], plan: Plan,
                max_samples: int | None = None) -> CallReplay:
    """Evaluate the samples of one call (the first ``max_samples``, or all) under ``plan``; compare the bits.

    The samples of one batch index are evaluated together (:func:`tcsmt.library.run_pairs`)."""
    res = CallReplay(plan.call.label(), plan=plan)
    by_batch: dict[int | None, list[tuple[int, int, int]]] = {}
    for s in call["samples"][:max_samples]:
        *idx, bits = s
        b, i, j = (idx if len(idx) == 3 else [None, *idx])
        by_batch.setdefault(None if b is None else int(b), []).append((int(i), int(j), int(str(bits), 16)))
    row_scaled = plan.call.scale == "row"
    for b, picks in by_batch.items():
        A = inputs["A"][b] if b is not None else inputs["A"]
        Bc = _cols_of(inputs, b)
        iv = np.array([i for i, _, _ in picks], dtype=np.int64)
        jv = np.array([j for _, j, _ in picks], dtype=np.int64)
        kw: dict[str, Any] = {}
        if "C" in inputs and inputs["C"] is not None and C_STEPS & set(plan.epilogue):
            C = inputs["C"][b] if b is not None else inputs["C"]
            kw["C"] = C[iv, jv]
        c_from_bias = bool(C_STEPS & set(plan.epilogue)) and "C" not in inputs
        if plan.call.bias and ("bias" in plan.epilogue or c_from_bias):
            kw["bias"] = np.asarray(inputs["bias"]).reshape(-1)[jv]
        if {"scale", "scale_b_then_a"} & set(plan.epilogue):
            sa, sb = np.asarray(inputs["scale_a"]).reshape(-1), np.asarray(inputs["scale_b"]).reshape(-1)
            kw["scale_a"] = sa[iv] if row_scaled else sa
            kw["scale_b"] = sb[jv] if row_scaled else sb
        try:
            got = np.asarray(run_pairs(plan, A[iv], Bc[:, jv], **kw, rows=iv, cols=jv)).reshape(-1)
        except TcsmtError as exc:
            res.run_error = str(exc)
            return res
        for (i, j, want), g in zip(picks, got):
            res.checked += 1
            if int(g) != want:
                res.mismatches.append((b, i, j, f"0x{want:x}", f"0x{int(g):x}"))
    return res


def replay_file(path: Path, make_inputs: Callable[[dict, int], dict], *, gpu: str = "h100",
                plans: dict[int, Plan] | None = None, max_samples: int | None = None) -> list[CallReplay]:
    """Replay every call of a validation file; a call without a plan is reported with its error."""
    data = _validation(path)
    out = []
    for n, call in enumerate(data.get("calls", [])):
        try:
            plan = (plans or {}).get(n) or _plan_for(call, gpu)
        except TcsmtError as exc:
            out.append(CallReplay(f"call {n}", error=str(exc)))
            continue
        out.append(replay_call(call, make_inputs(call, int(call["seed"])), plan, max_samples))
    return out


def _validation(path: Path) -> dict[str, Any]:
    """A validation file read through the loader: a JSON object whose ``calls`` is a list of objects, each
    with a seed and samples (the fields :func:`replay_call` and :func:`tcsmt.library.api.plan` read are
    checked there; a missing one is a one-line error naming the call)."""
    doc = load.document(path, "validation file")
    calls = doc.get("calls")
    for node in calls.as_list() if calls is not None else []:
        node.as_dict()
        node["seed"].as_int(0, (1 << 64) - 1)
        for s in node["samples"].as_list():
            items = s.as_list(4, 3)
            for x in items[:-1]:
                x.as_int(0, 1 << 40)
            items[-1].as_hex(64)
        for key in ("op", "a_dtype"):
            node[key].as_str(40)
        for key in ("M", "N", "K"):
            node[key].as_int(1, 1 << 20)
    return doc.value


def kind_of(call: dict[str, Any]) -> str:
    """The group a validation call is counted in: its split-K family, or (no split-K) its first kernel's name
    up to the tile shape."""
    if call.get("family"):
        return str(call["family"])
    import re

    first = (call.get("kernels") or ["(no kernel recorded)"])[0]
    first = re.split(r"_\d+x\d+", re.sub(r"^cutlass::Kernel2<", "", first))[0].split("<")[0]
    return ("split-K, no family: " if (call.get("split_k") or 1) > 1 else "S = 1: ") + first


def _suspect(call: dict[str, Any], r: CallReplay) -> str:
    """Which rule of the plan the disagreement points at (a reading of the plan's fields, for the report)."""
    p = r.plan
    if p is None:
        return ""
    if p.split_k > 1:
        return (f"split-K rule of family {call.get('family')} (S = {p.split_k}, grain {p.grain}, reduce {p.reduce}"
                + (f", K tile {p.k_tile}" if p.k_tile else "") + ") or the slice K-chain " + p.chain_spec)
    if p.epilogue and p.epilogue != ("scale",):
        return f"epilogue {'+'.join(p.epilogue)} or the K-chain {p.chain_spec}"
    return f"the K-chain {p.chain_spec}" + (f" with inputs rounded {p.in_round}" if p.in_round else "")


def report(path: Path, results: list[CallReplay], tables: list[str], gpu: str = "h100") -> dict[str, Any]:
    """The replay summary (counts per call group, calls without a plan, the findings) as a JSON object;
    ``gpu``: the GPU whose plan tables were used (named in ``what`` and ``command`` where it is not the H100)."""
    data = _validation(path)
    calls = data.get("calls", [])
    groups: dict[str, dict[str, int]] = {}
    findings, no_plan = [], []
    for n, (call, r) in enumerate(zip(calls, results)):
        g = groups.setdefault(kind_of(call), {"calls": 0, "replayed": 0, "checked": 0, "differ": 0, "no_plan": 0})
        g["calls"] += 1
        if r.error or r.run_error:
            g["no_plan"] += 1
            no_plan.append({"call": n, "label": r.label if not r.error else _label(call), "why": r.error or r.run_error})
            continue
        g["replayed"] += 1
        g["checked"] += r.checked
        g["differ"] += len(r.mismatches)
        if r.mismatches:
            findings.append({"call": n, "label": r.label, "seed": call["seed"], "dist": call.get("dist"),
                             "kernels": call.get("kernels"), "split_k": call.get("split_k"),
                             "differ": len(r.mismatches), "checked": r.checked,
                             "mismatches": [[m[0], m[1], m[2], m[3], m[4]] for m in r.mismatches],
                             "suspect": _suspect(call, r)})
    own = gpu == "h100" and "H100" in str(data.get("gpu"))
    whose = "H100" if own else f"{data.get('gpu')} ({Path(path).name})"
    under = "the recorded plans" if own else f"the plan tables of gpu {gpu!r}"
    return {"what": (f"replay of the recorded {whose} validation calls under {under}: every sampled output "
                     "of every call with a plan, inputs rebuilt by make_inputs(call, seed); mismatches are "
                     "[batch, row, col, GPU bits, model bits]"),
            "command": f"python -m tcsmt.library.replay {path}{'' if gpu == 'h100' else f' --gpu {gpu}'} --json OUT",
            "validation": Path(path).name,
            "gpu": data.get("gpu"), "torch": data.get("torch"), "cublas": data.get("cublas"),
            "plan_tables": tables,
            "totals": {"calls": len(calls), "replayed": sum(g["replayed"] for g in groups.values()),
                       "checked": sum(g["checked"] for g in groups.values()),
                       "differ": sum(g["differ"] for g in groups.values()), "no_plan": len(no_plan),
                       "calls_with_findings": len(findings)},
            "by_group": dict(sorted(groups.items())), "no_plan": no_plan, "findings": findings}


def _label(call: dict[str, Any]) -> str:
    return f"{call['op']} {call['a_dtype']} {call['M']}x{call['N']}x{call['K']} -> {call.get('out_dtype')}"


@click.command(context_settings=CONTEXT_SETTINGS,
               help="Replay a recorded validation file (FILE) under the plan tables of --gpu; exit 1 on any differing "
                    "bit, 2 on errors.  --json writes the summary (counts per call group, the findings).")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--gpu", default="h100", show_default=True, help="the GPU whose plan tables replay the calls")
@click.option("--max-samples", type=bounded_int(LIBRARY_SAMPLES), default=None, help="samples per call (default: all)")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the summary here")
@click.option("--force", is_flag=True, help="replace the --json file")
def library_replay_cmd(file: Path, gpu: str, max_samples: int | None, json_file: Path | None, force: bool) -> int:
    from tcsmt.io import files
    from tcsmt.library.plans import tables

    try:
        from tcsmt.hwcheck.library_calls import make_inputs
    except ImportError as exc:
        raise TcsmtError(f"the input generator tcsmt/hwcheck/library_calls.py (tcsmt.hwcheck.library_calls) is missing "
                         f"({exc})") from None
    out = files.output(json_file, force) if json_file else None
    results = replay_file(file, make_inputs, gpu=gpu, max_samples=max_samples)
    for n, r in enumerate(results):
        state = (f"no plan: {r.error}" if r.error else f"refused: {r.run_error}" if r.run_error
                 else f"{r.checked} checked, {len(r.mismatches)} differ")
        print(f"call {n}: {r.label}: {state}")
        for m in r.mismatches[:3]:
            print(f"    batch {m[0]} row {m[1]} col {m[2]}: GPU {m[3]}, model {m[4]}")
    checked = sum(r.checked for r in results)
    wrong = sum(len(r.mismatches) for r in results)
    print(f"total: {checked} outputs checked, {wrong} differ, "
          f"{sum(1 for r in results if r.error or r.run_error)} calls without a plan (or refused)")
    if out is not None:
        doc = report(file, results, sorted({Path(t.path).name for t in tables() if t.gpu == gpu}), gpu)
        if max_samples is not None:
            doc["max_samples"] = max_samples
        out.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"written: {out.path}")
    return 1 if wrong else 0


main = script_main(library_replay_cmd, "python -m tcsmt.library.replay")

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
