"""Compare the cuBLAS plans recorded on two GPUs call by call (evidence/h200_vs_h100_plans.json).

    python3 tools/library/plans_compare.py [--a evidence/h200_cublas_plans.json.gz]
        [--b evidence/h100_cublas_plans.json.gz] [--val-a ...h200_library_validation.json]
        [--val-b ...h100_library_validation.json.gz] [-o evidence/h200_vs_h100_plans.json]

Reads only committed files; adds nothing measured.  A call is the tuple of ``library_calls.CALL_FIELDS``.  For
every call recorded in both files it compares, each on its own:

* ``kernels``: the list of kernel names the profiler saw (parameter lists already dropped by the build);
* ``split_k``: the recorded S (cuBLASLt's trace of the real call);
* ``reduction_scheme``: ``reductionScheme=...`` of the call's cuBLASLt trace, ``none`` where the trace has none;
* ``lt``: the whole trace text (algo id, tile, stages, split, reduction, cluster shape, workspace bytes);
* ``torch_error``: whether torch refused the call.

``plan_same`` counts calls equal in kernels, S and reduction scheme (and refusal); the differing calls are
listed, one row each.  The validation files (calls with their own kernels, S and trace) are compared the same way.
"""
from __future__ import annotations

import json
import os
import re
import sys
from types import SimpleNamespace
from typing import Any

import click

from tcsmt.hwcheck.library_calls import CALL_FIELDS
from tcsmt.io import load
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.sim.inputs import read_json

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "evidence")
ASPECTS = ("kernels", "split_k", "reduction_scheme", "lt", "torch_error")


def scheme(trace: list[str]) -> str:
    """reductionScheme of a cuBLASLt trace (list of algo strings), ``none`` where it names none."""
    for a in trace:
        m = re.search(r"reductionScheme=(\w+)", a)
        if m:
            return m.group(1)
    return "none"


def views(calls: list[dict], table: list[str] | None) -> dict[tuple, dict]:
    """Per call key (``CALL_FIELDS``, and ``seed`` for validation calls: one shape runs with several inputs):
    the compared aspects.  ``table`` is the file's ``lt_algos`` (plan files index it; the validation files carry
    the trace text in ``lt_algo``).  A plan file lists a few random shapes twice (23 keys; the same plan each
    time): the last entry stands for the key."""
    out = {}
    for c in calls:
        trace = [table[i] for i in c.get("lt", [])] if table is not None else list(c.get("lt_algo") or [])
        key = tuple(c[k] for k in CALL_FIELDS) + ((c["seed"],) if "seed" in c else ())
        out[key] = {"kernels": list(c.get("kernels") or []), "split_k": c.get("split_k"),
                    "reduction_scheme": scheme(trace), "lt": trace, "torch_error": bool(c.get("torch_error")),
                    "family": c.get("family")}
    return out


def label(key: tuple) -> str:
    """``op a_dtype[xb_dtype]->out MxNxK`` and the call's other fields where not the default."""
    c = dict(zip(CALL_FIELDS, key))
    s = (f"{c['op']} {c['a_dtype']}{'' if c['b_dtype'] == c['a_dtype'] else 'x' + c['b_dtype']}->{c['out_dtype']} "
         f"{c['M']}x{c['N']}x{c['K']}")
    extra = [f"batch={c['batch']}" if c["batch"] != 1 else "", "bias" if c["bias"] else "",
             f"alpha={c['alpha']}" if c["alpha"] != 1.0 else "", f"beta={c['beta']}" if c["beta"] != 0.0 else "",
             "tf32" if c["tf32"] else "", f"scale={c['scale']}" if c["scale"] else "",
             "fast_accum" if c["fast_accum"] else "", f"seed={key[len(CALL_FIELDS)]}" if len(key) > len(CALL_FIELDS) else ""]
    return " ".join([s] + [e for e in extra if e])


def config(key: tuple) -> str:
    c = dict(zip(CALL_FIELDS, key))
    return f"{c['op']} {c['a_dtype']}{'' if c['b_dtype'] == c['a_dtype'] else 'x' + c['b_dtype']}->{c['out_dtype']}{' tf32' if c['tf32'] else ''}" + \
        (f" {c['scale']}{' fast' if c['fast_accum'] else ''}" if c["op"] == "scaled_mm" else "")


