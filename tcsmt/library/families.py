"""How a recorded cuBLAS plan file's kernel families are read: which family a call belongs to, its plan class,
its split-K grain, its reduction name, whether a call fits a decision's ``match``, and what two GPUs must
both record for a call to share a plan (``--same-as``: :func:`plan_signature`).

These rules are shared by the plan-table converter (:mod:`tcsmt.library.convert`), the decisions made from
recorded outputs (``tools/library/decide.py``) and the cross-GPU confirmation (``tools/library/h200_confirm.py``).
Nothing here computes arithmetic: it maps recorded names and rules onto the library model's vocabulary
(:data:`tcsmt.arith.semantics.REDUCTIONS`); what it cannot read it refuses with a :class:`~tcsmt.errors.TcsmtError`
or a reason string, never a guess.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tcsmt.errors import TcsmtError
from tcsmt.library.plans import beta_kind

REDUCE_NAMES = {"fp32_forward": "fp32_forward", "serial": "fp32_forward", "pairwise": "pairwise",
                "out_rounded": "out_rounded", "out_dtype_rounded": "out_rounded",
                "out_rounded_partials_fp32_sum": "out_rounded",
                "out_chain": "out_chain", "out_dtype_chain": "out_chain", "serial_out_dtype": "out_chain",
                "out_serial_f32add": "out_chain_acc_add", "out_chain_acc_add": "out_chain_acc_add"}
"""Reduction names of recorded files (the device's hypothesis names) -> :data:`tcsmt.arith.semantics.REDUCTIONS`."""
ONE_ROUNDING = "fp32 partials summed in fp32, the sum rounded once"
"""The device's summary where fp16/bf16 outputs hide the order of an fp32 sum; the family's fp32-out rule
(same kernels, same reduce kernel) gives the order."""
def family_of(call: dict[str, Any], families: dict[str, Any], where: str) -> tuple[str, dict[str, Any]] | None:
    """The family a call records (``family``, None = none), else the first whose regex and scheme fit."""
    if "family" in call:
        name = call["family"]
        if name is None:
            return None
        if name not in families:
            raise TcsmtError(f"{where}: family {name!r} is not among the plan file's families ({', '.join(families)})")
        return name, families[name]
    kernels = list(call.get("kernels") or [])
    for name, fam in families.items():
        rx = fam.get("kernel_regex")
        scheme, mine = fam.get("lt_reduction_scheme"), call.get("reduction_scheme")
        if rx and any(re.search(rx, k) for k in kernels) and (scheme is None or mine is None or scheme == mine):
            return name, fam
    return None


NO_SPLIT = re.compile(r"^nvjet_sm90_([a-z]+)_")
"""The nvjet kernel kind of a call without split-K: the letters after ``nvjet_sm90_`` (A/B, C, compute, D types)."""


def class_of(call: dict[str, Any], families: dict[str, Any]) -> str | None:
    """The plan class of a recorded call, what one GPU's probes and samples confirm at once: ``family NAME`` (S > 1:
    the family of its kernels and reductionScheme, :func:`family_of`) or ``no split: nvjet_sm90_KIND`` (S = 1 and
    nvjet kernels of one kind); None where neither (no rule to confirm)."""
    S = call.get("split_k")
    if S is None:
        return None
    if int(S) > 1:
        fam = family_of({k: v for k, v in call.items() if k != "family"}, families, "call")
        return f"family {fam[0]}" if fam else None
    kinds = sorted({m.group(1) for k in call.get("kernels") or [] for m in [NO_SPLIT.match(k)] if m})
    return f"no split: nvjet_sm90_{kinds[0]}" if len(kinds) == 1 else None


_GRAIN_RULE = re.compile(r"^(\d+) if K % (\d+) == 0 else (\d+)$")


def grain_of(family: dict[str, Any], K: int, where: str) -> int:
    """A family's grain for depth K: a number, or ``"G if K % D == 0 else g"`` (the sm80 cutlass families:
    32 where 32 divides K, else 16 bytes of the input format)."""
    g = family.get("grain")
    if isinstance(g, int) and not isinstance(g, bool) and g >= 1:
        return g
    m = _GRAIN_RULE.match(str(g))
    if not m:
        raise TcsmtError(f"{where}: cannot read the family's grain {g!r} (a number or 'G if K % D == 0 else g')")
    big, div, small = (int(x) for x in m.groups())
    return big if K % div == 0 else small


ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1}
"""Bytes of one input element by torch dtype name (tf32 calls read float32 tensors: 4)."""


