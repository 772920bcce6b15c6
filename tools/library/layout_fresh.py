"""Fresh layout probes of the refined split-K slice rule (evidence/library_plans.md, "Layouts"): probe lists of
recorded calls that no earlier probe ran, chosen where the refined rule's slice starts differ from the family's own
rule and from the other rules the first runs left open.

    python -m tools.library.layout_fresh lists DIR [--gpu G]     # DIR/G_fresh_list.json (device: layout_probes.sh)
    python -m tools.library.layout_fresh ingest GPU RAW --command CMD   # -> evidence/library/GPU_layout_probes_fresh.json

The refined rule (:data:`tools.library.layout_judge.REFINED_RULE_TEXT`) was fitted after the first layout probes
(``evidence/library/h100_layout_probes.json``, ``h200_layout_probes.json``) and the family probes of the grid; it is
a rule per (family, layout) variant (:func:`tools.library.layout_judge.refined_rule`).  ``lists`` reads every
recording of a GPU made under torch's default settings, takes each split-K call of a variant of the sm80 CUTLASS and
16-bit nvjet families (the fields exactly as recorded, its recorded kernels, S and reductionScheme beside them)
that no earlier probe of either GPU ran (same op, shape, layouts and dtypes), and keeps those whose refined starts
are readable (two or more slices, the first 16 or more k's wide) and differ from the family rule's starts.  Per
variant it picks, one class of K at a time (:func:`tools.library.layout_probes.k_class`), the call whose refined
starts differ from the most other open rules (:func:`tools.library.layout_judge.alternative_starts`), then the
cheapest, a second call per class at another S where one exists; variants round robin, those the first runs refuted
or never probed first.  ``ingest`` judges every probe twice, against the refined rule and against the family's own
rule (:func:`tools.library.layout_judge.judge`); a variant's verdict is for the refined rule (``slice_rule``), and
``family_rule_verdict`` the same probes' verdict on the family's rule.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.families import family_of
from tools.device import recordings as R
from tools.library.layout_judge import alternative_starts, dump, refined_rule, rule_starts, summarize
from tools.library.layout_probes import (
    GRID_PROBES,
    MAX_COST,
    RECORDINGS,
    REPO,
    _families,
    _pickable,
    grid_tags,
    k_class,
    layout_tag,
    probe_cost,
    run_header,
    scan,
)

EARLIER = [REPO / "evidence" / "library" / f"{g}_layout_probes{x}.json" for g in ("h100", "h200") for x in ("", "_fresh")]
CAP = 8
"""Calls per variant."""
MAX_ELEMS = 1 << 28
"""Largest operands + output of a picked call (elements; 512 MiB of 16-bit inputs)."""


def call_id(c: dict[str, Any]) -> tuple:
    """What makes two probes the same call: op, shape, layouts, dtypes, bias, tf32."""
    return (c["op"], c["M"], c["N"], c["K"], bool(c.get("a_t")), bool(c.get("b_t")), c["a_dtype"], c["b_dtype"],
            c["out_dtype"], bool(c.get("bias")), bool(c.get("tf32")))


def earlier_calls() -> set[tuple]:
    """Every call an earlier layout or grid probe of either GPU ran."""
    out = set()
    for path in EARLIER + [p for ps in GRID_PROBES.values() for p in ps]:
        for p in json.loads(path.read_text())["probes"]:
            if "M" in p:
                out.add(call_id({"a_t": False, "b_t": False, "bias": False, "tf32": False, **p}))
    return out


def wanted(fam: str, tag: str) -> bool:
    """Variants whose refined rule differs from the family's: the sm80 CUTLASS and 16-bit nvjet families."""
    return fam.startswith("cutlass_sm80_") or fam == "nvjet_sm90_16bit_splitK"


SPREAD = 48
"""Token counts taken from each recorded run besides its first :data:`FIRST`: evenly spread over the run."""
FIRST = 96


