"""MMA-Sim's instruction paths, and the tcsmt model path that computes each (or why none does).

MMA-Sim (Xie et al., arXiv 2511.10909, github microsoft/MMA-Sim) is a peer bit-level model; it is
imported at run time only (never copied here).  Its paths are read from the imported package itself:
the qualifier lists of ``mma``, ``mma.block_scale`` and ``mfma`` per architecture, and, for ``wgmma``
and ``tcgen05.mma`` (which have no list, only constructor checks), every combination of kind and
formats that MMA-Sim's constructor accepts.  One path = (architecture, instruction, A, B, C, D
formats, scale format and block); the M and N of a shape do not change the arithmetic of one output.

Each path is mapped to a tcsmt path of the same architecture, instruction family (``mma``,
``wgmma``, ``tcgen05``, ``mfma``) and formats.  Where MMA-Sim's k differs from the tcsmt
instruction's, tcsmt runs its path at K = MMA-Sim's k: a part of one instruction when the blocks are
contiguous and K is a multiple of the block (or within one block), or whole instructions chained
through the accumulator format when that equals the output format: the same computation as MMA-Sim's
shorter or longer instruction (the run checks it).  A C in fp16 where tcsmt's path takes fp32 is
widened exactly first (MMA-Sim converts it to D's type, exactly).  An fp64 (AMD: fp32) instruction of an
architecture without such a tcsmt path is MMA-Sim's chain of IEEE FMAs from C, tcsmt's reference
``ieee-fma64`` (``ieee-fma32``).  Anything else has no counterpart, with the reason stated.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import find_arch, resolve
from tcsmt.errors import TcsmtError

ARCHS = {"Volta": "volta", "Turing": "turing", "Ampere": "ampere", "Ada Lovelace": "ada", "Hopper": "hopper",
         "Blackwell": "blackwell", "RTX Blackwell": "rtx_blackwell", "CDNA1": "cdna1", "CDNA2": "cdna2",
         "CDNA3": "cdna3"}
"""MMA-Sim's architecture names -> tcsmt's model files."""

NV_TYPES = {"f64": "fp64", "f32": "fp32", "tf32": "tf32", "f16": "fp16", "bf16": "bf16", "e4m3": "e4m3",
            "e5m2": "e5m2", "e2m1": "e2m1", "ue8m0": "ue8m0", "ue4m3": "ue4m3"}
"""PTX type names in MMA-Sim's qualifiers -> tcsmt formats."""

AMD_TORCH = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
             "float8_e4m3fnuz": "e4m3fnuz", "float8_e5m2fnuz": "e5m2fnuz"}
"""torch dtypes of MMA-Sim's mfma operands -> tcsmt formats (xf32 is tf32: MMA-Sim truncates to it)."""

MMASIM_READINGS = {
    "zero_exp126": "zero operands join the alignment with exponent -126 (class 1)",
    "no_floor": "no alignment floor (floors)",
    "carry_unbounded": "unbounded carries (class 4)",
    "pairwise4": "fp32 RNE pairwise trees per group of 4 (class 6)",
    "pairwise2": "fp32 RNE pairwise trees per group of 2 (class 6)",
}
"""The named hypotheses (models/*.toml) that carry MMA-Sim's reading where tcsmt's primary differs
(docs/open_questions.md); a path's MMA-Sim spec names every one of them that the path has."""

NO_PATH_REASONS = {
    ("rtx_blackwell", "mma", "scale"): "ptxas 13.0 refuses this scale format and block for sm_120a mma.sync "
                                       "kind::mxf4nvf4 (models/rtx_blackwell.toml, source mxf4nvf4_combos)",
}


@dataclass
class MmaSimPath:
    """One MMA-Sim instruction path and how to build MMA-Sim's simulator object for it."""

    arch: str            # MMA-Sim's architecture name ("Ada Lovelace")
    api: str             # mma, mma_block_scale, wgmma, tcgen05mma, tcgen05mma_block_scale, mfma
    qualifier: str       # what MMA-Sim's constructor takes
    k: int
    a: str               # tcsmt format names
    b: str
    c: str
    d: str
    scale: str = ""      # ue8m0 / ue4m3, "" without block scaling
    block: int = 0       # products per scale factor
    packing: int = 1     # elements per stored A/B entry (2: e2m1 pairs in a byte)

    @property
    def family(self) -> str:
        return {"mma": "mma", "mma_block_scale": "mma", "wgmma": "wgmma", "tcgen05mma": "tcgen05",
                "tcgen05mma_block_scale": "tcgen05", "mfma": "mfma"}[self.api]

    @property
    def label(self) -> str:
        return f"{self.arch} {self.api} {self.qualifier}"

    def build(self, sim: dict[str, Any]) -> Any:
        """MMA-Sim's simulator object for this path (``sim``: the imported simulator classes by api name)."""
        return sim[self.api](self.arch, self.qualifier)


