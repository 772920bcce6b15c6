"""The matrix-unit instructions the hardware check can run, and how tiles map onto them.

A *path* is (input format, output format, instruction family).  An instruction
path is run by one kernel of ``kernels.cu`` on tiles of ``m`` rows of A, ``n``
columns of B and an ``m x n`` block of C: one instruction computes the ``m*n``
dot products ``D[r][j] = sum_k A[r][k] * B[j][k] + C[r][j]`` of length
``instr_k``, and a longer K chains ``K / instr_k`` instructions in k order
through the accumulator registers.

A *library* path (``library`` set) is a GEMM call a user makes (cuBLAS through
PyTorch: ``torch.mm`` with an fp32 output, ``torch._scaled_mm`` for fp8): one
tile is one ``m x K`` by ``K x n`` GEMM whose kernel the library chooses.
These calls take no C: every C is +0 (``has_c`` False), and ``instr_k`` is
only the granularity K must have (the library's own instruction k).
"""
from __future__ import annotations

from dataclasses import dataclass

from tcsmt.arith.formats import Format, get_format
from tcsmt.errors import TcsmtError


@dataclass(frozen=True)
class PathSpec:
    """One hardware path: formats, instruction shape, kernel and requirements.

    ``m``, ``n``: rows of A and columns of B per tile (the instruction's M and
    N); ``instr_k``: products per instruction; ``c_fmt``: format of C and D;
    ``cc``: the least compute capability (major*10+minor) with the
    instruction; ``arch_specific``: the kernel needs the sm_90a target.
    """

    in_fmt: str
    out_fmt: str
    instr: str
    kernel: str
    shape: str
    m: int
    n: int
    instr_k: int
    cc: int
    arch_specific: bool = False
    library: str = ""
    default_k: int = 0
    unchecked: bool = False
    """The kernel compiles (nvcc 13) and its SASS was read, but it has never run on a GPU of its target:
    every command that runs it says so (Blackwell sm_100a / sm_120a paths)."""
    scale_fmt: str = ""
    """Block-scaled paths: the scale format (ue8m0, ue4m3); the kernel takes scale arrays (T, m, K/scale_block)
    and (T, n, K/scale_block) after K, and runs with unit scales where none are given."""
    scale_block: int = 0
    b_fmt: str = ""
    """B's format where it differs from A's (mixed fp8 instructions, e4m3 x e5m2; their instruction
    family is ``mma_xe5m2``, ``wgmma_xe4m3``, ... as in models/*.toml); "" = in_fmt."""

    @property
    def has_c(self) -> bool:
        """Whether the path takes a C input (library GEMMs here compute D = A.B: C is +0)."""
        return not self.library

    @property
    def check_k(self) -> int:
        """K used when none is given: one instruction, or a library path's default GEMM depth."""
        return self.default_k or self.instr_k

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.in_fmt, self.out_fmt, self.instr)

    @property
    def label(self) -> str:
        return f"{short_name(self.in_fmt)}.{short_name(self.out_fmt)}/{self.instr}"

    @property
    def fin(self) -> Format:
        return get_format(self.in_fmt)

    @property
    def fin_b(self) -> Format:
        """B's format (A's unless the path mixes formats)."""
        return get_format(self.b_fmt or self.in_fmt)

    @property
    def fout(self) -> Format:
        return get_format(self.out_fmt)

    @property
    def c_fmt(self) -> Format:
        """C has the output format on every path here."""
        return get_format(self.out_fmt)

    @property
    def per_tile(self) -> int:
        return self.m * self.n

    def requirement(self) -> str:
        major, minor = divmod(self.cc, 10)
        if self.arch_specific:  # sm_90a, sm_100a, sm_120a kernels run on that compute capability only
            need = f"compute capability {major}.{minor} (sm_{self.cc}a)"
        else:
            need = f"compute capability {major}.{minor} or newer"
        return need + (" and PyTorch with CUDA" if self.library else "")


def _p(in_fmt, out_fmt, instr, kernel, shape, m, n, k, cc, arch_specific=False, b_fmt="") -> PathSpec:
    return PathSpec(in_fmt, out_fmt, instr, kernel, shape, m, n, k, cc, arch_specific, b_fmt=b_fmt)


