"""Raw device recordings of cuBLAS plans (``tcsmt record``, ``tools/device/record_plans.py``): reading them call by
call, and the plan signatures one GPU ran, for a catalog of another GPU that borrows its rules.

A recording has a header with the GPU, its SM count, the driver, the library versions and the settings; interned
kernel names, cuBLASLt trace summaries and plans (``tables``); and tasks of calls, each a run of token counts of
one call template (``mrange``) or a list of calls.  :func:`recorded_calls` yields them as the catalog builder
(:mod:`tcsmt.library.catalog_build`) reads them.
"""
from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.stamp import STAMP_FIELDS
from tcsmt.library.families import plan_signature
from tcsmt.library.settings import settings_key

CALL_FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32",
               "scale", "fast_accum", "a_t", "b_t")
DEFAULTS = {"batch": 1, "bias": False, "alpha": 1.0, "beta": 0.0, "tf32": False, "scale": None, "fast_accum": False,
            "a_t": False, "b_t": False}
def read_recording(path: Path) -> dict[str, Any]:
    try:
        with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise TcsmtError(f"cannot read recording {path}: {exc}") from None
    if not isinstance(data, dict) or "tables" not in data or "tasks" not in data:
        raise TcsmtError(f"{path}: not a plan recording (tables and tasks expected)")
    return data


def stamp_of(rec: dict[str, Any], where: str) -> dict[str, Any]:
    """GPU name, SM count, driver and library versions of a recording (its header's ``device``)."""
    dev = dict(rec.get("device") or {})
    dev.setdefault("gpu_name", dev.get("gpu"))  # the recorder names the GPU ``gpu``
    stamp = {k: dev.get(k) for k in STAMP_FIELDS}
    missing = [k for k in ("gpu_name", "torch", "cublas") if not stamp.get(k)]
    if missing:
        raise TcsmtError(f"{where}: the recording's device header lacks {', '.join(missing)}")
    return stamp


def setting_of(rec: dict[str, Any], a_dtype: str) -> str:
    """The settings key (:func:`settings_key`) of a recording's ``setting`` for calls on ``a_dtype``."""
    s = rec.get("setting") or {}
    env = s.get("env") or {}
    return settings_key(a_dtype, blas=s.get("blas", "cublas"), reduced=tuple(s.get("reduced", (True, True))),
                        cublas_workspace=str(env.get("CUBLAS_WORKSPACE_CONFIG", "")),
                        cublaslt_workspace=str(env.get("CUBLASLT_WORKSPACE_SIZE", "")),
                        deterministic=bool(s.get("deterministic", False)))


MAX_T = 16384


def token_counts(spec: str) -> list[int]:
    """The token counts of a recorded run list (the recorder's ``ms``): ``all`` = 1..16384, ``p2`` = powers of
    two, else ``A-B`` ranges and ``Sx``/``SxHI`` multiples of S above the previous part, joined by ``+``."""
    if spec == "all":
        return list(range(1, MAX_T + 1))
    if spec == "p2":
        return [1 << i for i in range(15)]
    ms: list[int] = []
    for part in spec.split("+"):
        if "x" in part:
            step_s, hi_s = part.split("x")
            step, hi = int(step_s), int(hi_s or MAX_T)
            start = (ms[-1] // step + 1) * step if ms else step
            ms += list(range(start, hi + 1, step))
        elif "-" in part:
            lo, hi = (int(x) for x in part.split("-"))
            ms += list(range(lo, hi + 1))
        else:
            ms.append(int(part))
    return sorted(set(ms))


def _runs(task: dict[str, Any]) -> Iterator[tuple[int, int, int]]:
    """(t_first, t_last, plan) of a token-count task, in any of the recorder's layouts: rows, or columns
    (``runs``: ``t_first``/``t_last``, or ``t_gap``/``t_span``: t_first minus the previous t_last, t_last minus
    t_first)."""
    if "rows" in task:
        for r in task["rows"]:
            yield int(r[0]), int(r[1]), int(r[2])
        return
    c = task["runs"]
    if "t_first" in c:
        yield from ((int(a), int(b), int(p)) for a, b, p in zip(c["t_first"], c["t_last"], c["plan"]))
        return
    t_last = 0
    for gap, span, pid in zip(c["t_gap"], c["t_span"], c["plan"]):
        t_first = t_last + int(gap)
        t_last = t_first + int(span)
        yield t_first, t_last, int(pid)


def _list(task: dict[str, Any], fields: Sequence[str]) -> Iterator[tuple[dict[str, Any], int]]:
    """(call fields, plan) of each call of a list task: rows of (index into ``calls``, plan, ...), or columns."""
    if "rows" in task:
        for r in task["rows"]:
            yield dict(zip(fields, task["calls"][int(r[0])])), int(r[1])
        return
    cols = task["calls"]
    for i, pid in enumerate(task["plan"]):
        yield {f: cols[f][i] for f in fields if f in cols}, int(pid)


def recorded_calls(rec: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, list[int], int]]:
    """(call template, vary, the recorded token counts of one run, plan index) for every run of a recording, and
    for every single call of its lists (vary M, one count); in a template the varying dimension is None."""
    fields = rec.get("fields") or CALL_FIELDS
    for task in rec["tasks"]:
        if task.get("view"):  # an operand layout beyond the catalog's keys (the recorder's layout-variant tasks)
            continue
        if task.get("kind") == "mrange":
            tmpl = {**DEFAULTS, **task["call"]}
            vary = task["vary"]
            ms = token_counts(task["ms"])
            pos = {t: i for i, t in enumerate(ms)}
            for t0, t1, pid in _runs(task):
                yield tmpl, vary, ms[pos[t0]: pos[t1] + 1], pid
        else:
            for values, pid in _list(task, fields):
                c = {**DEFAULTS, **values}
                yield c, "M", [int(c["M"])], pid


