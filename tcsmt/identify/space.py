"""The hypothesis space of ``tcsmt identify``: candidate ModelParams for one matrix-unit path.

The space of one path is the product of plausible values of each free
:class:`tcsmt.arith.params.ModelParams` parameter (the *factors*), plus named points:
every built-in model that has a path with the same formats (and its named
hypotheses), and the references ``exact``, ``ieee-fma32`` and ``pairwise-rne``,
all re-targeted to the path's instruction length.

The full product is far too large to simulate point by point (about 10^5 to
10^6 hypotheses), so it is enumerated lazily, in rings of growing Hamming
distance from the named points: ring 0 is the named points, ring r every
hypothesis that differs from some named point in exactly r factors.  A search
with ``radius = R`` covers rings 0..R; ``radius = None`` walks the whole product
(still lazily).  Hypotheses are canonicalised first (parameters that the
semantics provably never reads in that configuration are set to one fixed
value, see :func:`tcsmt.solve.inert.canonical`) and deduplicated by their semantic key, so two
hypotheses of the space never differ only syntactically.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import PARAM_NAMES, ModelParams, validate
from tcsmt.arith.registry import REFERENCES, architectures, reference_params
from tcsmt.errors import TcsmtError
from tcsmt.io.limits import CANDIDATE_HYPOTHESES, HYPOTHESES
from tcsmt.solve import inert

# the free parameters, in the order the table and the enumeration use
FACTOR_NAMES = (
    "block_k", "block_interleave", "extra_bits", "carry_bits", "align", "c_mode", "block_round",
    "block_frac_bits", "product_exponent", "subnormal_in", "subnormal_c", "subnormal_out", "out_round",
    "c_round", "zero_sign", "overflow_result",
)


@dataclass(frozen=True)
class PathInfo:
    """The path being identified: formats and the instruction's length K (products per instruction)."""

    in_fmt: str
    out_fmt: str
    c_fmt: str
    instr: str
    instr_k: int
    instr_shape: str = ""

    @property
    def label(self) -> str:
        short = {"fp16": "f16", "fp32": "f32", "fp64": "f64"}
        return f"{short.get(self.in_fmt, self.in_fmt)}.{short.get(self.out_fmt, self.out_fmt)}"

    @property
    def acc_fmt(self) -> str:
        return "fp64" if "fp64" in (self.in_fmt, self.out_fmt) else "fp32"


@dataclass(frozen=True)
class Hypothesis:
    """One point of the space: the parameters, a readable name, and its rank (lower = tried first)."""

    params: ModelParams
    name: str
    rank: tuple
    ring: int

    @property
    def key(self) -> tuple:
        return self.params.semantic_key()


def parse_path(text: str) -> tuple[str, str]:
    """``IN.OUT`` (``f16.f32``, ``e4m3.f32``, ``bf16.f32`` ...) -> tcsmt format names."""
    parts = text.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise TcsmtError(f"--path takes IN.OUT such as f16.f32 or e4m3.f32, not {text!r}")
    return get_format(parts[0]).name, get_format(parts[1]).name


def default_factors(path: PathInfo) -> dict[str, list[Any]]:
    """The plausible values of every free parameter on ``path`` (the product is the space).

    ``zero_sign`` and ``overflow_result`` are not varied: they matter only for
    results that round to zero or overflow, which the fp16/bf16/fp8 products of
    one instruction rarely reach, so the solver mostly has to prove them
    irrelevant, and those proofs take minutes.  Their values come from the
    named models.
    """
    K = path.instr_k
    acc = get_format(path.acc_fmt)
    blocks = [k for k in (1, 2, 4, 8, 16, 32) if k <= K and K % k == 0] or [K]
    if K not in blocks:
        blocks.append(K)
    if acc.frac_bits >= 52:
        extra: list[Any] = list(range(-3, 4))
        frac = [acc.frac_bits]
    else:
        extra = list(range(-10, 4))
        frac = [acc.frac_bits, 13]
    factors: dict[str, list[Any]] = {
        "block_k": blocks,
        "extra_bits": [*extra, "exact"],
        "carry_bits": [1, 2, 3, 4, 5, "unbounded"],
        "align": ["trunc", "rne", "floor"],
        "c_mode": ["aligned", "after"],
        "block_round": ["rz", "rne", "ru", "rd"],
        "block_frac_bits": frac,
        "product_exponent": ["raw", "normalized"],
        "subnormal_in": [True, False],
        "subnormal_c": [True, False],
        "subnormal_out": [True, False],
        "out_round": ["rne", "rz"] if path.out_fmt != path.acc_fmt else ["rne"],
        "c_round": ["rne", "rz"],
        "block_interleave": [0, 2],
    }
    # keep only parameters (and values) this version of ModelParams knows
    probe = ModelParams(in_fmt=path.in_fmt, out_fmt=path.out_fmt, c_fmt=path.c_fmt, acc_fmt=path.acc_fmt,
                        instr_k=K, block_k=K)
    out: dict[str, list[Any]] = {}
    for name, vals in factors.items():
        if name not in PARAM_NAMES:
            continue
        ok = []
        for v in vals:
            try:
                validate(dataclasses.replace(probe, **{name: v}))
                ok.append(v)
            except TcsmtError:
                if name in ("block_k", "block_frac_bits", "extra_bits", "carry_bits"):
                    ok.append(v)  # range checks depend on the other parameters
        if ok:
            out[name] = ok
    if "c_mode" in out and "after_instr" not in out["c_mode"]:
        try:
            validate(dataclasses.replace(probe, c_mode="after_instr"))
            out["c_mode"].append("after_instr")
        except TcsmtError:
            pass
    if len(blocks) == 1:
        out.pop("block_interleave", None)
    return out


