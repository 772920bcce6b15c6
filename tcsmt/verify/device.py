"""Run the fp32-emulation schemes with their tensor-core instructions executed on a device.

``run_scheme(algo, p, a, b, device)`` computes a scheme exactly as
:mod:`tcsmt.verify.schemes` defines it, except that every tensor-core
instruction TC(X.Y + acc) is executed by ``device`` (a CUDA GPU through
:mod:`tcsmt.hwcheck`, or a virtual device backed by a model) on the
fp16 -> fp32 ``mma`` path; the splits and the RN32 additions stay on the host
(they are IEEE operations).  Comparing its bits with the simulator's shows
whether the hardware reproduces the model's prediction for the whole scheme.

    python -m tcsmt.verify.device --arch hopper --n 100000 [--device cuda|model:SPEC] --out F.json

also replays the inputs the solver found (``--witness a0,a1,..;b0,b1,..`` in hex, repeatable).
"""
from __future__ import annotations

import datetime as _dt
import sys
from contextlib import contextmanager
from typing import Any

import click
import numpy as np

from tcsmt.arith.formats import FP32
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import resolve
from tcsmt.arith.values import format_value
from tcsmt.backends.numpy import NumpyBackend
from tcsmt.errors import TcsmtError
from tcsmt.io import files
from tcsmt.io.limits import GPU_K, RANDOM_N
from tcsmt.io.options import SEED, bounded_int, k_option
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.verify import Domain, error_of, parse_range, random_inputs, simulate_scheme
from tcsmt.verify import schemes as VS

_B = NumpyBackend()


@contextmanager
def tensor_cores_on(device):
    """Within the block, verify_schemes.tc runs its instruction on ``device``."""
    from tcsmt.hwcheck.runner import run_dot

    original = VS.tc

    def tc_on_device(B, p: ModelParams, xs, ys, acc):
        n = len(np.atleast_1d(np.asarray(xs[0])))
        a = np.stack([np.broadcast_to(np.asarray(x), (n,)) for x in xs], axis=1).astype(np.uint16)
        b = np.stack([np.broadcast_to(np.asarray(y), (n,)) for y in ys], axis=1).astype(np.uint16)
        c = np.broadcast_to(np.asarray(acc), (n,)).astype(np.uint32)
        return run_dot(("fp16", "fp32", p.instr), a, b, c, device=device).astype(np.int64)

    VS.tc = tc_on_device
    try:
        yield
    finally:
        VS.tc = original


def run_scheme(algo: str, p: ModelParams, a: np.ndarray, b: np.ndarray, device) -> np.ndarray:
    """fp32 patterns (n,) of the scheme on fp32 inputs a, b (n, K), tensor cores on ``device``."""
    a = np.asarray(a, dtype=np.uint32)
    b = np.asarray(b, dtype=np.uint32)
    with tensor_cores_on(device):
        out = VS.scheme(algo)(_B, p, [a[:, k].astype(np.int64) for k in range(a.shape[1])],
                              [b[:, k].astype(np.int64) for k in range(b.shape[1])])
    return np.asarray(out).astype(np.uint32)


def compare(algos: list[str], p: ModelParams, a: np.ndarray, b: np.ndarray, device) -> dict:
    """Per scheme: rows, mismatches between device and model, first counterexamples."""
    out = {}
    for algo in algos:
        dev_bits = run_scheme(algo, p, a, b, device)
        model_bits = simulate_scheme(algo, p, a, b).astype(np.uint32)
        bad = np.nonzero(dev_bits != model_bits)[0]
        out[algo] = {
            "rows": len(a),
            "mismatches": len(bad),
            "counterexamples": [
                {"a": [f"0x{int(x):08x}" for x in a[i]], "b": [f"0x{int(x):08x}" for x in b[i]],
                 "device": f"0x{int(dev_bits[i]):08x}", "model": f"0x{int(model_bits[i]):08x}"}
                for i in bad[:5]
            ],
        }
    return out


