"""The call lists of the ``addmm`` sampled-output runs (``python -m tools.library.addmm_samples lists``): per recorded
kernel class (:func:`sample_calls`, :func:`cancel_calls`, from :func:`tools.library.addmm_samples.scan`'s groups) and
the alpha / beta lists (:func:`alpha_calls`); each call a dict of :data:`FIELDS` with ``dist`` and ``seed`` for
``tcsmt.hwcheck.library_calls.make_inputs``.  Split from :mod:`tools.library.addmm_samples`, which writes them."""
from __future__ import annotations

import re
from typing import Any

FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32", "scale",
          "fast_accum", "a_t", "b_t")
UNREAD = re.compile(r"^(gemv|gemmSN|gemmk1|dot_kernel|std::enable_if)")
"""Kernels whose K order no probe read (``tcsmt.library.rules.UNREAD_K_ORDER`` and cuBLAS's gemvx): the catalogs
refuse their calls whatever the epilogue, so no call of theirs is sampled."""


def sample_calls(groups: dict[tuple, list]) -> list[dict[str, Any]]:
    """The sampled calls (module docstring), seeds 5000 upwards."""
    calls: list[dict[str, Any]] = []

    def add(c: dict[str, Any], group: tuple, dist: str, **kw: Any) -> None:
        e = {k: c.get(k) for k in FIELDS}
        e.update(a_t=bool(c.get("a_t")), b_t=bool(c.get("b_t")), tf32=bool(c.get("tf32")), **kw)
        e.update(dist=dist, seed=5000 + len(calls), group=" | ".join(str(x) for x in group),
                 recorded=c["recorded"] if not kw or kw == {"alpha": 1.0} else None)
        if e not in calls:
            calls.append(e)

    for g in sorted(groups, key=str):
        if UNREAD.match(g[8]):
            continue
        mine = sorted(groups[g], key=lambda x: x[0])
        big = [c for n, c in mine if c["M"] * c["N"] >= 256]
        if not big:
            continue
        first, second = big[0], big[3 * len(big) // 4]
        fp32 = first["a_dtype"] == "float32"
        for c, dist in ((first, "tf32_exact" if fp32 else "normal"),
                        (second, "tf32_exact" if fp32 else "wide" if second["out_dtype"] != "float16" else "normal")):
            add(c, g, dist, alpha=1.0)
            add(c, g, dist, alpha=1.0, bias=not c.get("bias"))
        add(first, g, "tf32_exact" if fp32 else "normal", alpha=0.5)
    return calls


def cancel_calls(groups: dict[tuple, list], seed0: int = 7000) -> list[dict[str, Any]]:
    """The ``c_cancel`` calls (``make_inputs``: the addend cancels a lead of the sum, so the epilogue hypotheses give
    other outputs): per 16-bit group, the cheapest recorded call with 256 or more outputs and K >= 192 and the one at
    the 1/4 point of the group's sizes, each with alpha = beta = 1, a 1-D bias and a matrix C; seeds from ``seed0``."""
    from tcsmt.hwcheck.library_calls import C_CANCEL_LEAD, C_CANCEL_TAIL
    calls: list[dict[str, Any]] = []
    for g in sorted(groups, key=str):
        if UNREAD.match(g[8]) or g[1] == "float32":
            continue
        big = [c for n, c in sorted(groups[g], key=lambda x: x[0])
               if c["M"] * c["N"] >= 256 and c["K"] >= 2 * (C_CANCEL_LEAD + C_CANCEL_TAIL)]
        if not big:
            continue
        for c in dict.fromkeys(id(x) for x in (big[0], big[len(big) // 4])):
            src = next(x for x in big if id(x) == c)
            for bias in (bool(src.get("bias")), not src.get("bias")):
                e = {k: src.get(k) for k in FIELDS}
                e.update(a_t=bool(src.get("a_t")), b_t=bool(src.get("b_t")), tf32=False, alpha=1.0, bias=bias,
                         dist="c_cancel", seed=seed0 + len(calls), group=" | ".join(str(x) for x in g),
                         recorded=src["recorded"] if bias == bool(src.get("bias")) else None)
                calls.append(e)
    return calls


ALPHA_SHAPES = ((1, 3072, 768), (49, 3072, 768), (916, 768, 3072), (7, 4096, 4096), (200, 4096, 4096),
                (1000, 11008, 4096), (64, 4096, 14336), (3000, 768, 3072))
"""(M, N, K) of the ``alpha`` list: the shapes of the sampled calls that showed the ``_badd_`` epilogue at alpha = 0.5
and 2 (1 and 49 x 3072 x 768, 916 x 768 x 3072), then decode, prefill and MLP widths (weights as ``W.t()``)."""
ALPHAS = (0.3, 1.7, -2.5)
"""Values of alpha that are not powers of two: RN32(alpha * y) then rounds, so rounding y to the output format before
or after the product gives other outputs (at alpha = 0.5 or 2 both orders are one)."""


BETAS = (0.75, -1.25, 0.3, -0.7)
"""Values of beta other than 0 and 1, not powers of two, for the ``beta`` list: at 0.75 and -1.25, beta * C of a 16-bit
C is exact in fp32, so FFMA(alpha, y, RN32(beta * C)) and FFMA(beta, C, y) are one sum there; 0.3 and -0.7 have long
significands and RN32(beta * C) rounds."""


def alpha_calls(seed0: int = 9000, beta_list: bool = False) -> list[dict[str, Any]]:
    """The ``alpha`` list: addmm with beta = 1 and alpha in :data:`ALPHAS` (a matrix C and a 1-D bias), and with
    alpha = 1, beta = 2 (a matrix C), bf16 and fp16, at :data:`ALPHA_SHAPES`; ``normal`` inputs, seeds from
    ``seed0``.  ``beta_list``: the ``beta`` list instead, alpha = 1 and beta in :data:`BETAS` (a matrix C and a 1-D
    bias), ``wide`` inputs for bf16 (fp16 ``normal``: wide ones overflow it), seeds from ``seed0`` + 1000."""
    calls: list[dict[str, Any]] = []
    kinds = [(1.0, b, bias) for b in BETAS for bias in (False, True)] if beta_list else \
        [*((a, 1.0, b) for a in ALPHAS for b in (False, True)), (1.0, 2.0, False)]
    for dt in ("bfloat16", "float16"):
        for M, N, K in ALPHA_SHAPES:
            for alpha, beta, bias in kinds:
                e: dict[str, Any] = {"op": "addmm", "M": M, "N": N, "K": K, "batch": 1, "a_dtype": dt, "b_dtype": dt,
                                     "out_dtype": dt, "bias": bias, "alpha": alpha, "beta": beta, "tf32": False,
                                     "scale": None, "fast_accum": False, "a_t": False, "b_t": True}
                e.update(dist="wide" if beta_list and dt == "bfloat16" else "normal", seed=seed0 + (1000 if beta_list else 0) + len(calls),
                         group="default | alpha and beta kinds", recorded=None)
                calls.append(e)
    return calls


def beta_split_calls(seed0: int = 12000) -> list[dict[str, Any]]:
    """The ``beta_split`` list: the ``beta`` list's calls at the values of beta whose product with a 16-bit C rounds in
    fp32 (0.3 and -0.7), on ``beta_split`` inputs (:func:`tcsmt.hwcheck.library_calls.make_inputs`: y = -RN32(beta *
    C) exactly, so FFMA(beta, C, y) gives beta * C's rounding error and FFMA(1, y, RN32(beta * C)) gives +0); seeds
    from ``seed0``."""
    calls = [c for c in alpha_calls(beta_list=True) if c["beta"] in (0.3, -0.7)]
    for n, c in enumerate(calls):
        c.update(dist="beta_split", seed=seed0 + n)
    return calls



GEMV_BIAS_SHAPES = ((1, 30522, 768), (1, 30522, 1024))
"""BERT-base's and BERT-large's LM heads at one token (vocabulary 30522, hidden 768 / 1024: the models' published
configs, bert-base-uncased and bert-large-uncased ``config.json``): ``linear`` with a bias at one token, which torch
hands to cuBLASLt with EPILOGUE_BIAS and beta = 0 (its trace in the sampled runs) and cuBLASLt runs on a CUDA-core GEMV
kernel (the recordings: bf16 ``gemvx`` block [8, 16], fp16 ``gemv2T_kernel_val`` block [128])."""


def gemv_bias_calls(seed0: int = 13000) -> list[dict[str, Any]]:
    """The ``gemv_bias`` list: ``linear`` with a bias at :data:`GEMV_BIAS_SHAPES`, bf16 and fp16, on ``normal``,
    ``wide`` (bf16 only: wide fp16 overflows) and ``c_cancel`` inputs, two seeds each, from ``seed0``: the samples
    that decide the epilogue of the GEMV kernels (torch's default settings)."""
    calls: list[dict[str, Any]] = []
    for dt in ("bfloat16", "float16"):
        for M, N, K in GEMV_BIAS_SHAPES:
            for dist in ("normal", "wide", "c_cancel") if dt == "bfloat16" else ("normal", "c_cancel"):
                for _ in range(2):
                    e: dict[str, Any] = {"op": "linear", "M": M, "N": N, "K": K, "batch": 1, "a_dtype": dt,
                                         "b_dtype": dt, "out_dtype": dt, "bias": True, "alpha": 1.0, "beta": 0.0,
                                         "tf32": False, "scale": None, "fast_accum": False, "a_t": False, "b_t": False}
                    e.update(dist=dist, seed=seed0 + len(calls), group="default | GEMV linear with bias",
                             recorded=None)
                    calls.append(e)
    return calls


WMMA_BIAS_SHAPES = ((2, 30522, 768), (9, 30522, 768), (16, 30522, 768), (2, 30522, 1024), (5, 30522, 1024))
"""BERT's LM heads at 2 to 16 tokens (``GEMV_BIAS_SHAPES``' widths), which run cuBLAS's sm80 CUTLASS WMMA kernel
``cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_*`` with the bias on both GPUs (the recordings: M = 2..16 at K = 768,
2..5 at K = 1024)."""


def wmma_bias_calls(seed0: int = 14000) -> list[dict[str, Any]]:
    """The ``wmma_bias`` list: bf16 ``linear`` with a bias at :data:`WMMA_BIAS_SHAPES` on ``normal`` and ``c_cancel``
    inputs, two seeds each, from ``seed0``: the samples that decide that kernel's bias epilogue."""
    calls = [dict(c, M=M, N=N, K=K) for M, N, K in WMMA_BIAS_SHAPES for c in gemv_bias_calls()[:1]]
    out = []
    for c in calls:
        for dist in ("normal", "c_cancel"):
            for _ in range(2):
                out.append(dict(c, dist=dist, seed=seed0 + len(out), group="default | WMMA linear with bias"))
    return out
