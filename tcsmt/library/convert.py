"""Convert a recorded cuBLAS plan file (raw GPU facts, JSON) into a plan table in ``models/library``.

Usage: ``python -m tcsmt.library.convert evidence/h100_cublas_plans.json [-o OUT] [--gpu h100] [--force]``

The raw file (written on the device; format in the issue-12 contract) lists
calls with the kernels the profiler saw and the split-K count S, and kernel
families with their slice rule (grain, contiguous/interleaved, remainder) and
reduction.  Each call becomes a plan when everything its arithmetic needs is
recorded; otherwise it goes to the table's ``[[unknown]]`` list with what is
missing, so a lookup names it.  Nothing is filled in by guessing, except:

* the K-chain of a slice comes from the input dtype (the library paths of the
  GPU's architecture file: fp16/bf16 -> the cuBLAS block chain, float32 with
  tf32 -> the tf32 chain, e4m3 -> ``scaled_mm_fast`` or ``scaled_mm``, e4m3 x e5m2
  -> ``scaled_mm_fast_xe5m2`` or ``scaled_mm_xe5m2``: the same chains with B decoded
  as e5m2), or from a family's ``chain`` field when it names one;
* the epilogue of ``mm``/``bmm`` (alpha = 1, beta = 0, no bias: none) and of
  ``_scaled_mm`` without bias (mmaemu's published FFMA), unless the call or its
  family records ``epilogue``; every other epilogue must be recorded.

Calls may also come from further recorded files of the same GPU and library
(``--calls``, e.g. the validation file: calls with ``kernels``, ``split_k``,
``split_k_source`` and ``family``); their slice and reduction rules are the
families of the plan file.  A call's family is the one it records
(``family``, chosen on the device by kernel names and cuBLASLt's
``reductionScheme``); a call without that field takes the family whose
``kernel_regex`` matches its kernels (and whose ``lt_reduction_scheme`` equals
the call's ``reduction_scheme`` where both are recorded).  A family's grain is
a number or ``"G if K % D == 0 else g"``; its reduction is a name of
:data:`REDUCE_NAMES`, or the device's summary ``"fp32 out: NAME (...); fp16/bf16
out: NAME (...)"`` (see :func:`reduction_of`).

A GPU whose own split-K rules were not probed (the H200) can borrow another GPU's rules where it recorded the
same plan: ``--same-as H100_PLANS.json [--same-as H100_CALLS.json]`` keeps a call only where a call of those
files with the same fields (op, shape, dtypes, flags) recorded the same kernel names, the same ``split_k`` and
the same cuBLASLt ``reductionScheme`` (``none`` where its trace has none); that call's family comes from the
first ``--same-as`` file's families, and ``--decisions`` may then be the other GPU's.  Every other call goes to
``[[unknown]]``, saying what differs, so a lookup refuses it.

Decisions made from recorded outputs (``--decisions FILE``, written by
``tools/library/decide.py``) fill what the plan file cannot say: the fp32 ->
tf32 input rounding of tf32 calls (``in_round``), K tiles, the K-chain of the fp32
CUDA-core kernels (``chain``) and epilogues; each carries
its evidence, which becomes the plan's source.  A tf32 call no decision covers
gets no ``in_round`` (its plan takes tf32 values only).
"""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from tcsmt.arith.registry import Arch, find_arch
from tcsmt.errors import TcsmtError
from tcsmt.io import load
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.families import borrow_refusal, class_of, family_of, grain_of, matches, recorded_signatures, reduction_of
from tcsmt.library.plans import EPILOGUE_STEPS, FP8, OPS, TORCH_DTYPES, load_table, plans_dir, torch_dtype

MMAEMU = ("_scaled_mm epilogue alpha = RN32(scale_a*scale_b), y = FFMA(acc, alpha, +0): mmaemu 0.1.0 "
          "(shared/reference/library_gemm.md)")
_CALL_KEYS = ("op", "M", "N", "K", "a_dtype")
LINEAR = ("linear without bias is x @ weight.T with no epilogue: torch's at::linear calls at::matmul(input, "
          "weight.t()) when bias is undefined (aten/src/ATen/native/Linear.cpp)")


