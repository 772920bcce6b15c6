"""Cut a small subset out of a plan recording (tasks by id, token counts up to a bound), for test fixtures; or a
recording without the tasks of one dtype (recorded again elsewhere).

    python -m tools.library.recording_subset REC.json.gz --task ID [--task ID ...] --max-t T -o OUT.json.gz
    python -m tools.library.recording_subset REC.json.gz --without-dtype DTYPE -o OUT.json.gz

The subset keeps the recording's header (device, setting, method), the chosen tasks' runs of token counts that
end at or below ``T`` (their ``ms`` becomes ``1-T``), and only the kernel names, trace summaries, errors and plans
they use, re-interned; it says what it was cut from (``subset_of``: file, sha256, tasks, bound).  The plans are
copied, never changed: a catalog built from the subset answers each kept call as one built from the whole does.
``--without-dtype`` keeps every other task whole (all its token counts) and the whole header, and says which tasks
it left out (``subset_of``).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.catalog_build import read_recording, token_counts

KEEP_HEADER = ("format", "name", "setting", "method", "method_text", "fields", "plan_fields", "device")


def subset(rec: dict[str, Any], task_ids: list[int], max_t: int | None) -> dict[str, Any]:
    """The recording's tasks ``task_ids`` (their runs ending at or below ``max_t``; None: whole, header kept)."""
    by_id = {int(t["id"]): t for t in rec["tasks"]}
    missing = [i for i in task_ids if i not in by_id]
    if missing:
        raise TcsmtError(f"no tasks {missing} in the recording")
    tables = rec["tables"]
    new: dict[str, list[Any]] = {"kernels": [], "lt": [], "errors": [], "plans": []}
    index: dict[str, dict[str, int]] = {k: {} for k in new}

    def intern(kind: str, value: Any) -> int:
        key = json.dumps(value, sort_keys=True)
        if key not in index[kind]:
            index[kind][key] = len(new[kind])
            new[kind].append(value)
        return index[kind][key]

    def plan(pid: int) -> int:
        p = list(tables["plans"][pid])
        p[0] = [intern("kernels", tables["kernels"][k]) for k in p[0]]
        p[7] = [intern("lt", tables["lt"][x]) for x in p[7]]
        p[8] = None if p[8] is None else intern("errors", tables["errors"][p[8]])
        p[9] = None if p[9] is None else intern("errors", tables["errors"][p[9]])
        return intern("plans", p)

    if max_t is None:  # whole tasks: every run kept, the plans re-interned
        tasks = [{**by_id[i], "runs": {**by_id[i]["runs"], "plan": [plan(int(x)) for x in by_id[i]["runs"]["plan"]]}}
                 for i in task_ids]
        return {**{k: v for k, v in rec.items() if k not in ("tables", "tasks")}, "tables": new, "tasks": tasks}
    tasks = []
    for i in task_ids:
        t = by_id[i]
        if t.get("kind") != "mrange" or "runs" not in t:
            raise TcsmtError(f"task {i}: only columnar runs of token counts are cut (kind mrange, runs)")
        ms = token_counts(t["ms"])
        if ms[: max_t] != list(range(1, min(max_t, len(ms)) + 1)):
            raise TcsmtError(f"task {i}: its token counts do not start 1, 2, 3, ...")
        cols = t["runs"]
        keep = [j for j, hi in enumerate(cols["t_last"]) if int(hi) <= max_t]
        runs = {k: [cols[k][j] for j in keep] for k in cols if k != "last"}
        if "last" in cols:  # sparse: {row index: [grids, workspace] at t_last} where they differ from t_first's
            pos = {j: n for n, j in enumerate(keep)}
            runs["last"] = {str(pos[int(j)]): v for j, v in cols["last"].items() if int(j) in pos}
        runs["plan"] = [plan(int(p)) for p in runs["plan"]]
        tasks.append({**{k: v for k, v in t.items() if k not in ("runs", "secs")}, "ms": f"1-{max_t}",
                      "n": max_t, "runs": runs})
    out = {k: rec[k] for k in KEEP_HEADER if k in rec}
    out["tables"] = new
    out["tasks"] = tasks
    return out


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("recording", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--task", "tasks", type=int, multiple=True, help="a task id to keep; repeatable")
@click.option("--max-t", type=int, help="keep the runs that end at or below this token count")
@click.option("--without-dtype", help="keep every task but those of this dtype (the list's name: tf32, bf16, ...)")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--force", is_flag=True)
def recording_subset_cmd(recording: Path, tasks: tuple[int, ...], max_t: int | None, without_dtype: str | None,
                         out: Path, force: bool) -> int:
    if out.exists() and not force:
        raise TcsmtError(f"{out} exists (pass --force to replace it)")
    if (without_dtype is None) == (not tasks or max_t is None):
        raise TcsmtError("give --task and --max-t, or --without-dtype alone")
    rec = read_recording(recording)
    sha = hashlib.sha256(recording.read_bytes()).hexdigest()
    if without_dtype is not None:
        left = [int(t["id"]) for t in rec["tasks"] if t.get("dtype") == without_dtype]
        res = subset(rec, [int(t["id"]) for t in rec["tasks"] if t.get("dtype") != without_dtype], None)
        res["subset_of"] = {"file": recording.name, "sha256": sha, "without_dtype": without_dtype,
                            "tasks_left_out": left, "command": f"python -m tools.library.recording_subset "
                                                              f"{recording.name} --without-dtype {without_dtype}"}
    else:
        res = subset(rec, list(tasks), max_t)
        res["subset_of"] = {"file": recording.name, "sha256": sha, "tasks": list(tasks), "max_t": max_t,
                            "command": f"python -m tools.library.recording_subset {recording.name} "
                                       + " ".join(f"--task {t}" for t in tasks) + f" --max-t {max_t}"}
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write(json.dumps(res, separators=(",", ":")).encode())
    rows = sum(len(t["runs"]["plan"]) for t in res["tasks"])
    print(f"wrote {out}: {len(res['tasks'])} tasks, {rows} runs, {len(res['tables']['plans'])} plans "
          f"({out.stat().st_size} bytes)")
    return 0


main = script_main(recording_subset_cmd, "python -m tools.library.recording_subset")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