@dataclass
class Counterpart:
    """The tcsmt computation compared with one MMA-Sim path: a model spec on a path at K products."""

    arch: str            # tcsmt architecture or reference name
    params: ModelParams
    K: int
    hypotheses: list[str] = field(default_factory=list)   # named hypotheses that carry MMA-Sim's reading
    overrides: list[str] = field(default_factory=list)    # MMA-Sim's readings that no named hypothesis of the path carries
    note: str = ""
    widen_c: bool = False   # C given in fp16, the path's C is fp32: widened exactly

    @property
    def instr(self) -> str:
        return self.params.instr

    def spec(self, hypotheses: bool = False) -> str:
        if hypotheses and (self.hypotheses or self.overrides):
            return f"{self.arch}:{','.join([*self.hypotheses, *self.overrides])}"
        return self.arch


def family(instr: str) -> str:
    """The instruction family of a tcsmt path's ``instr`` (``mma_xe5m2`` and ``mma.sync.kind::...``: mma)."""
    return re.split(r"[._]", instr)[0]


def _nv(q: str) -> str:
    if q not in NV_TYPES:
        raise TcsmtError(f"MMA-Sim names a type tcsmt does not know: {q!r}")
    return NV_TYPES[q]


def _shape_k(shape: str) -> int:
    return int(shape.split("k")[1])


def enumerate_paths(isa: dict[str, Any], sim: dict[str, Any]) -> list[MmaSimPath]:
    """Every MMA-Sim instruction path.  ``isa``: MMA-Sim's qualifier lists (``mma``, ``mma_block_scale``,
    ``mfma``: dicts architecture -> qualifiers); ``sim``: its simulator classes by api name (used to ask
    the wgmma and tcgen05 constructors which kinds they accept)."""
    out: list[MmaSimPath] = []
    for arch, quals in isa["mma"].items():
        for q in quals:
            shape, d, a, b, c = q.split(".")
            out.append(MmaSimPath(arch, "mma", q, _shape_k(shape), _nv(a), _nv(b), _nv(c), _nv(d)))
    for arch, quals in isa["mma_block_scale"].items():
        for q in quals:
            shape, block, d, a, b, c, s = q.split(".")
            k = _shape_k(shape)
            out.append(MmaSimPath(arch, "mma_block_scale", q, k, _nv(a), _nv(b), _nv(c), _nv(d), _nv(s),
                                  int(block[len("block"):]), 2 if k == 64 else 1))
    types = ["tf32", "f16", "bf16", "e4m3", "e5m2", "e2m1"]
    for api, arch, m in (("wgmma", "Hopper", 64), ("tcgen05mma", "Blackwell", 128)):
        for k in (8, 16, 32):
            for d in ("f32", "f16"):
                for a in types:
                    for b in types:
                        q = f"m{m}n8k{k}.{d}.{a}.{b}"
                        if _accepts(sim[api], arch, q):
                            out.append(MmaSimPath(arch, api, q, k, _nv(a), _nv(b), _nv(d), _nv(d)))
    for k in (32, 64):
        for block in (16, 32):
            for s in ("ue8m0", "ue4m3"):
                for a in types:
                    for b in types:
                        q = f"m128n8k{k}.block{block}.f32.{a}.{b}.{s}"
                        if _accepts(sim["tcgen05mma_block_scale"], "Blackwell", q):
                            out.append(MmaSimPath("Blackwell", "tcgen05mma_block_scale", q, k, _nv(a), _nv(b), "fp32",
                                                  "fp32", s, block, 2 if k == 64 else 1))
    for arch, quals in isa["mfma"].items():  # CDNA2 lists CDNA1's instructions too: kept (their arithmetic differs)
        for q in quals:
            obj = sim["mfma"](arch, q)
            a, b, d = (AMD_TORCH[str(t).removeprefix("torch.")] for t in (obj.a_type, obj.b_type, obj.d_type))
            if q.endswith("xf32"):
                a = b = "tf32"
            out.append(MmaSimPath(arch, "mfma", q, obj.k, a, b, d, d))
    seen: set[str] = set()
    unique = []
    for p in out:  # an architecture's list repeats another's qualifiers (RTX Blackwell names Ada's fp8 shapes)
        if p.label not in seen:
            seen.add(p.label)
            unique.append(p)
    return unique