def raw_call(tmpl: dict[str, Any], vary: str, t: int, plan: list[Any], tables: dict[str, list]) -> dict[str, Any]:
    """The call at token count ``t`` as the converter reads a recorded call (kernels, split_k, reductionScheme,
    trace, torch's refusal)."""
    c = {k: tmpl.get(k) for k in CALL_FIELDS}
    for d in vary:
        c[d] = t
    kernels, blocks, _clusters, _gz, _other, S, red, lt, err, cap_err = plan[:10]
    c["kernels"] = [tables["kernels"][k] for k in kernels]
    c["blocks"] = blocks
    c["split_k"] = S
    c["reduction_scheme"] = red or "none"
    c["lt_algo"] = [tables["lt"][i] for i in lt]
    c["split_k_source"] = "cublaslt_trace"
    if err is not None:
        c["torch_error"] = tables["errors"][err]
    if cap_err is not None:
        c["capture_error"] = tables["errors"][cap_err]
    if len(plan) > 10 and plan[10] is not None:  # the gemvx launches' [tile, stride] (tcsmt.hwcheck.record.PLAN_FIELDS)
        c["gemv_dealing"] = plan[10]
    if len(plan) > 11 and any(x is not None for x in plan[11]):  # segment_k_on launches' words (PLAN_FIELDS)
        c["segment_k_launch"] = plan[11]
    return c



def recorded_signature(rec: dict[str, Any], pid: int) -> tuple:
    """The plan signature (:func:`tcsmt.library.families.plan_signature`: kernel names, split_k, cuBLASLt's
    reductionScheme, torch's refusal) of plan ``pid`` of a recording."""
    tables = rec["tables"]
    kernels, _blocks, _clusters, _gz, _other, S, _red, lt, err, _cap = tables["plans"][pid][:10]
    call = {"kernels": [tables["kernels"][k] for k in kernels], "split_k": S, "lt": lt,
            "torch_error": None if err is None else tables["errors"][err]}
    return plan_signature(call, tables["lt"])


class RecordedPlans:
    """The plan signatures (kernel names, split-K count, cuBLASLt reductionScheme) one GPU recorded, on any call:
    what a catalog of another GPU that borrows this GPU's rules asks (:meth:`recorded_with`).  A kernel's arithmetic
    at a given split-K count and depth is its code's, which the two GPUs share (same library and torch: checked by
    the builder); the rules convert it from the kernels, S and K of the call itself."""

    def __init__(self, recordings: Sequence[tuple[str, dict[str, Any]]]):
        self._where: dict[tuple, str] = {}
        for name, rec in recordings:
            for pid in range(len(rec["tables"]["plans"])):
                sig = recorded_signature(rec, pid)
                if not sig[3]:  # torch's refusals carry no plan
                    self._where.setdefault(sig, name)

    def recorded_with(self, signature: tuple) -> str:
        """The first recording in which this GPU ran a call with this plan signature, or ''."""
        return self._where.get(signature, "")