def _runs(rec: dict[str, Any], k_mod64: tuple[int, ...] = ()):
    """(calls, plan id) of a recording: a token-count run as its first :data:`FIRST` token counts, :data:`SPREAD`
    more spread over the rest and up to :data:`SPREAD` multiples of 32 after the first (the K a 16-byte and a
    32-k grain tell apart), a list task's calls one by one."""
    for task in rec["tasks"]:
        if task["kind"] == "mrange":
            ms = R.task_values(task)
            pos = {t: i for i, t in enumerate(ms)}
            for r in R.iter_runs(task):
                run = ms[pos[r[0]]:pos[r[1]] + 1]
                spread = run[FIRST::max(1, (len(run) - FIRST) // SPREAD)]
                ts = sorted(set(run[:FIRST] + spread + [t for t in run[FIRST:] if t % 32 == 0][:SPREAD]
                                + [t for t in run if t % 64 in k_mod64]))
                yield [{**task["call"], task["vary"]: t} for t in ts], r[2]
        else:
            for c, pid, _g, _w in R.iter_list(task, rec["fields"]):
                yield [c], pid


def candidates(gpu: str, families: dict[str, Any], seen: set[tuple],
               rec_dir: Path = RECORDINGS, nvjet_k_floor: int = 8,
               layouts: tuple[str, ...] = (), k_mod64: tuple[int, ...] = ()
               ) -> dict[tuple[str, str], dict[tuple, tuple]]:
    """Per variant: call id -> (score, call) of every fresh, readable, discriminating recorded call (default
    settings), its recorded plan in ``recorded``; with ``k_mod64``, only calls whose K mod 64 is one of them (every
    such token count of a run taken)."""
    out: dict[tuple[str, str], dict[tuple, tuple]] = {}
    for path in sorted(rec_dir.glob(f"{gpu}_*.json.gz")):
        rec = R.load(str(path))
        if (rec.get("setting") or {}).get("name") != "default":
            continue
        cache: dict[int, Any] = {}
        for calls, pid in _runs(rec, k_mod64):
            if pid not in cache:
                p = R.plan_dict(rec, pid)
                S = int(p["split_k"] or 1)
                fam = family_of({"kernels": p["kernels"], "reduction_scheme": p["reduction_scheme"]}, families,
                                path.name) if S > 1 else None
                tag = str(layout_tag(p["kernels"])) if fam else ""
                keep = fam and wanted(fam[0], tag) and (not layouts or tag in layouts)
                cache[pid] = (fam[0], tag, S, p) if keep else None
            v = cache[pid]
            if v is None:
                continue
            fam, tag, S, p = v
            rule = refined_rule(fam, tag, nvjet_k_floor)
            for c in calls:
                if not _pickable(c, MAX_ELEMS) or call_id(c) in seen or (k_mod64 and c["K"] % 64 not in k_mod64):
                    continue
                K = c["K"]
                mine = rule_starts(families[fam], K, S, rule, c["a_dtype"])
                if len(mine) < 2 or mine[1] < 16 or mine == rule_starts(families[fam], K, S):
                    continue
                cost = probe_cost(c, S) * (1 if len(mine) == S else 16)
                if cost > MAX_COST:
                    continue
                alts = alternative_starts(families[fam], K, S, c["a_dtype"] == "float32")
                differs = sum(1 for a in alts.values() if a != mine)
                key = call_id(c)
                score = (differs, -cost)
                e = out.setdefault((fam, tag), {})
                if key not in e or score > e[key][0]:
                    e[key] = (score, {**c, "recorded": {"kernels": p["kernels"], "split_k": S,
                                                        "reduction_scheme": p["reduction_scheme"],
                                                        "file": path.name}})
    return out


def pick(cands: dict[tuple, tuple]) -> list[dict[str, Any]]:
    """Classes of K (:func:`tools.library.layout_probes.k_class`) in turn, from each the call whose refined starts
    differ from the most open rules (then the cheapest), preferring an S the class has no call of yet and then an
    (M, N) the variant has none of yet, up to :data:`CAP`."""
    by_class: dict[str, list] = {}
    for score, c in cands.values():
        by_class.setdefault(k_class(c["K"]), []).append((score, c))
    ranked = {kc: sorted(v, key=lambda x: x[0], reverse=True) for kc, v in by_class.items()}
    picked: list[dict[str, Any]] = []
    while len(picked) < CAP:
        n = len(picked)
        for kc in sorted(ranked):
            have = {c["recorded"]["split_k"] for c in picked if k_class(c["K"]) == kc}
            shapes = {(c["M"], c["N"]) for c in picked}
            rest = [c for _s, c in ranked[kc] if c not in picked]
            new_s = [c for c in rest if c["recorded"]["split_k"] not in have]
            new_mn = [c for c in new_s or rest if (c["M"], c["N"]) not in shapes]
            if rest and len(picked) < CAP:
                picked.append((new_mn or new_s or rest)[0])
        if len(picked) == n:
            break
    return picked


@click.group(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
def fresh_cmd() -> None:
    pass


@fresh_cmd.command("lists", help="write DIR/GPU_fresh_list.json: fresh probes of the refined slice rule")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--gpu", "gpus", multiple=True, default=("h100", "h200"), show_default=True)
@click.option("--nvjet-k-floor", type=int, default=8, show_default=True,
              help="the refined rule's floor of K for the nvjet kernels (2: the fit to the first fresh probes)")
@click.option("--layout", "layouts", multiple=True, help="only these layouts (e.g. NTN, NTT); default every one")
@click.option("--k-mod64", "k_mod64", type=int, multiple=True, help="only calls with K mod 64 equal to one of these")
def lists_cmd(out: Path, gpus: tuple[str, ...], nvjet_k_floor: int, layouts: tuple[str, ...],
              k_mod64: tuple[int, ...]) -> int:
    fams = _families()
    seen = earlier_calls()
    out.mkdir(parents=True, exist_ok=True)
    for gpu in gpus:
        earlier = json.loads((REPO / "evidence" / "library" / f"{gpu}_layout_probes.json").read_text())
        first = {(v["family"], v["layout"]): v["verdict"] for v in earlier["variants"]}
        cands = candidates(gpu, fams, seen, nvjet_k_floor=nvjet_k_floor, layouts=layouts, k_mod64=k_mod64)
        per = {k: [{**c, "config": " | ".join(k), "fresh": True} for c in pick(v)] for k, v in cands.items()}
        order = sorted(per, key=lambda k: (first.get(k) == "confirmed", k))
        plist: list[dict[str, Any]] = []
        for i in range(max((len(v) for v in per.values()), default=0)):
            plist += [per[k][i] for k in order if i < len(per[k])]
        (out / f"{gpu}_fresh_list.json").write_text(json.dumps(plist, indent=0) + "\n")
        click.echo(f"{gpu}: {len(plist)} probes -> {out / f'{gpu}_fresh_list.json'}")
        for k in order:
            ks = ", ".join(f"{c['M']}x{c['N']}x{c['K']} S={c['recorded']['split_k']} {k_class(c['K'])}"
                           for c in per[k])
            click.echo(f"  {k[0]:40s} {k[1]:4s} first run: {first.get(k, 'none'):10s} {len(per[k])}: {ks}")
    return 0


@fresh_cmd.command("ingest", help="judge a device run's fresh probes (RAW: its $OUT) against the refined rule")
@click.argument("gpu")
@click.argument("raw", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--command", "device_command", required=True, help="the device command that made RAW")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--nvjet-k-floor", type=int, default=8, show_default=True,
              help="the refined rule's floor of K for the nvjet kernels the probes are judged against")
def ingest_cmd(gpu: str, raw: Path, device_command: str, out: Path | None, nvjet_k_floor: int) -> int:
    fams = _families()
    header = run_header(raw, [device_command, f"python -m tools.library.layout_fresh ingest {gpu} RAW --command ..."],
                        (__doc__ or "").split("\n\n", 2)[2].strip())
    raw_probes = json.loads((raw / "r" / "probe_list.json").read_text())
    doc = summarize(gpu, raw_probes, fams, scan(gpu, fams), grid_tags(gpu, fams), header, refined=True,
                    nvjet_k_floor=nvjet_k_floor)
    doc["variants"] = [v for v in doc["variants"] if v["probes"]]
    path = out or REPO / "evidence" / "library" / f"{gpu}_layout_probes_fresh.json"
    path.write_text(dump(doc))
    for v in doc["variants"]:
        click.echo(f"{v['family']:40s} {v['layout']:4s} probes={v['probes']:2d} agree={v['agree']:2d} "
                   f"S={v['split_k']} refined: {v['verdict']}, family rule: {v['family_rule_verdict']}")
    click.echo(f"written {path}")
    return 0


main = script_main(fresh_cmd, "python -m tools.library.layout_fresh")

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