def _gpu_short(name: str) -> str:
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name or "")
    if not m:
        raise TcsmtError(f"cannot tell the GPU from {name!r}: pass --gpu")
    return m.group(1).lower()


def _chain_for(call: dict[str, Any], family: dict[str, Any] | None, arch: Arch) -> tuple[dict[str, str] | None, str]:
    """(arch path fields without arch, why not) for the slice K-chain of one raw call."""
    if family and isinstance(family.get("chain"), dict):
        return dict(family["chain"]), ""
    a, b = call["a_dtype"], call.get("b_dtype") or call["a_dtype"]
    if call["op"] == "scaled_mm":
        if a != "float8_e4m3fn" or b not in FP8:
            return None, f"no chain model for _scaled_mm on {a} x {b}"
        instr = "scaled_mm_fast" if call.get("fast_accum") else "scaled_mm"
        if b != a:  # B in its own fp8 format: the chain of that pair (instruction family suffix _x<B format>)
            instr += "_x" + TORCH_DTYPES[b]
            if not any(p.params.instr == instr for p in arch.find_paths("e4m3", "fp32", instr)):
                return None, f"no chain model for {a} x {b} ({arch.name} has no library path {instr})"
        return {"in_fmt": "e4m3", "out_fmt": "fp32", "instr": instr}, ""
    if a != b:
        return None, f"no chain model for {a} x {b}"
    if a in ("float16", "bfloat16"):
        return {"in_fmt": {"float16": "fp16", "bfloat16": "bf16"}[a], "out_fmt": "fp32", "instr": "cublas"}, ""
    if a == "float32" and call.get("tf32"):
        return {"in_fmt": "tf32", "out_fmt": "fp32", "instr": "cublas"}, ""
    if a in FP8:
        return None, f"torch runs no {call['op']} on {a}"
    return None, f"no chain model for {a} without tf32 on these kernels (no decided K-chain covers them)"


def _decided(call: dict[str, Any], decisions: list[dict[str, Any]], what: str) -> dict[str, Any] | None:
    """The first decision setting ``what`` whose ``match`` fits the call (:func:`matches`)."""
    for d in decisions:
        if what in d.get("set", {}) and matches(call, d.get("match", {})):
            return d
    return None


def _open_question(call: dict[str, Any], decisions: dict[str, Any] | None, name: str, what: str) -> str:
    """'; open in FILE: QUESTION (hypothesis: agreeing of sampled outputs, ...)' for the first question of a
    decision file that fits the call, sets ``what`` and was left undecided ('' where none)."""
    for q in (decisions or {}).get("questions", []):
        hyps = q.get("hypotheses", {})
        if q.get("decided") is None and what in q.get("sets", []) and hyps and matches(call, q.get("match", {})):
            counts = ", ".join(f"{h}: {r['agree']} of {r['samples']}" for h, r in hyps.items())
            return f"; undecided in {name}: {q['question']} ({counts} sampled outputs agree)"
    return ""


def _steps(steps: Any) -> list[str]:
    steps = list(steps)
    bad = [x for x in steps if x not in EPILOGUE_STEPS]
    if bad:
        raise TcsmtError(f"unknown epilogue steps {bad} (known: {', '.join(EPILOGUE_STEPS)})")
    return steps


def _epilogue(call: dict[str, Any], family: dict[str, Any] | None,
              decisions: list[dict[str, Any]]) -> tuple[list[str] | None, str]:
    """(epilogue steps, their source) of a raw call: recorded by the call or its family, decided from recorded
    outputs, or the plain cases; (None, why) where nothing says."""
    for src in (call, family or {}):
        if "epilogue" in src:
            return _steps(src["epilogue"]), "epilogue recorded"
    d = _decided(call, decisions, "epilogue")
    if d is not None:
        return _steps(d["set"]["epilogue"]), f"epilogue decided from recorded outputs: {d.get('evidence', '')}"
    plain = not call.get("bias") and float(call.get("alpha", 1.0)) == 1.0 and float(call.get("beta", 0.0)) == 0.0
    if call["op"] in ("mm", "bmm") and plain:
        return [], ""
    if call["op"] == "linear" and plain:
        return [], LINEAR
    if call["op"] == "scaled_mm" and not call.get("bias") and call.get("scale") == "tensor":
        return ["scale"], MMAEMU
    return None, "epilogue unknown (alpha/beta/bias arithmetic not recorded)"


