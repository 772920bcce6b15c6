"""``python -m tcsmt.peers.mmasim``: run MMA-Sim and tcsmt side by side on every MMA-Sim instruction path.

MMA-Sim (Xie, Wang, Yang, Yang; Microsoft Research; arXiv 2511.10909; github microsoft/MMA-Sim) is imported
at run time (``--mmasim DIR`` puts a checkout on the path; it needs torch); nothing of it is copied into
tcsmt.  For each of its instruction paths (:mod:`tcsmt.peers.mmasim_paths`) the same seeded rows
(:mod:`tcsmt.peers.rows`) go through MMA-Sim's simulator object and through tcsmt's counterpart, and
the output bit patterns are compared (two NaNs count as equal: NaN payloads are no arithmetic).
Where tcsmt's primary reading disagrees, the rows run again under the named hypotheses that carry
MMA-Sim's reading (``ARCH:zero_exp126,no_floor``, ...); every disagreement left then is reported.

MMA-Sim's simulator objects compute every output of an M x N instruction from its own row of A, column
of B and element of C (and scales) in a loop; the run sets M = N = 1 on the object so that one call is
one row.  ``--list`` prints the paths and their counterparts without running anything; ``--table FILE`` prints
the per-path table of a result file (no MMA-Sim needed).

Exit status: 0 when every path that both run agrees (under the primary reading or the hypotheses), 1
when a disagreement is left, 2 on a bad argument or when MMA-Sim cannot be imported.
"""
from __future__ import annotations

import datetime as _dt
import sys
import time
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import numpy as np

from tcsmt.arith.formats import NAN, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import resolve
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.check import git_commit
from tcsmt.io import files, load
from tcsmt.io.limits import RANDOM_N, SHOW
from tcsmt.io.options import SEED, bounded_int
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.peers.mmasim_paths import MMASIM_READINGS, Counterpart, MmaSimPath, counterpart, enumerate_paths
from tcsmt.peers.rows import KINDS, Rows, make_rows
from tcsmt.sim.simulator import convert_bits, simulate_params

MMASIM_REPO = "github.com/microsoft/MMA-Sim"
PAPER = "Xie, Wang, Yang, Yang: MMA-Sim: Bit-Accurate Reference Model of Tensor Cores and Matrix Cores, arXiv 2511.10909"
_TORCH = {"fp64": "float64", "fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16",
          "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e4m3fnuz": "float8_e4m3fnuz",
          "e5m2fnuz": "float8_e5m2fnuz", "ue8m0": "float8_e8m0fnu", "ue4m3": "float8_e4m3fn"}


class MmaSim:
    """The imported MMA-Sim: its simulator classes by api name, its qualifier lists, and torch."""

    def __init__(self, directory: Path | None):
        if directory is not None:
            if not directory.is_dir():
                raise TcsmtError(f"--mmasim {directory}: no such directory")
            sys.path.insert(0, str(directory))
        try:
            import torch
            from mmasim.isa import amd as amd_isa
            from mmasim.isa.nv_ptx import nv_mma
            from mmasim.simulator import amd, nv_ptx
        except Exception as exc:  # ImportError, or a broken install raising anything on import
            where = f" from {directory}" if directory else ""
            raise TcsmtError(f"MMA-Sim is not importable{where} ({type(exc).__name__}: {exc}); fetch "
                             f"{MMASIM_REPO} and give its directory with --mmasim (it needs torch)") from None
        self.torch = torch
        self.sim = {"mma": nv_ptx.mma, "mma_block_scale": nv_ptx.mma_block_scale, "wgmma": nv_ptx.wgmma,
                    "tcgen05mma": nv_ptx.tcgen05mma, "tcgen05mma_block_scale": nv_ptx.tcgen05mma_block_scale,
                    "mfma": amd.mfma}
        self.isa = {"mma": nv_mma.arch_mma_qualifiers, "mma_block_scale": nv_mma.arch_mma_block_scale_qualifiers,
                    "mfma": amd_isa.arch_mfma_qualifiers}
        self.directory = directory

    def tensor(self, bits: np.ndarray, fmt: str, packing: int = 1) -> Any:
        """A torch tensor of MMA-Sim's dtype holding these patterns (e2m1: uint8, two per byte with the even k in
        the low nibble where ``packing`` is 2)."""
        f = get_format(fmt)
        if fmt == "e2m1":
            x = bits.astype(np.uint8)
            if packing == 2:
                x = (x[0::2] | (x[1::2] << 4)).astype(np.uint8)
            return self.torch.from_numpy(x.copy())
        store = np.dtype(f.dtype)
        arr = bits.astype(store).view(np.uint8 if store.itemsize == 1 else f"int{8 * store.itemsize}").copy()
        return self.torch.from_numpy(arr).view(getattr(self.torch, _TORCH[fmt]))

    def patterns(self, d: Any, fmt: str) -> int:
        width = get_format(fmt).storage_bits
        ints = {64: self.torch.int64, 32: self.torch.int32, 16: self.torch.int16}
        return int(d.reshape(-1)[0].view(ints[width]).item()) & ((1 << width) - 1)

    def run(self, path: MmaSimPath, rows: Rows) -> tuple[np.ndarray, np.ndarray, str]:
        """MMA-Sim's outputs (patterns), a mask of the rows it computed, and its first error message."""
        obj = path.build(self.sim)
        obj.m = obj.n = 1   # one output per call; each output reads only its row, column and C
        n, K = rows.a.shape
        kp = K // path.packing
        out = np.zeros(n, np.uint64)
        ok = np.ones(n, bool)
        first = ""
        for i in range(n):
            A = self.tensor(rows.a[i], path.a, path.packing).reshape(1, kp)
            B = self.tensor(rows.b[i], path.b, path.packing).reshape(kp, 1)
            C = self.tensor(rows.c[i:i + 1], path.c).reshape(1, 1)
            args = [A, B, C]
            if path.scale:
                args += [self.tensor(rows.sa[i], path.scale).reshape(1, -1),  # type: ignore[index]
                         self.tensor(rows.sb[i], path.scale).reshape(-1, 1)]  # type: ignore[index]
            try:
                out[i] = self.patterns(obj(*args), path.d)
            except Exception as exc:  # MMA-Sim's own failure on this row: counted and reported
                ok[i] = False
                first = first or f"{type(exc).__name__}: {exc}"
                if i == 0:  # the path does not run at all
                    ok[:] = False
                    break
        return out, ok, first


