"""The questions ``python -m tools.library.decide`` asks (evidence/h100_library_decisions.json): each a match of the calls
it covers, its hypotheses (plan fields each sets, or ``c_init``) and the calls it is asked of (``on``: the validation
calls, ``more`` sampled calls, or a ``probe``'s whole calls), in the order the decisions are then applied (the first
matching decision sets a field).  Split from :mod:`tools.library.decide`, which asks them."""
from __future__ import annotations

from typing import Any

from tcsmt.library.rules import CUTLASS_K_TILE

CUTLASS_TILE = CUTLASS_K_TILE.pattern
"""A CUTLASS 2.x kernel name; group 1 is the threadblock tile's K (``..._64x64_32x6_...``: 32 k's, 6 stages;
``cutlass_75_wmma_..._32x32_32x1_...``: 32 k's, 1 stage): the catalogs' own pattern."""
NO_K_TILE = {"k_tile": 0}
"""The hypothesis 'blocks from the slice start' where the converter will not make that plan itself (it refuses a
CUTLASS kernel's plan whose slice residue cuts a block while the K iteration is undecided): ``decide`` evaluates the
plan another hypothesis of the question makes, with no K tiles."""

_SIMT_CHAINS = {f"{what} (models/hopper.toml fp32 simt_ffma{'' if hyp is None else ', hypothesis ' + hyp})":
                {"chain": {"arch": "hopper" if hyp is None else f"hopper:{hyp}", "in_fmt": "fp32", "out_fmt": "fp32",
                           "instr": "simt_ffma"}}
                for what, hyp in (("serial FFMA in k order", None),
                                  ("2 products at a time, exact with the running sum, one RNE", "pairs"),
                                  ("8 products at a time, exact with the running sum, one RNE", "k_blocks8"))}
"""The K-chains the fp32 kernels with tf32 off are tested against (the CUDA-core and the gemmSN kernels alike)."""


SM75_16BIT = r"^cutlass::Kernel2<cutlass_75_tensorop_\w*s1688gemm_(bf16|f16)_"
"""The sm75 CUTLASS 16-bit tensor-op kernels cuBLAS runs on Hopper (``cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_
nn_align1``; ``s1688gemm_bf16`` without the leading ``bf16_`` writes fp32): their names carry no K tile."""


def _block8(fmt: str) -> dict[str, str]:
    """The cuBLAS K-chain of ``fmt`` (bf16, fp16) -> fp32 with blocks of 8 products (models/hopper.toml, hypothesis
    ``block8`` of the ``cublas`` path)."""
    return {"arch": "hopper:block8", "in_fmt": fmt, "out_fmt": "fp32", "instr": "cublas"}


GEMV_BIAS_CLASSES = (("gemvx", r"(^|::)gemvx::kernel<"), ("gemv2T_kernel_val", r"(^|\s)gemv2T_kernel_val<"))
"""The CUDA-core GEMV kernels that run ``linear`` with a bias at M = 1 (BERT's LM heads: bf16 ``gemvx``, fp16 and, under
``CUBLAS_WORKSPACE_CONFIG=:0:0``, bf16 ``gemv2T_kernel_val``), one question each: the kernel's own epilogue code."""
NVJET_BETA1_CLASSES = (
    ("_badd_ (C added by the GEMM kernel, no split-K)", r"^nvjet_sm90_[a-z]+_\w+_badd(_coop[AB])?_[NT]{3}$"),
    ("_bz_bias_ (cuBLASLt's EPILOGUE_BIAS, no split-K: the Conv1D forward)",
     r"^nvjet_sm90_[a-z]+_\w+_bz(_coop[AB])?_bias_[NT]{3}$"),
    ("_bz_splitK_bias_ (EPILOGUE_BIAS with split-K)", r"^nvjet_sm90_[a-z]+_\w+_bz_splitK_bias_[NT]{3}$"),
    ("_bx_splitK_ (split-K, C added by the splitKreduce kernel)", r"^nvjet_sm90_[a-z]+_\w+_bx_splitK_[NT]{3}$"),
)
"""The nvjet kernel classes of ``addmm`` with beta = 1, by the epilogue part of the kernel's name (one question
each: a class is decided only by its own samples)."""
OTHER_BETA1_CLASSES = (
    ("sm75 CUTLASS tensor-op (s1688gemm, no split-K)", {"kernel_regex": SM75_16BIT, "split": False}),
    ("sm75 CUTLASS tensor-op split-K with fp32 partials (s1688gemm writing fp32, reduced by cuBLASLt's splitKreduce)",
     {"kernel_regex": r"^cutlass::Kernel2<cutlass_75_tensorop_s1688gemm_(bf16|f16)_", "split": True}),
    ("sm80 CUTLASS 16-bit tensor-op (s16816gemm, no split-K)",
     {"kernel_regex": r"^cutlass::Kernel2<cutlass_80_tensorop_\w*s16816gemm", "split": False}),
    ("sm75 / sm80 CUTLASS (no split-K)", {"kernel_regex": r"^cutlass::Kernel2<cutlass_", "split": False}),
    ("sm75 / sm80 CUTLASS split-K", {"kernel_regex": r"^cutlass::Kernel2<cutlass_", "split": True}),
    ("sm90 xmma tf32", {"kernel_regex": r"^sm90_xmma_gemm_f32f32_tf32f32"}),
)
"""The other kernel classes of ``addmm`` with beta = 1 that samples cover (one question each; the sm75 tensor-op
kernels, whose K-chain the probe questions decide, first)."""
FP32_OUT_BETA1_CLASSES = (
    ("sm90 xmma tf32 segment_k_off", {"kernel_regex": r"^sm90_xmma_gemm_f32f32_tf32f32_f32_\w*_segment_k_off_"}),
    ("sm80 CUTLASS tf32 (s1688gemm, no split-K)",
     {"kernel_regex": r"^cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_", "split": False}),
)
"""Kernel classes of ``addmm`` with beta = 1 writing fp32 (tf32), where rounding the sum to the output format first
changes nothing: only C after the sum and C as the initial accumulator are told apart (one question each)."""