def convert(raw: dict[str, Any], source_name: str, gpu: str | None = None,
            more_calls: Sequence[tuple[str, dict[str, Any]]] = (), decisions: dict[str, Any] | None = None,
            decisions_name: str = "", same_as: Sequence[tuple[str, dict[str, Any]]] = (),
            confirmed: tuple[str, dict[str, Any]] | None = None) -> str:
    """The plan table (TOML text) for one raw plan file, its calls and those of ``more_calls`` ((name, file)
    pairs of the same GPU and library), with the ``decisions`` (a decision file's object) applied.  With
    ``same_as`` ((name, file) pairs of another GPU, the first a plan file): only calls that recorded the same
    plan there (:func:`plan_signature`) get a plan, with that file's families; the rest are unknown, except, with
    ``confirmed`` ((name, object) of a confirmation file: per :func:`class_of` class, ``confirmed`` true or false and,
    for split-K family classes, ``probed_split_k``), the calls of a class confirmed on this GPU (a family class at a
    probed S), which get their own recorded plan under those families."""
    for key in ("gpu", "calls"):
        if key not in raw:
            raise TcsmtError(f"{source_name}: not a recorded plan file (no {key!r})")
    for name, other in more_calls:
        if not isinstance(other, dict) or "calls" not in other:
            raise TcsmtError(f"{name}: not a recorded call file (no 'calls')")
        for key in ("gpu", "cublas", "cublaslt", "torch"):
            if other.get(key) != raw.get(key):
                raise TcsmtError(f"{name}: {key} {other.get(key)!r} differs from {source_name}'s {raw.get(key)!r}")
    ref = recorded_signatures(same_as, raw)
    rules_gpu = same_as[0][1]["gpu"] if same_as else raw["gpu"]
    decided: list[dict[str, Any]] = []
    if decisions is not None:
        if decisions.get("gpu") != rules_gpu or not isinstance(decisions.get("decisions"), list):
            raise TcsmtError(f"{decisions_name}: not a decision file for {rules_gpu} (gpu and a 'decisions' list)")
        decided = decisions["decisions"]
    gpu = (gpu or _gpu_short(raw["gpu"])).lower()
    arch = find_arch(gpu)
    families_name, families = (same_as[0][0], same_as[0][1].get("families")) if same_as else \
        (source_name, raw.get("families"))
    families = families or {}
    method = raw.get("method")
    lib = f"cuBLAS {raw.get('cublas')}, cuBLASLt {raw.get('cublaslt')}, torch {raw.get('torch')}, CUDA {raw.get('cuda')}"
    made_from = ", ".join([source_name] + [n for n, _ in more_calls] + ([decisions_name] if decisions else []) +
                          [f"{n} (--same-as)" for n, _ in same_as])
    header = [f"# Converted by python -m tcsmt.library.convert from {made_from}; do not edit by hand.",
              f"gpu = {json.dumps(gpu)}", f"arch = {json.dumps(arch.name)}", f"device = {json.dumps(raw['gpu'])}",
              f"library = {json.dumps(lib)}",
              "sources = " + json.dumps([f"{source_name}: method {method}, workspace_bytes {raw.get('workspace_bytes')}"]
                                        + ([f"plans only where {raw['gpu']} recorded the same kernels, split_k and "
                                            f"reductionScheme as {rules_gpu} in {', '.join(n for n, _ in same_as)}; "
                                            f"slice rules, reductions and decisions are {rules_gpu}'s"]
                                           if same_as else []))]
    plans: dict[str, dict[str, Any]] = {}
    unknown: dict[str, dict[str, Any]] = {}
    lt_tables = {name: f.get("lt_algos") for name, f in [(source_name, raw), *more_calls]}
    for file_name, n, call in [(source_name, n, c) for n, c in enumerate(raw["calls"])] + \
            [(name, n, c) for name, other in more_calls for n, c in enumerate(other["calls"])]:
        where = f"{file_name}: call {n}"
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
        fam = family_of(call, families, where)
        fam_name, family = fam if fam else ("", None)
        S = call.get("split_k")
        why = ""
        fields: dict[str, Any] = {}
        d_chain = _decided(call, decided, "chain")
        chain, why_chain = (dict(d_chain["set"]["chain"]), "") if d_chain else _chain_for(call, family, arch)
        steps, ep_src = _epilogue(call, family, decided)
        reduce, why_reduce = reduction_of(family, call.get("out_dtype") or call["a_dtype"]) if family else (None, "")
        differs = borrow_refusal(call, lt_tables.get(file_name), ref, file_name, rules_gpu) if same_as else ""
        own = ""
        if differs and confirmed is not None:  # this GPU's own plan, where its class was confirmed on it
            cls = class_of(call, families)
            entry = confirmed[1].get("classes", {}).get(cls or "", {})
            at_s = not cls or not cls.startswith("family") or int(S or 0) in entry.get("probed_split_k", [])
            if cls and entry.get("confirmed") and at_s:
                at = f" (at split_k {entry.get('probed_split_k')})" if cls.startswith("family") else ""
                own = (f"this GPU's own recorded plan (split_k {S}, kernels {', '.join(kernels)}; {differs.split(';')[0]}"
                       f"); its class '{cls}' confirmed on this GPU ({confirmed[0]}: {entry.get('probes_agree', 0)} of "
                       f"{entry.get('probes', 0)} probes read {rules_gpu}'s slice rule and reduction{at}, "
                       f"{entry.get('outputs', 0)} sampled outputs of {entry.get('samples_same_plan', 0)} calls "
                       f"bit-exact): {rules_gpu}'s rules of that class apply")
                differs = ""
            elif not cls:
                differs += f"; no plan class of {rules_gpu}'s rules covers it ({confirmed[0]})"
            elif not entry.get("confirmed"):
                differs += f"; its class '{cls}' was not confirmed on this GPU ({confirmed[0]})"
            else:
                differs += (f"; its class '{cls}' was confirmed on this GPU only at split_k "
                            f"{entry.get('probed_split_k')} ({confirmed[0]})")
        if differs:
            why = differs
        elif S is None:
            why = f"split-K unknown (split_k not recorded in {file_name})"
        elif chain is None:
            why = why_chain + _open_question(call, decisions, decisions_name, "chain")
        elif steps is None:
            why = ep_src
        elif int(S) > 1 and family is None:
            why = f"slice rule unknown (no family of {families_name} covers kernels {kernels})"
        elif family is not None and int(S) > 1 and reduce is None:
            why = f"family {fam_name}: {why_reduce}"
        else:
            fields = {"split_k": int(S)}
            if family is not None and int(S) > 1:  # always has a family: split-K without one has a why above
                fields.update(grain=grain_of(family, shape[2], f"{where}: family {fam_name}"),
                              slices=family.get("slices", "contiguous"), remainder=family.get("remainder", "last"),
                              reduce=reduce)
            fields["epilogue"] = steps
            fields["chain"] = {"arch": arch.name, **chain}  # a decided chain may name a hypothesis (arch:NAME)
            srcs = [f"{file_name} (method: the table's sources): split_k {S} from {call.get('split_k_source')}"
                    + (f"; kernels {', '.join(kernels)}" if kernels else "")]
            if own:
                srcs.append(own)
            elif same_as:
                srcs.append(f"the same kernels, split_k and reductionScheme as {rules_gpu} recorded for this call "
                            f"({', '.join(n for n, _ in same_as)}): its rules apply")
            if family is not None and int(S) > 1:
                srcs.append(f"family {fam_name}: slices (grain {family.get('grain')!r}) and reduction "
                            f"({fields['reduce']}) read from its record in {families_name} (families.{fam_name}: "
                            f"rule, reduce and evidence)")
            if d_chain:
                srcs.append(f"K-chain decided from recorded outputs ({decisions_name}): {d_chain.get('evidence', '')}")
            if ep_src:
                srcs.append(ep_src)
            d = _decided(call, decided, "k_tile_regex")
            tile = [int(m.group(1)) for k in kernels for m in [re.search(d["set"]["k_tile_regex"], k)] if m] if d else []
            if tile:
                fields["k_tile"] = tile[0]
                srcs.append(f"K tiles of {tile[0]} k's, residue first, decided from recorded outputs "
                            f"({decisions_name}): {d.get('evidence', '') if d else ''}")
            if call.get("tf32"):
                d = _decided(call, decided, "in_round")
                if d is not None:
                    fields["in_round"] = d["set"]["in_round"]
                    srcs.append(f"fp32 -> tf32 input rounding {d['set']['in_round']} decided from recorded outputs "
                                f"({decisions_name}): {d.get('evidence', '')}")
                else:
                    srcs.append("fp32 -> tf32 input rounding of these kernels not decided: the plan takes tf32 values")
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


