"""Confirm on the H200 the plans it records where they differ from the H100's (evidence/library_plans.md, "H200").

    python -m tools.library.h200_confirm lists DIR        # DIR/{probe,valid}_list.json and DIR/round2/...
    python -m tools.library.h200_confirm recorded-lists DIR REC.json.gz ...  # S the catalog recordings add
    OUT=RAW_DIR bash tools/device/library_h200_confirm.sh DIR   # on the H200
    python -m tools.library.h200_confirm ingest RAW_DIR RAW_DIR2  # -> h200_library_confirm_{samples,probes}.json
    python -m tools.library.h200_confirm ingest --add RAW_DIR3   # appended to the committed files
    python -m tools.library.h200_confirm summary [-o evidence/h200_library_confirm.json]

The H200 recorded (``h200_cublas_plans.json.gz``) another plan than the H100 for 4,322 grid calls: other kernels,
another split-K count S, or another cuBLASLt reductionScheme.  Each such call falls in a **class**: a split-K
family of the H100 plan file (``families``: kernel regex, reductionScheme, slice rule, reduction), found for the
H200's own kernels and scheme, or, without split-K, the nvjet kernel kind of its dtypes (``no split: nvjet_sm90_tst``
...).  ``lists`` picks, from the committed plan files only, per class and dtype configuration a few calls to
probe (split-K slice starts and reduction order from output bits: ``slice_probe`` and ``reduce_probe2`` of
``tools/device/library_plans.py``, run with ``--probe-list``) and a few validation calls (random inputs of
``library_calls.make_inputs``, 256 sampled outputs each, run with ``--valid-list``).  ``summary`` reads what the
device wrote and decides, per class, whether the H100's rule holds on the H200:

* every probed call: the traced S equals the plan file's; the slice starts read from the bits are the family's
  rule (chunk = ceil(ceil(K/G)/S)*G) at that S; the reduction probe agrees with the family's reduction on every
  column (fp32 partials added forward from partial 0; for fp16/bf16 outputs the fp32 sum rounded once);
* every validation call: the kernels and S it ran with are the plan file's for that call, and every sampled
  output equals the model's under the plan the converter makes from the H200's own kernels and S (H100
  families and decisions): :func:`tcsmt.library.replay.replay_call`.

A class is confirmed when it has at least one validation call (and, for split-K families, one probe) and nothing
disagrees; a family class only at the S its probes read (``probed_split_k``; a second round, ``round2`` of
``lists``, probes every S of the differing calls that the first round did not); ``python -m tcsmt.library.convert ... --confirmed evidence/h200_library_confirm.json`` then gives
every differing call of a confirmed class its own plan.  Nothing is inferred for a class without a probe or a
sample: its calls stay refused.

``recorded-lists`` does the same for the H200's catalog recordings (``evidence/library/recordings/h200_*``, torch's
default settings): per family class and split-K count S that ``h200_library_confirm.json`` has not probed, one probe
call and one validation call picked among the recorded calls, each carrying the recorded plan signature
(``recorded``: kernels, S, reductionScheme, the recording's file) that ``summary`` holds the device's run against,
as it holds the first rounds' against the plan file.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.library_calls import CALL_FIELDS, make_inputs
from tcsmt.io import load
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.families import class_of, grain_of, plan_signature, reduction_of

RESULTS = Path(__file__).resolve().parents[2] / "evidence"
SAMPLES = "h200_library_confirm_samples.json"
PROBES = "h200_library_confirm_probes.json"
PLANS_H200, PLANS_H100 = "h200_cublas_plans.json.gz", "h100_cublas_plans.json.gz"
_SAME_KEYS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32",
              "scale", "fast_accum")
def _key(c: dict[str, Any]) -> tuple:
    return tuple(c.get(k) for k in _SAME_KEYS)


def config(c: dict[str, Any]) -> str:
    """The dtype configuration of a call (its grid configuration's name)."""
    b = c.get("b_dtype") or c["a_dtype"]
    dt = c["a_dtype"] if b == c["a_dtype"] else f"{c['a_dtype']}x{b}"
    return f"{c['op']} {dt}->{c.get('out_dtype')}" + (" tf32" if c.get("tf32") else "") + \
        (f" {c['scale']}" if c.get("scale") else "") + (" fast" if c.get("fast_accum") else "")


def _with_scheme(c: dict[str, Any], lt_algos: list[str] | None) -> dict[str, Any]:
    """The call with ``reduction_scheme`` from its cuBLASLt trace (what family matching reads)."""
    sig = plan_signature(c, lt_algos)
    return {**c, "reduction_scheme": sig[2]} if sig[2] != "none" else dict(c)


def differing(p200: dict[str, Any], p100: dict[str, Any]) -> list[dict[str, Any]]:
    """The H200 grid calls whose plan signature (kernels, S, reductionScheme, refusal) differs from the H100's."""
    ref: dict[tuple, set] = {}
    for c in p100["calls"]:
        ref.setdefault(_key(c), set()).add(plan_signature(c, p100.get("lt_algos")))
    out: dict[tuple, dict[str, Any]] = {}  # one entry per call (the plan file lists a call twice: its last entry)
    for c in p200["calls"]:
        theirs = ref.get(_key(c))
        if theirs and plan_signature(c, p200.get("lt_algos")) not in theirs and not c.get("torch_error"):
            out.pop(_key(c), None)
            out[_key(c)] = _with_scheme(c, p200.get("lt_algos"))
    return list(out.values())


def _spread(cs: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Up to n calls with distinct S where possible, spread over K (deterministic)."""
    cs = sorted(cs, key=lambda c: (c["K"], c["M"] * c["N"], c["M"], c["N"]))
    by_s: dict[int, list] = {}
    for c in cs:
        by_s.setdefault(int(c["split_k"]), []).append(c)
    picked: list = []
    for s in sorted(by_s, key=lambda s: (-len(by_s[s]), s)):
        if len(picked) < n:
            group = by_s[s]
            picked.append(group[len(group) // 2])
    rest = [c for c in cs if c not in picked]
    step = max(1, len(rest) // max(1, n - len(picked)))
    return picked + rest[::step][:n - len(picked)]


def lists(p200: dict[str, Any], p100: dict[str, Any], probes_per: int = 2,
          samples_per: int = 2) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """(probe calls, validation calls, calls per class) for the differing calls."""
    fams = p100["families"]
    groups: dict[tuple[str, str], list] = {}
    counts: dict[str, int] = {}
    for c in differing(p200, p100):
        cls = class_of(c, fams)
        counts[str(cls)] = counts.get(str(cls), 0) + 1
        if cls is not None:
            groups.setdefault((cls, config(c)), []).append(c)
    probes: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    dists = ("normal", "wide", "cancel", "tiny")
    for (cls, cfg), cs in sorted(groups.items()):
        plain = [c for c in cs if c["op"] in ("mm", "scaled_mm") and int(c.get("batch", 1)) == 1]
        if cls.startswith("family"):
            fit = [c for c in plain if c["M"] <= 256 and c["N"] >= 16 and c["K"] <= 16384]
            for c in _spread(fit, probes_per):
                probes.append({**{k: c[k] for k in CALL_FIELDS}, "config": f"{cls} | {cfg}"})
        small = [c for c in cs if (c["M"] + c["N"]) * c["K"] * int(c.get("batch", 1)) <= (1 << 25)
                 and c["M"] * c["N"] <= (1 << 24)]
        for c in _spread(small, samples_per):
            d = dists[len(samples) % 4]
            if c.get("out_dtype") == "float16" and d == "wide":
                d = "normal"
            samples.append({**{k: c[k] for k in CALL_FIELDS}, "dist": d, "seed": 7000 + len(samples),
                            "class": cls})
    return probes, samples, counts


def lists_other_s(p200: dict[str, Any], p100: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The second round: for every split-K S of a family class that the first round's probes (:func:`lists`) did not
    read, one probe call and one validation call of that class and S (a class is confirmed only at probed S)."""
    fams = p100["families"]
    first, _, _ = lists(p200, p100)
    recorded = {_key(c): c for c in p200["calls"]}
    done = {(p["config"].split(" | ")[0], int(recorded[_key(p)]["split_k"])) for p in first}
    by_s: dict[tuple[str, int], list] = {}
    for c in differing(p200, p100):
        cls = class_of(c, fams)
        if cls and cls.startswith("family") and (cls, int(c["split_k"])) not in done:
            by_s.setdefault((cls, int(c["split_k"])), []).append(c)
    probes: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    for (cls, _s), cs in sorted(by_s.items()):
        plain = [c for c in cs if c["op"] in ("mm", "scaled_mm") and int(c.get("batch", 1)) == 1]
        fit = [c for c in plain if c["M"] <= 256 and c["N"] >= 16 and c["K"] <= 16384]
        for c in _spread(fit, 1):
            probes.append({**{k: c[k] for k in CALL_FIELDS}, "config": f"{cls} | {config(c)}"})
        small = [c for c in cs if (c["M"] + c["N"]) * c["K"] * int(c.get("batch", 1)) <= (1 << 26)]
        for c in _spread(small, 1):
            d = "normal" if c.get("out_dtype") == "float16" else ("wide", "cancel")[len(samples) % 2]
            samples.append({**{k: c[k] for k in CALL_FIELDS}, "dist": d, "seed": 7500 + len(samples), "class": cls})
    return probes, samples


def _rule_starts(fam: dict[str, Any], K: int, S: int) -> list[int]:
    G = grain_of(fam, K, "family")
    tiles = -(-K // G)
    chunk = -(-tiles // S) * G  # ceil(ceil(K / G) / S) * G
    return [i * chunk for i in range(S) if i * chunk < K]


def ingest(raws: list[Path], earlier: tuple[dict[str, Any], dict[str, Any]] | None = None
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The device runs' files (each of ``raws``: r/valid_list.json, r/probe_list.json, smi.txt) as the two committed
    files: the validation calls (the validation file's format, with the driver) and the probes (with the versions);
    kernel names and cuBLASLt traces normalised as ``library_plans_build.py`` wrote the recorded files."""
    from tools.library.plans_build import kernel_name, lt_text

    val: dict[str, Any] = {}
    plist: list[dict[str, Any]] = []
    if earlier is not None:  # the committed files: the new runs are appended (same GPU, driver and versions)
        val = {**earlier[0], "calls": list(earlier[0]["calls"]), "rejected": list(earlier[0].get("rejected", []))}
        plist = list(earlier[1]["probes"])
    new_from = (len(val.get("calls", [])), len(plist))
    for raw in raws:
        v = json.loads((raw / "r" / "valid_list.json").read_text())
        smi = (raw / "smi.txt").read_text().splitlines()
        fields = dict(zip([x.strip() for x in smi[0].split(",")], [x.strip() for x in smi[1].split(",")]))
        v["driver"] = fields["driver_version"]
        mine = {k: v[k] for k in ("gpu", "driver", "torch", "cuda", "cublas", "cublaslt")}
        if val and any(val[k] != x for k, x in mine.items()):
            raise TcsmtError(f"{raw}: versions {mine} differ from the first run's")
        calls = [*val.get("calls", []), *v["calls"]]
        val = {**v, "calls": calls, "rejected": [*val.get("rejected", []), *v["rejected"]]}
        plist += json.loads((raw / "r" / "probe_list.json").read_text())
    for c in val["calls"][new_from[0]:] + plist[new_from[1]:]:  # as library_plans_build.py wrote the plan files
        c["kernels"] = [kernel_name(k) for k in c.get("kernels", [])]
        c["lt_algo"] = [lt_text(a) for a in c.get("lt_algo") or []]
    val["what"] = ("H200 validation calls picked by `python -m tools.library.h200_confirm lists` among the "
                   "calls whose H200 plan differs from the H100's (field 'class'; two device runs: the lists and "
                   "their round2), and by `recorded-lists` among the catalog recordings' calls at split-K counts "
                   "those did not probe (field 'recorded'; a third run, appended with `ingest --add`), run by "
                   "tools/device/library_h200_confirm.sh (library_plans_device.py --valid-list)")
    versions = {k: val[k] for k in ("gpu", "driver", "torch", "cuda", "cublas", "cublaslt")}
    probes = {**versions, "what": ("slice probe and reduction probe 2 (tools/device/library_plans.py slice_probe, "
                                   "reduce_probe2; --probe-list) of H200 split-K calls whose plan differs from the "
                                   "H100's; 'config' is 'CLASS | dtype configuration'; lt_algo: cuBLASLt's trace"),
              "probes": plist}
    return val, probes


def _why_no_plan(p100: dict[str, Any], val: dict[str, Any], dec: dict[str, Any], c: dict[str, Any]) -> str:
    """The converter's reason for giving a sample call no plan (its table's ``why``)."""
    from tcsmt.library.convert import convert

    raw = {k: v for k, v in p100.items() if k != "calls"} | {"calls": []}
    calls = {"gpu": p100["gpu"], "calls": [c], **{k: val[k] for k in ("cublas", "cublaslt", "torch")}}
    text = convert(raw, "h100_cublas_plans.json (families only)", "h200", [("sample", calls)], dec, "decisions",
                   certain=False)
    m = re.search(r'^why = "(.*)"$', text, re.M)
    return m.group(1) if m else "no plan"


def summary(val: dict[str, Any], probes_file: dict[str, Any], p200: dict[str, Any], p100: dict[str, Any],
            dec: dict[str, Any]) -> dict[str, Any]:
    """The per-class verdicts from the committed device files (:func:`ingest`)."""
    from tcsmt.library.replay import replay_call
    from tools.library.h200_own_plans import own_plans

    fams = p100["families"]
    probes = probes_file["probes"]
    recorded = {_key(c): c for c in p200["calls"]}
    classes: dict[str, dict[str, Any]] = {}

    def cls_entry(name: str) -> dict[str, Any]:
        return classes.setdefault(name, {"probes": 0, "probes_agree": 0, "samples": 0, "samples_same_plan": 0,
                                         "outputs": 0, "outputs_differ": 0, "disagreements": [],
                                         "not_replayed": []})

    for p in probes:
        cls = p["config"].split(" | ")[0]
        e = cls_entry(cls)
        e["probes"] += 1
        rec = p.get("recorded") or recorded.get(_key(p))
        fam = fams[cls.removeprefix("family ")]
        S = p.get("lt_split_k")
        want = _rule_starts(fam, p["K"], int(S)) if S else None
        red = p.get("reduce2") or {}
        name, _ = reduction_of(fam, p["out_dtype"])
        cols = red.get("columns", 0)
        # every hypothesis that rounds an fp32 sum once agrees with fp32_forward's count where the output
        # format hides the order; fp32_forward is the family's order (reduction_of maps both readings to it)
        ok_red = name == "fp32_forward" and cols > 0 and red.get("agree", {}).get("fp32_forward") == cols
        why = []
        if rec is None or S != rec.get("split_k"):
            why.append(f"traced S {S} != recorded {rec.get('split_k') if rec else None}")
        if p.get("starts") != want:
            why.append(f"starts {p.get('starts')[:6]} != rule {want[:6] if want else None}")
        if p.get("noncontiguous_groups") or p.get("n_anomalies"):
            why.append(f"anomalies {p.get('n_anomalies')}, noncontiguous {p.get('noncontiguous_groups')[:3]}")
        if not ok_red:
            why.append(f"reduction: {red.get('agree')} of {cols} columns (family: {name})")
        if why:
            e["disagreements"].append(f"probe {config(p)} {p['M']}x{p['N']}x{p['K']}: " + "; ".join(why))
        else:
            e["probes_agree"] += 1
            e["probed_split_k"] = sorted({*e.get("probed_split_k", []), int(S)})
    calls = [_with_scheme(c, None) for c in val["calls"]]  # family matching reads the traced reductionScheme
    plans = own_plans(p100, {**val, "calls": calls}, dec, list(range(len(calls))))
    for n, c in enumerate(calls):
        e = cls_entry(c["class"])
        e["samples"] += 1
        own = c.get("recorded")  # a call of the catalog recordings (lists_recorded): its recorded signature
        rec = own or recorded.get(_key(c))
        mine = plan_signature(c)
        theirs = plan_signature(rec, None if own else p200.get("lt_algos")) if rec else None
        if mine != theirs:
            e["disagreements"].append(f"sample {config(c)} {c['M']}x{c['N']}x{c['K']}: ran kernels {mine[0]}, S "
                                      f"{mine[1]}, {mine[2]}; the plan file recorded {theirs}")
            continue
        e["samples_same_plan"] += 1
        if n not in plans:  # e.g. an addmm epilogue no decision covers (the H100 table has no plan there either)
            e["not_replayed"].append(f"sample {config(c)} {c['M']}x{c['N']}x{c['K']} alpha {c['alpha']} beta "
                                     f"{c['beta']} bias {c['bias']}: {_why_no_plan(p100, val, dec, c)}")
            continue
        r = replay_call(c, make_inputs(c, int(c["seed"])), plans[n])
        e["outputs"] += r.checked
        e["outputs_differ"] += len(r.mismatches)
        if r.mismatches:
            e["disagreements"].append(f"sample {config(c)} {c['M']}x{c['N']}x{c['K']} seed {c['seed']}: "
                                      f"{len(r.mismatches)} of {r.checked} outputs differ, e.g. {r.mismatches[:2]}")
    for name, e in classes.items():
        need_probe = name.startswith("family")
        e["confirmed"] = (not e["disagreements"] and e["samples_same_plan"] > 0 and e["outputs"] > 0
                          and (e["probes_agree"] > 0 or not need_probe))
    return {**{k: val[k] for k in ("gpu", "driver", "torch", "cuda", "cublas", "cublaslt")},
            "classes": dict(sorted(classes.items())), "calls": len(calls), "probes": len(probes)}


def _load(name: str) -> Any:
    return load.read_json(RESULTS / name, "evidence file")


@click.group(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
def confirm_cmd() -> None:
    pass


@confirm_cmd.command("lists", help="write the probe and validation lists of the differing calls to OUT")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
def lists_cmd(out: Path) -> int:
    p200, p100 = _load(PLANS_H200), _load(PLANS_H100)
    probes, samples, counts = lists(p200, p100)
    out.mkdir(parents=True, exist_ok=True)
    (out / "probe_list.json").write_text(json.dumps(probes, indent=0))
    (out / "valid_list.json").write_text(json.dumps(samples, indent=0))
    probes2, samples2 = lists_other_s(p200, p100)
    (out / "round2").mkdir(exist_ok=True)
    (out / "round2" / "probe_list.json").write_text(json.dumps(probes2, indent=0))
    (out / "round2" / "valid_list.json").write_text(json.dumps(samples2, indent=0))
    print(f"{sum(counts.values())} differing calls in classes {counts}; {len(probes)} probes, "
          f"{len(samples)} validation calls written to {out}")
    return 0


@confirm_cmd.command("recorded-lists", help="write OUT/{probe,valid}_list.json: the recordings' unprobed split-K counts")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.argument("recordings", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
def recorded_lists_cmd(out: Path, recordings: tuple[Path, ...]) -> int:
    from tcsmt.library.recordings import read_recording

    recs = [(p.name, read_recording(p)) for p in recordings]
    from tools.library.h200_recorded_lists import lists_recorded

    probes, samples = lists_recorded(recs, _load(PLANS_H100), _load("h200_library_confirm.json"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "probe_list.json").write_text(json.dumps(probes, indent=0))
    (out / "valid_list.json").write_text(json.dumps(samples, indent=0))
    for p in probes:
        print(f"  probe {p['config']} {p['op']} {p['M']}x{p['N']}x{p['K']} S {p['recorded']['split_k']}")
    print(f"{len(probes)} probes, {len(samples)} validation calls written to {out}")
    return 0


@confirm_cmd.command("ingest", help="read the device runs' output folders RAW... into the results files")
@click.argument("raw", type=click.Path(exists=True, file_okay=False, path_type=Path), nargs=-1, required=True)
@click.option("--add", is_flag=True, help="append the runs to the committed files instead of replacing them")
def ingest_cmd(raw: tuple[Path, ...], add: bool) -> int:
    val, probe_file = ingest(list(raw), (_load(SAMPLES), _load(PROBES)) if add else None)
    (RESULTS / SAMPLES).write_text(json.dumps(val, separators=(",", ":")) + "\n")
    (RESULTS / PROBES).write_text(json.dumps(probe_file, indent=0) + "\n")
    print(f"written {SAMPLES}, {PROBES}")
    return 0


@confirm_cmd.command("summary", help="summarise the confirmation per plan class (default: the committed result file)")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=RESULTS / "h200_library_confirm.json",
              show_default=True)
def summary_cmd(out: Path) -> int:
    p200, p100 = _load(PLANS_H200), _load(PLANS_H100)
    doc = summary(_load(SAMPLES), _load(PROBES), p200, p100, _load("h100_library_decisions.json"))
    doc["command"] = "python -m tools.library.h200_confirm summary"
    doc["files"] = [SAMPLES, PROBES, PLANS_H200, PLANS_H100, "h100_library_decisions.json"]
    _, _, counts = lists(p200, p100)
    doc["differing_calls_per_class"] = counts
    print(json.dumps({k: {x: v[x] for x in ("probes", "probes_agree", "samples", "outputs", "outputs_differ",
                                             "confirmed")} for k, v in doc["classes"].items()}, indent=1))
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"written {out}")
    return 0


main = script_main(confirm_cmd, "python -m tools.library.h200_confirm")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