def _bw(in_fmt, out_fmt, instr, kernel, shape, m, n, k, cc, scale_fmt="", scale_block=0) -> PathSpec:
    """A Blackwell path (sm_100a tcgen05, sm_120a mma.sync): compiled and its SASS read, never run here."""
    return PathSpec(in_fmt, out_fmt, instr, kernel, shape, m, n, k, cc, True, unchecked=True,
                    scale_fmt=scale_fmt, scale_block=scale_block)


def _lib(in_fmt, out_fmt, instr, call, k, cc, default_k, size=256) -> PathSpec:
    """A library GEMM path: one tile = one size x K x size GEMM through PyTorch (cuBLAS)."""
    return PathSpec(in_fmt, out_fmt, instr, call, f"{size}x{size}xK GEMM", size, size, k, cc,
                    library="torch", default_k=default_k)


PATHS: dict[tuple[str, str, str], PathSpec] = {p.key: p for p in (
    _p("fp16", "fp32", "mma", "mma_f16_f32", "m16n8k16", 16, 8, 16, 80),
    _p("bf16", "fp32", "mma", "mma_bf16_f32", "m16n8k16", 16, 8, 16, 80),
    _p("fp16", "fp16", "mma", "mma_f16_f16", "m16n8k16", 16, 8, 16, 80),
    _p("tf32", "fp32", "mma", "mma_tf32_f32", "m16n8k8", 16, 8, 8, 80),
    _p("e4m3", "fp32", "mma", "mma_e4m3_f32", "m16n8k32", 16, 8, 32, 89),
    _p("e5m2", "fp32", "mma", "mma_e5m2_f32", "m16n8k32", 16, 8, 32, 89),
    _p("e4m3", "fp16", "mma", "mma_e4m3_f16", "m16n8k32", 16, 8, 32, 89),
    _p("e5m2", "fp16", "mma", "mma_e5m2_f16", "m16n8k32", 16, 8, 32, 89),
    _p("fp64", "fp64", "mma", "mma_f64_f64", "m8n8k4", 8, 8, 4, 80),
    _p("fp16", "fp32", "wgmma", "wgmma_f16_f32", "m64n8k16", 64, 8, 16, 90, True),
    _p("bf16", "fp32", "wgmma", "wgmma_bf16_f32", "m64n8k16", 64, 8, 16, 90, True),
    _p("e4m3", "fp32", "wgmma", "wgmma_e4m3_f32", "m64n8k32", 64, 8, 32, 90, True),
    _p("e5m2", "fp32", "wgmma", "wgmma_e5m2_f32", "m64n8k32", 64, 8, 32, 90, True),
    _p("e4m3", "fp16", "wgmma", "wgmma_e4m3_f16", "m64n8k32", 64, 8, 32, 90, True),
    _p("e5m2", "fp16", "wgmma", "wgmma_e5m2_f16", "m64n8k32", 64, 8, 32, 90, True),
    _p("tf32", "fp32", "wgmma", "wgmma_tf32_f32", "m64n8k8", 64, 8, 8, 90, True),
    _p("fp16", "fp16", "wgmma", "wgmma_f16_f16", "m64n8k16", 64, 8, 16, 90, True),
    # mixed fp8: A e4m3 and B e5m2 (or the reverse)
    _p("e4m3", "fp32", "mma_xe5m2", "mma_e4m3_e5m2_f32", "m16n8k32", 16, 8, 32, 89, b_fmt="e5m2"),
    _p("e5m2", "fp32", "mma_xe4m3", "mma_e5m2_e4m3_f32", "m16n8k32", 16, 8, 32, 89, b_fmt="e4m3"),
    _p("e4m3", "fp16", "mma_xe5m2", "mma_e4m3_e5m2_f16", "m16n8k32", 16, 8, 32, 89, b_fmt="e5m2"),
    _p("e4m3", "fp32", "wgmma_xe5m2", "wgmma_e4m3_e5m2_f32", "m64n8k32", 64, 8, 32, 90, True, b_fmt="e5m2"),
    _p("e5m2", "fp32", "wgmma_xe4m3", "wgmma_e5m2_e4m3_f32", "m64n8k32", 64, 8, 32, 90, True, b_fmt="e4m3"),
    _p("e4m3", "fp16", "wgmma_xe5m2", "wgmma_e4m3_e5m2_f16", "m64n8k32", 64, 8, 32, 90, True, b_fmt="e5m2"),
    # Blackwell, not checked on hardware (no B200 / RTX 50 here).  Instructions exactly as models/*.toml name
    # them (tests/test_hwcheck.py ties every one to a model path): tcgen05 (kind::tf32, kind::f16), and for the
    # kinds that take any pair of A and B types the kind followed by A's and B's type in PTX's order
    # (tcgen05.mma.kind::f8f6f4.e4m3.e4m3, mma.sync.kind::mxf8f6f4.block_scale.block32.ue8m0.e2m1.e2m1).
    _bw("tf32", "fp32", "tcgen05", "tcgen05_tf32_f32", "kind::tf32 m128n8k8", 128, 8, 8, 100),
    _bw("fp16", "fp32", "tcgen05", "tcgen05_f16_f32", "kind::f16 m128n8k16", 128, 8, 16, 100),
    _bw("bf16", "fp32", "tcgen05", "tcgen05_bf16_f32", "kind::f16 m128n8k16", 128, 8, 16, 100),
    _bw("e4m3", "fp32", "tcgen05.mma.kind::f8f6f4.e4m3.e4m3", "tcgen05_e4m3_f32", "kind::f8f6f4 m128n8k32", 128, 8, 32,
        100),
    _bw("e5m2", "fp32", "tcgen05.mma.kind::f8f6f4.e5m2.e5m2", "tcgen05_e5m2_f32", "kind::f8f6f4 m128n8k32", 128, 8, 32,
        100),
    _bw("e4m3", "fp32", "tcgen05.mma.kind::mxf8f6f4.block_scale.block32.ue8m0.e4m3.e4m3", "tcgen05_mxf8f6f4_e4m3_f32",
        "kind::mxf8f6f4 m128n8k32 scale_vec::1X", 128, 8, 32, 100, "ue8m0", 32),
    _bw("e2m1", "fp32", "tcgen05.mma.kind::mxf4nvf4.block_scale.block32.ue8m0", "tcgen05_mxf4nvf4_b32_ue8m0_f32",
        "kind::mxf4nvf4 m128n8k64 scale_vec::2X", 128, 8, 64, 100, "ue8m0", 32),
    _bw("e2m1", "fp32", "tcgen05.mma.kind::mxf4nvf4.block_scale.block16.ue8m0", "tcgen05_mxf4nvf4_b16_ue8m0_f32",
        "kind::mxf4nvf4 m128n8k64 scale_vec::4X", 128, 8, 64, 100, "ue8m0", 16),
    _bw("e2m1", "fp32", "tcgen05.mma.kind::mxf4nvf4.block_scale.block16.ue4m3", "tcgen05_mxf4nvf4_b16_ue4m3_f32",
        "kind::mxf4nvf4 m128n8k64 scale_vec::4X", 128, 8, 64, 100, "ue4m3", 16),
    _bw("e4m3", "fp32", "mma.sync.kind::f8f6f4.e4m3.e4m3", "sm120_f8f6f4_e4m3_f32", "m16n8k32", 16, 8, 32, 120),
    _bw("e5m2", "fp32", "mma.sync.kind::f8f6f4.e5m2.e5m2", "sm120_f8f6f4_e5m2_f32", "m16n8k32", 16, 8, 32, 120),
    _bw("e3m2", "fp32", "mma.sync.kind::f8f6f4.e3m2.e3m2", "sm120_f8f6f4_e3m2_f32", "m16n8k32", 16, 8, 32, 120),
    _bw("e2m3", "fp32", "mma.sync.kind::f8f6f4.e2m3.e2m3", "sm120_f8f6f4_e2m3_f32", "m16n8k32", 16, 8, 32, 120),
    _bw("e2m1", "fp32", "mma.sync.kind::f8f6f4.e2m1.e2m1", "sm120_f8f6f4_e2m1_f32", "m16n8k32", 16, 8, 32, 120),
    _bw("e4m3", "fp32", "mma.sync.kind::mxf8f6f4.block_scale.block32.ue8m0.e4m3.e4m3", "sm120_mxf8f6f4_e4m3_f32",
        "m16n8k32 scale_vec::1X", 16, 8, 32, 120, "ue8m0", 32),
    _bw("e2m1", "fp32", "mma.sync.kind::mxf8f6f4.block_scale.block32.ue8m0.e2m1.e2m1", "sm120_mxf8f6f4_e2m1_f32",
        "m16n8k32 scale_vec::1X", 16, 8, 32, 120, "ue8m0", 32),
    _bw("e2m1", "fp32", "mma.sync.kind::mxf4nvf4.block_scale.block32.ue8m0", "sm120_mxf4nvf4_b32_ue8m0_f32",
        "m16n8k64 scale_vec::2X", 16, 8, 64, 120, "ue8m0", 32),
    _bw("e2m1", "fp32", "mma.sync.kind::mxf4nvf4.block_scale.block16.ue4m3", "sm120_mxf4nvf4_b16_ue4m3_f32",
        "m16n8k64 scale_vec::4X", 16, 8, 64, 120, "ue4m3", 16),
    # library GEMMs (cuBLAS through PyTorch); kernel = the call made, see library.py
    _lib("fp16", "fp32", "cublas", "mm_out_fp32", 16, 80, 256),
    _lib("bf16", "fp32", "cublas", "mm_out_fp32", 16, 80, 256),
    _lib("fp16", "fp16", "cublas", "mm", 16, 80, 256),
    _lib("tf32", "fp32", "cublas", "mm_tf32", 8, 80, 256),
    _lib("e4m3", "fp32", "scaled_mm", "scaled_mm", 32, 89, 512),
    _lib("e4m3", "fp32", "scaled_mm_fast", "scaled_mm_fast_accum", 32, 89, 512),
)}

