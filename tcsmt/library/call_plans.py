"""One recorded cuBLAS call -> its plan fields, or what is unknown: the conversion the plan tables
(:mod:`tcsmt.library.convert`) and the plan catalogs (:mod:`tcsmt.library.catalog_build`) share.

:class:`ConvertContext` holds what the conversion needs besides the call (the GPU's architecture, the split-K
families, the decisions made from recorded outputs, another GPU's rules to borrow); :meth:`ConvertContext.entry`
applies the rules described in :mod:`tcsmt.library.convert` to one call.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tcsmt.arith.registry import Arch, find_arch
from tcsmt.errors import TcsmtError
from tcsmt.library.families import (
    borrow_refusal,
    class_of,
    family_of,
    gemv_kernel,
    grain_of,
    matches,
    names_kernels,
    recorded_signatures,
    reduction_of,
)
from tcsmt.library.lookup import gpu_short_name
from tcsmt.library.plans import EPILOGUE_STEPS, FP8, OPS, TORCH_DTYPES, torch_dtype

MMAEMU = ("_scaled_mm epilogue alpha = RN32(scale_a*scale_b), y = FFMA(acc, alpha, +0): mmaemu 0.1.0 "
          "(shared/reference/library_gemm.md)")
_CALL_KEYS = ("op", "M", "N", "K", "a_dtype")
LINEAR = ("linear without bias is x @ weight.T with no epilogue: torch's at::linear calls at::matmul(input, "
          "weight.t()) when bias is undefined (aten/src/ATen/native/Linear.cpp)")


def _gpu_short(name: str) -> str:
    try:
        return gpu_short_name(name)
    except TcsmtError:
        raise TcsmtError(f"cannot tell the GPU from {name!r}: pass --gpu") from None


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
    outputs (on a CUDA-core GEMV kernel only by a decision whose match names kernels:
    :func:`tcsmt.library.families.names_kernels`), or the plain cases; (None, why) where nothing says."""
    for src in (call, family or {}):
        if "epilogue" in src:
            return _steps(src["epilogue"]), "epilogue recorded"
    d = _decided(call, decisions, "epilogue")
    if d is not None and gemv_kernel(call.get("kernels") or []) and not names_kernels(d.get("match", {})):
        return None, ("epilogue of the CUDA-core GEMV kernels not decided (the decision that fits the call names no "
                      "kernels: it was read on others)")
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


@dataclass
class ConvertContext:
    """What the conversion of one recorded call needs besides the call: the GPU's architecture, the split-K
    families and their file, the decisions, and (for a GPU borrowing another's rules) the other GPU's recorded
    signatures and the confirmation file.  :meth:`entry` turns one recorded call into its plan fields or the
    reason it has none; the plan table (:func:`convert`) and the plan catalog (:mod:`tcsmt.library.catalog`)
    both use it, so a call converts the same way in both."""

    gpu: str
    arch: Arch
    families: dict[str, Any]
    families_name: str
    rules_gpu: str
    decisions: dict[str, Any] | None
    decisions_name: str
    decided: list[dict[str, Any]]
    same_as: Sequence[tuple[str, dict[str, Any]]]
    ref: dict[tuple, set[tuple]]
    confirmed: tuple[str, dict[str, Any]] | None
    lt_tables: dict[str, Any]

    @classmethod
    def make(cls, raw: dict[str, Any], source_name: str, gpu: str | None = None,
             more_calls: Sequence[tuple[str, dict[str, Any]]] = (), decisions: dict[str, Any] | None = None,
             decisions_name: str = "", same_as: Sequence[tuple[str, dict[str, Any]]] = (),
             confirmed: tuple[str, dict[str, Any]] | None = None) -> ConvertContext:
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
        lt_tables = {name: f.get("lt_algos") for name, f in [(source_name, raw), *more_calls]}
        return cls(gpu, arch, families or {}, families_name, rules_gpu, decisions, decisions_name, decided, same_as,
                   ref, confirmed, lt_tables)

    def entry(self, file_name: str, n: int, call: dict[str, Any],
              same_on: str = "") -> tuple[dict[str, Any], dict[str, Any], str]:
        """(the call's identity fields, its plan fields, '') or (identity, {}, why it has no plan).  ``same_on``: a
        recording in which the GPU whose rules are borrowed ran this call's kernels, split_k and reductionScheme."""
        arch, families, families_name, decided = self.arch, self.families, self.families_name, self.decided
        decisions, decisions_name, same_as, ref = self.decisions, self.decisions_name, self.same_as, self.ref
        rules_gpu, confirmed, lt_tables = self.rules_gpu, self.confirmed, self.lt_tables
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
        differs = borrow_refusal(call, lt_tables.get(file_name), ref, file_name, rules_gpu) if same_as and not same_on \
            else ""
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
            why = ep_src + _open_question(call, decisions, decisions_name, "epilogue")
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
            elif same_on:
                srcs.append(f"kernels, split_k and reductionScheme that {rules_gpu} also ran (its recordings, named "
                            f"in the catalog's sources): its rules apply")
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
            if not tile:  # a K tile decided for kernels whose names carry none (the sm75 CUTLASS kernels)
                d = _decided(call, decided, "k_tile")
                tile = [int(d["set"]["k_tile"])] if d else []
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
        return ident, fields, why


