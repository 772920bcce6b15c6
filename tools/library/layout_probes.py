"""Split-K probes of the operand layouts the plan grid did not probe (evidence/library_plans.md, "Layouts").

    python -m tools.library.layout_probes lists DIR [--gpu G] [--targeted]  # DIR/G_probe_list.json, DIR/variants.json
    OUT=RAW bash tools/device/layout_probes.sh LIST [BUDGET_S]              # on the device (numpy and torch only)
    python -m tools.library.layout_probes ingest GPU RAW --command CMD      # -> evidence/library/GPU_layout_probes.json

The families of ``evidence/h100_cublas_plans.json.gz`` (kernel regex, reductionScheme, grain, slices, reduction) were
read from output bits on the grid's layouts: ``torch.mm`` with both operands row-major and ``_scaled_mm``.  The
recordings (evidence/library/recordings) hold split-K calls of other layouts (weight and input gradients, GPT-2
Conv1D, ``linear``).  A **variant** is (family, layout tag): the family by :func:`tcsmt.library.families.family_of`
(kernels and reductionScheme of the recorded plan), the tag the last ``_`` field of an nvjet kernel's name
(``NNT``, ``NTT``, ``TNN`` ...) or the ``_nn_`` / ``_nt_`` / ``_tn_`` / ``_tt_`` token of an sm80 cutlass kernel.

``lists`` reads every recording of a GPU (all settings: the counts), picks from those recorded under torch's default
settings the calls to probe: per variant its most frequent S values and its largest, and one call of each recorded
(op, a_t, b_t, dtypes, bias) group, each the cheapest recorded call (operands and probe calls) with that plan, with
the fields exactly as recorded (``a_t`` / ``b_t``: tools/device/record_plans.py ``FIELDS``), the recorded kernels
and S beside them; only calls whose rule slices are two or more and 16 or more k wide (what the slice probe can
read).  ``--targeted`` appends per variant, one per class of K (:func:`k_class`), the recorded call that best tells
apart the slice rules the H100 run left open (:func:`tools.library.layout_judge.alternative_starts`).  ``ingest``
judges each probe against the family's own rule (:func:`tools.library.layout_judge.judge`: the traced S, kernels
and reductionScheme of the probed call are the recorded ones, the slice starts read from the bits are
``chunk = ceil(ceil(K/G)/S)*G`` with the family's grain G, and the reduction probe agrees on every column with the
family's reduction).  A variant is ``confirmed`` only where every probe of it agreed; else ``refuted`` with what the
bits said; ``not probed`` where no probe of it ran.
"""
from __future__ import annotations

import collections
import json
import re
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.io.load import read_json
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.families import family_of
from tools.device import recordings as R
from tools.library.layout_judge import alternative_starts, dump, group_of, rule_starts, summarize

REPO = Path(__file__).resolve().parents[2]
RECORDINGS = REPO / "evidence" / "library" / "recordings"
PLANS = REPO / "evidence" / "h100_cublas_plans.json.gz"
GRID_PROBES = {"h100": [REPO / "evidence" / "h100_library_probes.json.gz"],
               "h200": [REPO / "evidence" / "h200_library_confirm_probes.json"]}
OPS = ("mm", "linear", "addmm")
"""Ops the probe runs (``library_calls.call_torch``); ``matmul`` / ``bmm`` calls are not picked."""
MAX_ELEMS = 1 << 26
"""Largest operands + output of a picked call (elements)."""
MAX_COST = 3 * 10**8
"""Largest :func:`probe_cost` of a picked call (a few seconds on the device's host)."""


def layout_tag(kernels: list[str]) -> str | None:
    """The layout tag of a split-K plan's kernels (nvjet: the name's last ``_`` field; sm80 cutlass: its
    ``_nn_`` / ``_nt_`` / ``_tn_`` / ``_tt_`` token); several tags joined by ``/``."""
    tags = set()
    for k in kernels:
        if k.startswith("nvjet_"):
            tags.add(k.rsplit("_", 1)[-1])
        elif k.startswith("cutlass::"):
            m = re.search(r"_(nn|nt|tn|tt)_", k)
            if m:
                tags.add(m.group(1))
    return "/".join(sorted(tags)) or None


