"""One end-to-end check of ``tcsmt record`` on a CUDA GPU, summarised in a small JSON file.

    python3 tools/device/record_check.py OUT.json [--workdir DIR]      (tcsmt, numpy, torch and click importable)

1. ``python3 -m tcsmt.cli.record_cmd --call ... --out DIR/plans``: the calls of :data:`CALLS`, recorded under CUDA
   graph capture, converted and written as a catalog, as a user runs it;
2. ``python3 -m tcsmt.cli.record_cmd --script DIR/prog.py --out DIR/plans --name script``: a small bf16 program
   (linear layers forward and backward, attention-shaped matmuls, a baddbmm) seen through the dispatch mode;
3. in this process: the same calls recorded again by running them under torch.profiler (``method="executed"``),
   compared call by call with the capture recording (kernel names, numSplitsK, reductionScheme, torch's refusal);
4. each call looked up through ``TCSMT_PLANS=DIR/plans`` under this GPU's running stamp, the catalog's plan
   compared with the shipped plan table's where both have one, and every answered call replayed bit for bit on
   sampled outputs (inputs from ``tcsmt.hwcheck.library_calls.make_inputs``, outputs from the GPU with the call's
   operand layouts and settings, expected bits from the plan: ``tcsmt.library.replay.replay_call``);
5. ``python3 -m pytest -q tests/test_record.py`` where pytest is importable (its torch and GPU tests run here).
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main

CALLS = [
    "mm 64x96x4096 bfloat16",
    "mm 4096x4096x77 bfloat16 a_t=1",
    "mm 77x4096x4096 bfloat16",
    "linear 7x11008x4096 bfloat16",
    "linear 77x4096x4096 float16 bias=1",
    "addmm 128x512x1024 bfloat16 alpha=0.5 beta=2",
    "bmm 128x128x64x12 bfloat16 b_t=1",
    "bmm 100x64x100x8 float16",
    "mm 200x300x500 float32 tf32=1",
    "mm 64x64x4096 bfloat16 out_dtype=float32",
    "scaled_mm 64x4096x4096 float8_e4m3fn out_dtype=bfloat16 scale=tensor",
    "scaled_mm 16x4096x4096 float8_e4m3fn out_dtype=bfloat16 scale=row fast_accum=1",
    "mm 1x4096x11008 bfloat16",
    "mm 1x4096x11008 bfloat16 settings=blas=cublaslt",
    "mm 1x4096x11008 bfloat16 settings=blas=cublaslt,reduced=off",
]
PROG = """
import torch
dt = torch.bfloat16
lin = torch.nn.Linear(4096, 1024, bias=True, device="cuda", dtype=dt)
x = torch.randn(3, 37, 4096, device="cuda", dtype=dt, requires_grad=True)
lin(x).float().pow(2).mean().backward()              # forward, input and weight gradients
up = torch.nn.Linear(1024, 4096, bias=False, device="cuda", dtype=dt)
up(torch.randn(5, 1024, device="cuda", dtype=dt)).sum().backward()
q = torch.randn(2, 8, 33, 64, device="cuda", dtype=dt)
k = torch.randn(2, 8, 33, 64, device="cuda", dtype=dt)
s = q @ k.transpose(-2, -1)                          # bmm on the folded batch
torch.baddbmm(torch.zeros(16, 33, 33, device="cuda", dtype=dt), q.reshape(16, 33, 64),
              k.reshape(16, 33, 64).transpose(1, 2), alpha=0.125)
