"""Inputs that decide between two plans of one library GEMM call.

A call is named ``OP:MxNxK:DTYPE[:key=value,...]`` (:func:`parse_call`; keys ``out``, ``b``, ``batch``,
``alpha``, ``beta``, ``bias``, ``tf32``, ``scale``, ``fast_accum``), a plan by the recorded plan of the call
with ``field=value`` changes (:func:`plan_with`; fields :data:`PLAN_FIELDS`).

Each output of a plan depends only on one row of A and one column of B (and the C, bias and scale values at
that position), so two plans are told apart by one row ``a`` (K values) and one column ``b`` (K values).
Solving for them symbolically over the whole K of a long call is too big, so :func:`separate` tries
constructions instead, in this order, and keeps the first that the exact simulator
(:func:`tcsmt.library.run` on the full call, both plans) proves separating:

1. *slice probes*, at each k where one plan starts a split-K slice (or a K tile, or a promotion run) and the
   other does not: a small product w just before that k, and a large pair L, -L from it on.  Where the pair
   shares a slice with w, w is absorbed into L's running sum and cancelled with it (output 0); where a slice
   boundary lies between them, w's slice keeps it (output w);
2. *reduction probes*: one product per slice, values chosen so that fp32 partials and partials rounded to a
   16-bit output format (or a different order of the additions) round differently;
3. random rows and columns (normal-like values, a seeded generator), with random C and bias where the plan
   takes them.

The answer is checked, never assumed: both plans are evaluated on the printed inputs, and their outputs
differ.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from tcsmt.arith.formats import FP32, Format
from tcsmt.arith.params import MAX_K
from tcsmt.arith.registry import find_arch, resolve
from tcsmt.arith.semantics import REDUCTIONS
from tcsmt.errors import TcsmtError
from tcsmt.io.limits import LIBRARY_BATCH, LIBRARY_DIM, SPLIT_K, parse_int, shown
from tcsmt.library.api import run
from tcsmt.library.checks import make_call
from tcsmt.library.evaluate import fmt_of
from tcsmt.library.lookup import lookup
from tcsmt.library.plans import C_STEPS, EPILOGUE_STEPS, IN_ROUNDS, K_TILE, REMAINDERS, SLICES, Call, Plan, _check_plan

PLAN_FIELDS = {
    "split_k": "S, the number of split-K slices (>= 1)",
    "grain": "k's per slice tile",
    "slices": f"one of {SLICES}",
    "remainder": f"one of {REMAINDERS}",
    "reduce": f"one of {REDUCTIONS}",
    "k_tile": "residue-first K tile (0: none)",
    "segment": "k's of a slice after which its chain restarts from +0, the segment sums added in fp32 (0: none)",
    "in_round": f"fp32 -> tf32 input rounding, one of {tuple(r for r in IN_ROUNDS if r)} (or none)",
    "epilogue": f"steps joined by '+' (or none), among {tuple(EPILOGUE_STEPS)}",
    "promote": "fp8 promotion interval: products per run added into fp32 (the chain's instr_k)",
    "chain.KEY": "any parameter of the slice K-chain (a ModelParams override, e.g. chain.block_k=8)",
}
CALL_KEYS = {"out": "out_dtype", "b": "b_dtype", "batch": "batch", "alpha": "alpha", "beta": "beta", "bias": "bias",
             "tf32": "tf32", "scale": "scale", "fast_accum": "fast_accum"}


def parse_call(text: str) -> Call:
    """``OP:MxNxK:DTYPE[:key=value,...]`` as a checked :class:`Call` (e.g. ``mm:64x64x4096:bfloat16:out=float32``)."""
    parts = str(text).split(":")
    if len(parts) not in (3, 4):
        raise TcsmtError(f"a library call is OP:MxNxK:DTYPE[:key=value,...] (e.g. mm:64x64x4096:bfloat16), "
                         f"not {text!r}")
    op, shape, dtype = parts[0], parts[1], parts[2]
    dims = shape.lower().split("x")
    if len(dims) != 3:
        raise TcsmtError(f"the shape of a library call is MxNxK (e.g. 64x64x4096), not {shown(shape)}")
    M, N, K = (parse_int(x, name, LIBRARY_DIM, 1, "the largest library call tcsmt models")
               for name, x in zip("MNK", dims))
    kw: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in (parts[3] if len(parts) == 4 else "").split(","))):
        key, eq, value = item.partition("=")
        if key not in CALL_KEYS:
            raise TcsmtError(f"unknown call key {shown(key)} (known: {', '.join(CALL_KEYS)})")
        if CALL_KEYS[key] in kw:
            raise TcsmtError(f"the call key {key} is given twice in {shown(text)}")
        if not eq:
            value = "true"
        name = CALL_KEYS[key]
        if name in ("bias", "tf32", "fast_accum"):
            if value.lower() not in ("true", "false", "1", "0"):
                raise TcsmtError(f"{key} is true or false, not {value!r}")
            kw[name] = value.lower() in ("true", "1")
        elif name == "batch":
            kw[name] = parse_int(value, key, LIBRARY_BATCH, 1)
        elif name in ("alpha", "beta"):
            try:
                kw[name] = float(value) if len(value) <= 100 else float("nan")
            except ValueError:
                raise TcsmtError(f"{key} is a number, not {shown(value)}") from None
        else:
            kw[name] = value
    return make_call(op, M, N, K, a_dtype=dtype, **kw)


PLAN_LIMITS = {"split_k": (1, SPLIT_K), "grain": (0, LIBRARY_DIM), "k_tile": (0, K_TILE), "segment": (0, LIBRARY_DIM),
               "promote": (0, MAX_K)}
"""The range of each integer plan field (``promote`` is the chain's ``instr_k``)."""


def default_plan(call: Call, gpu: str) -> Plan:
    """A plan with no split-K and no epilogue beyond torch's defaults, on the GPU architecture's library chain
    for the call's dtypes (the base of a plan given entirely by ``field=value`` changes)."""
    from tcsmt.library.call_plans import _chain_for

    arch = find_arch(gpu)
    chain_fields, why = _chain_for(dataclasses.asdict(call), None, arch)
    if chain_fields is None:
        raise TcsmtError(f"no library chain for {call.label()}: {why}")
    chain = resolve(arch.name, chain_fields["in_fmt"], chain_fields["out_fmt"], chain_fields["instr"])
    steps: tuple[str, ...] = ()
    if call.op == "scaled_mm":
        steps = ("scale",)
    if call.bias:
        steps += ("bias",)
    if call.alpha != 1.0 or call.beta != 0.0:
        steps += ("alpha", "beta_c")
    plan = Plan(call=call, gpu=gpu, library="(no recorded plan)", chain=chain,
                chain_spec=f"{arch.name} {chain.in_fmt}->{chain.out_fmt} ({chain.instr})", epilogue=steps,
                in_round="rne" if call.tf32 else "", sources=("built from --plan-a/--plan-b changes only",))
    return plan


def plan_with(base: Plan, changes: str) -> Plan:
    """``base`` with ``field=value,...`` changes (:data:`PLAN_FIELDS`); a TcsmtError names a bad field or value."""
    fields: dict[str, Any] = {}
    chain_over: dict[str, str] = {}
    given: set[str] = set()
    for item in filter(None, (x.strip() for x in str(changes).split(","))):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise TcsmtError(f"a plan change is FIELD=VALUE, not {shown(item)} (fields: {', '.join(PLAN_FIELDS)})")
        if key in given or (key == "promote" and "chain.instr_k" in given) or (key == "chain.instr_k" and "promote" in given):
            raise TcsmtError(f"the plan field {shown(key)} is given twice in {shown(changes)}")
        given.add(key)
        if key.startswith("chain."):
            chain_over[key[6:]] = value
        elif key in PLAN_LIMITS:
            lo, hi = PLAN_LIMITS[key]
            n = parse_int(value, key, hi, lo)
            if key == "promote":
                chain_over["instr_k"] = str(n)
            else:
                fields[key] = n
        elif key == "epilogue":
            fields[key] = () if value == "none" else tuple(value.split("+"))
        elif key == "in_round":
            fields[key] = "" if value == "none" else value
        elif key in ("slices", "remainder", "reduce"):
            fields[key] = value
        else:
            raise TcsmtError(f"unknown plan field {key!r} (known: {', '.join(PLAN_FIELDS)})")
    plan = dataclasses.replace(base, **fields)
    if chain_over:
        try:
            chain = base.chain.with_overrides(chain_over)
        except TcsmtError as exc:
            field = "promote" if "promote" in given and "instr_k" in str(exc) else "chain." + ", chain.".join(chain_over)
            raise TcsmtError(f"plan {shown(changes)}: {field}: {exc}") from None
        spec = base.chain_spec + " with " + ",".join(f"{k}={v}" for k, v in chain_over.items())
        plan = dataclasses.replace(plan, chain=dataclasses.replace(chain, name=spec), chain_spec=spec)
    if plan.split_k > 1 and plan.grain < 1:
        raise TcsmtError(f"split_k = {plan.split_k} needs a grain (the plan has none: add grain=G)")
    return _check_plan(plan, f"plan {changes!r}")


def plans_for(call: Call, gpu: str, changes_a: str | None, changes_b: str | None) -> tuple[Plan, Plan]:
    """Plans A and B: the recorded plan of the call with each side's changes (both sides must give changes
    where no plan is recorded); equal plans are refused."""
    try:
        base = lookup(call, gpu)
    except TcsmtError as exc:
        if not (changes_a and changes_b):
            raise TcsmtError(f"{exc} (or give both --plan-a and --plan-b)") from None
        base = default_plan(call, gpu)
    if not changes_a and not changes_b:
        raise TcsmtError("give --plan-b FIELD=VALUE,... (plan A is the recorded plan unless --plan-a changes it)")
    a = plan_with(base, changes_a or "")
    b = plan_with(base, changes_b or "")
    if effective(a) == effective(b):
        raise TcsmtError(f"the two plans compute the same thing for {call.label()} "
                         f"(A: {changes_a or 'recorded'}; B: {changes_b or 'recorded'})")
    return a, b


def effective(p: Plan) -> tuple:
    """What decides the outputs of ``p`` for its call: the chain, the slices as k lists cut into their segments, and
    the rest of the arithmetic (split-K fields only matter through the slices; a K tile only where a slice's length
    is not a multiple of it: otherwise no zero products are inserted, :func:`tcsmt.library.evaluate.slice_operands`)."""
    slices = p.slice_ranges()
    k_tile = p.k_tile if p.k_tile and any(len(s) % p.k_tile for s in slices) else 0
    return (dataclasses.replace(p.chain, name="", sources=()), p.in_round, k_tile,
            tuple(tuple(tuple(seg) for seg in p.segments(s)) for s in slices), p.reduce if p.split_k > 1 else "",
            p.epilogue)


# ----------------------------------------------------------------------------- constructions
@dataclass
class Separation:
    """Inputs that separate two plans, with both plans' outputs on them."""

    how: str
    a: np.ndarray
    """A's row: K patterns of the call's input format (a_dtype)."""
    b: np.ndarray
    """B's column (mm orientation): K patterns of b_dtype."""
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    """C (1, 1), bias (1,), scale_a, scale_b (one value each) where the plans take them."""
    out_a: int = 0
    out_b: int = 0


def _pow2(fmt: Format, e: int, neg: bool = False) -> int:
    v = Fraction(2) ** e
    return fmt.from_fraction(-v if neg else v)


def _exps(fmt: Format) -> tuple[int, int]:
    """A large and a small exponent of the input format: products 2^(2*big) and 2^(2*small) lie 2^30 or more
    apart (fp8: 2^28) while both stay normal in fp32."""
    big = min(10, fmt.emax - 1)
    small = max(-10, fmt.emin)
    return big, small


def _extras(plan: Plan, rng: np.random.Generator | None) -> dict[str, np.ndarray]:
    steps = set(plan.epilogue)
    out: dict[str, np.ndarray] = {}
    ofmt = fmt_of(plan.call.out_dtype)
    if steps & C_STEPS:
        out["C"] = np.array([[_random_value(ofmt, rng) if rng is not None else 0]], dtype=ofmt.dtype)
    if "bias" in steps:
        bfmt = fmt_of(plan.call.a_dtype if plan.call.op in ("addmm", "linear") else plan.call.out_dtype)
        out["bias"] = np.array([_random_value(bfmt, rng) if rng is not None else 0], dtype=bfmt.dtype)
    if steps & {"scale", "scale_b_then_a"}:
        for k in ("scale_a", "scale_b"):
            v = Fraction(1) if rng is None else Fraction(int(rng.integers(1 << 10, 1 << 11)), 1 << 10)
            out[k] = np.array([FP32.from_fraction(v)], dtype=np.uint32)
    return out


def _random_value(fmt: Format, rng: np.random.Generator | None) -> int:
    if rng is None:
        return 0
    m = int(rng.integers(0, 1 << min(fmt.frac_bits, 10)))
    v = (1 + Fraction(m, 1 << min(fmt.frac_bits, 10))) * Fraction(2) ** int(rng.integers(-2, 2))
    return fmt.from_fraction(-v if rng.integers(0, 2) else v)


def _starts(p: Plan) -> set[int]:
    """k positions where ``p`` starts a slice, a segment, a residue-first tile run or a promotion run."""
    out: set[int] = set()
    for ks in p.slice_ranges():
        if not ks:
            continue
        out.add(ks[0])
        out.update(seg[0] for seg in p.segments(ks) if seg)
        step = p.chain.instr_k
        if step:
            m = len(ks) % p.k_tile if p.k_tile else 0
            first = (m - p.k_tile) if m else 0  # residue-first: zero products pad the first tile
            out.update(ks[i] for i in range(len(ks)) if i > 0 and (i - first) % step == 0)
        if p.k_tile and len(ks) % p.k_tile and len(ks) > p.k_tile:
            out.add(ks[len(ks) % p.k_tile])  # the first full tile after the residue
    return out


def _slice_order(pa: Plan, pb: Plan) -> dict[int, tuple[list[int], int]]:
    """For each k that starts a segment inside a slice of either plan (not the slice's first k): the slice's k's
    and k's place in them."""
    out: dict[int, tuple[list[int], int]] = {}
    for p in (pa, pb):
        for ks in p.slice_ranges():
            if p.segment:
                out.update((ks[i], (ks, i)) for i in range(p.segment, len(ks), p.segment))
    return out


def _slice_probes(pa: Plan, pb: Plan) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    K = pa.call.K
    afmt, bfmt = fmt_of(pa.call.a_dtype), fmt_of(pa.call.b_dtype)
    big, small = _exps(afmt if afmt.emax <= bfmt.emax else bfmt)
    diff = sorted(_starts(pa) ^ _starts(pb))
    order = _slice_order(pa, pb)
    for k in diff[:24]:
        for before, pair in ((1, (0, 1)), (1, (0, 2)), (2, (0, 1)), (1, (1, 2))):
            # neighbours in k order, or in the slice's own order where k starts a segment inside a slice (an
            # interleaved slice's previous k is S k's back)
            seq, at = order.get(k, (range(K), k))
            q, p0, p1 = at - before, at + pair[0], at + pair[1]
            if q < 0 or p1 >= len(seq):
                continue
            q, p0, p1 = seq[q], seq[p0], seq[p1]
            a = np.zeros(K, dtype=afmt.dtype)
            b = np.zeros(K, dtype=bfmt.dtype)
            a[q], b[q] = _pow2(afmt, small), _pow2(bfmt, small)
            a[p0], b[p0] = _pow2(afmt, big), _pow2(bfmt, big)
            a[p1], b[p1] = _pow2(afmt, big, neg=True), _pow2(bfmt, big)
            yield (f"slice probe at k = {k}: w = 2^{2 * small} at k = {q}, L = 2^{2 * big} at k = {p0}, "
                   f"-L at k = {p1}", a, b)


def _reduction_probes(pa: Plan, pb: Plan) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    K = pa.call.K
    afmt, bfmt = fmt_of(pa.call.a_dtype), fmt_of(pa.call.b_dtype)
    firsts = [ks[0] for ks in pa.slice_ranges() if ks]
    if len(firsts) < 2:
        firsts = [ks[0] for ks in pb.slice_ranges() if ks]
    if len(firsts) < 2:
        return
    # slice 0 sums 1 + 3*2^-(f+3) (products 1*1 and (1.5*2^-h)*(2^-(f+2-h))), slice 1 holds 3*2^-(f+3), the
    # others 0 (f: a 16-bit output's fraction bits): the fp32 sum 1 + 6*2^-(f+3) rounds up to 1 + 2^-f, the
    # sum of the partials rounded to the output, 1 + 3*2^-(f+3), rounds down to 1
    k0, k1 = firsts[0], firsts[1]
    for f in (7, 10):
        h = (f + 2) // 2
        try:
            one_a, one_b = afmt.from_fraction(1), bfmt.from_fraction(1)
            x_a, x_b = afmt.from_fraction(Fraction(3, 2) / 2 ** h), bfmt.from_fraction(Fraction(1, 2 ** (f + 2 - h)))
            exact = (afmt.to_fraction(x_a) * bfmt.to_fraction(x_b) == Fraction(3, 2 ** (f + 3)))
        except (TcsmtError, ValueError, OverflowError):
            continue
        if not exact or k0 + 1 >= k1:
            continue
        a = np.zeros(K, dtype=afmt.dtype)
        b = np.zeros(K, dtype=bfmt.dtype)
        a[k0], b[k0] = one_a, one_b
        a[k0 + 1], b[k0 + 1] = x_a, x_b
        a[k1], b[k1] = x_a, x_b
        yield (f"reduction probe: 1 + 3*2^-{f + 3} in the slice from k = {k0}, 3*2^-{f + 3} in the slice from "
               f"k = {k1}", a, b)


def _random(pa: Plan, seed: int, n: int) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.random.Generator]]:
    K = pa.call.K
    afmt, bfmt = fmt_of(pa.call.a_dtype), fmt_of(pa.call.b_dtype)
    rng = np.random.default_rng(seed)
    for t in range(n):
        a = np.array([_random_value(afmt, rng) for _ in range(K)], dtype=afmt.dtype)
        b = np.array([_random_value(bfmt, rng) for _ in range(K)], dtype=bfmt.dtype)
        yield f"random row and column (seed {seed}, try {t + 1})", a, b, rng


