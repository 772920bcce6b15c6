"""How a layout probe of the device (tools/device/library_plans.py ``--probe-list``) is judged against its split-K
family's rule, and the committed file it makes (evidence/library/GPU_layout_probes.json; the pipeline:
:mod:`tools.library.layout_probes`).

A probe **agrees** where the traced S and the kernels of the probed call are the recorded ones (on the recorder's
flat buffers and on the probe's own tensors), the traced reductionScheme is the recorded one, the slice starts read
from the bits are the family's ``chunk = ceil(ceil(K/G)/S)*G`` (G: :func:`tcsmt.library.families.grain_of`) with no
anomaly, and the reduction probe agrees on every column with the family's reduction
(:func:`tcsmt.library.families.reduction_of`).  Where the starts are not the rule's, ``read`` names the chunk rules
that give them (``chunk_rules``).
"""
from __future__ import annotations

import collections
import json
import re
from typing import Any

from tcsmt.library.families import grain_of, reduction_of, rule_key, slice_rule_fields

KEEP_RAW = 4
"""(partials, output) pairs of the reduction probe kept per probe in the committed file (the device keeps 32); the
per-16-k patterns of the slice probe (``group_patterns``) are kept only for the probes that disagree."""
HYPOTHESIS = {"fp32_forward": "fp32_forward", "out_rounded": "out_rounded_partials_fp32_sum",
              "out_chain": "out_dtype_chain", "out_chain_acc_add": "out_serial_f32add"}
"""Reduction names of :func:`reduction_of` -> the device's hypothesis (``reduce_hypotheses`` of library_plans.py)."""


def group_of(c: dict[str, Any]) -> str:
    """A call's group: op, layouts, dtypes, bias, tf32, scales (``mm a_t=1 b_t=0 bfloat16->bfloat16``)."""
    b = c["b_dtype"] if c["b_dtype"] != c["a_dtype"] else ""
    return (f"{c['op']} a_t={int(bool(c.get('a_t')))} b_t={int(bool(c.get('b_t')))} {c['a_dtype']}{'x' + b if b else ''}"
            f"->{c['out_dtype']}" + (" bias" if c.get("bias") else "") + (" tf32" if c.get("tf32") else "")
            + (f" {c['scale']}" if c.get("scale") else "") + (" fast" if c.get("fast_accum") else ""))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def chunk_starts(K: int, S: int, G: int) -> list[int]:
    """Slice starts of chunk = ceil(ceil(K/G)/S)*G, empty slices past K dropped."""
    chunk = _ceil_div(_ceil_div(K, G), S) * G
    return [i * chunk for i in range(S) if i * chunk < K]


def floored_starts(K: int, S: int, G: int, k_floor: int) -> list[int]:
    """Slice starts of chunk = ceil(ceil(K'/G)/S)*G on K' = K floored to a multiple of k_floor (0: K' = K), empty
    slices dropped (the tail [K', K) joins the last slice: no start of its own)."""
    Kf = K - K % k_floor if k_floor else K
    return chunk_starts(Kf, S, G) if Kf else [0]


def rule_starts(fam: dict[str, Any], K: int, S: int, rule: dict[str, Any] | None = None,
                a_dtype: str = "bfloat16") -> list[int]:
    """Slice starts at S under a variant's slice rule (None: the family's own rule, its grain for this K;
    :func:`tcsmt.library.families.slice_rule_fields`)."""
    f = slice_rule_fields(fam, rule, K, a_dtype, "family")
    return floored_starts(K, S, f["grain"], f["k_floor"])


REFINED_RULE_TEXT = ("sm80 CUTLASS kernels cut K in chunks of 128 bytes of the input type where K fills whole chunks "
                     "and the kernel is nn or tn, else of 16 bytes; nvjet kernels apply their family's grain to K "
                     "floored to a multiple of 8, the tail in the last slice")
"""The slice rule fitted to the 508 readable probes of the first layout-probe runs (evidence/library_plans.md,
"Layouts"), before fresh probes tested it."""


def refined_rule_text(nvjet_k_floor: int = 8) -> str:
    """:data:`REFINED_RULE_TEXT` with the nvjet kernels' K floored to a multiple of ``nvjet_k_floor``."""
    return REFINED_RULE_TEXT.replace("floored to a multiple of 8", f"floored to a multiple of {nvjet_k_floor}")