def _same(x: np.ndarray, y: np.ndarray, fmt: str) -> np.ndarray:
    f = get_format(fmt)
    xs, ys = x.astype(f.dtype), y.astype(f.dtype)
    return (xs == ys) | ((f.classify(xs) == NAN) & (f.classify(ys) == NAN))


def _tcsmt(cp: Counterpart, spec: str, rows: Rows, c_bits: np.ndarray) -> tuple[np.ndarray, ModelParams]:
    p = cp.params
    q = resolve(spec, p.in_fmt, p.out_fmt, None if spec.split(":")[0] in ("ieee-fma64", "ieee-fma32") else p.instr)
    if spec == cp.arch and q.semantic_key() != p.semantic_key():
        raise TcsmtError(f"{spec} {p.instr}: the resolved path is not the counterpart found")  # pragma: no cover
    return simulate_params(q, rows.a, rows.b, c_bits, bits=True, sa=rows.sa, sb=rows.sb).astype(np.uint64), q


def _hex(bits: np.ndarray, fmt: str) -> str:
    digits = get_format(fmt).hex_digits
    return "".join(f"{int(x):0{digits}x}" for x in np.asarray(bits).reshape(-1))


def _pick(rows_idx: np.ndarray, kind: np.ndarray, limit: int) -> list[int]:
    """Up to ``limit`` of these rows, taken from the kinds in turn."""
    by_kind = [list(rows_idx[kind[rows_idx] == k]) for k in range(len(KINDS))]
    out: list[int] = []
    while len(out) < limit and any(by_kind):
        for lst in by_kind:
            if lst and len(out) < limit:
                out.append(int(lst.pop(0)))
    return sorted(out)


