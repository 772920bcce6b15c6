"""Convert a recorded cuBLAS plan file (raw GPU facts, JSON) into a plan table in ``models/library``.

Usage: ``python -m tcsmt.library_import hwcheck/results/h100_cublas_plans.json [-o OUT] [--gpu h100] [--force]``

The raw file (written on the device; format in the issue-12 contract) lists
calls with the kernels the profiler saw and the split-K count S, and kernel
families with their slice rule (grain, contiguous/interleaved, remainder) and
reduction.  Each call becomes a plan when everything its arithmetic needs is
recorded; otherwise it goes to the table's ``[[unknown]]`` list with what is
missing, so a lookup names it.  Nothing is filled in by guessing, except:

* the K-chain of a slice comes from the input dtype (the library paths of the
  GPU's architecture file: fp16/bf16 -> the cuBLAS block chain, float32 with
  tf32 -> the tf32 chain, e4m3 -> ``scaled_mm_fast`` or ``scaled_mm``), or from
  a family's ``chain`` field when it names one;
* the epilogue of ``mm``/``bmm`` (alpha = 1, beta = 0, no bias: none) and of
  ``_scaled_mm`` without bias (mmaemu's published FFMA), unless the call or its
  family records ``epilogue``; every other epilogue must be recorded.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from .errors import TcsmtError
from .library_plan import EPILOGUE_STEPS, FP8, OPS, load_table, plans_dir, torch_dtype
from .registry import find_arch

REDUCE_NAMES = {"fp32_forward": "fp32_forward", "serial": "fp32_forward", "pairwise": "pairwise",
                "out_rounded": "out_rounded", "out_dtype_rounded": "out_rounded",
                "out_chain": "out_chain", "out_dtype_chain": "out_chain", "serial_out_dtype": "out_chain"}
MMAEMU = ("_scaled_mm epilogue alpha = RN32(scale_a*scale_b), y = FFMA(acc, alpha, +0): mmaemu 0.1.0 "
          "(shared/reference/library_gemm.md)")
_CALL_KEYS = ("op", "M", "N", "K", "a_dtype")


def _gpu_short(name: str) -> str:
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name or "")
    if not m:
        raise TcsmtError(f"cannot tell the GPU from {name!r}: pass --gpu")
    return m.group(1).lower()


def _chain_for(call: dict[str, Any], family: dict[str, Any] | None) -> tuple[dict[str, str] | None, str]:
    """(arch path fields without arch, why not) for the slice K-chain of one raw call."""
    if family and isinstance(family.get("chain"), dict):
        return dict(family["chain"]), ""
    a, b = call["a_dtype"], call.get("b_dtype") or call["a_dtype"]
    if a != b:
        return None, f"no chain model for {a} x {b}"
    if call["op"] == "scaled_mm":
        if a != "float8_e4m3fn":
            return None, f"no chain model for _scaled_mm on {a}"
        instr = "scaled_mm_fast" if call.get("fast_accum") else "scaled_mm"
        return {"in_fmt": "e4m3", "out_fmt": "fp32", "instr": instr}, ""
    if a in ("float16", "bfloat16"):
        return {"in_fmt": {"float16": "fp16", "bfloat16": "bf16"}[a], "out_fmt": "fp32", "instr": "cublas"}, ""
    if a == "float32" and call.get("tf32"):
        return {"in_fmt": "tf32", "out_fmt": "fp32", "instr": "cublas"}, ""
    if a in FP8:
        return None, f"torch runs no {call['op']} on {a}"
    return None, f"no chain model for {a} without tf32 (fp32 SIMT GEMMs are not modelled)"


def _family(kernels: list[str], families: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    for name, fam in families.items():
        rx = fam.get("kernel_regex")
        if rx and any(re.search(rx, k) for k in kernels):
            return name, fam
    return None


def _epilogue(call: dict[str, Any], family: dict[str, Any] | None) -> tuple[list[str] | None, str]:
    for src in (call, family or {}):
        if "epilogue" in src:
            steps = list(src["epilogue"])
            bad = [s for s in steps if s not in EPILOGUE_STEPS]
            if bad:
                raise TcsmtError(f"unknown epilogue steps {bad} (known: {', '.join(EPILOGUE_STEPS)})")
            return steps, "epilogue recorded"
    plain = not call.get("bias") and float(call.get("alpha", 1.0)) == 1.0 and float(call.get("beta", 0.0)) == 0.0
    if call["op"] in ("mm", "bmm") and plain:
        return [], ""
    if call["op"] == "scaled_mm" and not call.get("bias"):
        return ["scale"], MMAEMU
    return None, "epilogue unknown (alpha/beta/bias arithmetic not recorded)"


def convert(raw: dict[str, Any], source_name: str, gpu: str | None = None) -> str:
    """The plan table (TOML text) for one raw plan file."""
    for key in ("gpu", "calls"):
        if key not in raw:
            raise TcsmtError(f"{source_name}: not a recorded plan file (no {key!r})")
    gpu = (gpu or _gpu_short(raw["gpu"])).lower()
    arch = find_arch(gpu)
    families = raw.get("families") or {}
    method = raw.get("method")
    lib = f"cuBLAS {raw.get('cublas')}, cuBLASLt {raw.get('cublaslt')}, torch {raw.get('torch')}, CUDA {raw.get('cuda')}"
    header = [f"# Converted by python -m tcsmt.library_import from {source_name}; do not edit by hand.",
              f"gpu = {json.dumps(gpu)}", f"arch = {json.dumps(arch.name)}", f"device = {json.dumps(raw['gpu'])}",
              f"library = {json.dumps(lib)}",
              "sources = " + json.dumps([f"{source_name}: method {method}, workspace_bytes {raw.get('workspace_bytes')}"])]
    plans: dict[str, dict[str, Any]] = {}
    unknown: dict[str, dict[str, Any]] = {}
    for n, call in enumerate(raw["calls"]):
        where = f"{source_name}: call {n}"
        missing = [k for k in _CALL_KEYS if k not in call]
        if missing:
            raise TcsmtError(f"{where}: missing {', '.join(missing)}")
        if call["op"] not in OPS:
            raise TcsmtError(f"{where}: unknown op {call['op']!r}")
        for k in ("a_dtype", "b_dtype", "out_dtype"):
            torch_dtype(call.get(k), f"{where}: {k}")
        ident = {k: call.get(k) for k in ("op", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32",
                                          "scale", "fast_accum")}
        ident = {k: v for k, v in ident.items() if v is not None}
        shape = [int(call["M"]), int(call["N"]), int(call["K"]), int(call.get("batch", 1))]
        kernels = list(call.get("kernels") or [])
        fam = _family(kernels, families)
        fam_name, family = fam if fam else ("", None)
        S = call.get("split_k")
        why = ""
        fields: dict[str, Any] = {}
        chain, why_chain = _chain_for(call, family)
        steps, ep_src = _epilogue(call, family)
        if S is None:
            why = f"split-K unknown (split_k not recorded in {source_name})"
        elif chain is None:
            why = why_chain
        elif steps is None:
            why = ep_src
        elif int(S) > 1 and family is None:
            why = f"slice rule unknown (no family of {source_name} matches kernels {kernels})"
        elif family is not None and int(S) > 1 and family.get("reduce") not in REDUCE_NAMES:
            why = f"split-K reduction {family.get('reduce')!r} of family {fam_name} not modelled"
        else:
            fields = {"split_k": int(S)}
            if family is not None and int(S) > 1:  # always has a family: split-K without one has a why above
                fields.update(grain=int(family["grain"]), slices=family.get("slices", "contiguous"),
                              remainder=family.get("remainder", "last"), reduce=REDUCE_NAMES[family["reduce"]])
            fields["epilogue"] = steps
            fields["chain"] = {"arch": arch.name, **chain}
            srcs = [f"{source_name}: {method}; split_k {S} from {call.get('split_k_source')}"
                    + (f"; kernels {', '.join(kernels)}" if kernels else "")]
            if family is not None and int(S) > 1:
                srcs.append(f"family {fam_name}: {family.get('evidence', 'no evidence recorded')}")
            if ep_src:
                srcs.append(ep_src)
            fields["kernels"] = kernels
            fields["sources"] = srcs
        if why:
            key = json.dumps([ident, why], sort_keys=True)
            unknown.setdefault(key, {**ident, "why": why, "shapes": []})["shapes"].append(shape)
        else:
            key = json.dumps([ident, fields], sort_keys=True)
            plans.setdefault(key, {**ident, **fields, "shapes": []})["shapes"].append(shape)
    out = header
    for entry in plans.values():
        out += ["", "[[plans]]"] + [f"{k} = {_toml(v)}" for k, v in entry.items()]
    for entry in unknown.values():
        out += ["", "[[unknown]]"] + [f"{k} = {_toml(v)}" for k, v in entry.items()]
    return "\n".join(out) + "\n"


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    raise TcsmtError(f"cannot write {v!r} to a plan table")


def convert_file(raw_path: Path, out_path: Path | None = None, gpu: str | None = None, force: bool = False) -> Path:
    """Convert ``raw_path``; write the table (refusing to overwrite unless ``force``) and check it loads."""
    try:
        raw = json.loads(Path(raw_path).read_text())
    except (OSError, ValueError) as exc:
        raise TcsmtError(f"cannot read {raw_path}: {exc}") from None
    if not isinstance(raw, dict):
        raise TcsmtError(f"{raw_path}: not a recorded plan file (a JSON object expected)")
    text = convert(raw, Path(raw_path).name, gpu)
    if out_path is None:
        m = re.search(r'^gpu = "([^"]+)"', text, re.M)
        assert m is not None  # convert() writes gpu = "<name>" for a name that find_arch accepted
        g = m.group(1)
        major = str(raw.get("cublas") or "x")[:2]
        out_path = plans_dir() / f"{g}_cublas{major}_recorded.toml"
    out_path = Path(out_path)
    if out_path.exists() and not force:
        raise TcsmtError(f"{out_path} exists (pass --force to replace it)")
    tmp = out_path.with_suffix(".toml.tmp")
    tmp.write_text(text)
    try:
        load_table(tmp)
    except TcsmtError:
        tmp.unlink()
        raise
    tmp.replace(out_path)
    return out_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tcsmt.library_import", description=__doc__.split("\n")[0])
    ap.add_argument("raw", type=Path, help="recorded plan file (JSON)")
    ap.add_argument("-o", "--out", type=Path, default=None, help="plan table to write (default models/library/...)")
    ap.add_argument("--gpu", default=None, help="GPU name of the table (default: from the file's gpu field)")
    ap.add_argument("--force", action="store_true", help="replace an existing table")
    args = ap.parse_args(argv)
    try:
        path = convert_file(args.raw, args.out, args.gpu, args.force)
    except TcsmtError as exc:
        print(f"tcsmt: error: {exc}", file=sys.stderr)
        return 2
    t = load_table(path)
    print(f"wrote {path}: {len(t.plans)} plans, {len(t.unknown)} calls without a plan")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
