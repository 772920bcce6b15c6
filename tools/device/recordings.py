"""Read and compact the plan recordings of ``record_plans.py`` (standard library only).

A device run writes rows (``mrange_row`` / ``list_row`` of its header).  ``compact`` rewrites such a file losslessly
for the repository:

* torch's refusal messages of a token-count task carry the token count as ``{t}`` (``msg.replace("{t}", str(t))``
  gives the message back); the device script does this itself since the H200 runs, the H100 runs before it are
  rewritten here; consecutive runs whose plans then coincide and that launched nothing are joined;
* tables keep only the entries in use;
* the rows of each task are stored as columns (``runs``: ``t_gap`` = t_first minus the previous run's t_last (the
  first run's: minus 0), ``t_span`` = t_last - t_first, ``plan``, ``grids``, ``workspace``, and ``last``: run
  index -> [grids, workspace] at ``t_last`` where they differ from ``t_first``; list tasks: ``calls`` as one list
  per call field, ``plan``, ``grids``, ``workspace`` per call), which gzip compresses about eight times better
  than rows of absolute token counts.

``iter_runs`` and ``iter_list`` give the rows back; ``plan_dict`` names a plan's fields.

    python3 tools/device/recordings.py compact DEVICE_FILE.json.gz OUT.json.gz   # with a round-trip check
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys

PLAN_FIELDS = ["kernels", "blocks", "clusters", "grid_z", "other_nodes", "split_k", "reduction_scheme", "lt",
               "torch_error", "capture_error", "gemv_dealing", "segment_k_launch"]
"""A plan's fields (a file's own ``plan_fields``; files recorded before 2026-11-27 (night) lack ``gemv_dealing``,
before 2026-11-27 (late night) ``segment_k_launch``)."""
FORMAT = "tcsmt cuBLAS plan recordings, v1 (columnar)"


def load(path: str) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def plan_dict(rec: dict, pid: int) -> dict:
    """A plan of a recording's table with named fields, kernel names, trace summaries and messages resolved."""
    p = rec["tables"]["plans"][pid]
    tab = rec["tables"]
    d = dict(zip(rec.get("plan_fields") or PLAN_FIELDS, p))
    d["kernels"] = [tab["kernels"][k] for k in d["kernels"]]
    d["lt"] = [tab["lt"][k] for k in d["lt"]]
    for k in ("torch_error", "capture_error"):
        if d[k] is not None:
            d[k] = tab["errors"][d[k]]
    return d


def iter_runs(task: dict):
    """Rows [t_first, t_last, plan, grids_first, workspace_first, grids_last, workspace_last] of a token-count task
    (either layout)."""
    if "rows" in task:
        for r in task["rows"]:
            yield r if len(r) == 7 else [*r, r[3], r[4]]
        return
    c = task["runs"]
    last = c.get("last", {})
    t_last = 0
    for i in range(len(c["plan"])):
        g, w = c["grids"][i], c["workspace"][i]
        gl, wl = last.get(str(i), (g, w))
        t_first = t_last + c["t_gap"][i]
        t_last = t_first + c["t_span"][i]
        yield [t_first, t_last, c["plan"][i], g, w, gl, wl]


def iter_list(task: dict, fields: list[str]):
    """(call dict, plan, grids, workspace) of each call of a list task (either layout)."""
    if "rows" in task:
        for r in task["rows"]:
            yield dict(zip(fields, task["calls"][r[0]])), r[1], r[2], r[3]
        return
    cols = task["calls"]
    for i in range(len(task["plan"])):
        yield {f: cols[f][i] for f in fields}, task["plan"][i], task["grids"][i], task["workspace"][i]


