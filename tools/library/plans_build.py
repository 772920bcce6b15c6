"""Build the committed plan, probe and validation files (evidence/library_plans.md) from one device run.

    python3 tools/library/plans_build.py DEVICE_OUT_DIR [--results evidence] [--prefix h200]

DEVICE_OUT_DIR holds what ``tools/device/library_plans.py --out`` wrote (``h100_cublas_plans.json.gz``,
``probes.json``, ``h100_library_validation.json``).  This script adds nothing measured: it drops the
profiler's parameter lists from kernel names (``void f<T>(Params)`` -> ``f<T>``), moves cuBLASLt's algorithm
strings into one table, summarises the slice and reduction probes per kernel family (``families``), and
writes ``h100_cublas_plans.json.gz`` (gzipped JSON), ``h100_library_probes.json.gz`` (gzipped) and
``h100_library_validation.json.gz`` (gzipped; ``--prefix h200``: ``h200_...``; the device script names its files ``h100_...``
whatever the GPU; the GPU is in the files).
A run without probes (no ``probes.json``) gets no probe file and an empty ``families``.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import sys
from types import SimpleNamespace

import click

from tcsmt.hwcheck.library_calls import CALL_FIELDS
from tcsmt.hwcheck.plan_capture import kernel_name
from tcsmt.io.options import NON_NEGATIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main


def lt_text(a: str) -> str:
    """cuBLASLt's trace summary without device addresses (``biasPointer=0x7f..`` -> ``biasPointer``)."""
    return re.sub(r"(Pointer)=0[xX][0-9a-fA-F]+", r"\1", a)


def _ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for positive b, in integers."""
    return -(-a // b)


def chunk_starts(K: int, S: int, G: int) -> list[int]:
    """Slice starts of the rule chunk = ceil(ceil(K/G)/S)*G, remainder in the last slice (empty slices have
    no start).  With G = 128 this is also mmaemu's q = ceil(T/S) tiles of 128."""
    chunk = _ceil_div(_ceil_div(K, G), S) * G
    return [i * chunk for i in range(S) if i * chunk < K]


HALF = ("bf16_bf16", "f16_f16", "bf16_f32", "f16_f32")
CUTLASS_HALF = r"^cutlass::Kernel2<cutlass_(75|80)_(wmma_)?tensorop_.*gemm.*>$"
FAMILIES: dict[str, dict] = {
    "nvjet_sm90_16bit_splitK": {
        "kernel_regex": r"^nvjet_sm90_(tst|tss|hsh|hss)_.*_splitK_.*$",
        "with": "cublasLt::splitKreduce_kernel<...>", "configs": HALF, "grain": 64,
        "scheme": "REDUCTION_SCHEME_COMPUTE_TYPE"},
    "nvjet_sm90_fp8_splitK": {
        "kernel_regex": r"^nvjet_sm90_(qq|rq)[a-z]*_.*_splitK_.*$",
        "with": "cublasLt::splitKreduce_kernel<...>",
        "configs": ("e4m3_bf16", "e4m3_bf16_fast", "e4m3_f32", "e4m3_f32_fast"), "grain": 128,
        "scheme": "REDUCTION_SCHEME_COMPUTE_TYPE"},
    "cutlass_sm80_fp32_splitK": {
        "kernel_regex": r"^cutlass::Kernel2<cutlass_80_(tensorop_s1688gemm|simt_sgemm)_.*>$",
        "with": "cublasLt::splitKreduce_kernel<...> (cuBLASLt algoId 20 / 21 / 23; tf32 tensor ops or fp32 simt)",
        "configs": ("tf32_f32", "f32_f32"), "grain": "32 if K % 32 == 0 else 4", "small_grain": 4,
        "scheme": "REDUCTION_SCHEME_COMPUTE_TYPE"},
    "cutlass_sm80_16bit_splitK_compute_type": {
        "kernel_regex": CUTLASS_HALF, "scheme": "REDUCTION_SCHEME_COMPUTE_TYPE",
        "with": "cublasLt::splitKreduce_kernel<...>; cuBLASLt trace reductionScheme=REDUCTION_SCHEME_COMPUTE_TYPE",
        "configs": HALF, "grain": "32 if K % 32 == 0 else 8", "small_grain": 8},
    "cutlass_sm80_16bit_splitK_output_type": {
        "kernel_regex": CUTLASS_HALF, "scheme": "REDUCTION_SCHEME_OUTPUT_TYPE",
        "with": "cublasLt::splitKreduce_kernel<...>; cuBLASLt trace reductionScheme=REDUCTION_SCHEME_OUTPUT_TYPE",
        "configs": HALF, "grain": "32 if K % 32 == 0 else 8", "small_grain": 8},
    "cutlass_sm80_16bit_splitK_inplace": {
        "kernel_regex": CUTLASS_HALF, "scheme": "REDUCTION_SCHEME_INPLACE",
        "with": "no reduce kernel; cuBLASLt trace reductionScheme=REDUCTION_SCHEME_INPLACE (serial split-K)",
        "configs": HALF, "grain": "32 if K % 32 == 0 else 8", "small_grain": 8},
}
HYPOTHESES = {
    "fp32_forward": "fp32 partials added in fp32 from partial 0 upwards, then one RNE rounding to the output",
    "fp32_reverse": "fp32 partials added in fp32 from the last partial down",
    "fp32_pairwise": "fp32 partials added pairwise (halves)",
    "out_rounded_partials_fp32_sum": "each partial rounded (RNE) to the output format, added forward in fp32, "
                                     "the sum rounded to the output format",
    "out_dtype_chain": "each partial rounded to the output format and added into a running output-format sum",
    "out_serial_f32add": "serial: output = RNE(partial 0); then output = RNE(fp32(output + partial s)) for s = 1..",
}


