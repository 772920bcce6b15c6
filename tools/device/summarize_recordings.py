"""Figures of the plan recordings (evidence/library/recordings): capture against the committed plan files and against
executed calls, counts, rates, settings and GPUs compared, kernel names outside the split-K families.

    python3 tools/device/summarize_recordings.py --dir evidence/library/recordings \\
        --plans h100=evidence/h100_cublas_plans.json.gz --plans h200=evidence/h200_cublas_plans.json.gz \\
        --out evidence/library/recordings/summary.json.gz

Standard library only, plus ``tcsmt.library.families.family_of`` (the families' own matching rule) and the loader
``tcsmt.io.load.read_json`` (the plan files are gzipped JSON) from the repository it runs in.  (The committed
summary was made when the plan files were ``hwcheck/results/<gpu>_cublas_plans.json``: its command and
``families_from`` name them so; evidence/README.md maps old paths.  It was written as summary.json and compressed
with ``gzip -9 -n`` on 2026-11-27, its text unchanged: the working tree that travels to the GPU host is size-limited.)
"""
from __future__ import annotations

import argparse
import bisect
import collections
import gzip
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
import recordings as R  # noqa: E402

from tcsmt.io.load import read_json  # noqa: E402
from tcsmt.library.families import family_of  # noqa: E402

CALL_FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32",
               "scale", "fast_accum")
PTR = re.compile(r"(Pointer)=0[xX][0-9a-fA-F]+")


def lt_committed(a: str) -> str:
    """A committed plan file's trace summary in the recordings' form (no addresses, no '; ws=N')."""
    return re.sub(r"; ws=\d+$", "", PTR.sub(r"\1", a))


_PLANS: dict = {}


def plan(rec: dict, pid: int) -> dict:
    key = (id(rec), pid)
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = R.plan_dict(rec, pid)
    return p


def sig(p: dict) -> tuple:
    return (tuple(p["kernels"]), p["split_k"], p["reduction_scheme"], p["torch_error"] is not None)


# ------------------------------------------------------------------------------------------------ (a) grid
def grid_vs_committed(rec: dict, committed: dict) -> dict:
    ref = {tuple(c[k] for k in CALL_FIELDS): c for c in committed["calls"]}
    lt = committed["lt_algos"]
    cnt = collections.Counter()
    diffs = []
    for task in rec["tasks"]:
        for call, pid, _g, _w in R.iter_list(task, rec["fields"]):
            rc = ref.get(tuple(call[k] for k in CALL_FIELDS))
            if rc is None:
                cnt["not_in_committed_file"] += 1
                continue
            p = plan(rec, pid)
            red = [m.group(1) for a in rc.get("lt", []) for m in [re.search(r"reductionScheme=(\w+)", lt[a])] if m]
            checks = {
                "kernels": p["kernels"] == rc["kernels"],
                "split_k": p["split_k"] == rc.get("split_k"),
                "reduction_scheme": (p["reduction_scheme"] or None) == (red[0] if red else None),
                "lt_trace": p["lt"] == [lt_committed(lt[a]) for a in rc.get("lt", [])],
                "torch_refusal": (p["torch_error"] is not None) == bool(rc.get("torch_error")),
            }
            cnt["compared"] += 1
            for k, v in checks.items():
                cnt[k + "_equal"] += v
            if all(checks.values()):
                cnt["all_equal"] += 1
            elif len(diffs) < 40:
                diffs.append({"call": {k: call[k] for k in CALL_FIELDS}, "differs": [k for k, v in checks.items() if not v],
                              "capture": {"kernels": p["kernels"], "split_k": p["split_k"], "lt": p["lt"]},
                              "committed": {"kernels": rc["kernels"], "split_k": rc.get("split_k"),
                                            "lt": [lt_committed(lt[a]) for a in rc.get("lt", [])]}})
    return {"counts": dict(cnt), "differences": diffs}


# ------------------------------------------------------------------------------------------------ (b) executed
def capture_vs_executed(rec: dict) -> dict:
    cnt = collections.Counter()
    diffs = []
    by_op = collections.Counter()
    for task in rec["tasks"]:
        cap = list(R.iter_list(task, rec["fields"]))
        for e in task["exec"]:
            idx, epid, egrids, ews, cfull, efull, _smem, _ecl = e
            call, cpid, cgrids, cws = cap[idx]
            pc, pe = plan(rec, cpid), plan(rec, epid)
            checks = {
                "kernel_names": pc["kernels"] == pe["kernels"],
                "full_demangled_names": cfull == efull,
                "grids": cgrids == egrids,
                "blocks": pc["blocks"] == pe["blocks"],
                "split_k": pc["split_k"] == pe["split_k"],
                "reduction_scheme": pc["reduction_scheme"] == pe["reduction_scheme"],
                "lt_trace": pc["lt"] == pe["lt"],
                "workspace_bytes": cws == ews,
                "other_nodes": pc["other_nodes"] == pe["other_nodes"],
                "torch_refusal": pc["torch_error"] == pe["torch_error"],
            }
            cnt["calls"] += 1
            cnt["refused_by_torch"] += pc["torch_error"] is not None
            by_op[(call["op"], call["a_dtype"], call["out_dtype"], bool(call["a_t"]), bool(call["b_t"]))] += 1
            for k, v in checks.items():
                cnt[k + "_equal"] += v
            if all(checks.values()):
                cnt["all_equal"] += 1
            elif len(diffs) < 40:
                diffs.append({"call": call, "differs": [k for k, v in checks.items() if not v],
                              "capture": [pc["kernels"], cgrids, pc["other_nodes"], cws],
                              "executed": [pe["kernels"], egrids, pe["other_nodes"], ews]})
    return {"counts": dict(cnt), "differences": diffs,
            "calls_per_kind": {json.dumps(k): v for k, v in sorted(by_op.items(), key=str)}}