def admissible(p: ModelParams) -> bool:
    """False for parameter sets the space leaves out: runs of an interleave longer than a block
    (some blocks would hold more than block_k products and others none)."""
    n = getattr(p, "block_interleave", 0)
    nblocks = (p.instr_k // p.block_k) if p.block_k and p.instr_k else 1
    return not (n and nblocks > 1 and (n > p.block_k or p.block_k % n))


def _retarget(p: ModelParams, path: PathInfo, name: str) -> ModelParams | None:
    """A built-in model's parameters moved onto ``path`` (its K and C format); None if they cannot be."""
    K = path.instr_k
    block_k = p.block_k if p.block_k and K % p.block_k == 0 and p.block_k <= K else K
    if p.reduction == "pairwise":
        block_k = p.block_k if p.block_k and K % p.block_k == 0 else 0
    try:
        q = dataclasses.replace(p, instr_k=K, block_k=block_k, c_fmt=path.c_fmt, instr=path.instr,
                                instr_shape=path.instr_shape, name=name, sources=(), notes="")
        return validate(q)
    except TcsmtError:
        return None


def named_points(path: PathInfo) -> list[tuple[str, ModelParams]]:
    """Every built-in model (and named hypothesis) with ``path``'s formats, then the references."""
    out: list[tuple[str, ModelParams]] = []
    for arch in architectures().values():
        for ap in arch.paths:
            base = ap.params
            if ap.library or base.in_fmt != path.in_fmt or base.out_fmt != path.out_fmt or base.b_fmt:
                continue  # library GEMMs chain many instructions: no hypothesis for one instruction;
                # a mixed path (B in another format) reads other inputs
            tag = arch.name if base.instr == path.instr else f"{arch.name}/{base.instr}"
            q = _retarget(base, path, tag)
            if q is not None:
                out.append((tag, q))
            for hname, over in ap.hypotheses.items():
                try:
                    hp = base.with_overrides(over)
                except TcsmtError:
                    continue
                q = _retarget(hp, path, f"{tag}:{hname}")
                if q is not None:
                    out.append((f"{tag}:{hname}", q))
    for ref in REFERENCES:
        if ref == "ieee-fma64" and path.acc_fmt != "fp64":
            continue
        try:
            rp = reference_params(ref, path.in_fmt, path.out_fmt)
        except TcsmtError:
            continue
        q = _retarget(rp, path, ref)
        if q is not None:
            out.append((ref, q))
    return out


@dataclass
class HypothesisSpace:
    """The factored, lazily enumerated space of one path (see module docstring)."""

    path: PathInfo
    factors: dict[str, list[Any]]
    points: list[tuple[str, ModelParams]]
    radius: int | None = 2

    @classmethod
    def for_path(cls, path: PathInfo, radius: int | None = 2,
                 factors: dict[str, list[Any]] | None = None) -> HypothesisSpace:
        pts = named_points(path)
        facs = factors or default_factors(path)
        if not pts:
            # no model has this path: start from the product's first point
            first = {k: v[0] for k, v in facs.items()}
            base = ModelParams(in_fmt=path.in_fmt, out_fmt=path.out_fmt, c_fmt=path.c_fmt, acc_fmt=path.acc_fmt,
                               instr=path.instr, instr_k=path.instr_k, **first)
            try:
                pts = [("product-origin", validate(base))]
            except TcsmtError as exc:
                raise TcsmtError(f"the hypothesis space of {path.label} is empty ({exc})") from None
        return cls(path, facs, pts, radius)

    def product_size(self) -> int:
        """Points of the full factor product (before canonicalisation)."""
        n = 1
        for vals in self.factors.values():
            n *= len(vals)
        return n

    def describe(self) -> dict[str, Any]:
        return {
            "factors": {k: list(v) for k, v in self.factors.items()},
            "named_points": [n for n, _ in self.points],
            "radius": self.radius,
            "product_size": self.product_size(),
        }

    def _variants(self, p: ModelParams, ring: int) -> Iterator[tuple[ModelParams, tuple[str, ...]]]:
        names = [n for n in FACTOR_NAMES if n in self.factors]
        for combo in itertools.combinations(names, ring):
            alts = [[v for v in self.factors[n] if v != getattr(p, n)] for n in combo]
            for vals in itertools.product(*alts):
                yield dataclasses.replace(p, **dict(zip(combo, vals))), tuple(
                    f"{n}={v}" for n, v in zip(combo, vals))

    def iter_ring(self, ring: int, seen: set) -> Iterator[Hypothesis]:
        """The new hypotheses of one ring (keys in ``seen`` are skipped and added).

        Named points that coincide (after re-targeting and canonicalisation)
        become one hypothesis named ``a = b``.
        """
        if ring == 0:
            merged: dict[tuple, tuple[int, list[str], ModelParams]] = {}
            for idx, (pname, p) in enumerate(self.points):
                try:
                    q = inert.canonical(validate(p))
                except TcsmtError:
                    continue
                key = q.semantic_key()
                if key in seen:
                    continue
                if key in merged:
                    merged[key][1].append(pname)
                else:
                    merged[key] = (idx, [pname], q)
            for key, (idx, names, q) in merged.items():
                seen.add(key)
                name = " = ".join(names)
                yield Hypothesis(dataclasses.replace(q, name=name), name, (0, idx, len(seen)), 0)
            return
        for idx, (pname, p) in enumerate(self.points):
            for q, diff in self._variants(p, ring):
                try:
                    q = inert.canonical(validate(q))
                except TcsmtError:
                    continue
                if not admissible(q):
                    continue
                key = q.semantic_key()
                if key in seen:
                    continue
                seen.add(key)
                name = f"{pname}+{','.join(diff)}"
                yield Hypothesis(dataclasses.replace(q, name=name), name, (ring, idx, len(seen)), ring)

    def candidates_bound(self, radius: int | None = None) -> int:
        """An upper bound on the hypotheses rings 0..``radius`` (default: the space's) may hold before
        deduplication: for each named point, the sum over rings r of the products of r factors' other values."""
        names = [n for n in FACTOR_NAMES if n in self.factors]
        top = self.max_ring() if radius is None else min(radius, len(names))
        total = 0
        for _, p in self.points:
            alts = [len([v for v in self.factors[n] if v != getattr(p, n, None)]) for n in names]
            e = [1] + [0] * top  # elementary symmetric sums of alts up to degree top
            for x in alts:
                for r in range(top, 0, -1):
                    e[r] += e[r - 1] * x
            total += sum(e)
        return total

    def check_size(self) -> None:
        """Refuse, before any is enumerated, a space whose rings may hold more than
        :data:`tcsmt.io.limits.CANDIDATE_HYPOTHESES` candidates (a huge ``--radius``, or ``all``)."""
        bound = self.candidates_bound()
        if bound <= CANDIDATE_HYPOTHESES:
            return
        fits = max((r for r in range(self.max_ring() + 1) if self.candidates_bound(r) <= CANDIDATE_HYPOTHESES),
                   default=0)
        what = "all" if self.radius is None else f"{self.radius:,}"
        raise TcsmtError(f"--radius {what}: the hypothesis space of {self.path.label} may hold {bound:,} candidate "
                         f"hypotheses ({len(self.points)} named models and their rings), over the limit of "
                         f"{CANDIDATE_HYPOTHESES:,}; choose --radius {fits} or less")

    def hypotheses(self, deadline: float | None = None, limit: int = HYPOTHESES) -> list[Hypothesis] | None:
        """Every hypothesis of the space (:meth:`check_size` first), or None when ``deadline`` (a
        ``time.time()``) passes first; more than ``limit`` distinct ones are refused."""
        self.check_size()
        out: list[Hypothesis] = []
        for h in self:
            out.append(h)
            if len(out) > limit:
                raise TcsmtError(f"the hypothesis space of {self.path.label} holds more than {limit:,} hypotheses "
                                 "(the limit); choose a smaller --radius")
            if deadline is not None and time.time() >= deadline:
                return None
        return out

    def max_ring(self) -> int:
        n = len([x for x in FACTOR_NAMES if x in self.factors])
        return n if self.radius is None else min(self.radius, n)

    def __iter__(self) -> Iterator[Hypothesis]:
        seen: set = set()
        for ring in range(self.max_ring() + 1):
            yield from self.iter_ring(ring, seen)


def factor_values(hyps: Sequence[Hypothesis], name: str) -> list[Any]:
    """The distinct values of parameter ``name`` among ``hyps``, in first-seen order."""
    out: list[Any] = []
    for h in hyps:
        v = getattr(h.params, name)
        if v not in out:
            out.append(v)
    return out
