"""Devices that execute tiles of a path: the CUDA GPU (through CuPy) or a model.

Both kinds implement :meth:`run_tiles`: given ``a`` of shape (T, m, K), ``b``
of shape (T, n, K) and ``c`` of shape (T, m, n) as bit patterns of the path's
input and output formats, return ``d`` of shape (T, m, n) with
``d[t, r, j] = A[t, r, :] . B[t, j, :] + C[t, r, j]`` as the device computes it.

:class:`CudaDevice` runs the kernels of ``kernels.cu`` (compiled at run time
with nvcc, or NVRTC through CuPy when nvcc is missing).  :class:`ModelDevice`
is a virtual device whose "hardware" is a tcsmt model: it lets the checking
logic run (and be tested) on machines without a GPU.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.paths import PathSpec

KERNEL_SOURCE = Path(__file__).resolve().parent / "kernels.cu"
MAX_SHARED = 48 * 1024


def expand_tiles(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tiles -> independent dot products in (t, r, j) order: shapes (T*m*n, K), (T*m*n, K), (T*m*n,)."""
    T, m, K = a.shape
    n = b.shape[1]
    aa = np.broadcast_to(a[:, :, None, :], (T, m, n, K)).reshape(T * m * n, K)
    bb = np.broadcast_to(b[:, None, :, :], (T, m, n, K)).reshape(T * m * n, K)
    return aa, bb, c.reshape(T * m * n)


def check_scale_tiles(spec: PathSpec, K: int, sa: np.ndarray | None, sb: np.ndarray | None) -> None:
    """Raise TcsmtError unless the tile scale arrays fit the path: scale_A (T, m, K / scale_block) and scale_B
    (T, n, K / scale_block) uint8 patterns on a block-scaled path (both or neither), none elsewhere."""
    if sa is None and sb is None:
        return
    if not spec.scale_fmt:
        raise TcsmtError(f"{spec.label} is not block-scaled: it takes no scale factors")
    if sa is None or sb is None:
        raise TcsmtError("give both scale tiles, sa and sb, or neither (unit scales)")
    m = K // spec.scale_block
    if sa.dtype != np.uint8 or sb.dtype != np.uint8 or sa.ndim != 3 or sb.ndim != 3 \
            or sa.shape[1:] != (spec.m, m) or sb.shape[1:] != (spec.n, m) or sa.shape[0] != sb.shape[0]:
        raise TcsmtError(f"scale tiles must be uint8 (T, {spec.m}, {m}) and (T, {spec.n}, {m}), "
                         f"not {sa.dtype} {sa.shape} and {sb.dtype} {sb.shape}")