# ------------------------------------------------------------------------------------------------ counts
def task_key(task: dict) -> str:
    return json.dumps([task.get("dtype"), task.get("product"), task.get("layer"), task["call"]], sort_keys=True)


def runs_with_counts(task: dict):
    ms = R.task_values(task)
    pos = {t: i for i, t in enumerate(ms)}
    for r in R.iter_runs(task):
        yield r, pos[r[1]] - pos[r[0]] + 1


def file_counts(rec: dict, families: dict, seen: set) -> dict:
    """Calls, runs, refusals, capture failures and split calls per (dtype, product); kernel names with their calls;
    the kernels of split calls (S > 1) that no family takes (``family_of``), and the kernels of split calls that a
    family takes but that the committed plan file of the GPU never recorded (``seen``)."""
    per = collections.defaultdict(collections.Counter)
    kern = collections.Counter()
    split_nofam = collections.Counter()
    split_unseen = collections.Counter()
    plan_fam = {}
    for task in rec["tasks"]:
        if task["kind"] == "mrange":
            items = ((r[2], n) for r, n in runs_with_counts(task))
            key = f"{task.get('dtype')} {task.get('product')}"
        else:
            items = ((pid, 1) for _c, pid, _g, _w in R.iter_list(task, rec["fields"]))
            key = task["list"].split(":")[0]
        c = per[key]
        c["tasks"] += 1
        for pid, n in items:
            p = plan(rec, pid)
            c["calls"] += n
            c["runs"] += 1
            c["torch_refusals"] += n * (p["torch_error"] is not None)
            c["capture_failures"] += n * (p["capture_error"] is not None)
            c["split_k_gt_1"] += n * ((p["split_k"] or 1) > 1)
            for k in p["kernels"]:
                kern[k] += n
            if (p["split_k"] or 1) > 1:
                if pid not in plan_fam:
                    plan_fam[pid] = family_of({"kernels": p["kernels"], "reduction_scheme": p["reduction_scheme"]},
                                              families, "recording")
                if plan_fam[pid] is None:
                    c["split_calls_without_family"] += n
                    for k in p["kernels"]:
                        split_nofam[(k, p["reduction_scheme"])] += n
                else:
                    for k in p["kernels"]:
                        if k not in seen:
                            split_unseen[(k, plan_fam[pid][0])] += n
    return {"per": {k: dict(v) for k, v in per.items()}, "kernels": kern, "split_without_family": split_nofam,
            "split_unseen": split_unseen}


# ------------------------------------------------------------------------------------------------ comparisons
def compare_files(a: dict, b: dict) -> dict:
    """Token counts of b's tasks that a also recorded, and how many have a's kernels, S, reduction and refusal."""
    idx = {task_key(t): t for t in a["tasks"] if t["kind"] == "mrange"}
    cnt = collections.Counter()
    per = collections.defaultdict(collections.Counter)
    for tb in b["tasks"]:
        if tb["kind"] != "mrange":
            continue
        ta = idx.get(task_key(tb))
        if ta is None:
            cnt["tasks_unmatched"] += 1
            continue
        ms = R.task_values(tb)
        ra = [(r[0], r[1], sig(plan(a, r[2]))) for r in R.iter_runs(ta)]
        starts = [r[0] for r in ra]
        k = f"{tb.get('dtype')} {tb.get('product')}"
        for r in R.iter_runs(tb):
            sb = sig(plan(b, r[2]))
            lo, hi = bisect.bisect_left(ms, r[0]), bisect.bisect_right(ms, r[1])
            for t in ms[lo:hi]:
                j = bisect.bisect_right(starts, t) - 1
                if j < 0 or ra[j][1] < t:
                    cnt["not_in_a"] += 1
                    continue
                sa = ra[j][2]
                same = sa == sb
                cnt["compared"] += 1
                cnt["same_kernels_S_reduction_refusal"] += same
                cnt["same_S"] += sa[1] == sb[1]
                per[k]["compared"] += 1
                per[k]["same"] += same
                per[k]["split_in_a"] += (sa[1] or 1) > 1
                per[k]["split_in_b"] += (sb[1] or 1) > 1
                per[k]["refused_in_b"] += sb[3]
    return {"counts": dict(cnt), "per_dtype_product": {k: dict(v) for k, v in per.items()}}


