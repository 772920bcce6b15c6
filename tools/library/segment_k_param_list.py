"""Lists of calls for reading the tf32 ``segment_k_on`` launch parameters (``tools/device/segment_k_params.py``) and
for more swamping probes of them (``tools/device/segment_k_probe.py``).

    python -m tools.library.segment_k_param_list [--out-dir tools/device]

Writes ``segment_k_params_list.json``: the 60 probed calls of ``segment_k_probe_list.json`` first, then calls of a few
of their shapes with one of M, N, K varied at a time (:data:`SWEEPS`), so that a parameter word that follows the
tile counts, the K iterations or the grid shows itself; and ``segment_k_probe_list_more.json``: the sweeps marked for
probing, whose swamping read-out says how the cut moves with the varied size.  Nothing here is a rule.

With ``--fresh``: ``segment_k_fresh_list.json``, calls drawn at random (:func:`fresh_calls`, seeded) to test the rule of
:mod:`tcsmt.library.segment_k` on calls no rule was fitted to (captured and probed in one device run, judged offline),
and ``segment_k_tree_list.json``, calls of 2 to 16 segments for ``segment_k_tree_probe.py`` (:data:`TREE_CALLS`).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main

DEVICE = Path(__file__).resolve().parents[2] / "tools" / "device"
TAIL = "float32 tf32=1"

SWEEPS: list[tuple[str, str, list[int], bool]] = [
    # (op, shape with one of M/N/K written as {}, values, probed too)
    ("mm", "302x9728x{}", [32 * i for i in range(40, 121, 4)] + [2568, 2576, 2584], True),
    ("mm", "302x{}x2560", [128 * j for j in range(40, 101, 4)], True),
    ("mm", "{}x9728x2560", [128 * i for i in range(1, 13)] + [200, 330, 400], False),
    ("linear", "7888x2560x{}", [32 * i for i in range(64, 193, 8)], True),
    ("linear", "{}x2560x4096", [128 * i for i in range(40, 81, 4)], False),
    ("mm", "1528x6928x{}", [2776 + 8 * j for j in range(-6, 7) if j], False),
    ("mm", "256x4096x{}", [1024 * i for i in range(4, 33, 2)], False),
    ("mm", "8896x64x{}", [416 * i for i in range(2, 12)], False),
    ("mm", "{}x4096x4096", [128 * i for i in range(1, 17)], True),
    ("mm", "512x{}x8192", [128 + 256 * j for j in range(16)], False),
    ("mm", "1024x1024x{}", [512 * i for i in range(2, 33, 2)], True),
    ("linear", "193x5120x{}", [1536 * i for i in range(2, 13)], True),
    ("mm", "{}x16x1632", [512 * i for i in range(4, 33, 2)], False),
    ("linear", "33x{}x4096", [256 * j for j in range(2, 33, 2)], False),
    ("mm", "{}x2048x3072", [64 * i for i in range(1, 40, 2)], False),
]


TREE_CALLS = ["mm 314x1024x4096", "mm 302x9728x2560", "mm 302x5120x2560", "mm 1160x4096x4096", "mm 257x3072x3072",
              "mm 302x6144x2560", "mm 8896x64x2496", "mm 1528x6928x2824", "mm 1528x6928x2728",
              "linear 567x3584x18944", "mm 448x2048x3072", "mm 704x2048x3072", "mm 1024x1024x4096",
              "mm 8896x64x4576", "mm 257x8192x128256"]
"""Calls whose launches (``h100_segment_k_params.json.gz``) have S = 2, 3, 4, 5, 5, 8, 8, 10, 11, 13, 14, 14, 15, 16, 7."""


def fresh_calls(n: int = 80, seed: int = 20261127) -> list[dict]:
    """n calls: op mm (nn), linear (tn) or mm with A transposed (nt); M, N, K log-uniform in [16, 16384],
    [64, 16384], [512, 32768] on multiples of 8 (M any), operands at most 2^28 elements in all."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: list[dict] = []
    while len(out) < n:
        m, nn, k = (int(v) for v in np.exp(rng.uniform(np.log([16, 64, 512]), np.log([16384, 16384, 32768]))))
        nn, k = 8 * max(1, nn // 8), 8 * max(1, k // 8)
        if m * k + k * nn > 2 ** 28:
            continue
        op = ["mm", "linear", "mm"][int(rng.integers(0, 3))]
        extra = " a_t=1" if op == "mm" and rng.integers(0, 2) else ""
        out.append({"spec": f"{op} {m}x{nn}x{k} {TAIL}{extra}"})
    return out


def sweep_calls() -> tuple[list[dict], list[dict]]:
    """(every sweep call, the probed ones), each ``{"spec": ...}``."""
    every, probed = [], []
    for op, shape, values, probe in SWEEPS:
        for v in values:
            c = {"spec": f"{op} {shape.format(v)} {TAIL}", "sweep": f"{op} {shape}"}
            every.append(c)
            if probe:
                probed.append(c)
    return every, probed


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=DEVICE)
@click.option("--fresh", is_flag=True, help="write the fresh and tree lists instead (module docstring)")
def segment_k_param_list_cmd(out_dir: Path, fresh: bool) -> int:
    made = "python -m tools.library.segment_k_param_list"
    if fresh:
        (out_dir / "segment_k_fresh_list.json").write_text(
            json.dumps({"made_by": made + " --fresh", "calls": fresh_calls()}, indent=0) + "\n")
        tree = [{"spec": f"{c} {TAIL}"} for c in TREE_CALLS]
        (out_dir / "segment_k_tree_list.json").write_text(
            json.dumps({"made_by": made + " --fresh", "calls": tree}, indent=0) + "\n")
        print(f"{len(fresh_calls())} fresh calls, {len(tree)} tree calls -> {out_dir}")
        return 0
    probed_before = json.loads((DEVICE / "segment_k_probe_list.json").read_text())["calls"]
    every, probed = sweep_calls()
    seen = {c["spec"] for c in probed_before}
    every = [c for c in every if c["spec"] not in seen]
    probed = [c for c in probed if c["spec"] not in seen]
    calls = [{"spec": c["spec"], "probed": True} for c in probed_before] + every
    (out_dir / "segment_k_params_list.json").write_text(json.dumps({"made_by": made, "calls": calls}, indent=0) + "\n")
    (out_dir / "segment_k_probe_list_more.json").write_text(
        json.dumps({"made_by": made, "calls": probed}, indent=0) + "\n")
    print(f"{len(calls)} calls to capture, {len(probed)} more to probe -> {out_dir}")
    return 0


main = script_main(segment_k_param_list_cmd, "python -m tools.library.segment_k_param_list")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