def refined_rule(family: str, layout: str, nvjet_k_floor: int = 8) -> dict[str, Any] | None:
    """The refined rule (:data:`REFINED_RULE_TEXT`, the nvjet floor ``nvjet_k_floor``: 8 as fitted first, 2 as
    fitted to the fresh probes of the weight-gradient layouts) of one variant as a slice rule (data:
    :func:`tcsmt.library.families.slice_rule_fields`), None where it names none (other families)."""
    if family.startswith("cutlass_sm80_"):
        return {"grain_bytes": [128, 16] if layout in ("nn", "tn") else [16, 16]}
    if family.startswith("nvjet_sm90_"):
        return {"k_floor": nvjet_k_floor}
    return None


def chunk_rules(K: int, starts: list[int]) -> list[str]:
    """The grains G (and S) whose chunk rule gives these starts (what the bits say where the family's rule fails)."""
    S = len(starts)
    out = []
    for G in (4, 8, 16, 32, 64, 128, 256):
        for s in range(S, 4 * S + 1):
            if chunk_starts(K, s, G) == starts:
                out.append(f"G={G} S={s}")
                break
    for a in (8, 64):
        for G in (64, 128):
            chunk = _ceil_div(_ceil_div(K - K % a, G), S) * G
            if K % a and [i * chunk for i in range(S) if i * chunk < K] == starts:
                out.append(f"G={G} S={S} on K floored to a multiple of {a} (the tail in the last slice)")
    return out


def kernel_name(k: str) -> str:
    """The profiler's demangled kernel name as the recordings write it (no ``void``, no parameter list)."""
    from tools.library.plans_build import kernel_name as short
    return short(k)


def _scheme(trace: list[str] | None) -> str | None:
    m = [x.group(1) for a in trace or [] for x in [re.search(r"reductionScheme=(\w+)", a)] if x]
    return m[0] if m else None


def judge(p: dict[str, Any], families: dict[str, Any],
          rule: dict[str, Any] | None = None) -> tuple[bool, list[str], dict[str, Any]]:
    """(agrees, why not, what the bits read) of one probe against its family's rule, or against the variant's
    slice rule ``rule`` (:func:`rule_starts`) where given (module docstring)."""
    fam_name = p["config"].split(" | ")[0]
    fam = families[fam_name]
    rec = p["recorded"]
    S, K = int(rec["split_k"]), p["K"]
    why = []
    for k in ("torch_error", "probe_torch_error", "probe_error"):
        if p.get(k):
            why.append(f"{k}: {p[k]}")
    for which in ("kernels", "probe_kernels"):
        ks = [kernel_name(k) for k in p.get(which) or []]
        if ks != rec["kernels"]:
            why.append(f"{which} {ks} are not the recorded {rec['kernels']}")
    for which in ("lt_split_k", "probe_lt_split_k"):
        if p.get(which) != S:
            why.append(f"{which} {p.get(which)} != recorded S {S}")
    scheme = _scheme(p.get("probe_lt_algo"))
    if scheme != rec.get("reduction_scheme"):
        why.append(f"traced reductionScheme {scheme} != recorded {rec.get('reduction_scheme')}")
    starts = p.get("starts")
    want = rule_starts(fam, K, S, rule, p["a_dtype"])
    red = p.get("reduce2") or {}
    cols = int(red.get("columns") or 0)
    agree = red.get("agree") or {}
    read = {"starts": starts, "slices": len(starts or []), "rule_starts": want,
            "chunk_rules_fitting": chunk_rules(K, starts) if starts else [],
            "reduction_columns": cols,
            "reductions_on_every_column": sorted(h for h, v in agree.items() if cols and v == cols)}
    if starts != want:
        which = f"the slice rule {rule_key(rule)}" if rule else "the family's rule"
        why.append(f"slice starts {starts} != {which} {want} (fitting: {read['chunk_rules_fitting']})")
    if p.get("n_anomalies") or p.get("noncontiguous_groups"):
        why.append(f"anomalies {p.get('n_anomalies')}, noncontiguous groups {(p.get('noncontiguous_groups') or [])[:4]}")
    name, no = reduction_of(fam, p["out_dtype"])
    hyp = HYPOTHESIS.get(name or "")
    read["family_reduction"] = hyp or no
    if hyp is None:
        why.append(f"the family has no reduction for this output: {no}")
    elif not cols or agree.get(hyp) != cols:
        why.append(f"reduction {hyp}: {agree.get(hyp)} of {cols} columns (on every column: "
                   f"{read['reductions_on_every_column']})")
    return not why, why, read


