"""Replay a recorded library validation file: rebuild each call's inputs, evaluate the sampled outputs, compare bits.

The file (written on the device; issue-12 contract) lists calls with ``seed``
and ``samples`` = ``[i, j, "0x.."]`` (``[b, i, j, "0x.."]`` for bmm).  The
inputs come from ``make_inputs(call, seed)`` (``hwcheck/library_calls.py`` on
the device side), a dict of numpy bit-pattern arrays with keys ``A`` (M, K) or
(batch, M, K), ``B`` (K, N) or (batch, K, N) in the ``mm`` orientation (or
``weight`` (N, K) for linear), and where the call has them ``C`` (M, N),
``bias`` (N,), ``scale_a`` and ``scale_b`` (one value, or M and N values).
Each sampled output is evaluated under the recorded plan (or ``plans[i]``
when given) with :func:`tcsmt.library.run`, one row at a time.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import TcsmtError
from .library import plan as plan_of
from .library import run
from .library_plan import Plan


@dataclass
class CallReplay:
    """One call's replay: how many samples were checked, and the ones that differ."""

    label: str
    checked: int = 0
    mismatches: list[tuple] = field(default_factory=list)
    error: str = ""


def _plan_for(call: dict[str, Any], gpu: str) -> Plan:
    return plan_of(call["op"], int(call["M"]), int(call["N"]), int(call["K"]), gpu=gpu, a_dtype=call["a_dtype"],
                   b_dtype=call.get("b_dtype"), out_dtype=call.get("out_dtype"), batch=int(call.get("batch", 1)),
                   alpha=float(call.get("alpha", 1.0)), beta=float(call.get("beta", 0.0)),
                   bias=bool(call.get("bias", False)), tf32=bool(call.get("tf32", False)), scale=call.get("scale"),
                   fast_accum=bool(call.get("fast_accum", False)))


def _cols_of(inputs: dict[str, np.ndarray], b: int | None) -> np.ndarray:
    if "B" in inputs:
        B = inputs["B"]
        return B[b] if b is not None else B
    if "weight" in inputs:
        return inputs["weight"].T
    raise TcsmtError("make_inputs gave neither B nor weight")


def replay_call(call: dict[str, Any], inputs: dict[str, np.ndarray], plan: Plan,
                max_samples: int | None = None) -> CallReplay:
    """Evaluate the samples of one call (the first ``max_samples``, or all) under ``plan``; compare the bits."""
    res = CallReplay(plan.call.label())
    by_row: dict[tuple, list[tuple[int, int]]] = {}
    for s in call["samples"][:max_samples]:
        *idx, bits = s
        b, i, j = (idx if len(idx) == 3 else [None, *idx])
        by_row.setdefault((b, int(i)), []).append((int(j), int(str(bits), 16)))
    row_scaled = plan.call.scale == "row"
    for (b, i), cols in by_row.items():
        A = inputs["A"][b] if b is not None else inputs["A"]
        Bc = _cols_of(inputs, b)
        js = np.array([j for j, _ in cols], dtype=np.int64)
        kw: dict[str, Any] = {}
        if "C" in inputs and inputs["C"] is not None and plan.epilogue and {"beta_c", "alpha_beta_c"} & set(plan.epilogue):
            C = inputs["C"][b] if b is not None else inputs["C"]
            kw["C"] = C[i:i + 1][:, js]
        if plan.call.bias:
            kw["bias"] = np.asarray(inputs["bias"]).reshape(-1)[js]
        if "scale" in plan.epilogue:
            sa, sb = np.asarray(inputs["scale_a"]).reshape(-1), np.asarray(inputs["scale_b"]).reshape(-1)
            kw["scale_a"] = sa[i:i + 1] if row_scaled else sa
            kw["scale_b"] = sb[js] if row_scaled else sb
        got = np.asarray(run(plan, A[i:i + 1], Bc[:, js], **kw)).reshape(-1)
        for (j, want), g in zip(cols, got):
            res.checked += 1
            if int(g) != want:
                res.mismatches.append((b, i, j, f"0x{want:x}", f"0x{int(g):x}"))
    return res


def replay_file(path: Path, make_inputs: Callable[[dict, int], dict], *, gpu: str = "h100",
                plans: dict[int, Plan] | None = None, max_samples: int | None = None) -> list[CallReplay]:
    """Replay every call of a validation file; a call without a plan is reported with its error."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise TcsmtError(f"cannot read {path}: {exc}") from None
    out = []
    for n, call in enumerate(data.get("calls", [])):
        try:
            plan = (plans or {}).get(n) or _plan_for(call, gpu)
        except TcsmtError as exc:
            out.append(CallReplay(f"call {n}", error=str(exc)))
            continue
        out.append(replay_call(call, make_inputs(call, int(call["seed"])), plan, max_samples))
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m tcsmt.library_replay FILE``: replay a validation file; exit 1 on any differing bit, 2 on errors."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m tcsmt.library_replay", description=main.__doc__)
    ap.add_argument("file", type=Path)
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--max-samples", type=int, default=None, help="samples per call (default: all)")
    args = ap.parse_args(argv)
    try:
        from tcsmt.hwcheck.library_calls import make_inputs
    except ImportError as exc:
        print(f"tcsmt: error: the input generator hwcheck/library_calls.py (tcsmt.hwcheck.library_calls) is missing ({exc})", file=sys.stderr)
        return 2
    try:
        results = replay_file(args.file, make_inputs, gpu=args.gpu, max_samples=args.max_samples)
    except TcsmtError as exc:
        print(f"tcsmt: error: {exc}", file=sys.stderr)
        return 2
    for r in results:
        state = f"no plan: {r.error}" if r.error else f"{r.checked} checked, {len(r.mismatches)} differ"
        print(f"{r.label}: {state}")
        for m in r.mismatches[:3]:
            print(f"    batch {m[0]} row {m[1]} col {m[2]}: GPU {m[3]}, model {m[4]}")
    checked = sum(r.checked for r in results)
    wrong = sum(len(r.mismatches) for r in results)
    print(f"total: {checked} outputs checked, {wrong} differ, {sum(1 for r in results if r.error)} calls without a plan")
    return 1 if wrong else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