INSTRUCTION_FAMILIES = tuple(dict.fromkeys(p.instr for p in PATHS.values()))
"""Every --instr value a path has: mma, wgmma, then the library calls."""

_SHORT = {"fp16": "f16", "fp32": "f32", "fp64": "f64"}


def short_name(fmt: str) -> str:
    """``fp16`` -> ``f16`` (the PTX spelling used in PATH arguments); others unchanged."""
    return _SHORT.get(fmt, fmt)


class NoKernel(TcsmtError):
    """No hardware path (no kernel) for these formats and instruction family."""


def find_path(in_fmt: str, out_fmt: str, instr: str = "mma") -> PathSpec:
    """The PathSpec for formats (any tcsmt name or alias) and instruction family (``mma_xe5m2``: B in e5m2)."""
    key = (get_format(in_fmt).name, get_format(out_fmt).name, instr)
    if key not in PATHS:
        have = ", ".join(p.label for p in PATHS.values())
        raise NoKernel(f"no hardware path {short_name(key[0])}.{short_name(key[1])} with {instr} (available: {have})")
    return PATHS[key]


def parse_path(text: str, instr: str = "mma") -> PathSpec:
    """Parse ``IN.OUT`` (e.g. ``f16.f32``, ``e4m3.f32``, ``f64.f64``) for ``instr``."""
    parts = text.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise TcsmtError(f"--path takes IN.OUT such as f16.f32 or e4m3.f32, not {text!r}")
    return find_path(parts[0], parts[1], instr)


def default_k(spec: PathSpec, k: int | None) -> int:
    """The K to check: ``k`` if given (it must be a positive multiple of the path's k), else ``spec.check_k``."""
    K = spec.check_k if k is None else k
    if K <= 0 or K % spec.instr_k:
        raise TcsmtError(f"--k must be a positive multiple of {spec.instr_k} for {spec.label}, not {K}")
    return K


def pad_k(K: int, spec: PathSpec) -> int:
    """K rounded up to a whole number of instructions."""
    return -(-K // spec.instr_k) * spec.instr_k


def unit_scale(scale_fmt: str) -> int:
    """The pattern of the scale 1 (ue8m0 2^0 = 0x7F, ue4m3 1.0 = 0x38)."""
    return int(get_format(scale_fmt).from_fraction(1))