torch.cuda.synchronize()
"""


def run(cmd: list[str], env: dict[str, str]) -> dict:
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return {"command": " ".join(cmd[1:]), "rc": p.returncode, "seconds": _secs(t0),
            "output": (p.stdout + p.stderr).strip().splitlines()[-40:]}


def plan_key(rec: dict, row: list) -> dict:
    p = rec["tables"]["plans"][row[1]]
    return {"kernels": [rec["tables"]["kernels"][k] for k in p[0]], "split_k": p[5], "reduction": p[6],
            "torch_error": p[8] is not None}


def gpu_out(torch, vc: dict, inputs: dict, layouts: tuple[bool, bool]):
    """The call's output bits on the GPU, its operands in the call's layouts (a_t, b_t: transposed views)."""
    from tcsmt.hwcheck.library_calls import out_bits, run_call, to_device
    if vc["op"] not in ("mm", "bmm") or not any(layouts):
        return run_call(torch, vc, inputs, "cuda")
    import numpy as np
    a_t, b_t = layouts

    def put(x, t, dt):
        if not t:
            return to_device(torch, x, dt, "cuda")
        return to_device(torch, np.ascontiguousarray(np.swapaxes(x, -1, -2)), dt, "cuda").transpose(-1, -2)
    A, B = put(inputs["A"], a_t, vc["a_dtype"]), put(inputs["B"], b_t, vc["b_dtype"])
    kw = {} if vc["out_dtype"] == vc["a_dtype"] else {"out_dtype": getattr(torch, vc["out_dtype"])}
    return out_bits(torch, (torch.mm if vc["op"] == "mm" else torch.bmm)(A, B, **kw))


def checks(res: dict, plans: Path, env: dict[str, str]) -> None:
    """Steps 3 to 5 (module docstring)."""
    import torch

    from tcsmt.arith.registry import gpu_of_device
    from tcsmt.cli.record_cmd import recorder_call, setting_for
    from tcsmt.hwcheck.library_calls import make_inputs, sample_positions
    from tcsmt.hwcheck.record import record_calls
    from tcsmt.hwcheck.stamp import apply_setting, read_setting, running_stamp
    from tcsmt.library.catalog import Catalog
    from tcsmt.library.lookup import answer, parse_record_spec
    from tcsmt.library.plans import table_lookup
    from tcsmt.library.replay import replay_call

    stamp = running_stamp(torch)
    gpu = gpu_of_device(stamp["gpu_name"])
    res["stamp"], res["gpu"] = stamp, gpu
    calls = [parse_record_spec(c) for c in CALLS]
    # 3. capture vs executed
    captured = {}
    for f in sorted(plans.glob("*_recorded.*.json.gz")):
        rec = json.load(gzip.open(f, "rt"))
        task = rec["tasks"][0]
        for row in task["rows"]:
            captured[json.dumps(task["calls"][row[0]])] = plan_key(rec, row)
    same, differ = 0, []
    t0 = time.time()
    by_setting: dict[str, list] = {}
    for c in calls:
        by_setting.setdefault(c.settings, []).append(c)
    for key, group in by_setting.items():
        rec = record_calls(torch, [recorder_call(c) for c in group], setting_for(key), method="executed")
        task = rec["tasks"][0]
        for row in task["rows"]:
            k = json.dumps(task["calls"][row[0]])
            got, want = plan_key(rec, row), captured.get(k)
            if got == want:
                same += 1
            else:
                differ.append({"call": task["calls"][row[0]], "executed": got, "captured": want})
    res["capture_vs_executed"] = {"calls": len(calls), "same": same, "differ": differ,
                                  "seconds": _secs(t0)}
    # 4. lookups, catalog vs table, bit-exact replay
    os.environ["TCSMT_PLANS"] = str(plans)
    cat = Catalog(next(plans.glob("*_recorded.sqlite")))
    lookups, replays, versus = [], [], []
    for spec, c in zip(CALLS, calls):
        try:
            a = answer(c, gpu, stamp=stamp)
        except Exception as exc:
            lookups.append({"call": spec, "refused": str(exc)[:400]})
            continue
        p = a.plan
        lookups.append({"call": spec, "kind": a.kind, "split_k": p.split_k, "reduce": p.reduce if p.split_k > 1 else "",
                        "epilogue": list(p.epilogue), "kernels": list(p.kernels), "evidence": list(a.evidence)})
        hits = [h for h in cat.find(c) if h.plan is not None]
        tab, _why = table_lookup(c, gpu)
        if hits and tab is not None:
            versus.append({"call": spec, "same_arithmetic": hits[0].plan.arithmetic() == tab.arithmetic()})
        vc = {k: getattr(c, k) for k in ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias",
                                         "alpha", "beta", "tf32", "scale", "fast_accum")}
        vc["dist"] = "tf32_exact" if c.tf32 else "normal"
        inputs = make_inputs(vc, 1)
        before = read_setting(torch)
        s = setting_for(c.settings)
        apply_setting(torch, s["blas"], s["reduced"])
        try:
            out = gpu_out(torch, vc, inputs, (c.a_t, c.b_t))
        finally:
            apply_setting(torch, before["blas"], before["reduced"]["bfloat16"])
        vc["samples"] = [[*pos, hex(int(out[pos]))] for pos in sample_positions(vc, 1, 128)]
        r = replay_call(vc, inputs, p)
        replays.append({"call": spec, "checked": r.checked, "mismatches": len(r.mismatches),
                        "run_error": r.run_error})
    res["lookups"], res["catalog_vs_table"], res["replay"] = lookups, versus, replays
    res["summary"] = {"answered": sum("kind" in x for x in lookups), "calls": len(CALLS),
                      "outputs_checked": sum(r["checked"] for r in replays),
                      "outputs_differing": sum(r["mismatches"] for r in replays),
                      "capture_equals_executed": f"{same} of {len(calls)}",
                      "catalog_equals_table": f"{sum(v['same_arithmetic'] for v in versus)} of {len(versus)}"}


def _secs(t0: float) -> float:
    return float(f"{time.time() - t0:.1f}")


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where the catalogs and the program go (default: a new temporary folder)")
def record_check_cmd(out: Path, workdir: Path | None) -> int:
    work = Path(workdir or tempfile.mkdtemp(prefix="record_check_"))
    work.mkdir(parents=True, exist_ok=True)
    plans = work / "plans"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    res: dict = {"what": __doc__.split("\n")[0], "calls": CALLS}
    cmd = [sys.executable, "-m", "tcsmt.cli.record_cmd", *(x for c in CALLS for x in ("--call", c)), "--out", str(plans)]
    res["record_calls"] = run(cmd, env)
    print("\n".join(res["record_calls"]["output"]), flush=True)
    (work / "prog.py").write_text(PROG)
    res["record_script"] = run([sys.executable, "-m", "tcsmt.cli.record_cmd", "--script", str(work / "prog.py"),
                                "--out", str(plans), "--name", "script"], env)
    dry = run([sys.executable, "-m", "tcsmt.cli.record_cmd", "--script", str(work / "prog.py"), "--dry-run"], env)
    res["script_calls"] = dry["output"]

    try:
        checks(res, plans, env)
    except Exception:  # the summary keeps what ran, and why the rest did not
        import traceback
        res["error"] = traceback.format_exc()[-3000:]
    # 5. the tests
    try:
        import pytest  # noqa: F401
        res["pytest"] = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_record.py"],
                            env)["output"][-3:]
    except ImportError:
        res["pytest"] = "pytest not importable here"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res.get("summary"), indent=1), res.get("error", ""))
    return 0


main = script_main(record_check_cmd, "python3 tools/device/record_check.py")

if __name__ == "__main__":
    sys.exit(main())