def summarize(gpu: str, raw: list[dict[str, Any]], families: dict[str, Any], stats: dict, grid: set,
              header: dict[str, Any], refined: bool = False, nvjet_k_floor: int = 8) -> dict[str, Any]:
    """The committed file: header, one entry per variant of the GPU's recordings (verdict from the probes), and
    the probes with their readings.  ``refined``: each probe is judged against its variant's refined rule
    (:func:`refined_rule`; the variant's ``slice_rule``, its ``verdict``) and against the family's own rule
    (``agrees_family_rule``, the variant's ``family_rule_verdict``)."""
    per: dict[tuple[str, str], list] = collections.defaultdict(list)
    fam_ok: dict[tuple[str, str], list[bool]] = collections.defaultdict(list)
    probes = []
    for p in raw:
        fam, tag = p["config"].split(" | ")
        rule = refined_rule(fam, tag, nvjet_k_floor) if refined else None
        ok, why, read = judge(p, families, rule)
        per[(fam, tag)].append((p, ok, why, read))
        entry = {**p, "agrees": ok, "why_not": why, "read": read}
        if refined:
            ok_f, why_f, _ = judge(p, families)
            fam_ok[(fam, tag)].append(ok_f)
            entry.update(slice_rule=rule, agrees_family_rule=ok_f, why_not_family_rule=why_f)
            ok = ok and ok_f
        if "raw" in (p.get("reduce2") or {}):  # the device keeps 32 (partials, output) pairs; 4 are committed
            entry["reduce2"] = {**p["reduce2"], "raw": p["reduce2"]["raw"][:KEEP_RAW]}
        if ok:  # the per-16-k patterns only where the starts they give are not the rule's
            entry.pop("group_patterns", None)
        probes.append(entry)
    variants = []
    for key in sorted(set(stats) | set(per), key=lambda k: (k[0], k[1])):
        st = stats.get(key)
        ps = per.get(key, [])
        n_ok = sum(ok for _p, ok, _w, _r in ps)
        e: dict[str, Any] = {"family": key[0], "layout": key[1],
                             "kernels": sorted({k for p, *_ in ps for k in p["recorded"]["kernels"]}),
                             "split_k": sorted({int(p["recorded"]["split_k"]) for p, *_ in ps}),
                             "probes": len(ps), "agree": n_ok,
                             "probed_on_the_grid_before": key in grid}
        if refined:
            e["slice_rule"] = refined_rule(*key, nvjet_k_floor)
            e["slice_rule_text"] = refined_rule_text(nvjet_k_floor)
            oks = fam_ok.get(key, [])
            e["family_rule_verdict"] = ("not probed" if not oks else "confirmed" if all(oks) else "refuted")
            e["agree_family_rule"] = sum(oks)
        if not ps:
            e["verdict"] = "not probed"
        elif n_ok == len(ps):
            e["verdict"] = "confirmed"
        else:
            e["verdict"] = "refuted"
            e["read"] = [f"{p['M']}x{p['N']}x{p['K']} {group_of(p)} S={p['recorded']['split_k']}: " + "; ".join(w)
                         for p, ok, w, _r in ps if not ok]
        e["probed_calls"] = [f"{group_of(p)} {p['M']}x{p['N']}x{p['K']} S={p['recorded']['split_k']}" for p, *_ in ps]
        if st:
            e["recorded"] = {"calls": st["calls"], "calls_default_settings": st["calls_default_settings"],
                             "split_k": {str(k): v for k, v in sorted(st["split_k"].items())},
                             "groups": dict(st["groups"].most_common()), "files": dict(st["files"].most_common()),
                             "kernel_names": len(st["kernels"]),
                             "most_called_kernels": dict(st["kernels"].most_common(5))}
        variants.append(e)
    return {**header, "gpu_key": gpu, "families_from": "evidence/h100_cublas_plans.json.gz", "variants": variants,
            "probes": probes}


def dump(doc: dict[str, Any]) -> str:
    """The committed file's text: indented, but one line per probe (their raw readings are long)."""
    head = json.dumps({k: v for k, v in doc.items() if k != "probes"}, indent=1)
    probes = ",\n".join("  " + json.dumps(p, separators=(",", ":")) for p in doc["probes"])
    return head[:-2] + ',\n "probes": [\n' + probes + "\n ]\n}\n"



def alternative_starts(fam: dict[str, Any], K: int, S: int, fp32: bool) -> dict[str, list[int]]:
    """Slice starts of the rules that the H100 layout probes left open: the family's, chunk rules of other grains
    (16 bytes of the input: 4 for fp32, 8 for 16-bit; 32; 64) and the family's grain on K floored to a multiple
    of 8 or of 64 (the tail in the last slice)."""
    G = grain_of(fam, K, "family")
    out = {"family rule": rule_starts(fam, K, S)}
    for g in ((4, 32) if fp32 else (8, 32, 64)):
        out[f"G={g}"] = chunk_starts(K, S, g)
    for a in (8, 64):
        chunk = _ceil_div(_ceil_div(K - K % a, G), S) * G
        out[f"G={G} on K floored to {a}"] = [i * chunk for i in range(S) if i * chunk < K]
    return out
