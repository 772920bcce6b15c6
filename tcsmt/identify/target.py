"""Devices that ``tcsmt identify`` runs experiments on: a GPU path, or a virtual device backed by a model.

Both compute one instruction's dot products: ``run(a, b, c)`` takes bit
patterns a (n, K), b (n, K) of the input format and c (n,) of the C format,
K = the path's instruction length, and returns the output patterns (n,).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import REFERENCES, find_arch, resolve, split_spec
from tcsmt.errors import TcsmtError
from tcsmt.identify.space import PathInfo, parse_path
from tcsmt.io.files import safe_name


def _slug(text: str) -> str:
    """A token of a log directory's name (never a path: :func:`tcsmt.io.files.safe_name`)."""
    return safe_name(re.sub(r"[^A-Za-z0-9_.+=-]+", "-", text).lower(), "device")


class ModelTarget:
    """A virtual device that computes with the model ``spec`` (``volta``, ``hopper:carry_bits=3``, ...)."""

    def __init__(self, spec: str, path_text: str, instr: str | None = None):
        fin, fout = parse_path(path_text)
        base = split_spec(spec)[0]
        if base.lower() in REFERENCES:
            raise TcsmtError(f"--model takes an architecture (the references have no instruction length); got {spec!r}")
        arch = find_arch(base)
        cands = arch.find_paths(fin, fout, instr)
        if not cands:
            have = ", ".join(sorted({f"{p.params.in_fmt}.{p.params.out_fmt}" + (f" ({p.params.instr})" if p.params.instr != 'mma' else '')
                                     for p in arch.paths}))
            raise TcsmtError(f"{arch.name} has no path {path_text}" + (f" with {instr}" if instr else "")
                             + f" (it has: {have})")
        chosen = next((c for c in cands if c.params.instr == "mma"), cands[0]) if instr is None else cands[0]
        self.params: ModelParams = resolve(spec, fin, fout, chosen.params.instr)
        p = self.params
        K = p.instr_k or p.block_k or 16
        self.path = PathInfo(p.in_fmt, p.out_fmt, p.c_fmt, p.instr, K, p.instr_shape)
        self.spec = spec
        self.label = f"model-{_slug(spec)}"
        self.calls = 0

    def run(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        from tcsmt.sim.simulator import simulate_params

        self.calls += 1
        return np.asarray(simulate_params(self.params, a, b, c))

    def info(self) -> dict[str, Any]:
        return {"device": f"model:{self.spec}", "virtual": True, "model": self.params.name}


class GpuTarget:
    """The GPU's matrix unit on one path, through :func:`tcsmt.hwcheck.runner.run_dot`."""

    def __init__(self, path_text: str, instr: str = "mma"):
        fin, fout = parse_path(path_text)
        try:
            from tcsmt.hwcheck import runner
            from tcsmt.hwcheck.paths import find_path
        except ImportError as exc:
            raise TcsmtError(f"the GPU runner (tcsmt.hwcheck) is not available: {exc}") from None
        self.spec = find_path(fin, fout, instr)
        self._runner = runner
        self.device = runner.default_device()  # TcsmtError "no CUDA device found" without one
        why = self.device.supports(self.spec)
        if why:
            raise TcsmtError(why)
        self.path = PathInfo(self.spec.in_fmt, self.spec.out_fmt, self.spec.c_fmt.name, instr,
                             self.spec.instr_k, self.spec.shape)
        name = getattr(self.device, "gpu_name", "") or getattr(self.device, "name", "gpu")
        self.label = f"gpu-{_slug(name)}"
        self.calls = 0

    def run(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        self.calls += 1
        return np.asarray(self._runner.run_dot(self.spec, a, b, c, device=self.device))

    def info(self) -> dict[str, Any]:
        try:
            return dict(self.device.info())
        except Exception as exc:  # information only; never fatal
            return {"device": self.label, "info_error": str(exc)}