def autograd_summary(path: str) -> list:
    with open(path) as f:
        d = json.load(f)
    out = []
    for c in d["cases"]:
        ops = []
        for o in c["gemm_ops"]:
            ops.append([o["op"], [[a.get("shape"), a.get("stride")] if isinstance(a, dict) else a for a in o["args"]]])
        out.append({"dtype": c["dtype"], "bias": c["bias"], "module": c.get("module", "nn.Linear"),
                    "input_shape": c["input_shape"], "T": c["T"], "K": c["K"], "N": c["N"], "gemm_ops": ops})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--plans", action="append", required=True, help="GPU=committed plan file")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    plans = dict(x.split("=", 1) for x in args.plans)
    fam_src = read_json(plans["h100"], "recorded plan file")
    families = fam_src["families"]
    res: dict = {"families_from": plans["h100"], "families": {k: v.get("kernel_regex") for k, v in families.items()}}
    files = sorted(f for f in os.listdir(args.dir) if f.endswith(".json.gz"))
    recs = {f[:-8]: R.load(os.path.join(args.dir, f)) for f in files}
    res["files"] = {}
    kern_all: dict = collections.defaultdict(collections.Counter)
    nofam_all: dict = collections.defaultdict(collections.Counter)
    unseen_all: dict = collections.defaultdict(collections.Counter)
    committed = {g: read_json(p, "recorded plan file") for g, p in plans.items()}
    seen = {g: {k for c in committed[g]["calls"] for k in c.get("kernels") or []} for g in committed}
    for name, rec in recs.items():
        gpu = name.split("_")[0]
        dev = rec.get("device", {})
        fc = file_counts(rec, families, seen[gpu])
        res["files"][name] = {
            "gpu": dev.get("gpu"), "sm_count": dev.get("sm_count"), "driver": dev.get("driver"), "torch": dev.get("torch"),
            "cublas": dev.get("cublas_version"), "cublaslt": dev.get("cublaslt"), "setting": rec["setting"],
            "setting_said": dev.get("setting_said"), "method": rec["method"], "lists": rec["lists"],
            "stats": rec["stats"], "not_done": rec["not_done"], "date_utc": dev.get("date_utc"),
            "counts": fc["per"]}
        for k, v in fc["kernels"].items():
            kern_all[gpu][k] += v
        for k, v in fc["split_without_family"].items():
            nofam_all[gpu][k] += v
        for k, v in fc["split_unseen"].items():
            unseen_all[gpu][k] += v
    for gpu in plans:
        g = recs.get(f"{gpu}_grid_capture")
        if g is not None:
            res[f"{gpu}_grid_capture_vs_committed"] = grid_vs_committed(g, committed[gpu])
        f = recs.get(f"{gpu}_fresh_compare")
        if f is not None:
            res[f"{gpu}_fresh_capture_vs_executed"] = capture_vs_executed(f)
        ag = os.path.join(args.dir, f"{gpu}_autograd.json")
        if os.path.exists(ag):
            res[f"{gpu}_autograd"] = autograd_summary(ag)
        base = recs.get(f"{gpu}_layers_16bit")
        for name, rec in recs.items():
            if base is not None and name.startswith(f"{gpu}_layers_bf16_"):
                res.setdefault("settings_vs_default", {})[name] = compare_files(base, rec)
    if "h100_layers_16bit" in recs and "h200_layers_16bit" in recs:
        res["h200_vs_h100_layers_16bit"] = compare_files(recs["h100_layers_16bit"], recs["h200_layers_16bit"])
    names = set(kern_all["h100"]) | set(kern_all["h200"])
    in_fam = {k for k in names if any(re.search(v["kernel_regex"], k) for v in families.values() if v.get("kernel_regex"))}
    res["kernel_names"] = {"distinct": len(names), "matching_a_family_regex": len(in_fam),
                           "per_gpu_distinct": {g: len(v) for g, v in kern_all.items()}}
    res["split_calls_without_family"] = {
        g: [{"kernel": k, "reduction_scheme": red, "calls": n} for (k, red), n in v.most_common()]
        for g, v in nofam_all.items()}
    res["split_kernels_with_family_not_in_committed_file"] = {
        g: {"distinct": len(v), "calls": sum(v.values()),
            "per_family": {f: sum(n for (_k, f2), n in v.items() if f2 == f) for f in sorted({f for _k, f in v})},
            "kernels": [{"kernel": k, "family": f, "calls": n} for (k, f), n in v.most_common()]}
        for g, v in unseen_all.items()}
    splitish = collections.Counter()
    for g, v in kern_all.items():
        for k, n in v.items():
            if k not in in_fam and re.search(r"split|segment_k", k, re.I):
                splitish[(g, k)] += n
    res["split_named_kernels_outside_families"] = [{"gpu": g, "kernel": k, "calls": n}
                                                   for (g, k), n in splitish.most_common()]
    with (gzip.open if args.out.endswith(".gz") else open)(args.out, "wt") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k.endswith(("committed", "executed"))}, indent=1)[:6000])


if __name__ == "__main__":
    main()