def _parse_witness(text: str) -> tuple[list[int], list[int]]:
    try:
        left, right = text.split(";")
        return [int(x, 16) for x in left.split(",")], [int(x, 16) for x in right.split(",")]
    except ValueError as exc:
        raise TcsmtError(f"--witness takes hex fp32 patterns 'a0,a1,...;b0,b1,...', not {text!r}") from exc


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--arch", default="hopper", show_default=True)
@click.option("--algos", default="markidis,ootomo", show_default=True)
@click.option("--n", type=bounded_int(RANDOM_N), default=100_000, show_default=True, help="random rows per range")
@k_option("dot-product length", default=16, limit=GPU_K)
@click.option("--ranges", default="2^-14..2^14,2^-36..2^-14,1..2", show_default=True)
@click.option("--witness", "witnesses", multiple=True, help="hex fp32 patterns 'a0,a1,...;b0,b1,...' (repeatable)")
@click.option("--device", "device_name", default="cuda", show_default=True)
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--out", "out_file", default="")
@click.option("--force", is_flag=True, help="overwrite --out (a regular file only)")
def verify_device_cmd(arch: str, algos: str, n: int, k: int, ranges: str, witnesses: tuple[str, ...],
                      device_name: str, seed: int, out_file: str, force: bool) -> int:
    witness_rows = [_parse_witness(w) for w in witnesses]  # refused before anything runs
    out = files.output(out_file, force) if out_file else None  # claimed before the device runs
    from tcsmt.hwcheck.device import get_device

    device = get_device(device_name)
    p = resolve(arch, "fp16", "fp32", "mma")
    algo_names = [a.strip() for a in algos.split(",") if a.strip()]
    rng = np.random.default_rng(seed)
    report: dict = {"tool": "python -m tcsmt.verify.device", "arch": arch, "model": p.name,
                    "device": getattr(device, "describe", lambda: device_name)(),
                    "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                    "k": k, "ranges": {}, "witnesses": []}
    for rng_text in ranges.split(","):
        dom: Domain = parse_range(rng_text)
        a, b = random_inputs(rng, n, k, dom, "loguniform")
        report["ranges"][rng_text] = compare(algo_names, p, a, b, device)
        for algo, r in report["ranges"][rng_text].items():
            print(f"{rng_text:>14}  {algo:9} rows {r['rows']:>8}  device != model: {r['mismatches']}")
    for wa, wb in witness_rows:
        a, b = np.array([wa], np.uint32), np.array([wb], np.uint32)
        entry: dict[str, Any] = {"a": [format_value(FP32.to_fraction(x)) for x in wa],
                 "b": [format_value(FP32.to_fraction(x)) for x in wb]}
        for algo in algo_names:
            d_dev = int(run_scheme(algo, p, a, b, device)[0])
            d_mod = int(simulate_scheme(algo, p, a, b)[0])
            entry[algo] = {"device": f"0x{d_dev:08x}", "model": f"0x{d_mod:08x}",
                           "abs_error_device": format_value(error_of(d_dev, wa, wb, False)),
                           "abs_error_model": format_value(error_of(d_mod, wa, wb, False))}
            print(f"witness {algo:9} device {d_dev:#010x} model {d_mod:#010x} "
                  f"error {entry[algo]['abs_error_device']}")
        report["witnesses"].append(entry)
    if out is not None:
        out.write_json(report)
    total = sum(r["mismatches"] for rr in report["ranges"].values() for r in rr.values())
    total += sum(e[a]["device"] != e[a]["model"] for e in report["witnesses"] for a in algo_names)
    print(f"device and model {'agree on every row' if total == 0 else f'differ on {total} rows'}")
    return 0 if total == 0 else 1


main = script_main(verify_device_cmd, "python -m tcsmt.verify.device")

if __name__ == "__main__":
    sys.exit(main())