def slice_rule_fields(family: dict[str, Any], rule: dict[str, Any] | None, K: int, a_dtype: str,
                      where: str) -> dict[str, int]:
    """The plan fields ``grain`` and ``k_floor`` of a split-K call of depth K (inputs of torch dtype ``a_dtype``)
    under a slice rule of one (family, layout) variant (``rule``; None = the family's own, :func:`grain_of`,
    no floor).  A rule is data (the layout-probe files' ``slice_rule``) with these keys:

    * ``grain_bytes`` = [big, small]: the grain is big / b k's where K * b is a multiple of big (K fills whole
      chunks of ``big`` bytes), else small / b, with b the bytes of one input element (:data:`ELEM_BYTES`;
      [16, 16]: always 16 bytes);
    * ``grain``: a grain as :func:`grain_of` reads it (absent, with no ``grain_bytes``: the family's);
    * ``k_floor``: the grain's chunks cut K floored to a multiple of ``k_floor``; the last slice that holds
      k's of the floored K also takes the tail (:meth:`tcsmt.library.plans.Plan.slice_ranges`); absent or 0: none.
    """
    rule = rule or {}
    gb = rule.get("grain_bytes")
    if gb is not None:
        b = ELEM_BYTES.get(a_dtype)
        ok = isinstance(gb, list) and len(gb) == 2 and all(isinstance(x, int) and x >= 1 for x in gb)
        if b is None or not ok or gb[0] % b or gb[1] % b:
            raise TcsmtError(f"{where}: cannot read the slice rule's grain_bytes {gb!r} for {a_dtype}")
        grain = gb[0] // b if (K * b) % gb[0] == 0 else gb[1] // b
    else:
        grain = grain_of({"grain": rule["grain"]} if "grain" in rule else family, K, where)
    floor = rule.get("k_floor", 0)
    if not isinstance(floor, int) or floor < 0:
        raise TcsmtError(f"{where}: cannot read the slice rule's k_floor {floor!r}")
    return {"grain": grain, "k_floor": floor}


def rule_key(rule: dict[str, Any] | None) -> str:
    """A slice rule as text, the key verdicts are kept under ('family' for the family's own rule)."""
    if not rule:
        return "family"
    return ", ".join(f"{k}={rule[k]}" for k in sorted(rule) if k in ("grain", "grain_bytes", "k_floor"))


def reduction_of(family: dict[str, Any], out_dtype: str) -> tuple[str | None, str]:
    """(reduction name, why not) of a family for an output dtype.

    ``reduce`` is a name of :data:`REDUCE_NAMES`, or the device's summary with one part per output kind,
    ``"fp32 out: NAME (...)"`` and ``"fp16/bf16 out: NAME (...)"``; a part that opens with
    :data:`ONE_ROUNDING` (an fp32 sum rounded once, order hidden) takes the order of the fp32-out part.
    """
    text = str(family.get("reduce"))
    if text in REDUCE_NAMES:
        return REDUCE_NAMES[text], ""
    parts = dict(zip(*[iter(re.split(r"(?:^|; )(fp32 out|fp16/bf16 out): ", text)[1:])] * 2))
    kind = "fp32 out" if out_dtype == "float32" else "fp16/bf16 out"

    def named(part: str) -> str | None:
        m = re.match(r"(\w+)", part)
        return REDUCE_NAMES.get(m.group(1)) if m else None

    part = parts.get(kind)
    if part is None:
        return None, f"split-K reduction for {kind} not recorded (family reduce {text!r})"
    name = named(part)
    if name is None and part.startswith(ONE_ROUNDING):
        name = named(parts.get("fp32 out", ""))
        if name != "fp32_forward":
            return None, f"split-K reduction for {kind}: an fp32 sum whose order no fp32-out rule fixes ({text!r})"
    if name is None:
        return None, f"split-K reduction {part!r} ({kind}) not modelled"
    return name, ""


def matches(call: dict[str, Any], match: dict[str, Any]) -> bool:
    """Whether a raw call fits a decision's ``match``: ``kernel_regex`` searched in its kernel names,
    ``alpha_is_1`` / ``beta_is_0`` compare alpha == 1 / beta == 0, ``beta_kind`` is
    :func:`~tcsmt.library.plans.beta_kind` (0, 1, other: 2), ``split`` is split_k > 1, ``any`` holds a list of
    matches of which one must fit, every other key
    equals the call's field (bias, tf32 and fast_accum default to false)."""
    for k, v in match.items():
        if k == "any":
            ok = any(matches(call, m) for m in v)
        elif k == "kernel_regex":
            ok = any(re.search(v, x) for x in call.get("kernels") or [])
        elif k == "alpha_is_1":
            ok = (float(call.get("alpha", 1.0)) == 1.0) == v
        elif k == "beta_is_0":
            ok = (float(call.get("beta", 0.0)) == 0.0) == v
        elif k == "beta_kind":
            ok = beta_kind(float(call.get("beta", 0.0))) == v
        elif k == "split":
            ok = (int(call.get("split_k") or 1) > 1) == v
        else:
            ok = call.get(k, False if k in ("bias", "tf32", "fast_accum") else None) == v
        if not ok:
            return False
    return True