def probe_cost(c: dict[str, Any], S: int) -> int:
    """A probe's rough work: the slice probe's calls (ceil(K/8/N) of them) times operand and output elements, and
    the reduction probe's per-column hypotheses on the host."""
    M, N, K = c["M"], c["N"], c["K"]
    return -(-K // (8 * N)) * (M * K + K * N + M * N) + 400 * N * S


def _pickable(c: dict[str, Any], max_elems: int = MAX_ELEMS) -> bool:
    M, N, K = c["M"], c["N"], c["K"]
    return (c["op"] in OPS or c["op"] == "scaled_mm") and int(c.get("batch") or 1) == 1 and \
        float(c.get("alpha", 1.0)) == 1.0 and M * K + K * N + M * N <= max_elems


def _items(rec: dict[str, Any]):
    """(calls, plan id, calls of the plan, more calls) of every recorded call: token-count runs as their first two
    token counts (the cheapest calls of the run; the second one often has another remainder) weighted by the run's
    calls, and, where the token count is K, the first K of every other :func:`k_class` in the run (odd K with
    K % 64 >= 8 apart) as ``more`` (for :func:`targeted` only)."""
    for task in rec["tasks"]:
        if task["kind"] == "mrange":
            ms = R.task_values(task)
            pos = {t: i for i, t in enumerate(ms)}
            for r in R.iter_runs(task):
                n = pos[r[1]] - pos[r[0]] + 1
                firsts = ms[pos[r[0]]:pos[r[0]] + min(n, 2)]
                more = []
                if task["vary"] == "K":  # the first K of each k_class in the run's first 130 token counts
                    seen = {k_class(t) for t in firsts}
                    for t in ms[pos[r[0]]:pos[r[0]] + min(n, 130)]:
                        kc = k_class(t)
                        if kc not in seen:
                            seen.add(kc)
                            more.append(t)
                yield ([{**task["call"], task["vary"]: t} for t in firsts], r[2], n,
                       [{**task["call"], task["vary"]: t} for t in more])
        else:
            for c, pid, _g, _w in R.iter_list(task, rec["fields"]):
                yield [c], pid, 1, []


def scan(gpu: str, families: dict[str, Any], rec_dir: Path = RECORDINGS) -> dict[tuple[str, str], dict[str, Any]]:
    """Per variant of a GPU's recordings: calls (all files, all settings), calls per S, kernel names, calls per
    (op, layout, dtypes) group, and the probe candidates (default settings) per (S, group): the cheapest call."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    files = sorted(p for p in rec_dir.glob(f"{gpu}_*.json.gz"))
    if not files:
        raise TcsmtError(f"no recordings {gpu}_*.json.gz in {rec_dir}")
    for path in files:
        rec = R.load(str(path))
        default = (rec.get("setting") or {}).get("name") == "default"
        cache: dict[int, Any] = {}
        for calls, pid, n, more in _items(rec):
            if pid not in cache:
                p = R.plan_dict(rec, pid)
                S = int(p["split_k"] or 1)
                fam = family_of({"kernels": p["kernels"], "reduction_scheme": p["reduction_scheme"]}, families,
                                path.name) if S > 1 else None
                cache[pid] = (fam[0], layout_tag(p["kernels"]), S, p) if fam else None
            v = cache[pid]
            if v is None:
                continue
            fam, tag, S, p = v
            e = out.setdefault((fam, str(tag)), {"calls": 0, "calls_default_settings": 0, "split_k": collections.Counter(),
                                                  "kernels": collections.Counter(), "groups": collections.Counter(),
                                                  "files": collections.Counter(), "candidates": {}})
            e["calls"] += n
            e["split_k"][S] += n
            e["files"][path.name.removesuffix(".json.gz")] += n
            for k in p["kernels"]:
                e["kernels"][k] += n
            g = group_of(calls[0])
            e["groups"][g] += n
            if not default:
                continue
            e["calls_default_settings"] += n
            for c in calls + more:
                if not _pickable(c):
                    continue
                starts = rule_starts(families[fam], c["K"], S)
                n_slices = len(starts)
                if n_slices < 2 or starts[1] < 16:
                    # no boundary to read (slices past K are empty), or slices narrower than the slice probe's
                    # groups of 16 k (it reads one start per group)
                    continue
                # calls whose S slices all hold data first
                cost = probe_cost(c, S) * (1 if n_slices == S else 16)
                if cost > MAX_COST:
                    continue
                rec_plan = {"kernels": p["kernels"], "split_k": S, "reduction_scheme": p["reduction_scheme"],
                            "file": path.name}
                best = e["candidates"].get((S, g))
                if (best is None or cost < best[0]) and c in calls:  # ``more``: only for ``targeted``
                    e["candidates"][(S, g)] = (cost, {**c, "recorded": rec_plan})
                key = (S, g, k_class(c["K"]))
                best = e.setdefault("by_k_class", {}).get(key)
                if best is None or cost < best[0]:
                    e["by_k_class"][key] = (cost, {**c, "recorded": rec_plan})
    return out


def k_class(K: int) -> str:
    """What of K a grain rule can depend on: divisible by 64, by 32, by 8, not by 8 (K % 64 below 8, or not)."""
    if K % 8:
        return "K%8!=0" + (" K%64>=8" if K % 64 >= 8 else "")
    return "K%64=0" if K % 64 == 0 else "K%32=0" if K % 32 == 0 else "K%8=0"


def targeted(e: dict[str, Any], fam: dict[str, Any], cap: int = 5) -> list[dict[str, Any]]:
    """Calls that tell the open slice rules apart (``alternative_starts``), one per class of K (:func:`k_class`):
    the cheapest call whose alternatives give the most distinct readable starts (two or more slices, 16 or more k
    wide), the variant's more frequent S first."""
    picked: list[dict[str, Any]] = []
    for kc in ("K%64=0", "K%32=0", "K%8!=0 K%64>=8", "K%8!=0", "K%8=0"):
        best = None
        for (S, _g, kc2), (cost, c) in (e.get("by_k_class") or {}).items():
            if kc2 != kc:
                continue
            alts = alternative_starts(fam, c["K"], S, c["a_dtype"] == "float32")
            if any(len(v) < 2 or v[1] < 16 for v in alts.values()):
                continue
            distinct = len({tuple(v) for v in alts.values()})
            score = (distinct, e["split_k"][S], -cost)
            if distinct >= 2 and (best is None or score > best[0]):
                best = (score, c)
        if best is not None and len(picked) < cap:
            picked.append(best[1])
    return picked


def pick(e: dict[str, Any], n_top: int = 3, cap: int = 10) -> list[dict[str, Any]]:
    """The probe calls of one variant: the cheapest call at each of its n_top most frequent S and at its largest S
    (among S with a probe-able call), then one call of every group at the group's most frequent S, up to cap."""
    cands = e["candidates"]
    by_s: dict[int, list] = collections.defaultdict(list)
    for (S, _g), (cost, c) in cands.items():
        by_s[S].append((cost, c))
    if not by_s:
        return []
    order = sorted(by_s, key=lambda s: (-e["split_k"][s], s))
    wanted = [*order[:n_top], max(by_s)]
    picked: list[dict[str, Any]] = []

    def add(c: dict[str, Any]) -> None:
        if c not in picked and len(picked) < cap:
            picked.append(c)

    for S in dict.fromkeys(wanted):
        add(min(by_s[S], key=lambda x: x[0])[1])
    # more frequent groups first; ties in reverse name order (with bias before without: the first run's choice)
    groups = sorted(sorted({g for (_S, g) in cands}, reverse=True), key=lambda g: -e["groups"][g])
    for g in groups:
        mine = [(S, cost, c) for (S, g2), (cost, c) in cands.items() if g2 == g]
        if any(group_of(c) == g for c in picked):
            continue
        S_best = max(mine, key=lambda x: (e["split_k"][x[0]], -x[1]))
        add(S_best[2])
    return picked


def grid_tags(gpu: str, families: dict[str, Any]) -> set[tuple[str, str]]:
    """The variants the committed grid probes of a GPU covered (their kernels and traced scheme)."""
    seen = set()
    for path in GRID_PROBES[gpu]:
        for p in read_json(path, "probe file")["probes"]:
            scheme = [m.group(1) for a in p.get("lt_algo") or [] for m in [re.search(r"reductionScheme=(\w+)", a)] if m]
            fam = family_of({"kernels": p.get("kernels") or [], "reduction_scheme": scheme[0] if scheme else None},
                            families, path.name)
            if fam and (p.get("lt_split_k") or 1) > 1:
                seen.add((fam[0], str(layout_tag(p.get("kernels") or []))))
    return seen


def _families() -> dict[str, Any]:
    return read_json(PLANS, "recorded plan file")["families"]


@click.group(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
def layout_cmd() -> None:
    pass


@layout_cmd.command("lists", help="write DIR/GPU_probe_list.json and DIR/variants.json from the recordings")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--gpu", "gpus", multiple=True, default=("h100", "h200"), show_default=True)
@click.option("--targeted", "targeted_calls", is_flag=True,
              help="append, per variant, the calls that tell the slice rules the H100 run left open apart")
def lists_cmd(out: Path, gpus: tuple[str, ...], targeted_calls: bool) -> int:
    fams = _families()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    for gpu in gpus:
        stats = scan(gpu, fams)
        grid = grid_tags(gpu, fams)
        plist: list[dict[str, Any]] = []
        per_variant = {}
        for key in sorted(stats):
            calls = pick(stats[key], n_top=2 if key in grid else 3, cap=5 if key in grid else 10)
            per_variant[key] = [{**c, "config": " | ".join(key)} for c in calls]
        # round robin over the variants (the unprobed ones first), so that a cut-off run covers all of them
        order = sorted(per_variant, key=lambda k: (k in grid, k))
        for i in range(max((len(v) for v in per_variant.values()), default=0)):
            plist += [per_variant[k][i] for k in order if i < len(per_variant[k])]
        if targeted_calls:  # after the list above, so that its order and calls stay those of the first run
            extra = {k: [{**c, "config": " | ".join(k), "targeted": True} for c in targeted(stats[k], fams[k[0]])
                         if c not in [{x: y for x, y in p.items() if x != "config"} for p in per_variant[k]]]
                     for k in order}
            for i in range(max((len(v) for v in extra.values()), default=0)):
                plist += [extra[k][i] for k in order if i < len(extra[k])]
        (out / f"{gpu}_probe_list.json").write_text(json.dumps(plist, indent=0) + "\n")
        summary[gpu] = [{"family": k[0], "layout": k[1], "grid_probed": k in grid, "calls": v["calls"],
                         "calls_default_settings": v["calls_default_settings"],
                         "split_k": {str(s): n for s, n in sorted(v["split_k"].items())},
                         "groups": dict(v["groups"].most_common()), "picked": len(per_variant[k])}
                        for k, v in sorted(stats.items())]
        click.echo(f"{gpu}: {len(stats)} variants, {len(plist)} probes -> {out / f'{gpu}_probe_list.json'}")
        for e in summary[gpu]:
            top = sorted(e["split_k"].items(), key=lambda x: -x[1])[:6]
            click.echo(f"  {e['family']:40s} {e['layout']:4s} grid={int(e['grid_probed'])} calls={e['calls']:7d} "
                       f"picked={e['picked']:2d} S(top)={dict(top)} max S={max(int(s) for s in e['split_k'])}")
    (out / "variants.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


def run_header(raw: Path, command: list[str], method: str) -> dict[str, Any]:
    """The evidence header of a device probe run (RAW: its $OUT): the GPU, driver (``smi.txt``), torch, CUDA,
    cuBLAS, cuBLASLt and matmul settings (``info.json``), the commands and the method text."""
    info = json.loads((raw / "info.json").read_text())
    smi = (raw / "smi.txt").read_text().splitlines()
    fields = dict(zip([x.strip() for x in smi[0].split(",")], [x.strip() for x in smi[1].split(",")]))
    return {"gpu": info["gpu"], "driver": fields.get("driver_version"), "torch": info["torch"],
            "cuda": info["cuda"], "cublas": info.get("cublas_version"), "cublaslt": info.get("cublaslt"),
            "matmul_settings": info.get("matmul_settings"), "command": command, "method": method}


@layout_cmd.command("ingest", help="judge a device run's probes (RAW: its $OUT) and write the evidence file")
@click.argument("gpu")
@click.argument("raw", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--command", "device_command", required=True, help="the device command that made RAW")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path))
def ingest_cmd(gpu: str, raw: Path, device_command: str, out: Path | None) -> int:
    fams = _families()
    header = run_header(raw, [device_command, f"python -m tools.library.layout_probes ingest {gpu} RAW --command ..."],
                        (__doc__ or "").split("\n\n", 2)[2].strip())
    raw_probes = json.loads((raw / "r" / "probe_list.json").read_text())
    doc = summarize(gpu, raw_probes, fams, scan(gpu, fams), grid_tags(gpu, fams), header)
    path = out or REPO / "evidence" / "library" / f"{gpu}_layout_probes.json"
    path.write_text(dump(doc))
    for v in doc["variants"]:
        click.echo(f"{v['family']:40s} {v['layout']:4s} probes={v['probes']:2d} agree={v['agree']:2d} "
                   f"S={v['split_k']} {v['verdict']}")
    click.echo(f"written {path}")
    return 0


main = script_main(layout_cmd, "python -m tools.library.layout_probes")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