def _accepts(cls: Any, arch: str, qualifier: str) -> bool:
    """Whether MMA-Sim's constructor takes this qualifier (it checks kinds and formats with assert)."""
    try:
        cls(arch, qualifier)
    except (AssertionError, KeyError, ValueError, IndexError):
        return False
    return True


def _k_fits(p: ModelParams, K: int) -> str | None:
    """How tcsmt's path ``p`` computes an instruction of K products ("" exactly, a note, or None: it cannot)."""
    if p.instr_k in (0, K):
        return ""
    if p.scale_fmt or p.c_mode == "after_instr" or p.block_interleave:
        return None
    bk = p.block_k or p.instr_k
    if K < p.instr_k and (K <= bk or K % bk == 0):
        return f"K = {K} on the k{p.instr_k} instruction: {'its first block' if K <= bk else f'its first {K // bk} blocks'}"
    if K > p.instr_k and K % p.instr_k == 0 and p.acc_fmt == p.out_fmt:
        return f"K = {K}: {K // p.instr_k} chained k{p.instr_k} instructions"
    return None


def _reason(arch: str, path: MmaSimPath) -> str:
    keys = [(arch, path.family, "scale")] if path.scale else []
    for key in [*keys, (arch, path.family, path.k), (arch, path.family, path.a)]:
        if key in NO_PATH_REASONS:
            return NO_PATH_REASONS[key]
    b = "" if path.b == path.a else f" x {path.b}"
    scale = f" with {path.scale} scales per {path.block}" if path.scale else ""
    return (f"models/{arch}.toml has no {path.family} path {path.a}{b} -> {path.d} (C {path.c}){scale} "
            f"for k{path.k}")


def counterpart(path: MmaSimPath) -> Counterpart | str:
    """tcsmt's computation for ``path``, or the reason there is none."""
    arch = ARCHS.get(path.arch)
    if arch is None:
        return f"tcsmt has no model of MMA-Sim's architecture {path.arch!r}"
    found: list[tuple[int, Counterpart]] = []
    for mp in find_arch(arch).every_path():
        p = mp.params
        if (mp.library or family(p.instr) != path.family or p.in_fmt != path.a or p.b_format != path.b
                or p.out_fmt != path.d or p.scale_fmt != path.scale or (p.scale_block or 0) != path.block):
            continue
        if path.family == "mfma" and path.qualifier.endswith("_1k") != p.instr_shape.endswith("_1k"):
            continue  # CDNA2's bf16 _1k instructions and the older bf16 ones sum differently (MMA-Sim amd.py)
        widen = p.c_fmt != path.c
        if widen and not (path.c == "fp16" and p.c_fmt == "fp32"):
            continue
        how = _k_fits(p, path.k)
        if how is None:
            continue
        hyps = [h for h in MMASIM_READINGS if h in mp.hypotheses]
        # MMA-Sim's NVIDIA fused dot-add gives every zero the exponent -126 (arithmetic.py L93-94); a path
        # without the named hypothesis for it gets the reading as an override, reported as such
        over = ["zero_exponent=-126"] if (path.family != "mfma" and p.zero_exponent is None
                                         and "zero_exp126" not in mp.hypotheses and p.in_fmt != "fp64") else []
        note = "; ".join(x for x in (how, "C widened exactly from fp16 to fp32" if widen else "") if x)
        found.append((0 if p.instr_k == path.k else 1, Counterpart(arch, p, path.k, hyps, over, note, widen)))
    if found:
        return min(found, key=lambda t: t[0])[1]
    if path.a == path.b == path.d == "fp64" or (path.family == "mfma" and path.a == path.b == path.d == "fp32"):
        ref = "ieee-fma64" if path.a == "fp64" else "ieee-fma32"
        return Counterpart(ref, resolve(ref, path.a, path.d), path.k, [], [],
                           f"reference {ref}: MMA-Sim's {path.a} instruction is a chain of IEEE FMAs from C in k order"
                           f" (models/{arch}.toml has no {path.a} path of its own)")
    return _reason(arch, path)