def expand_scales(sa: np.ndarray, sb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scale tiles -> the scales of each independent dot product in (t, r, j) order (as :func:`expand_tiles`):
    output (t, r, j) reads row r of scale_A[t] and column j of scale_B[t]; shapes (T*m*n, nb) each."""
    T, m, nb = sa.shape
    n = sb.shape[1]
    return (np.broadcast_to(sa[:, :, None, :], (T, m, n, nb)).reshape(T * m * n, nb),
            np.broadcast_to(sb[:, None, :, :], (T, m, n, nb)).reshape(T * m * n, nb))


def check_tiles(spec: PathSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """Raise TcsmtError unless the tile arrays have the path's shapes and dtypes."""
    if a.ndim != 3 or b.ndim != 3 or c.ndim != 3:
        raise TcsmtError("tiles must be a (T, m, K), b (T, n, K), c (T, m, n)")
    T, m, K = a.shape
    if (m, b.shape[1], c.shape[1], c.shape[2]) != (spec.m, spec.n, spec.m, spec.n) or b.shape[0] != T \
            or c.shape[0] != T or b.shape[2] != K:
        raise TcsmtError(f"tile shapes {a.shape}, {b.shape}, {c.shape} do not fit {spec.shape} tiles")
    if K == 0 or K % spec.instr_k:
        raise TcsmtError(f"K = {K} must be a positive multiple of {spec.instr_k} for {spec.shape}")
    if a.dtype != spec.fin.dtype or b.dtype != spec.fin.dtype or c.dtype != spec.c_fmt.dtype:
        raise TcsmtError(f"tile dtypes must be {spec.fin.dtype} (A, B) and {spec.c_fmt.dtype} (C)")
    if not spec.has_c and np.any(c):
        raise TcsmtError(f"{spec.label} ({spec.kernel}) computes A.B without C: every C must be +0")


class ModelDevice:
    """A virtual device that computes with a tcsmt model spec (``model:SPEC``)."""

    def __init__(self, spec: str):
        self.spec = spec
        self.name = f"model:{spec}"
        self.gpu_seconds = 0.0

    def params(self, path: PathSpec):
        from tcsmt.arith.registry import resolve

        return resolve(self.spec, path.in_fmt, path.out_fmt, path.instr)

    def supports(self, path: PathSpec) -> str | None:
        """None when the path can run, else why not."""
        try:
            self.params(path)
        except TcsmtError as exc:
            return str(exc)
        return None

    def info(self) -> dict[str, Any]:
        return {"device": self.name, "virtual": True}

    def run_tiles(self, path: PathSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray, sa: np.ndarray | None = None,
                  sb: np.ndarray | None = None) -> np.ndarray:
        from tcsmt.sim.simulator import simulate_params

        check_tiles(path, a, b, c)
        check_scale_tiles(path, a.shape[2], sa, sb)
        t0 = time.perf_counter()
        aa, bb, cc = expand_tiles(a, b, c)
        xa = xb = None
        if path.scale_fmt:  # output (t, r, j) reads row r of scale_A and column j of scale_B (unit scales if none)
            T, m, K = a.shape
            n, nb = b.shape[1], K // path.scale_block
            if sa is None or sb is None:
                from tcsmt.hwcheck.paths import unit_scale

                sa = np.full((T, m, nb), unit_scale(path.scale_fmt), dtype=np.uint8)
                sb = np.full((T, n, nb), unit_scale(path.scale_fmt), dtype=np.uint8)
            xa, xb = expand_scales(sa, sb)
        d = simulate_params(self.params(path), aa, bb, cc, sa=xa, sb=xb, bits=xa is not None).reshape(c.shape)
        self.gpu_seconds += time.perf_counter() - t0
        return d


def _one_line(text: str, limit: int = 600) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    msg = " | ".join(lines)
    return msg if len(msg) <= limit else msg[:limit] + " ..."


def _find_nvcc() -> str | None:
    env = os.environ.get("TCSMT_NVCC")
    if env:
        return env
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    return None


def compile_cubin(arch: str, source: Path = KERNEL_SOURCE, nvcc: str | None = None) -> Path:
    """Compile ``source`` for ``arch`` (e.g. ``sm_90a``) with nvcc into a cached cubin.

    The cache key is the source text, the target and nvcc's version; the cache
    lives in ``$TCSMT_CACHE`` or ``~/.cache/tcsmt/hwcheck``.  A failing
    compilation raises TcsmtError with the compiler's message on one line.
    """
    nvcc = nvcc or _find_nvcc()
    if nvcc is None:
        raise TcsmtError("nvcc not found (set TCSMT_NVCC or put nvcc on PATH)")
    try:
        ver = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise TcsmtError(f"cannot run {nvcc}: {exc}") from exc
    text = source.read_text()
    key = hashlib.sha256((text + arch + ver).encode()).hexdigest()[:20]
    cache = Path(os.environ.get("TCSMT_CACHE", Path.home() / ".cache" / "tcsmt" / "hwcheck"))
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        cache = Path(tempfile.gettempdir()) / "tcsmt-hwcheck"
        cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"kernels-{arch}-{key}.cubin"
    if out.is_file():
        return out
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=cache)  # unique, never shared
    os.close(fd)
    tmp = Path(tmp_name)
    cmd = [nvcc, f"-arch={arch}", "-cubin", "-O3", "-o", str(tmp), str(source)]
    try:
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            raise TcsmtError(f"cannot run {nvcc}: {exc}") from exc
        if res.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            raise TcsmtError(f"compiling {source.name} for {arch} failed: {_one_line(res.stderr + res.stdout)}")
        tmp.replace(out)  # the cache's content is determined by its key: replacing is safe
    finally:
        tmp.unlink(missing_ok=True)  # any failure (interrupt included) leaves no temporary file
    return out