def evaluate(plan: Plan, a: np.ndarray, b: np.ndarray, extras: dict[str, np.ndarray]) -> int:
    """The output pattern of ``plan`` at a row a (K,) and a column b (K,) (with the C, bias, scales given)."""
    kw = dict(extras)
    if "C" in kw and not set(plan.epilogue) & C_STEPS:
        kw.pop("C")
    if "bias" in kw and "bias" not in plan.epilogue:
        kw.pop("bias")
    if not set(plan.epilogue) & {"scale", "scale_b_then_a"}:
        kw.pop("scale_a", None)
        kw.pop("scale_b", None)
    return int(np.asarray(run(plan, a[None, :], b[:, None], **kw)).reshape(-1)[0])


def separate(pa: Plan, pb: Plan, *, seed: int = 0, random_tries: int = 32) -> Separation | None:
    """The first construction whose outputs under ``pa`` and ``pb`` differ (evaluated exactly), or None."""
    for how, a, b in [*_slice_probes(pa, pb), *_reduction_probes(pa, pb)]:
        ex = _both_extras(pa, pb, None)
        ya, yb = evaluate(pa, a, b, ex), evaluate(pb, a, b, ex)
        if ya != yb:
            return Separation(how, a, b, ex, ya, yb)
    for how, a, b, rng in _random(pa, seed, random_tries):
        ex = _both_extras(pa, pb, rng)
        ya, yb = evaluate(pa, a, b, ex), evaluate(pb, a, b, ex)
        if ya != yb:
            return Separation(how, a, b, ex, ya, yb)
    return None


def _both_extras(pa: Plan, pb: Plan, rng: np.random.Generator | None) -> dict[str, np.ndarray]:
    ex = _extras(pa, rng)
    for k, v in _extras(pb, rng).items():
        ex.setdefault(k, v)
    return ex


__all__ = ["PLAN_FIELDS", "Separation", "default_plan", "effective", "evaluate", "parse_call", "plan_with",
           "plans_for", "separate"]