def task_values(task: dict) -> list[int]:
    """The token counts of a token-count task (its ``ms`` description, as record_plans.parse_mspec)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from record_plans import parse_mspec
    return parse_mspec(task["ms"])


class _Tab:
    def __init__(self):
        self.items: list = []
        self.index: dict = {}

    def __call__(self, x):
        key = json.dumps(x, separators=(",", ":"))
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.items)
            self.items.append(x)
        return i


def _norm_msg(msg: str | None, t: int) -> str | None:
    if msg is None or "{t}" in msg:
        return msg
    return re.sub(rf"(?<![0-9]){t}(?![0-9])", "{t}", msg)


def compact(rec: dict, source_path: str | None = None) -> dict:
    tab = rec["tables"]
    new = {"kernels": _Tab(), "lt": _Tab(), "errors": _Tab(), "plans": _Tab()}

    def remap(pid: int, t: int | None) -> int:
        p = list(tab["plans"][pid])
        p[0] = [new["kernels"](tab["kernels"][k]) for k in p[0]]
        p[7] = [new["lt"](tab["lt"][k]) for k in p[7]]
        for j in (8, 9):
            if p[j] is not None:
                msg = tab["errors"][p[j]]
                p[j] = new["errors"](_norm_msg(msg, t) if t is not None else msg)
        return new["plans"](p)

    out = {k: v for k, v in rec.items() if k not in ("tables", "tasks")}
    out["format"] = FORMAT
    if source_path:
        with open(source_path, "rb") as f:
            raw = f.read()
        out["compacted_from"] = {"file": os.path.basename(source_path), "bytes": len(raw),
                                 "sha256": hashlib.sha256(raw).hexdigest()}
    out["layout"] = __doc__.split("\n\n")[1].strip()
    tasks = []
    for t in rec["tasks"]:
        nt = {k: v for k, v in t.items() if k not in ("rows", "calls")}
        if t["kind"] == "mrange":
            runs: list[list] = []
            for r in iter_runs(t):
                single = r[0] == r[1]
                pid = remap(r[2], r[0] if single else None)
                empty = not new["plans"].items[pid][0]
                if runs and runs[-1][2] == pid and empty and r[3] == runs[-1][3] == [] and r[4] == runs[-1][4] == []:
                    runs[-1][1] = r[1]
                    continue
                runs.append([r[0], r[1], pid, r[3], r[4], r[5], r[6]])
            ends = [0] + [r[1] for r in runs[:-1]]
            cols = {"t_gap": [r[0] - e for r, e in zip(runs, ends)], "t_span": [r[1] - r[0] for r in runs],
                    "plan": [r[2] for r in runs], "grids": [r[3] for r in runs], "workspace": [r[4] for r in runs]}
            last = {str(i): [r[5], r[6]] for i, r in enumerate(runs) if (r[5], r[6]) != (r[3], r[4])}
            if last:
                cols["last"] = last
            nt["runs"] = cols
        else:
            fields = rec["fields"]
            rows = list(iter_list(t, fields))
            if [r[0] for r in t["rows"]] != list(range(len(t["rows"]))):
                raise ValueError(f"task {t['id']}: list rows out of order")
            nt["calls"] = {f: [c[f] for c, _, _, _ in rows] for f in fields}
            nt["plan"] = [remap(p, None) for _, p, _, _ in rows]
            nt["grids"] = [g for _, _, g, _ in rows]
            nt["workspace"] = [w for _, _, _, w in rows]
            if "exec" in t:
                nt["exec"] = [[e[0], remap(e[1], None), *e[2:]] for e in t["exec"]]
        tasks.append(nt)
    out["tables"] = {k: v.items for k, v in new.items()}
    out["tasks"] = tasks
    return out


def _call_view(rec: dict, pid: int, t: int | None, cache: dict) -> tuple:
    key = (id(rec), pid)
    v = cache.get(key)
    if v is None:
        d = plan_dict(rec, pid)
        v = cache[key] = (tuple(json.dumps(d.get(k)) for k in PLAN_FIELDS),
                          any(d[k] is not None and "{t}" in d[k] for k in ("torch_error", "capture_error")))
    if not v[1] or t is None:
        return v[0]
    return tuple(x.replace("{t}", str(t)) for x in v[0])


def check_round_trip(a: dict, b: dict):
    """Every token count / call of ``a`` (device rows) has in ``b`` (compact) the same plan fields (messages with
    {t} expanded), the same grids and workspace at the first token count of each run, and the same at run ends."""
    if len(a["tasks"]) != len(b["tasks"]):
        raise AssertionError("task count differs")
    cache: dict = {}
    for ta, tb in zip(a["tasks"], b["tasks"]):
        if ta["kind"] == "mrange":
            ms = task_values(ta)
            pos = {t: i for i, t in enumerate(ms)}
            pa, pb = {}, {}
            ea, eb = {}, {}
            for src, per, ends, rec in ((ta, pa, ea, a), (tb, pb, eb, b)):
                for r in iter_runs(src):
                    for t in ms[pos[r[0]]:pos[r[1]] + 1]:
                        per[t] = _call_view(rec, r[2], t, cache)
                    ends[r[0]] = (r[3], r[4])
                    ends[r[1]] = (r[5], r[6])
            if pa != pb or len(pa) != len(ms):
                raise AssertionError(f"task {ta['id']}: plans differ")
            for t, v in eb.items():
                if ea.get(t) != v:
                    raise AssertionError(f"task {ta['id']}: grids at {t} differ")
        else:
            la = list(iter_list(ta, a["fields"]))
            lb = list(iter_list(tb, b["fields"]))
            if len(la) != len(lb):
                raise AssertionError(f"task {ta['id']}: call count differs")
            for (ca, p1, g1, w1), (cb, p2, g2, w2) in zip(la, lb):
                if ca != cb or (g1, w1) != (g2, w2) or _call_view(a, p1, None, cache) != _call_view(b, p2, None, cache):
                    raise AssertionError(f"task {ta['id']}: a call differs")
            if "exec" in ta and [e[2:] for e in ta["exec"]] != [e[2:] for e in tb["exec"]]:
                raise AssertionError(f"task {ta['id']}: executed records differ")


def main():
    if len(sys.argv) != 4 or sys.argv[1] != "compact":
        raise SystemExit(__doc__)
    src, dst = sys.argv[2], sys.argv[3]
    rec = load(src)
    out = compact(rec, src)
    check_round_trip(rec, out)
    with gzip.open(dst, "wt", compresslevel=9) as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"{dst}: {os.path.getsize(dst)} bytes (from {os.path.getsize(src)}), round trip checked")


if __name__ == "__main__":
    main()