class CudaDevice:
    """The first CUDA GPU, through CuPy; kernels from ``kernels.cu``."""

    def __init__(self, ordinal: int = 0):
        try:
            import cupy  # noqa: F401
        except Exception as exc:  # ImportError, or a CuPy that cannot find CUDA
            raise TcsmtError(f"no CUDA device found (CuPy is not usable: {type(exc).__name__}: {exc})") from None
        import cupy as cp

        self.cp = cp
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise TcsmtError(f"no CUDA device found ({_one_line(str(exc))})") from None
        if count <= ordinal:
            raise TcsmtError("no CUDA device found")
        self.ordinal = ordinal
        self.dev = cp.cuda.Device(ordinal)
        self.dev.use()
        props = cp.cuda.runtime.getDeviceProperties(ordinal)
        name = props.get("name", b"")
        self.gpu_name = name.decode() if isinstance(name, bytes) else str(name)
        self.cc = int(props["major"]) * 10 + int(props["minor"])
        self.sm_count = int(props.get("multiProcessorCount", 0)) or 80
        self.name = f"cuda:{ordinal} {self.gpu_name}"
        # arch-specific targets where the GPU has them (wgmma: sm_90a; tcgen05: sm_100a; sm_120 block scale: sm_120a)
        self.arch = {90: "sm_90a", 100: "sm_100a", 103: "sm_103a", 120: "sm_120a", 121: "sm_121a"}.get(self.cc,
                                                                                                  f"sm_{self.cc}")
        self._noted: set[str] = set()
        self._module = None
        self._functions: dict[str, Any] = {}
        self.compiler = ""
        self.gpu_seconds = 0.0

    # -------------------------------------------------------------- info
    def info(self) -> dict[str, Any]:
        rt = self.cp.cuda.runtime
        drv = rt.driverGetVersion()
        run = rt.runtimeGetVersion()
        return {
            "device": self.gpu_name,
            "compute_capability": f"{self.cc // 10}.{self.cc % 10}",
            "cuda_driver": f"{drv // 1000}.{(drv % 1000) // 10}",
            "cuda_runtime": f"{run // 1000}.{(run % 1000) // 10}",
            "driver": _nvidia_driver_version(),
            "cupy": self.cp.__version__,
            "compiler": self.compiler or None,
            "arch": self.arch,
        }

    def library_info(self) -> dict[str, Any]:
        """PyTorch/cuBLAS versions and settings (recorded with library-path results)."""
        from tcsmt.hwcheck import library

        return library.info()

    def supports(self, path: PathSpec) -> str | None:
        if self.cc < path.cc or (path.arch_specific and self.cc != path.cc):
            return (f"{path.shape} {path.label} needs {path.requirement()}; "
                    f"{self.gpu_name} has compute capability {self.cc // 10}.{self.cc % 10}")
        if path.library:
            from tcsmt.hwcheck import library

            return library.unsupported(path)
        return None

    # ----------------------------------------------------------- kernels
    def _load(self):
        if self._module is not None:
            return self._module
        cp = self.cp
        nvcc = _find_nvcc()
        if nvcc is not None:
            cubin = compile_cubin(self.arch, nvcc=nvcc)
            self._module = cp.RawModule(path=str(cubin))
            self.compiler = f"nvcc ({nvcc}) -arch={self.arch}"
        else:
            try:
                module = cp.RawModule(code=KERNEL_SOURCE.read_text(), options=("-std=c++17",), backend="nvrtc")
                module.compile()
                self._module = module
            except Exception as exc:
                raise TcsmtError(f"compiling {KERNEL_SOURCE.name} with NVRTC failed: {_one_line(str(exc))}") from None
            self.compiler = "nvrtc (CuPy)"
        return self._module

    def function(self, name: str):
        if name not in self._functions:
            mod = self._load()
            try:
                self._functions[name] = mod.get_function(name)
            except Exception as exc:
                raise TcsmtError(f"kernel {name} is not in the compiled module for {self.arch} "
                                 f"({_one_line(str(exc))})") from None
        return self._functions[name]

    def run_tiles(self, path: PathSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray, sa: np.ndarray | None = None,
                  sb: np.ndarray | None = None) -> np.ndarray:
        check_tiles(path, a, b, c)
        check_scale_tiles(path, a.shape[2], sa, sb)
        cp = self.cp
        t0 = time.perf_counter()
        if path.library:
            why = self.supports(path)
            if why:
                raise TcsmtError(why)
            from tcsmt.hwcheck import library

            out = library.run_tiles(path, a, b, self.ordinal)
            self.gpu_seconds += time.perf_counter() - t0
            return out
        dsa = None if sa is None else cp.asarray(np.ascontiguousarray(sa))
        dsb = None if sb is None else cp.asarray(np.ascontiguousarray(sb))
        dd = self.run_tiles_on_device(path, cp.asarray(np.ascontiguousarray(a)), cp.asarray(np.ascontiguousarray(b)),
                                      cp.asarray(np.ascontiguousarray(c)), dsa, dsb)
        try:
            out = cp.asnumpy(dd)
        except Exception as exc:
            raise TcsmtError(f"kernel {path.kernel} failed: {_one_line(str(exc))}") from None
        self.gpu_seconds += time.perf_counter() - t0
        return out

    def run_tiles_on_device(self, path: PathSpec, da, db, dc, dsa=None, dsb=None):
        """As run_tiles, with CuPy arrays in and out (no host transfers; asynchronous); ``dsa``, ``dsb``: the
        tiles' scale patterns (T, m, K / scale_block), (T, n, K / scale_block) on a block-scaled path (None:
        unit scales)."""
        why = self.supports(path)
        if why:
            raise TcsmtError(why)
        cp = self.cp
        if path.library:
            from tcsmt.hwcheck import library

            return cp.asarray(library.run_tiles(path, da, db, self.ordinal))
        T, _, K = da.shape
        if path.unchecked and path.label not in self._noted:  # said once per path, on every command that runs it
            self._noted.add(path.label)
            print(f"tcsmt: note: the {path.label} kernel ({path.shape}, {self.arch}) has not been checked on "
                  f"hardware by tcsmt: it was compiled and its SASS read only; run `tcsmt hwcheck --layouts` "
                  f"on this GPU first", file=sys.stderr)
        fn = self.function(path.kernel)
        da, db, dc = cp.ascontiguousarray(da), cp.ascontiguousarray(db), cp.ascontiguousarray(dc)
        dd = cp.empty_like(dc)
        scale_args: tuple = ()
        if path.scale_fmt:  # the tiles' scales, row r of scale_A at SA[(t * m + r) * nb + blk]; unit scales if none
            from tcsmt.hwcheck.paths import unit_scale

            nb = K // path.scale_block
            if dsa is None or dsb is None:
                one = unit_scale(path.scale_fmt)
                dsa, dsb = cp.full((T, path.m, nb), one, dtype=cp.uint8), cp.full((T, path.n, nb), one, dtype=cp.uint8)
            scale_args = (cp.ascontiguousarray(dsa), cp.ascontiguousarray(dsb))
        if path.instr.startswith("tcgen05"):
            shared = (path.m + path.n) * K * path.fin.dtype.itemsize
            if shared > MAX_SHARED:
                raise TcsmtError(f"K = {K} is too long for the tcgen05 kernel (at most "
                                 f"{MAX_SHARED // ((path.m + path.n) * path.fin.dtype.itemsize)})")
            if path.scale_fmt and K > 16 * path.instr_k:  # the kernel's tensor memory holds 16 instructions' scales
                raise TcsmtError(f"K = {K} is too long for the block-scaled tcgen05 kernel (at most {16 * path.instr_k})")
            grid = max(1, min(T, self.sm_count * 2))
            fn((grid,), (128,), (da, db, dc, dd, np.int64(T), np.int32(K), *scale_args), shared_mem=shared)
        elif path.instr == "wgmma":
            shared = 8 * K * path.fin.dtype.itemsize
            if shared > MAX_SHARED:
                raise TcsmtError(f"K = {K} is too long for the wgmma kernel (at most "
                                 f"{MAX_SHARED // (8 * path.fin.dtype.itemsize)})")
            grid = max(1, min(T, self.sm_count * 16))
            fn((grid,), (128,), (da, db, dc, dd, np.int64(T), np.int32(K)), shared_mem=shared)
        else:
            grid = max(1, min(-(-T // 4), self.sm_count * 32))
            fn((grid,), (128,), (da, db, dc, dd, np.int64(T), np.int32(K), *scale_args))
        return dd


def _nvidia_driver_version() -> str | None:
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return res.stdout.strip().splitlines()[0] if res.returncode == 0 and res.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def get_device(spec: str = "cuda"):
    """``cuda`` / ``cuda:N`` -> CudaDevice; ``model:SPEC`` -> ModelDevice (a virtual device)."""
    s = spec.strip()
    if s.startswith("model:"):
        if not s[6:].strip():
            raise TcsmtError("--device model:SPEC needs a model spec, e.g. model:ampere")
        return ModelDevice(s[6:].strip())
    if s == "cuda" or s.startswith("cuda:"):
        ordinal = 0
        if s.startswith("cuda:"):
            try:
                ordinal = int(s[5:])
            except ValueError:
                raise TcsmtError(f"--device cuda:N needs a GPU number, not {s!r}") from None
        return CudaDevice(ordinal)
    raise TcsmtError(f"unknown device {spec!r} (use cuda, cuda:N or model:SPEC)")
