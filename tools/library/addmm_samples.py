"""Sampled outputs of ``addmm`` with beta = 1 (evidence/library_plans.md, "addmm with beta = 1"): the calls and the
decision of its epilogue.

    python -m tools.library.addmm_samples lists DIR                  # DIR/addmm_list.json, DIR/addmm_list_lt.json
    (device) python3 tools/device/library_plans.py --out R --valid-list DIR/addmm_list.json     # sampled outputs
    python -m tools.library.addmm_samples ingest RAW_H100 [RAW_H200] --command CMD   # -> evidence/library/addmm_beta1.json.gz

``lists`` reads the H100's recordings (torch's default settings and ``blas=cublaslt``) and groups every recorded ``addmm`` call with beta = 1 by what its plan can
depend on: dtypes, tf32, operand layouts (``a_t``, ``b_t``), a 1-D bias or a matrix C, alpha = 1 or not, the kernel
kind (nvjet kind, CUTLASS / xmma kernel), split-K or not and cuBLASLt's reductionScheme, and the backend setting
(torch's default, or ``blas=cublaslt``).  Per group it takes the cheapest recorded call with 256 or more outputs and
one at the 3/4 point of the group's sizes (4 Mi elements at most), each with alpha = beta = 1, the other input form (a 1-D bias for a matrix C and the reverse), and the
cheapest also with alpha = 0.5, beta = 1; inputs from ``tcsmt/hwcheck/library_calls.py`` (``make_inputs`` with the
call's ``dist`` and ``seed``: ``normal``, ``wide`` for the larger 16-bit ones, ``tf32_exact`` for float32).
``addmm_list_lt.json`` holds the calls of the ``blas=cublaslt`` groups (run in a process whose torch prefers
cuBLASLt).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tools.device import recordings as R
from tools.library.layout_probes import RECORDINGS, layout_tag

FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32", "scale",
          "fast_accum", "a_t", "b_t")
SETTINGS = ("default", "cublaslt")
UNREAD = re.compile(r"^(gemv|gemmSN|gemmk1|dot_kernel|std::enable_if)")
"""Kernels whose K order no probe read (``tcsmt.library.rules.UNREAD_K_ORDER`` and cuBLAS's gemvx): the catalogs
refuse their calls whatever the epilogue, so no call of theirs is sampled."""
MAX_ELEMS = 1 << 22
"""Largest operands + output of a sampled call (elements)."""


def kernel_kind(kernels: list[str]) -> str:
    """The kind of a plan's main kernel: ``nvjet_KIND`` or the kernel's name up to its tile shape."""
    ks = [k for k in kernels if "elementwise" not in k and "splitKreduce" not in k]
    if not ks:
        return "none"
    m = re.match(r"nvjet_sm90_([a-z]+)_", ks[0])
    if m:
        return f"nvjet_{m.group(1)}"
    return re.split(r"_\d+x\d+", ks[0])[0]


def group_key(c: dict[str, Any], p: dict[str, Any], setting: str) -> tuple:
    """What an addmm call's plan can depend on (module docstring)."""
    S = int(p["split_k"] or 1)
    return (setting, c["a_dtype"], c["out_dtype"], bool(c.get("tf32")), bool(c.get("a_t")), bool(c.get("b_t")),
            bool(c.get("bias")), float(c["alpha"]) == 1.0, kernel_kind(p["kernels"]), str(layout_tag(p["kernels"])),
            S > 1, p["reduction_scheme"] or "")


def scan(gpu: str = "h100", rec_dir: Path = RECORDINGS) -> dict[tuple, list[tuple[int, dict[str, Any]]]]:
    """Group -> (elements, call) of every recorded addmm call with beta = 1 (token-count runs: their first two and
    last token counts)."""
    out: dict[tuple, list] = {}
    for path in sorted(rec_dir.glob(f"{gpu}_*.json.gz")):
        rec = R.load(str(path))
        setting = (rec.get("setting") or {}).get("name")
        if setting not in SETTINGS:
            continue

        def add(c: dict[str, Any], pid: int) -> None:
            if c["op"] != "addmm" or float(c["beta"]) != 1.0 or int(c.get("batch") or 1) != 1:
                return
            p = R.plan_dict(rec, pid)
            if p["torch_error"] or p["capture_error"] or not p["kernels"]:
                return
            n = c["M"] * c["N"] + c["M"] * c["K"] + c["K"] * c["N"]
            if n <= MAX_ELEMS:
                out.setdefault(group_key(c, p, str(setting)), []).append((n, {**c, "recorded": {
                    "kernels": p["kernels"], "split_k": p["split_k"], "reduction_scheme": p["reduction_scheme"],
                    "file": path.name}}))

        for task in rec["tasks"]:
            if task["kind"] == "mrange":
                if task["call"]["op"] != "addmm":
                    continue
                ms = R.task_values(task)
                pos = {t: i for i, t in enumerate(ms)}
                for r in R.iter_runs(task):
                    run = ms[pos[r[0]]:pos[r[1]] + 1]
                    for t in dict.fromkeys(run[:2] + run[-1:]):
                        add({**task["call"], task["vary"]: t}, r[2])
            else:
                for c, pid, _g, _w in R.iter_list(task, rec["fields"]):
                    add(c, pid)
    return out


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


@click.group(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
def addmm_cmd() -> None:
    pass


@addmm_cmd.command("lists", help="write DIR/addmm_list.json and DIR/addmm_list_lt.json from the H100 recordings")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
def lists_cmd(out: Path) -> int:
    groups = scan()
    calls = sample_calls(groups)
    out.mkdir(parents=True, exist_ok=True)
    for name, setting in (("addmm_list.json", "default"), ("addmm_list_lt.json", "cublaslt")):
        mine = [c for c in calls if c["group"].startswith(setting + " |")]
        (out / name).write_text(json.dumps(mine, indent=0) + "\n")
        click.echo(f"{out / name}: {len(mine)} calls")
    for g in sorted(groups, key=str):
        click.echo(f"  {len(groups[g]):6d} recorded (sampled) calls: {' | '.join(str(x) for x in g)}")
    return 0


main = script_main(addmm_cmd, "python -m tools.library.addmm_samples")

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
