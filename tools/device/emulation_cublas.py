"""Does cuBLAS's FP32 emulation with bf16 pieces (CUBLAS_COMPUTE_32F_EMULATED_16BFX9) run here, and
which ``tcsmt verify`` scheme reproduces its bits?

    python tools/device/emulation_cublas.py --out results.json [--n 64] [--ks 16,32]

For each K: random fp32 A (n x K) and B (K x n), log-uniform magnitudes in [2^-14, 2^14], random
signs (seed 0); one cublasGemmEx with compute type 78 (CUBLAS_COMPUTE_32F_EMULATED_16BFX9, cuBLAS
12.9+) after cublasSetEmulationStrategy(EAGER) where the library has it, and one with
CUBLAS_COMPUTE_32F (native fp32) for reference.  Every output element is compared with the
simulator's ``bf16x9``, ``bf16x9-large-first`` and ``fp32`` schemes on the H100 bf16 -> fp32 model.
A status other than success (e.g. not supported on this GPU) is recorded, not raised.
"""
from __future__ import annotations

import ctypes
import datetime as dt
import sys

import click
import numpy as np

from tcsmt.io import files
from tcsmt.io.options import POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main

CUBLAS_COMPUTE_32F = 68
CUBLAS_COMPUTE_32F_EMULATED_16BFX9 = 78
CUDA_R_32F = 0
CUBLAS_EMULATION_STRATEGY_EAGER = 2


def _libcublas():
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("libcublas not found")


def gemm(lib, handle, a: np.ndarray, b: np.ndarray, compute: int) -> tuple[int, np.ndarray]:
    """C = A B (row-major fp32) through cublasGemmEx; returns (status, C bits)."""
    import cupy as cp

    m, k = a.shape
    n = b.shape[1]
    # row-major C = A B is column-major C^T = B^T A^T: pass B as the first operand
    da, db = cp.asarray(a), cp.asarray(b)
    dc = cp.zeros((m, n), dtype=cp.float32)
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    st = lib.cublasGemmEx(ctypes.c_void_p(handle), 0, 0, n, m, k, ctypes.byref(alpha),
                          ctypes.c_void_p(db.data.ptr), CUDA_R_32F, n, ctypes.c_void_p(da.data.ptr), CUDA_R_32F, k,
                          ctypes.byref(beta), ctypes.c_void_p(dc.data.ptr), CUDA_R_32F, n, compute, -1)
    cp.cuda.runtime.deviceSynchronize()
    return int(st), cp.asnumpy(dc).view(np.uint32)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.splitlines()[0])
@click.option("--out", "out_file", required=True, help="the JSON report (never replaced without --force)")
@click.option("--n", type=POSITIVE_INT, default=64, show_default=True, help="rows and columns of the GEMM")
@click.option("--ks", default="16,32", show_default=True, help="comma-separated K values")
@click.option("--force", is_flag=True, help="replace --out (a regular file only)")
def emulation_cublas_cmd(out_file: str, n: int, ks: str, force: bool) -> int:
    try:
        k_values = [int(x) for x in ks.split(",")]
    except ValueError:
        raise click.BadParameter(f"{ks!r} is not a comma-separated list of integers", param_hint="'--ks'") from None
    if any(k < 1 for k in k_values):
        raise click.BadParameter(f"{ks!r}: every K must be >= 1", param_hint="'--ks'")
    out = files.output(out_file, force)  # claimed before the GPU runs
    import cupy as cp

    from tcsmt.verify import domain as VD
    from tcsmt.verify import evaluate as V  # no solver modules: the GPU host has no pysmt

    lib = _libcublas()
    handle = cp.cuda.device.get_cublas_handle()
    ver = ctypes.c_int(0)
    lib.cublasGetVersion_v2(ctypes.c_void_p(handle), ctypes.byref(ver))
    strategy = None
    if hasattr(lib, "cublasSetEmulationStrategy"):
        strategy = int(lib.cublasSetEmulationStrategy(ctypes.c_void_p(handle), CUBLAS_EMULATION_STRATEGY_EAGER))
    props = cp.cuda.runtime.getDeviceProperties(0)
    report: dict = {"tool": "tools/device/emulation_cublas.py", "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "gpu": props["name"].decode(), "cc": f"{props['major']}.{props['minor']}",
                    "driver": cp.cuda.runtime.driverGetVersion(), "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
                    "cublas": ver.value, "cupy": cp.__version__, "set_emulation_strategy_eager": strategy, "ks": {}}
    p = V.model_for("hopper", "bf16")
    rng = np.random.default_rng(0)
    dom = VD.parse_range("2^-14..2^14", "bf16")
    for k in k_values:
        a, _ = V.random_inputs(rng, n, k, dom, "loguniform")
        bt, _ = V.random_inputs(rng, n, k, dom, "loguniform")
        entry: dict = {}
        for label, ct in (("emulated_16bfx9", CUBLAS_COMPUTE_32F_EMULATED_16BFX9), ("native_32f", CUBLAS_COMPUTE_32F)):
            st, c = gemm(lib, handle, a.view(np.float32), bt.view(np.float32).T.copy(), ct)
            e: dict = {"status": st}
            if st == 0:
                rows = np.repeat(a, n, axis=0)
                cols = np.tile(bt, (n, 1))
                got = c.reshape(-1)
                for algo in ("bf16x9", "bf16x9-large-first", "fp32"):
                    want = V.simulate_scheme(algo, V.params_for(algo, "hopper"), rows, cols)
                    e[f"equal_{algo}"] = int(np.sum(want == got))
                e["elements"] = int(got.size)
                e["max_rel_error"] = float(np.max(V.errors_fp64(got[:512], rows[:512], cols[:512], True)))
            entry[label] = e
            print(k, label, e, flush=True)
        report["ks"][str(k)] = entry
    report["model"] = p.name
    out.write_json(report)
    return 0


main = script_main(emulation_cublas_cmd, "python tools/device/emulation_cublas.py")

if __name__ == "__main__":
    sys.exit(main())