QUESTIONS: list[dict[str, Any]] = [
    {"question": "K iteration inside a slice of the sm80 CUTLASS 16-bit kernels",
     "match": {"kernel_regex": r"^cutlass::Kernel2<cutlass_80_tensorop_\w*s16816gemm"},
     "hypotheses": {"blocks from the slice start": NO_K_TILE,
                    "residue first, K-tile from the kernel name": {"k_tile_regex": CUTLASS_TILE}}},
    {"question": "K iteration inside a slice of the sm80 CUTLASS tf32 kernels",
     "match": {"kernel_regex": r"^cutlass::Kernel2<cutlass_80_tensorop_s1688gemm"},
     "hypotheses": {"blocks from the slice start": NO_K_TILE,
                    "residue first, K-tile from the kernel name": {"k_tile_regex": CUTLASS_TILE}}},
    *[{"question": f"K-chain and K iteration of the sm75 CUTLASS {name} kernels (s1688gemm: mma m16n8k8)",
       "on": "probe", "match": {"a_dtype": dtype, "kernel_regex": SM75_16BIT},
       "hypotheses": {"blocks of 16 from the slice start (the wgmma kernels' chain)": None,
                      "blocks of 16, residue first, K tile 32": {"k_tile": 32},
                      "blocks of 8 (one m16n8k8 each) from the slice start": {"chain": _block8(fmt)},
                      "blocks of 8 (one m16n8k8 each), residue first, K tile 32": {"chain": _block8(fmt), "k_tile": 32}}}
      for name, dtype, fmt in (("bf16", "bfloat16", "bf16"), ("fp16", "float16", "fp16"))],
    {"question": "K iteration of the sm75 CUTLASS bf16 WMMA kernels (s161616gemm: wmma m16n16k16)",
     "on": "probe", "match": {"a_dtype": "bfloat16", "kernel_regex": r"^cutlass::Kernel2<cutlass_75_wmma_tensorop_\w*s161616gemm"},
     "hypotheses": {"blocks from the slice start": NO_K_TILE,
                    "residue first, K-tile from the kernel name": {"k_tile_regex": CUTLASS_TILE}}},
    {"question": "fp32 -> tf32 input rounding of the sm80 CUTLASS tf32 kernels",
     "match": {"tf32": True, "kernel_regex": r"^cutlass::Kernel2<cutlass_80_tensorop_s1688gemm"},
     "hypotheses": {m: {"in_round": m} for m in ("rz", "rna", "rne")}},
    {"question": "fp32 -> tf32 input rounding of the sm90 xmma tf32 kernels",
     "match": {"tf32": True, "kernel_regex": r"^sm90_xmma_gemm_f32f32_tf32f32"},
     "hypotheses": {m: {"in_round": m} for m in ("rz", "rna", "rne")}},
    {"question": "fp32 -> tf32 input rounding of the sm80 xmma tf32 kernels",
     "match": {"tf32": True, "kernel_regex": r"^sm80_xmma_gemm_f32f32_tf32f32"},
     "hypotheses": {m: {"in_round": m} for m in ("rz", "rna", "rne")}},
    {"question": "fp32 -> tf32 input rounding of the sm80 xmma tf32 kernels (fresh random-shape calls on raw fp32 "
                 "inputs: the validation calls left it open)",
     "on": "more", "match": {"tf32": True, "kernel_regex": r"^sm80_xmma_gemm_f32f32_tf32f32"},
     "hypotheses": {m: {"in_round": m} for m in ("rz", "rna", "rne")}},
    {"question": "K iteration inside a slice of the sm80 CUTLASS tf32 kernels (fresh calls whose K residue cuts a block)",
     "on": "more", "match": {"tf32": True, "kernel_regex": r"^cutlass::Kernel2<cutlass_80_tensorop_s1688gemm"},
     "hypotheses": {"blocks from the slice start": NO_K_TILE,
                    "residue first, K-tile from the kernel name": {"k_tile_regex": CUTLASS_TILE}}},
    {"question": "K iteration of the sm80 CUTLASS WMMA kernels (s161616gemm: wmma m16n16k16; fresh calls whose K "
                 "residue cuts a block)",
     "on": "more", "match": {"kernel_regex": r"^cutlass::Kernel2<cutlass_80_wmma_tensorop_\w*s161616gemm"},
     "hypotheses": {"blocks from the slice start": NO_K_TILE,
                    "residue first, K-tile from the kernel name": {"k_tile_regex": CUTLASS_TILE}}},
    {"question": "K iteration of the sm75 CUTLASS fp16 WMMA kernels (s161616gemm: wmma m16n16k16; fresh calls whose K "
                 "residue cuts a block)",
     "on": "more", "match": {"a_dtype": "float16", "kernel_regex": r"^cutlass::Kernel2<cutlass_75_wmma_tensorop_\w*s161616gemm"},
     "hypotheses": {"blocks from the slice start": NO_K_TILE,
                    "residue first, K-tile from the kernel name": {"k_tile_regex": CUTLASS_TILE}}},
    {"question": "K-chain of the fp32 CUDA-core kernels (tf32 off)",
     "match": {"a_dtype": "float32", "tf32": False,
               "kernel_regex": r"^(cutlass::Kernel2<cutlass_80_simt_sgemm|sm80_xmma_gemm_f32f32_f32f32_f32_\w*_ffma_\w*_execute_kernel)"},
     "hypotheses": _SIMT_CHAINS},
    {"question": "K-chain of the fp32 gemmSN kernels (tf32 off)",
     "match": {"a_dtype": "float32", "tf32": False, "kernel_regex": r"^gemmSN_"},
     "hypotheses": _SIMT_CHAINS},
    {"question": "epilogue of row-wise _scaled_mm",
     "match": {"op": "scaled_mm", "scale": "row", "bias": False},
     "hypotheses": {"FFMA(y, RN32(scale_a[i]*scale_b[j]), +0)": {"epilogue": ["scale"]},
                    "RN32(RN32(y*scale_b[j])*scale_a[i])": {"epilogue": ["scale_b_then_a"]}}},
    {"question": "epilogue of per-tensor _scaled_mm with bias",
     "match": {"op": "scaled_mm", "scale": "tensor", "bias": True},
     "hypotheses": {"FFMA(y, RN32(scale_a*scale_b), +0), then RN32(+ bias)": {"epilogue": ["scale", "bias"]}}},
    {"question": "epilogue of linear with bias",
     # the kernel classes of its validation calls; the CUTLASS split-K kernels with a bias (in-place, or tf32) stay
     # open (a fresh H200 tf32 call on cutlass_80_tensorop_s1688gemm, split in place, gave 105 of 128 other outputs)
     "match": {"op": "linear", "bias": True,
               "any": [{"kernel_regex": r"^nvjet_sm90_[a-z]+_\w+_bz(_coop[AB])?(_splitK)?_bias_[NT]{3}$"},
                       {"kernel_regex": r"^cutlass::Kernel2<cutlass_80_tensorop_\w*s16816gemm", "split": False}]},
     "hypotheses": {"RN32(y + bias)": {"epilogue": ["bias"]}}},
    *[{"question": f"epilogue of linear with bias on the CUDA-core GEMV kernel {name} (M = 1: torch's cuBLASLt call with "
                   "EPILOGUE_BIAS runs it)",
       "on": "more", "match": {"op": "linear", "bias": True, "kernel_regex": regex},
       "hypotheses": {"RN32(y + bias) after the reduced sum": {"epilogue": ["bias"]},
                      "the bias as the initial accumulator of the first thread's chain": {"c_init": True}}}
      for name, regex in GEMV_BIAS_CLASSES],
    {"question": "epilogue of linear with bias on the sm80 CUTLASS WMMA kernels (s161616gemm: BERT's LM heads at 2 to 16 "
                 "tokens)",
     "on": "more", "match": {"op": "linear", "bias": True, "split": False,
                             "kernel_regex": r"^cutlass::Kernel2<cutlass_80_wmma_tensorop_\w*s161616gemm"},
     "hypotheses": {"RN32(y + bias) after the reduced sum": {"epilogue": ["bias"]},
                    "the bias as the initial accumulator of the K-chain": {"c_init": True}}},
    {"question": "epilogue of tf32 linear with bias on the sm90 xmma segment_k_off kernels (fp32 models' layers with "
                 "tf32 on)",
     "on": "more", "match": {"op": "linear", "bias": True, "tf32": True, "split": False,
                             "kernel_regex": r"^sm90_xmma_gemm_f32f32_tf32f32_f32_\w+_segment_k_off_"},
     "hypotheses": {"RN32(y + bias) after the K-chain": {"epilogue": ["bias"]},
                    "the bias as the initial accumulator of the K-chain": {"c_init": True}}},
    {"question": "epilogue of addmm with a 1-D bias and beta = 0 (torch: the input is ignored)",
     "match": {"op": "addmm", "bias": True, "alpha_is_1": True, "beta_is_0": True},
     "hypotheses": {"none (beta = 0: the bias is not added)": {"epilogue": []},
                    "RN32(y + bias)": {"epilogue": ["bias"]}}},
    *[{"question": f"epilogue of addmm with alpha != 1 and beta = 1 on the nvjet {what} kernels",
       "on": "more", "match": {"op": "addmm", "alpha_is_1": False, "beta": 1.0, "kernel_regex": regex},
       "hypotheses": {"RN_out(RN32(RN_out(RN32(alpha*y)) + C))": {"epilogue": ["alpha", "out_round_c"]},
                      "FFMA(alpha, y, RN32(beta*C))": {"epilogue": ["alpha_beta_c"]},
                      "FFMA(beta, C, RN32(alpha*y))": {"epilogue": ["alpha", "beta_c"]}}}
      for what, regex in NVJET_BETA1_CLASSES[:2]],
    {"question": "epilogue of addmm with alpha != 1 and beta = 1 on the nvjet split-K kernels (_bx_splitK_ with a matrix "
                 "C, _bz_splitK_bias_; applied by cuBLASLt's splitKreduce kernel)",
     "on": "more", "match": {"op": "addmm", "alpha_is_1": False, "beta": 1.0, "split": True,
                             "kernel_regex": r"^nvjet_sm90_[a-z]+_\w+_(bx_splitK|bz_splitK_bias)_[NT]{3}$"},
     "hypotheses": {"FFMA(beta, C, RN32(alpha*y))": {"epilogue": ["alpha", "beta_c"]},
                    "RN_out(RN32(RN_out(RN32(alpha*y)) + C))": {"epilogue": ["alpha", "out_round_c"]},
                    "C as the initial accumulator of the first slice's K-chain": {"c_init": True}}},
    {"question": "epilogue of addmm with alpha != 1 and beta*C (C a matrix, or the 1-D bias expanded), no split-K",
     "match": {"op": "addmm", "alpha_is_1": False, "beta_kind": 2, "split": False},
     "hypotheses": {"FFMA(beta, C, RN32(alpha*y))": {"epilogue": ["alpha", "beta_c"]},
                    "FFMA(alpha, y, RN32(beta*C))": {"epilogue": ["alpha_beta_c"]}}},
    {"question": "epilogue of addmm with alpha != 1 and beta*C, split-K (applied by cuBLASLt's splitKreduce kernel)",
     "match": {"op": "addmm", "alpha_is_1": False, "beta_kind": 2, "split": True},
     "hypotheses": {"FFMA(beta, C, RN32(alpha*y))": {"epilogue": ["alpha", "beta_c"]},
                    "FFMA(alpha, y, RN32(beta*C))": {"epilogue": ["alpha_beta_c"]}}},
    *[{"question": f"epilogue of addmm with alpha = 1 and beta not 0 or 1 (a matrix C, or the 1-D bias expanded), "
                   f"{'split-K' if split else 'no split-K'}",
       "on": "more", "match": {"op": "addmm", "alpha": 1.0, "beta_kind": 2, "split": split},
       "hypotheses": {"FFMA(alpha, y, RN32(beta*C))": {"epilogue": ["alpha_beta_c"]},
                      "FFMA(beta, C, RN32(alpha*y))": {"epilogue": ["alpha", "beta_c"]},
                      "C as the initial accumulator of the first slice's K-chain": {"c_init": True}}}
      for split in (False, True)],
    *[{"question": f"epilogue of addmm with alpha = 1 and beta = 1 on the nvjet {what} kernels",
       "on": "more", "match": {"op": "addmm", "alpha": 1.0, "beta": 1.0, "kernel_regex": regex},
       "hypotheses": {"RN32(y + C) after the reduced sum": {"epilogue": ["beta_c"]},
                      "RN_out(RN32(RN_out(y) + C))": {"epilogue": ["out_round_c"]},
                      "C as the initial accumulator of the first slice's K-chain": {"c_init": True}}}
      for what, regex in NVJET_BETA1_CLASSES],
    *[{"question": f"epilogue of addmm with alpha = 1 and beta = 1 on the {what} kernels",
       "on": "more", "match": {"op": "addmm", "alpha": 1.0, "beta": 1.0, **match},
       "hypotheses": {"RN32(y + C) after the reduced sum": {"epilogue": ["beta_c"]},
                      "C as the initial accumulator of the first slice's K-chain": {"c_init": True}}}
      for what, match in FP32_OUT_BETA1_CLASSES],
    *[{"question": f"epilogue of addmm with alpha = 1 and beta = 1 on the {what} kernels",
       "on": "more", "match": {"op": "addmm", "alpha": 1.0, "beta": 1.0, **match},
       "hypotheses": {"RN32(y + C) after the reduced sum": {"epilogue": ["beta_c"]},
                      "RN_out(RN32(RN_out(y) + C))": {"epilogue": ["out_round_c"]},
                      "C as the initial accumulator of the first slice's K-chain": {"c_init": True}}}
      for what, match in OTHER_BETA1_CLASSES],
    {"question": "epilogue of addmm with alpha = 1 and beta = 1 (a 1-D bias or a matrix C; the kernels of no class "
                 "above, and every class together)",
     "on": "more", "match": {"op": "addmm", "alpha": 1.0, "beta": 1.0},
     "hypotheses": {"RN32(y + C) after the reduced sum": {"epilogue": ["beta_c"]},
                    "C as the initial accumulator of the first slice's K-chain": {"c_init": True}}},
    {"question": "epilogue of addmm with alpha != 1 and beta = 1, no split-K (the kernels of no class above)",
     "on": "more", "match": {"op": "addmm", "alpha_is_1": False, "beta": 1.0, "split": False},
     "hypotheses": {"FFMA(alpha, y, RN32(beta*C))": {"epilogue": ["alpha_beta_c"]},
                    "C as the initial accumulator of the first slice's K-chain": {"c_init": True}}},
    {"question": "epilogue of addmm with alpha != 1 and beta = 1, split-K (the kernels of no class above)",
     "on": "more", "match": {"op": "addmm", "alpha_is_1": False, "beta": 1.0, "split": True},
     "hypotheses": {"FFMA(beta, C, RN32(alpha*y))": {"epilogue": ["alpha", "beta_c"]},
                    "C as the initial accumulator of the first slice's K-chain": {"c_init": True}}},
]
"""Questions with ``on`` = ``more`` are asked of the calls of ``--more`` (evidence/library/addmm_beta1.json.gz,
this GPU's calls not ``excluded``) and skipped without it; a hypothesis ``c_init`` is computed by
:func:`tools.library.addmm_samples.c_init_outputs` on the plan of the question's first hypothesis.  Questions with
``on`` = ``probe`` are asked of the calls of ``--probe`` (:mod:`tools.library.chain_probe`: every output of the kept
batches of whole calls) and skipped without it."""