def compare_path(ms: MmaSim, path: MmaSimPath, n: int, seed: int, examples: int) -> dict[str, Any]:
    """The comparison of one path: counts, and the example rows (inputs, both outputs) for the vectors file."""
    entry: dict[str, Any] = {"arch": path.arch, "instruction": path.api, "qualifier": path.qualifier,
                             "formats": {"a": path.a, "b": path.b, "c": path.c, "d": path.d},
                             "scale": f"{path.scale} per {path.block}" if path.scale else ""}
    cp = counterpart(path)
    if isinstance(cp, str):
        return {**entry, "tcsmt": None, "reason": cp, "rows": 0}
    p = cp.params
    entry["tcsmt"] = {"spec": cp.arch, "instr": p.instr, "in": p.in_fmt, "b": p.b_format, "out": p.out_fmt,
                      "K": cp.K, "note": cp.note}
    rows = make_rows(path.a, path.b, path.c, path.k, n, seed, path.scale, path.block)
    t0 = time.process_time()
    d_m, ok, err = ms.run(path, rows)
    entry["mmasim_seconds"] = round(time.process_time() - t0, 1)
    if 2 * int((~ok).sum()) >= n:  # MMA-Sim does not run this path (at most the rows it returns early: NaN)
        return {**entry, "rows": 0, "mmasim_errors": int((~ok).sum()),
                "reason": f"MMA-Sim raises on {int((~ok).sum())} of {n} rows ({err})"}
    c_t = convert_bits(rows.c, get_format("fp16"), get_format("fp32")) if cp.widen_c else rows.c
    d_p, _ = _tcsmt(cp, cp.arch, rows, c_t)
    differ = ~_same(d_m, d_p, path.d) & ok
    entry.update(rows=int(ok.sum()), mmasim_errors=int((~ok).sum()), mmasim_error=err or None,
                 disagree_primary=int(differ.sum()),
                 disagree_primary_by_kind={KINDS[k]: int((differ & (rows.kind == k)).sum())
                                           for k in range(len(KINDS)) if (differ & (rows.kind == k)).any()})
    d_h = d_p
    spec_h = cp.spec(hypotheses=True)
    if differ.any():
        entry["hypothesis"] = spec_h if (cp.hypotheses or cp.overrides) else None
        entry["hypothesis_readings"] = [MMASIM_READINGS[h] for h in cp.hypotheses]
        entry["hypothesis_overrides"] = cp.overrides  # MMA-Sim readings without a named hypothesis on this path
        if cp.hypotheses or cp.overrides:
            d_h, _ = _tcsmt(cp, spec_h, rows, c_t)
        left = ~_same(d_m, d_h, path.d) & ok
        entry["disagree_hypothesis"] = int(left.sum())
        entry["left_examples"] = [{"row": int(i), "kind": KINDS[rows.kind[i]], "a": _hex(rows.a[i], path.a),
                                   "b": _hex(rows.b[i], path.b), "c": _hex(rows.c[i], path.c),
                                   **({"sa": _hex(rows.sa[i], path.scale), "sb": _hex(rows.sb[i], path.scale)}  # type: ignore[index]
                                      if path.scale else {}),
                                   "mmasim": _hex(d_m[i], path.d), "tcsmt": _hex(d_h[i], path.d)}
                                  for i in np.flatnonzero(left)[:3]]
    keep = _pick(np.flatnonzero(differ), rows.kind, examples) + _pick(np.flatnonzero(~differ & ok), rows.kind, 4)
    entry["_vectors"] = {
        "label": path.label, "spec": cp.arch, "spec_hypothesis": spec_h, "in": p.in_fmt, "b": p.b_format,
        "c": path.c, "out": p.out_fmt, "instr": p.instr, "K": cp.K, "widen_c": cp.widen_c,
        "scale": path.scale, "rows": [
            {"kind": KINDS[rows.kind[i]], "a": _hex(rows.a[i], path.a), "b": _hex(rows.b[i], path.b),
             "c": _hex(rows.c[i], path.c),
             **({"sa": _hex(rows.sa[i], path.scale), "sb": _hex(rows.sb[i], path.scale)}  # type: ignore[index]
                if path.scale else {}),
             "mmasim": _hex(d_m[i], path.d), "primary": _hex(d_p[i], path.d), "hypothesis": _hex(d_h[i], path.d)}
            for i in keep]}
    return entry


def table_lines(entries: list[dict[str, Any]]) -> list[str]:
    """The per-path table (markdown) of a result."""
    out = ["| MMA-Sim path | tcsmt | rows | differ (primary) | MMA-Sim reading (hypotheses) | differ then |",
           "|---|---|---:|---:|---|---:|"]
    for e in entries:
        name = f"{e['arch']} {e['instruction']} {e['qualifier']}"
        if e.get("tcsmt") is None:
            out.append(f"| {name} | none: {e['reason']} | 0 | - | - | - |")
            continue
        t = e["tcsmt"]
        where = f"`{t['spec']}` {t['instr']}" + (f" ({t['note']})" if t["note"] else "")
        if not e["rows"]:
            out.append(f"| {name} | {where} | 0 | - | {e['reason']} | - |")
            continue
        hyp = e.get("hypothesis")
        over = " (override: no named hypothesis)" if e.get("hypothesis_overrides") else ""
        out.append(f"| {name} | {where} | {e['rows']} | {e['disagree_primary']} | "
                   f"{'`' + hyp + '`' + over if hyp else '-'} | {e.get('disagree_hypothesis', '-') if e['disagree_primary'] else '-'} |")
    return out


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--mmasim", type=click.Path(path_type=Path), default=None,
              help="directory holding MMA-Sim's package mmasim/")
@click.option("--mmasim-commit", default="", help="the MMA-Sim commit (read with git where DIR is a checkout)")
@click.option("--rows", type=bounded_int(RANDOM_N), default=20_000, show_default=True, help="rows per path")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--only", default="", help="only the paths whose label contains this text")
@click.option("--examples", type=bounded_int(SHOW, lower=0), default=16, show_default=True,
              help="disagreeing rows per path kept for --vectors")