def _read_json(path: Path, what: str) -> dict[str, Any]:
    data = load.read_json(path, what)
    if not isinstance(data, dict):
        raise TcsmtError(f"{path}: not a {what} (a JSON object expected)")
    return data


def convert_file(raw_path: Path, out_path: Path | None = None, gpu: str | None = None, force: bool = False,
                 calls: Sequence[Path] = (), decisions: Path | None = None, same_as: Sequence[Path] = (),
                 confirmed: Path | None = None) -> Path:
    """Convert ``raw_path`` (with the calls of ``calls`` and the ``decisions`` file); write the table (refusing
    to overwrite unless ``force``) and check it loads."""
    raw = _read_json(raw_path, "recorded plan file")
    more = [(Path(c).name, _read_json(c, "recorded call file")) for c in calls]
    dec = _read_json(decisions, "decision file") if decisions is not None else None
    ref = [(Path(c).name, _read_json(c, "recorded plan or call file")) for c in same_as]
    conf = (Path(confirmed).name, _read_json(confirmed, "confirmation file")) if confirmed is not None else None
    if conf is not None and not same_as:
        raise TcsmtError("--confirmed widens a --same-as table: pass the other GPU's files with --same-as")
    text = convert(raw, Path(raw_path).name, gpu, more, dec, Path(decisions).name if decisions is not None else "",
                   ref, conf)
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