def grain(fam: str, K: int) -> int:
    """The slice grain G of a family for depth K (the sm80 cutlass families: 32 where 32 divides K, else 16 bytes
    of the input format)."""
    g = FAMILIES[fam]["grain"]
    if isinstance(g, int):
        return g
    return 32 if K % 32 == 0 else FAMILIES[fam]["small_grain"]


def lt_scheme(p: dict) -> str:
    for a in p.get("lt_algo") or []:
        m = re.search(r"reductionScheme=(\w+)", a)
        if m:
            return m.group(1)
    return "none"


def family_of(p: dict) -> str | None:
    names = [kernel_name(k) for k in p["kernels"]]
    for fam, d in FAMILIES.items():
        if p["config"] in d["configs"] and any(re.match(d["kernel_regex"], n) for n in names) and \
                d.get("scheme", lt_scheme(p)) == lt_scheme(p):
            return fam
    return None


CONFIG_OF = {  # (op class, a dtype, out dtype, tf32) -> probe configuration
             ("mm", "bfloat16", "bfloat16", False): "bf16_bf16", ("mm", "float16", "float16", False): "f16_f16",
             ("mm", "bfloat16", "float32", False): "bf16_f32", ("mm", "float16", "float32", False): "f16_f32",
             ("mm", "float32", "float32", True): "tf32_f32", ("mm", "float32", "float32", False): "f32_f32"}


def call_family(c: dict) -> str | None:
    """The split-K family of a recorded call (its kernel names and the reductionScheme of its trace
    ``lt_algo``), else None.  Every op maps to the configuration of its dtypes (bmm, addmm, linear included)."""
    config = _config_of(c)
    if config is None:
        return None
    return family_of({"config": config, "kernels": c["kernels"], "lt_algo": c.get("lt_algo") or []})


def _config_of(c: dict) -> str | None:
    if c["op"] == "scaled_mm":
        return "e4m3_bf16" if c["out_dtype"] == "bfloat16" else "e4m3_f32"
    return CONFIG_OF.get(("mm", c["a_dtype"], c["out_dtype"], bool(c.get("tf32")) and c["a_dtype"] == "float32"))