def compare_tables(a: dict[tuple, dict], b: dict[tuple, dict], name_a: str, name_b: str) -> dict:
    """Counts of agreement, per aspect and per configuration, and the differing calls as rows
    ``[call, kernels_a, S_a, scheme_a, kernels_b, S_b, scheme_b]`` (kernels as indices into ``kernel_names``)."""
    both = [k for k in a if k in b]
    same = dict.fromkeys(ASPECTS, 0)
    plan_same = 0
    names: dict[str, int] = {}
    per_config: dict[str, list[int]] = {}
    kinds: dict[str, int] = {}
    rows = []
    for k in both:
        va, vb = a[k], b[k]
        eq = {x: va[x] == vb[x] for x in ASPECTS}
        for x in ASPECTS:
            same[x] += eq[x]
        ok = eq["kernels"] and eq["split_k"] and eq["reduction_scheme"] and eq["torch_error"]
        plan_same += ok
        pc = per_config.setdefault(config(k), [0, 0])
        pc[0] += ok
        pc[1] += 1
        if ok:
            continue
        kind = "+".join(x for x in ("kernels", "split_k", "reduction_scheme", "torch_error") if not eq[x])
        kinds[kind] = kinds.get(kind, 0) + 1
        rows.append([label(k), [names.setdefault(n, len(names)) for n in va["kernels"]], va["split_k"],
                     va["reduction_scheme"], [names.setdefault(n, len(names)) for n in vb["kernels"]], vb["split_k"],
                     vb["reduction_scheme"]])
    return {"calls_" + name_a: len(a), "calls_" + name_b: len(b), "calls_in_both": len(both),
            "plan_same": plan_same, "plan_differs": len(rows), "same_per_aspect": same,
            "differs_in": kinds,
            "plan_same_per_config": {c: f"{n} of {t}" for c, (n, t) in sorted(per_config.items())},
            "split_calls_in_both_" + name_b: sum(1 for k in both if (b[k]["split_k"] or 1) > 1),
            "differing_calls_fields": ["call", f"kernels_{name_a}", f"split_k_{name_a}", f"reduction_scheme_{name_a}",
                                       f"kernels_{name_b}", f"split_k_{name_b}", f"reduction_scheme_{name_b}"],
            "kernel_names": list(names), "differing_calls": rows}


_IN_FILE = click.Path(exists=True, dir_okay=False)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--a", "a", type=_IN_FILE, default=os.path.join(RESULTS, "h200_cublas_plans.json.gz"), show_default=True)
@click.option("--b", "b", type=_IN_FILE, default=os.path.join(RESULTS, "h100_cublas_plans.json.gz"), show_default=True)
@click.option("--val-a", type=_IN_FILE, default=os.path.join(RESULTS, "h200_library_validation.json.gz"),
              show_default=True)
@click.option("--val-b", type=_IN_FILE, default=os.path.join(RESULTS, "h100_library_validation.json.gz"),
              show_default=True)
@click.option("--name-a", default="h200", show_default=True)
@click.option("--name-b", default="h100", show_default=True)
@click.option("-o", "--out", default=os.path.join(RESULTS, "h200_vs_h100_plans.json"), show_default=True)
def compare_cmd(**options) -> None:
    _compare(SimpleNamespace(**options))


def _compare(args: SimpleNamespace) -> None:
    files: dict[str, Any] = {}
    for key in ("a", "b", "val_a", "val_b"):
        files[key] = read_json(getattr(args, key))
    pa, pb, va, vb = files["a"], files["b"], files["val_a"], files["val_b"]
    res: dict[str, Any] = {
        "what": ("cuBLAS plans of the same calls recorded on two GPUs, compared call by call "
                 "(tools/library/plans_compare.py; plan_same = same kernel names, same split-K S, same "
                 "cuBLASLt reductionScheme, same torch refusal)"),
        "files": {args.name_a: os.path.basename(args.a), args.name_b: os.path.basename(args.b),
                  "validation_" + args.name_a: load.document_name(args.val_a),
                  "validation_" + args.name_b: load.document_name(args.val_b)},
        "versions": {n: {k: p.get(k) for k in ("gpu", "torch", "cuda", "cublas", "cublaslt", "sm_count")}
                     for n, p in ((args.name_a, pa), (args.name_b, pb))},
        "plans": compare_tables(views(pa["calls"], pa["lt_algos"]), views(pb["calls"], pb["lt_algos"]),
                         args.name_a, args.name_b),
        "validation": compare_tables(views(va["calls"], None), views(vb["calls"], None), args.name_a, args.name_b),
    }
    with open(args.out, "w") as f:
        json.dump(res, f, separators=(",", ":"))
        f.write("\n")
    for part in ("plans", "validation"):
        r = res[part]
        print(f"{part}: {r['calls_in_both']} calls in both, plan_same {r['plan_same']}, per aspect "
              f"{r['same_per_aspect']}, differing {r['plan_differs']}: {r['differs_in']}")


main = script_main(compare_cmd, "python3 tools/library/plans_compare.py")

if __name__ == "__main__":
    sys.exit(main())