_IN_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("raw", type=_IN_FILE)
@click.option("--calls", type=_IN_FILE, multiple=True,
              help="further recorded calls of the same GPU and library (e.g. the validation file); repeatable")
@click.option("--decisions", type=_IN_FILE, default=None,
              help="decisions made from recorded outputs (tools/library/decide.py): tf32 input rounding, epilogues")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="plan table to write (default models/library/...)")
@click.option("--gpu", default=None, help="GPU name of the table (default: from the file's gpu field)")
@click.option("--force", is_flag=True, help="replace an existing table")
@click.option("--same-as", type=_IN_FILE, multiple=True,
              help="another GPU's plan file (first) and call files: keep only calls that recorded the same "
                   "plan there, with its split-K rules; repeatable")
@click.option("--confirmed", type=_IN_FILE, default=None,
              help="with --same-as: a confirmation file (tools/library/h200_confirm.py summary): calls whose "
                   "own plan differs get it where their class is confirmed on this GPU")
def library_import_cmd(raw: Path, calls: tuple[Path, ...], decisions: Path | None, out: Path | None, gpu: str | None,
                       force: bool, same_as: tuple[Path, ...], confirmed: Path | None) -> int:
    """RAW: the recorded plan file (JSON)."""
    path = convert_file(raw, out, gpu, force, list(calls), decisions, list(same_as), confirmed)
    t = load_table(path)
    print(f"wrote {path}: {len(t.plans)} plans, {len(t.unknown)} calls without a plan")
    return 0


main = script_main(library_import_cmd, "python -m tcsmt.library.convert")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