def plan_signature(call: dict[str, Any], lt_algos: Sequence[str] | None = None) -> tuple:
    """What two GPUs must both record for a call to share a plan: kernel names, split_k, cuBLASLt's
    reductionScheme (from ``lt`` indices into ``lt_algos``, or the trace text ``lt_algo``; ``none`` where the
    trace names none) and whether torch refused it."""
    trace = [lt_algos[i] for i in call.get("lt", [])] if lt_algos is not None else list(call.get("lt_algo") or [])
    m = [x.group(1) for a in trace for x in [re.search(r"reductionScheme=(\w+)", a)] if x]
    return (tuple(call.get("kernels") or []), call.get("split_k"), m[0] if m else "none", bool(call.get("torch_error")))


SAME_KEYS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32",
              "scale", "fast_accum")


def recorded_signatures(same_as: Sequence[tuple[str, dict[str, Any]]], raw: dict[str, Any]) -> dict[tuple, set[tuple]]:
    """Call fields -> the plan signatures another GPU recorded for them (``--same-as`` files)."""
    ref: dict[tuple, set[tuple]] = {}
    for n, (name, other) in enumerate(same_as):
        if not isinstance(other, dict) or "calls" not in other or (n == 0 and "families" not in other):
            raise TcsmtError(f"{name}: not a recorded {'plan' if n == 0 else 'call'} file for --same-as")
        for key in ("cublas", "cublaslt", "torch"):
            if other.get(key) != raw.get(key):
                raise TcsmtError(f"{name}: {key} {other.get(key)!r} differs from the recorded {raw.get(key)!r}")
        for c in other["calls"]:
            ref.setdefault(tuple(c.get(k) for k in SAME_KEYS), set()).add(plan_signature(c, other.get("lt_algos")))
    return ref


def borrow_refusal(call: dict[str, Any], lt_algos: Sequence[str] | None, ref: dict[tuple, set[tuple]],
             file_name: str, rules_gpu: str) -> str:
    """Why ``call`` (of a file whose trace table is ``lt_algos``) gets no borrowed plan ('' where the other GPU
    recorded the same one)."""
    theirs = ref.get(tuple(call.get(k) for k in SAME_KEYS))
    mine = plan_signature(call, lt_algos)
    if not theirs:
        return f"not recorded on {rules_gpu}, whose split-K rules these plans borrow"
    if mine in theirs:
        return ""
    t = sorted(theirs, key=str)[0]
    what = [w for w, a, b in zip(("kernels", "split_k", "reductionScheme", "torch refusal"), mine, t) if a != b]
    return (f"this GPU's recorded plan ({file_name}: split_k {mine[1]}, kernels {', '.join(mine[0])}) differs in "
            f"{', '.join(what)} from {rules_gpu}'s (split_k {t[1]}, kernels {', '.join(t[0])}), whose split-K rules "
            f"these plans borrow; this GPU's own rules are not recorded")


UNREAD_K_ORDER = re.compile(r"(?:^|::)((?:gemv|gemmSN|gemmk1|dot_kernel)\w*)")
"""CUDA-core matrix-vector kernels whose own K order no probe read: one K-chain is not their arithmetic.  Searched
anywhere after a scope (the demangled ``internal::gemvx::kernel`` comes after its return type,
``std::enable_if<true, void>::type``); group 1 names the kernel."""


def kernel_key(name: str) -> str:
    """A demangled kernel name as the recordings write it: the profiler's ``void `` return type and parameter list
    dropped (the graph reader's names have neither; a templated return type such as gemvx's stays)."""
    name = name.removeprefix("void ")
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                return name[:i]
    return name


def gemv_kernel(kernels: Sequence[str]) -> bool:
    """Whether the kernels include a CUDA-core GEMV kernel (its entry depends on K: :func:`tcsmt.library.gemv_rules.gemv_fields`)."""
    return any(UNREAD_K_ORDER.search(k.split("<")[0]) or UNREAD_K_ORDER.search(k) for k in map(kernel_key, kernels))


def names_kernels(match: dict[str, Any]) -> bool:
    """Whether a decision's ``match`` (:func:`matches`) names kernels (a ``kernel_regex``, or one in each ``any``):
    a decision on the CUDA-core GEMV kernels must name them, since their epilogue is their own code."""
    alts = match.get("any") or []
    return "kernel_regex" in match or (bool(alts) and all(names_kernels(m) for m in alts))