def summarise(probes: list[dict]) -> dict:
    fams: dict = {}
    for p in probes:
        fam = family_of(p)
        if fam is None or len(p["starts"]) < 2:
            continue
        d = FAMILIES[fam]
        f = fams.setdefault(fam, {"probes": 0, "S_lt_eq_S_bits": 0, "grain_rule_lt_S": 0, "grain_rule_bits_S": 0,
                                  "tiles128_rule_lt_S": 0, "clean": 0, "reduce": {}, "reduce2": {}, "shapes": [],
                                  "mismatch": [], "schemes": set(), "ws_planes_eq_S_bits": 0,
                                  "out_dtypes": set()})
        f["probes"] += 1
        f["clean"] += bool(p.get("clean")) and not p.get("noncontiguous_groups") and not p.get("n_anomalies")
        S_lt, S_bits, K = p.get("lt_split_k"), len(p["starts"]), p["K"]
        f["S_lt_eq_S_bits"] += S_lt == S_bits
        if S_lt != S_bits:
            f.setdefault("mismatch", []).append(f"{p['M']}x{p['N']}x{K}: logged {S_lt}, {S_bits} slices of "
                                                f"{p['starts'][1] if S_bits > 1 else K}")
        for a in p.get("lt_algo") or []:
            m = re.search(r"reductionScheme=(\w+)", a)
            f.setdefault("schemes", set()).add(m.group(1) if m else "none")
        if S_lt:
            f["grain_rule_lt_S"] += chunk_starts(K, S_lt, grain(fam, K)) == p["starts"]
            ws = [int(m.group(1)) for a in p.get("lt_algo") or [] for m in [re.search(r"ws=(\d+)", a)] if m]
            planes = {w // (4 * p["M"] * p["N"]) for w in ws}
            f["ws_planes_eq_S_bits"] += planes == {S_bits}
            f["tiles128_rule_lt_S"] += chunk_starts(K, S_lt, 128) == p["starts"]
        f["grain_rule_bits_S"] += chunk_starts(K, S_bits, grain(fam, K)) == p["starts"]
        f["shapes"].append(f"{p['config']} {p['M']}x{p['N']}x{K}: S_lt={S_lt} starts={p['starts'][:4]}"
                           f"{'...' if S_bits > 4 else ''}")
        f["out_dtypes"].add(p["out_dtype"])
        kind = "fp32 out" if p["out_dtype"] == "float32" else "fp16/bf16 out"
        for key, store in (("reduce", "reduce"), ("reduce2", "reduce2")):
            for name, n in (p.get(key) or {}).get("agree", {}).items():
                r = f.setdefault(store, {}).setdefault(name, [0, 0])
                r[0] += n
                r[1] += p[key]["columns"]
                if key == "reduce2":
                    r = f.setdefault("by_kind", {}).setdefault(kind, {}).setdefault(name, [0, 0])
                    r[0] += n
                    r[1] += p[key]["columns"]
    out = {}
    for fam, f in fams.items():
        d = FAMILIES[fam]
        red = {k: f"{a} of {b}" for k, (a, b) in f["reduce"].items()}
        red2 = {k: f"{a} of {b}" for k, (a, b) in f["reduce2"].items()}
        parts = []
        for kind, hyps in sorted(f.get("by_kind", {}).items(), reverse=True):
            full = [k for k, (a, b) in hyps.items() if a == b]
            if len(full) == 1 or (full and full[0] == "fp32_forward" and
                                  {"fp32_reverse", "fp32_pairwise"} <= {k for k, (a, b) in hyps.items() if a < b}):
                parts.append(f"{kind}: {full[0]} ({HYPOTHESES[full[0]]})")
            elif set(full) == {"fp32_forward", "fp32_reverse", "fp32_pairwise"} and all(
                    a < b for k, (a, b) in hyps.items() if k.startswith("out_")):
                parts.append(f"{kind}: fp32 partials summed in fp32, the sum rounded once (RNE) to the output; "
                             f"the order is hidden by that rounding here (the fp32-out probes of the family fix it)")
            else:
                parts.append(f"{kind}: undetermined (full agreement: {full})")
        reduce = "; ".join(parts) if parts else "unknown"
        ev = (f"slice probe (tools/device/library_plans.py slice_probe: per column, weights 2^m * unit at up to "
              f"8 positions q before an L, -L pair that cancels; a weight is lost exactly when q lies in the "
              f"pair's slice, since the slice's running sum absorbs it into L before -L cancels L) on "
              f"{f['probes']} split-K calls: every k position read (no anomaly, each slice contiguous) in "
              f"{f['clean']} of {f['probes']}; the number of slices equals "
              f"cuBLASLt's logged numSplitsK in {f['S_lt_eq_S_bits']} of {f['probes']}; starts equal "
              f"chunk = ceil(ceil(K/G)/S)*G with G = {d['grain']} (remainder in the last slice; the form of bitequiv's rule) "
              f"with the logged S in {f['grain_rule_lt_S']} of {f['probes']} and with the measured number of "
              f"slices in {f['grain_rule_bits_S']} of {f['probes']}; 128-wide tiles, q = ceil(T/S) (mmaemu's "
              f"H100 rule) with the logged S in {f['tiles128_rule_lt_S']} of {f['probes']}. Reduction probe 2 "
              f"(reduce_probe2: two products per slice, so each partial is exact in fp32 but in general not in "
              f"fp16/bf16, random signs, exponents spread across slices, 4 to 64 rounds; outputs compared with "
              f"exact fp32 partials reduced by each hypothesis), agreement: {red2}."
              + (f" (Probe 1, one product per slice, cannot separate the hypotheses where all partials fit the "
                 f"output format: {red}.)" if red else ""))
        if fam == "nvjet_sm90_fp8_splitK":
            ev += (" Reduction probe 2 with fp8 products 4 to 12 binades apart inside one slice matched no "
                   "hypothesis with exact partials (e4m3 -> fp32: e.g. 30 of 64, 240 of 512), as the fp8 block "
                   "does not keep such sums exact; the counts above are from the rerun with A a power of two "
                   "per slice and gaps of 1 to 5 binades.")
        if f["S_lt_eq_S_bits"] < f["probes"]:
            ev += (f" The measured number of slices differs from the logged numSplitsK in "
                   f"{f['probes'] - f['S_lt_eq_S_bits']} of {f['probes']} probes ({'; '.join(f['mismatch'][:4])}): "
                   f"the rule's last slices are empty there (chunk * (S - 1) >= K), and the workspace in the "
                   f"trace, divided by 4*M*N bytes, equals the measured count in {f['ws_planes_eq_S_bits']} of "
                   f"{f['probes']}.")
        ev += f" reductionScheme values in cuBLASLt's trace of the probed calls: {sorted(f['schemes'])}."
        out[fam] = {"kernel_regex": d["kernel_regex"], "with": d["with"], "grain": d["grain"],
                    "lt_reduction_scheme": d["scheme"],
                    "rule": "chunk = ceil(ceil(K/G)/S)*G, slice s = [s*chunk, min(K, (s+1)*chunk)), S = numSplitsK "
                            "of cuBLASLt's trace; slices past K are empty",
                    "slices": "contiguous", "remainder": "last", "reduce": reduce,
                    "grain_rule_matches_logged_S": f"{f['grain_rule_lt_S']} of {f['probes']}",
                    "evidence": ev, "probed": f["shapes"]}
    return out


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("device_out", type=click.Path(exists=True, file_okay=False))
@click.option("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "evidence"),
              show_default=True, help="folder the built files are written to")
@click.option("--workspace", type=NON_NEGATIVE_INT, default=None,
              help="workspace bytes of torch's cuBLAS handle, where the run's own reading is void")
@click.option("--note", default="")
@click.option("--prefix", default="h100", show_default=True, help="file name prefix of the written files (h100, h200)")
@click.option("--driver", default=None, help="NVIDIA driver version of the run (nvidia-smi), where known")
@click.option("--probe-list", multiple=True,
              help="probe_list.json of a --probe-list run (more probes, with their reduce_probe2)")
@click.option("--reduce2", multiple=True,
              help="reduce2.json of a --reduce-from run; CONFIG_PREFIX=PATH takes only those configurations "
                   "(later files win)")
def build_cmd(**options) -> None:
    _build(SimpleNamespace(**options))


def _build(args: SimpleNamespace) -> None:
    with gzip.open(os.path.join(args.device_out, "h100_cublas_plans.json.gz"), "rt") as f:
        plans = json.load(f)
    probes_path = os.path.join(args.device_out, "probes.json")
    probes = []
    if os.path.exists(probes_path):
        with open(probes_path) as f:
            probes = json.load(f)
    with open(os.path.join(args.device_out, "h100_library_validation.json")) as f:
        val = json.load(f)
    for path in args.probe_list:
        with open(path) as f:
            for e in json.load(f):
                e["clean"] = not e["noncontiguous_groups"] and e["n_anomalies"] == 0
                e["source"] = "probe list"
                key = (e["config"], e["M"], e["N"], e["K"])
                probes = [q for q in probes if (q["config"], q["M"], q["N"], q["K"]) != key or
                          q.get("source") != "probe list"]
                probes.append(e)
    for spec in args.reduce2:
        prefix, _, path = spec.rpartition("=")
        with open(path) as f:
            r2 = json.load(f)["reduce2"]
        for r in r2:
            if prefix and not r["config"].startswith(prefix):
                continue
            for p in probes:
                if all(p[k] == r[k] for k in ("config", "M", "N", "K")):
                    p["reduce2"] = r["reduce2"]
    algos: dict[str, int] = {}
    calls = []
    for c in plans["calls"]:
        e = {k: c[k] for k in CALL_FIELDS}
        e["kernels"] = [kernel_name(k) for k in c["kernels"]]
        e["split_k"] = c["split_k"]
        e["split_k_source"] = c["split_k_source"]
        if c.get("lt_algo"):
            e["lt"] = [algos.setdefault(lt_text(a), len(algos)) for a in c["lt_algo"]]
        if c.get("torch_error"):
            e["torch_error"] = c["torch_error"]
        calls.append(e)
    table = list(algos)
    for e in calls:
        if (e["split_k"] or 1) > 1:
            lt = [table[i] for i in e.get("lt", [])]
            e["reduction_scheme"] = lt_scheme({"lt_algo": lt})
            e["family"] = call_family({**e, "lt_algo": lt})
    meta = plans["meta"]
    out = {"gpu": plans["gpu"], "torch": plans["torch"], "cuda": plans["cuda"], "cublas": plans["cublas"],
           "cublaslt": plans["cublaslt"], **({"driver": args.driver} if args.driver else {}),
           "workspace_bytes": args.workspace if args.workspace is not None else plans["workspace_bytes"],
           "method": plans["method"] + (" Kernel names: the profiler's, without 'void' and the parameter list. "
                                         "'lt' indexes 'lt_algos': cuBLASLt's trace of the call (entry point, "
                                         "algo config, compute descriptor, workspace bytes)."),
           "note": args.note,
           "matmul_settings": meta.get("matmul_settings"), "cublas_version": meta.get("cublas_version"),
           "packages": meta.get("packages"), "sm_count": meta.get("sm_count"),
           "cublaslt_log_vs_profiler": plans.get("cublaslt_log_vs_profiler"),
           "heuristic_vs_profiler": plans.get("heuristic_vs_profiler"),
           "lt_algos": list(algos), "families": summarise(probes), "calls": calls}
    os.makedirs(args.results, exist_ok=True)
    # gzipped (10 MB of JSON in 0.25 MB), with no name or time in the header (gzip -n): the same run gives the
    # same bytes; the package's loader (tcsmt.io.load.read_json) reads it as JSON
    with open(os.path.join(args.results, f"{args.prefix}_cublas_plans.json.gz"), "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write((json.dumps(out, separators=(",", ":")) + "\n").encode())
    keep = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32",
            "scale", "fast_accum", "config", "D", "lt_split_k", "tests", "pairs", "lost_pairs", "n_anomalies",
            "anomalies", "noncontiguous_groups", "starts", "clean", "reduce", "reduce2", "source")
    small = []
    for p in probes:
        e = {k: p.get(k) for k in keep}
        e["kernels"] = [kernel_name(k) for k in p["kernels"]]
        e["lt_algo"] = p.get("lt_algo")
        if p["K"] <= 4096:
            e["group_patterns"] = p.get("group_patterns")
        small.append(e)
    if small:
        with gzip.open(os.path.join(args.results, f"{args.prefix}_library_probes.json.gz"), "wt") as f:
            json.dump({"gpu": plans["gpu"], "torch": plans["torch"], "cublaslt": plans["cublaslt"],
                       "what": ("slice and reduction probes of split-K calls (tools/device/library_plans.py: "
                                "slice_probe, reduce_probe); group_patterns per 16 k positions: L = weight lost "
                                "(same slice as the L/-L pair), s = survived, after | the previous group's last q"),
                       "probes": small}, f, separators=(",", ":"))
            f.write("\n")
    for c in val["calls"]:
        c["kernels"] = [kernel_name(k) for k in c.get("kernels", [])]
        c["lt_algo"] = [lt_text(a) for a in c.get("lt_algo") or []]
        if (c.get("split_k") or 1) > 1:
            c["reduction_scheme"] = lt_scheme(c)
            c["family"] = call_family(c)
    if args.workspace is not None:
        val["workspace_bytes"] = args.workspace
    val["note"] = args.note
    if args.driver:
        val["driver"] = args.driver
    with gzip.open(os.path.join(args.results, f"{args.prefix}_library_validation.json.gz"), "wt") as f:
        json.dump(val, f, separators=(",", ":"))
        f.write("\n")


main = script_main(build_cmd, "python3 tools/library/plans_build.py")

if __name__ == "__main__":
    sys.exit(main())
