"""Plan recordings as files: a call as the recorder takes it, the recorder's setting of a settings key, the names
of a user's catalog and its recordings, writing a recording, and merging two recordings of one GPU and setting.

Shared by ``tcsmt record`` (:mod:`tcsmt.cli.record_cmd`) and the on-the-spot recorder of the torch facade
(:mod:`tcsmt.library.record_missing`).  Standard library only.
"""
from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path
from typing import Any

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.record import FIELDS, FORMAT
from tcsmt.hwcheck.stamp import STAMP_FIELDS
from tcsmt.library.plans import Call
from tcsmt.library.settings import parse_settings_key

ENV_OF = {"cublas_workspace": "CUBLAS_WORKSPACE_CONFIG", "cublaslt_workspace": "CUBLASLT_WORKSPACE_SIZE"}
"""The settings-key fields that are environment variables (they act when a process starts)."""


def recorder_call(call: Call) -> dict[str, Any]:
    """A :class:`Call` as the recorder's call dict (``linear``/``scaled_mm`` take the (N, K) weight: ``b_t``)."""
    d = {k: getattr(call, k) for k in FIELDS}
    if call.op in ("linear", "scaled_mm"):
        d["b_t"] = True
    return d


def setting_for(key: str) -> dict[str, Any]:
    """The recorder's setting of a settings key; TcsmtError where the key's environment variables differ from this
    process's (they act when a process starts)."""
    fields = parse_settings_key(key)
    for field, var in ENV_OF.items():
        want, have = fields.get(field, ""), os.environ.get(var, "")
        if want != have:
            raise TcsmtError(f"calls under settings {key!r} need {var}" + (f"={want}" if want else " unset") +
                             (f"; this process has {var}={have}" if have else "; this process has it unset") +
                             " (it acts when a process starts): run tcsmt record so")
    env = {var: os.environ[var] for var in ENV_OF.values() if os.environ.get(var)}
    return {"name": key, "blas": fields.get("blas", "cublas"), "reduced": list(fields.get("reduced", (True, True))),
            "env": env}


def safe_name(text: str) -> str:
    """``text`` with every run of characters other than letters, digits, '.', '_' and '-' made one '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text))


def catalog_name(gpu: str, stamp: dict[str, Any], name: str) -> str:
    """``<gpu>_cublas<version>_torch<version>_<name>.sqlite``."""
    return safe_name(f"{gpu}_cublas{stamp.get('cublas')}_torch{stamp.get('torch')}_{name}") + ".sqlite"


def recording_path(catalog: Path, settings: str) -> Path:
    """The recording of one settings key beside its catalog: ``<catalog stem>.<settings>.json.gz``."""
    return catalog.with_name(catalog.stem + "." + safe_name(settings) + ".json.gz")


def write_recording(path: Path, rec: dict[str, Any]) -> None:
    """Write ``rec`` as gzipped JSON: to a temporary file beside ``path``, renamed over it at the end (a reader
    never sees half a file)."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        with gzip.GzipFile(tmp, "wb", mtime=0) as f:
            f.write(json.dumps(rec, separators=(",", ":")).encode())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise TcsmtError(f"cannot write recording {path}: {exc}") from None


def _list_task(rec: dict[str, Any], where: str) -> dict[str, Any]:
    tasks = rec.get("tasks") or []
    if rec.get("format") != FORMAT or len(tasks) != 1 or tasks[0].get("kind") != "list" or "rows" not in tasks[0]:
        raise TcsmtError(f"{where}: not a recording of one list of calls ({FORMAT})")
    if list(rec.get("fields") or FIELDS) != list(FIELDS):
        raise TcsmtError(f"{where}: call fields {rec.get('fields')} are not the recorder's {list(FIELDS)}")
    return tasks[0]


def merge_recordings(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """One recording of ``old``'s calls then ``new``'s (those ``old`` lacks), both made by :func:`tcsmt.hwcheck.record.
    record_calls` on one GPU under one stamp and setting (TcsmtError otherwise).  ``new``'s kernel names, trace
    summaries, errors and plans are interned into ``old``'s tables (a plan's indices are renumbered, its other
    fields kept), so each plan is stored once."""
    t_old, t_new = _list_task(old, "the recording on file"), _list_task(new, "the new recording")
    for k in STAMP_FIELDS:
        key = "gpu" if k == "gpu_name" else k
        if (old.get("device") or {}).get(key) != (new.get("device") or {}).get(key):
            raise TcsmtError(f"the recording on file was made under {key} {(old.get('device') or {}).get(key)!r}, "
                             f"the new one under {(new.get('device') or {}).get(key)!r}: not merged")
    if old.get("setting") != new.get("setting"):
        raise TcsmtError(f"the recording on file was made under setting {old.get('setting')}, the new one under "
                         f"{new.get('setting')}: not merged")
    tabs = {name: list(old["tables"][name]) for name in ("kernels", "lt", "errors")}
    index = {name: {json.dumps(x): i for i, x in enumerate(items)} for name, items in tabs.items()}
    plans = list(old["tables"]["plans"])
    plan_index = {json.dumps(p): i for i, p in enumerate(plans)}

    def intern(name: str, i: int | None) -> int | None:
        if i is None:
            return None
        x = new["tables"][name][i]
        key = json.dumps(x)
        if key not in index[name]:
            index[name][key] = len(tabs[name])
            tabs[name].append(x)
        return index[name][key]

    def renumbered(p: list[Any]) -> int:
        q = list(p)
        q[0] = [intern("kernels", k) for k in p[0]]
        q[7] = [intern("lt", s) for s in p[7]]
        q[8], q[9] = intern("errors", p[8]), intern("errors", p[9])
        key = json.dumps(q)
        if key not in plan_index:
            plan_index[key] = len(plans)
            plans.append(q)
        return plan_index[key]

    calls = [list(c) for c in t_old["calls"]]
    rows = [list(r) for r in t_old["rows"]]
    have = {json.dumps(c) for c in calls}
    for r in t_new["rows"]:
        c = list(t_new["calls"][int(r[0])])
        if json.dumps(c) in have:
            continue
        have.add(json.dumps(c))
        rows.append([len(calls), renumbered(new["tables"]["plans"][int(r[1])]), *r[2:]])
        calls.append(c)
    notes = list(dict.fromkeys([*old.get("notes", []), *new.get("notes", [])]))
    methods = list(dict.fromkeys(str(m) for m in (old.get("method"), new.get("method")) if m))
    return {**old, "notes": notes, "method": "; ".join(methods),
            "tables": {**tabs, "plans": plans},
            "tasks": [{**t_old, "n": len(calls), "calls": calls, "rows": rows}]}