@click.option("--list", "list_", is_flag=True, help="print the paths and their counterparts; run nothing")
@click.option("--json", "json_", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the result here")
@click.option("--vectors", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write example rows with both outputs here")
@click.option("--force", is_flag=True, help="replace the --json / --vectors files")
@click.option("--table", type=click.Path(path_type=Path), default=None,
              help="print the per-path table of a --json result; run nothing")
def peer_mmasim_cmd(**kw: Any) -> int:
    args = SimpleNamespace(**kw)
    args.list, args.json = kw["list_"], kw["json_"]
    if args.table:
        try:
            doc = load.read_json(args.table, "result file")
            lines = table_lines(doc["paths"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TcsmtError(f"--table {args.table}: not a result of this tool ({type(exc).__name__}: {exc})") from None
        print("\n".join(lines))
        return 0
    ms = MmaSim(args.mmasim)
    commit = args.mmasim_commit or (git_commit(args.mmasim) if args.mmasim else "")
    commit = "" if commit == "unknown" else commit
    if (args.json or args.vectors) and not commit:
        raise TcsmtError("--json/--vectors record MMA-Sim's commit: give --mmasim-commit (or --mmasim a git checkout)")
    outs = [files.output(f, args.force) for f in (args.json, args.vectors) if f]  # claimed before the run
    tcsmt_commit = git_commit()  # the code that runs (read before it runs)
    paths = [p for p in enumerate_paths(ms.isa, ms.sim) if args.only in p.label]
    if not paths:
        raise TcsmtError(f"--only {args.only!r} matches no MMA-Sim path")
    if args.list:
        for p in paths:
            cp = counterpart(p)
            print(f"{p.label}: " + (f"none: {cp}" if isinstance(cp, str) else
                                    f"{cp.arch} {cp.instr} K={cp.K}" + (f" ({cp.note})" if cp.note else "")
                                    + (f"; MMA-Sim reading {cp.spec(True)}" if cp.hypotheses or cp.overrides else "")))
        return 0
    entries = []
    for i, p in enumerate(paths):
        e = compare_path(ms, p, args.rows, args.seed + zlib.crc32(p.label.encode()), args.examples)
        entries.append(e)
        state = (e.get("reason") or "") if not e["rows"] else (
            f"{e['rows']} rows, {e['disagree_primary']} differ" +
            (f", {e['disagree_hypothesis']} under {e.get('hypothesis') or 'no hypothesis'}" if e["disagree_primary"] else ""))
        print(f"[{i + 1}/{len(paths)}] {p.label}: {state}", flush=True)
    compared = [e for e in entries if e["rows"]]
    left = [e for e in compared if e["disagree_primary"] and e.get("disagree_hypothesis")]
    totals = {"paths": len(entries), "compared": len(compared), "no_counterpart": sum(1 for e in entries if not e["tcsmt"]),
              "mmasim_cannot_run": sum(1 for e in entries if e["tcsmt"] and not e["rows"]),
              "rows": sum(e["rows"] for e in compared),
              "agree_primary": sum(1 for e in compared if not e["disagree_primary"]),
              "agree_under_hypothesis": sum(1 for e in compared if e["disagree_primary"] and not e.get("disagree_hypothesis")
                                            and not e.get("hypothesis_overrides")),
              "agree_with_override": sum(1 for e in compared if e["disagree_primary"] and not e.get("disagree_hypothesis")
                                         and e.get("hypothesis_overrides")),
              "left": len(left)}
    print(f"{totals['paths']} MMA-Sim paths: {totals['compared']} compared ({totals['rows']} rows), "
          f"{totals['agree_primary']} agree under tcsmt's primary reading, {totals['agree_under_hypothesis']} under "
          f"the named hypotheses that carry MMA-Sim's reading, {totals['agree_with_override']} only with an override "
          f"(no named hypothesis), {totals['left']} disagree still; "
          f"{totals['no_counterpart']} without a tcsmt counterpart, {totals['mmasim_cannot_run']} that MMA-Sim cannot run")
    head = {"tool": "python -m tcsmt.peers.mmasim", "mmasim": {"repo": MMASIM_REPO, "commit": commit, "paper": PAPER},
            "tcsmt_commit": tcsmt_commit,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "seed": args.seed, "seed_per_path": "seed + crc32(path label)", "rows_per_path": args.rows, "only": args.only, "kinds": list(KINDS)}
    vectors = [e.pop("_vectors") for e in entries if "_vectors" in e]
    if args.json:
        print(f"written: {outs[0].write_json({**head, 'totals': totals, 'paths': entries})}")
    if args.vectors:
        print(f"written: {outs[-1].write_json({**head, 'paths': vectors})}")
    return 1 if left else 0


main = script_main(peer_mmasim_cmd, "python -m tcsmt.peers.mmasim")

if __name__ == "__main__":  # pragma: no cover
    try:
        raise SystemExit(main())
    except BrokenPipeError:  # output piped into head: stop quietly
        sys.stderr.close()
        raise SystemExit(0) from None
