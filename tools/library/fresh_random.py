"""Fresh random-shape calls: what the shipped catalogs answer of them, and what a recording on the GPU answers.

    python -m tools.library.fresh_random list --seed S --shapes N [--sampled 600] -o tools/device/fresh_random_list.json
    (GPU host)  tcsmt record --calls <the list's all_calls> --out DIR --name fresh_random
                python3 tools/device/catalog_sample_run.py LIST RAW.json.gz [SECONDS]
    python -m tools.library.fresh_random coverage LIST --gpu G [--plans DIR] [--json OUT.json]
    python -m tools.library.catalog_samples replay RAW.json.gz --gpu G --plans DIR [--json SUMMARY.json]
    python -m tools.library.fresh_random refused LIST --gpu G --plans DIR --reason REGEX -o SAMPLE_LIST.json

``list`` draws N shapes as the recorded random list does (``tools/device/record_plans.py``'s ``random_calls``: M, N,
K log-uniform in [1, 16384], half of them rounded to multiples of 8 or 16, each shape in the 7 main configurations)
under a seed of its own, and keeps the calls torch makes (``_scaled_mm`` needs N and K multiples of 16) that no shipped catalog holds (``all_calls``: ``tcsmt record --calls``
specs); of those whose inputs are quick to make ((M + N) K batch <= 2^25), ``--sampled`` drawn evenly are the
``calls`` that ``catalog_sample_run.py`` runs (input distribution and seed each, as ``catalog_samples pick`` writes).
``coverage`` asks the library (:func:`tcsmt.library.lookup.answer`) about every call of ``all_calls``: the shipped
catalogs alone, then with the folder ``--plans`` that the GPU's recording wrote, and counts the refusals by reason.
``refused`` lists, for ``catalog_sample_run.py``, the calls of ``all_calls`` outside ``calls`` (not sampled yet) that
are quick to make and that the library, with ``--plans``, refuses for a reason matching REGEX: fresh GPU outputs of
them check a rule made afterwards to answer them.
"""
from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.io.load import read_json_object
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.checks import make_call
from tcsmt.library.lookup import answer, catalogs, parse_record_spec, record_spec
from tcsmt.library.plans import Call

DEVICE_TOOLS = Path(__file__).resolve().parents[1] / "device"
QUICK = 1 << 25
"""Largest (M + N) K batch of a sampled call (its inputs are made on the CPU in seconds, as ``catalog_samples``)."""
DISTS = ("normal", "wide", "cancel")
_LISTING = click.argument("listing", type=click.Path(exists=True, dir_okay=False, path_type=Path))
"""The list ``list`` wrote (``tools/device/fresh_random_list.json``)."""
_PLANS_HELP = "the folder the GPU's recording of the list wrote"


def random_calls(seed: int, shapes: int) -> list[dict[str, Any]]:
    """The recorder's random calls (``tools/device/record_plans.py``), the one generator both lists use."""
    sys.path.insert(0, str(DEVICE_TOOLS))
    try:
        import record_plans
    finally:
        sys.path.remove(str(DEVICE_TOOLS))
    return list(record_plans.random_calls(seed, shapes))


def call_of(c: dict[str, Any]) -> Call:
    layout = c["op"] not in ("linear", "scaled_mm")
    return make_call(c["op"], c["M"], c["N"], c["K"], a_dtype=c["a_dtype"], b_dtype=c["b_dtype"],
                     out_dtype=c["out_dtype"], batch=c["batch"], bias=c["bias"], tf32=c["tf32"], scale=c["scale"],
                     fast_accum=c["fast_accum"], a_t=bool(c["a_t"]) and layout, b_t=bool(c["b_t"]) and layout)


def held(call: Call, gpu: str) -> bool:
    """Whether a shipped catalog of ``gpu`` holds a run covering ``call``."""
    return any(c.find(call) for c in catalogs(()) if c.gpu == gpu)


def fresh_list(seed: int, shapes: int, sampled: int, gpus: tuple[str, ...]) -> dict[str, Any]:
    drawn = random_calls(seed, shapes)
    calls, refused = [], 0
    for c in drawn:
        try:
            calls.append(call_of(c))
        except TcsmtError:  # torch refuses it (fp8 with N or K not a multiple of 16): no plan to ask about
            refused += 1
    fresh = [c for c in calls if not any(held(c, g) for g in gpus)]
    quick = [c for c in fresh if (c.M + c.N) * c.K * c.batch <= QUICK]
    step = max(1, len(quick) // max(1, sampled))
    picked = quick[::step][:sampled]
    dists = [DISTS[i % len(DISTS)] for i in range(len(picked))]
    samples = []
    for i, (c, d) in enumerate(zip(picked, dists)):
        if c.out_dtype == "float16" and d == "wide":
            d = "normal"
        samples.append({"spec": record_spec(c), "dist": d, "seed": seed * 100000 + i})
    return {"what": f"fresh random-shape calls (seed {seed}, {shapes} shapes x 7 configurations) that no shipped "
                    f"catalog of {', '.join(gpus)} holds",
            "command": "python -m tools.library.fresh_random " + " ".join(sys.argv[1:]), "seed": seed,
            "shapes": shapes, "drawn": len(drawn), "torch_refuses": refused, "held_by_shipped": len(calls) - len(fresh),
            "quick": len(quick), "all_calls": [record_spec(c) for c in fresh], "calls": samples}


def refused_list(doc: dict[str, Any], gpu: str, plans: tuple[str, ...], reason: str) -> list[dict[str, Any]]:
    """The calls of ``all_calls`` not in ``calls``, quick to make, refused for a reason matching ``reason``."""
    pattern = re.compile(reason)
    sampled = {c["spec"] for c in doc.get("calls", [])}
    out: list[dict[str, Any]] = []
    for spec in doc.get("all_calls", []):
        call = parse_record_spec(spec)
        if spec in sampled or (call.M + call.N) * call.K * call.batch > QUICK:
            continue
        try:
            answer(call, gpu, plans_dirs=plans)
            continue
        except TcsmtError as exc:
            if not pattern.search(str(exc)):
                continue
        d = DISTS[len(out) % len(DISTS)]
        out.append({"spec": spec, "dist": "normal" if call.out_dtype == "float16" and d == "wide" else d,
                    "seed": int(doc.get("seed", 0)) * 1000 + len(out)})
    return out


def coverage(specs: list[str], gpu: str, plans: tuple[str, ...]) -> dict[str, Any]:
    """Answered and refused calls (by reason) among ``specs`` on ``gpu``, searching the folders ``plans``."""
    tally: collections.Counter = collections.Counter()
    why: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    for spec in specs:
        call = parse_record_spec(spec)
        try:
            kinds[answer(call, gpu, plans_dirs=plans).kind] += 1
            tally["answered"] += 1
        except TcsmtError as exc:
            tally["refused"] += 1
            reason = str(exc).split(f" on {gpu}: ", 1)[-1].split("; record it on that GPU")[0]
            why[f"{call.a_dtype}{' tf32' if call.tf32 else ''} {call.op}: {reason[:110]}"] += 1
    return {"gpu": gpu, "plans": list(plans), "calls": len(specs), **tally, "answered_as": dict(kinds),
            "refused_by_reason": dict(why.most_common(40))}


@click.group(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
def fresh_cmd() -> None:
    pass


@fresh_cmd.command("list", help="draw fresh random-shape calls no shipped catalog holds")
@click.option("--seed", type=int, required=True)
@click.option("--shapes", type=click.IntRange(1, 100000), required=True)
@click.option("--sampled", type=click.IntRange(0, 100000), default=600, show_default=True)
@click.option("--gpu", "gpus", multiple=True, default=("h100", "h200"), show_default=True)
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def list_cmd(seed: int, shapes: int, sampled: int, gpus: tuple[str, ...], out: Path) -> int:
    doc = fresh_list(seed, shapes, sampled, gpus)
    out.write_text(json.dumps(doc, indent=0) + "\n")
    print(f"{doc['drawn']} calls drawn, {doc['torch_refuses']} that torch refuses, {doc['held_by_shipped']} held by the shipped catalogs, "
          f"{len(doc['all_calls'])} fresh, {len(doc['calls'])} sampled -> {out}")
    return 0


@fresh_cmd.command("coverage", help="what the library answers of a list's calls, shipped catalogs alone and with DIR")
@_LISTING
@click.option("--gpu", required=True)
@click.option("--plans", type=click.Path(exists=True, file_okay=False), default=None, help=_PLANS_HELP)
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def coverage_cmd(listing: Path, gpu: str, plans: str | None, json_out: Path | None) -> int:
    doc = read_json_object(listing, "fresh random list")
    specs = [str(s) for s in doc.get("all_calls", [])]
    res = {"list": listing.name, "seed": doc.get("seed"), "shipped_only": coverage(specs, gpu, ())}
    if plans:
        res["with_recording"] = coverage(specs, gpu, (plans,))
        res["recording"] = [c.name for c in catalogs((plans,)) if c.path.parent == Path(plans)]
    res["command"] = "python -m tools.library.fresh_random " + " ".join(sys.argv[1:])
    for k in ("shipped_only", "with_recording"):
        if k in res:
            r = res[k]
            print(f"{k}: {r.get('answered', 0)} of {r['calls']} answered")
    if json_out is not None:
        json_out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


@fresh_cmd.command("refused", help="list the calls not sampled yet that the library refuses for a reason, for the GPU")
@_LISTING
@click.option("--gpu", required=True)
@click.option("--plans", type=click.Path(exists=True, file_okay=False), required=True, help=_PLANS_HELP)
@click.option("--reason", required=True, metavar="REGEX", help="refusals whose text matches this")
@click.option("--samples", type=click.IntRange(1, 4096), default=256, show_default=True,
              help="sampled outputs asked per call")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def refused_cmd(listing: Path, gpu: str, plans: str, reason: str, samples: int, out: Path) -> int:
    try:
        re.compile(reason)
    except re.error as exc:
        raise TcsmtError(f"--reason: not a regular expression: {exc}") from None
    doc = read_json_object(listing, "fresh random list")
    calls = refused_list(doc, gpu, (plans,), reason)
    out.write_text(json.dumps({"what": f"calls of {listing.name} not sampled yet that the {gpu} recording's catalog "
                                       f"refuses for a reason matching {reason!r}",
                               "command": "python -m tools.library.fresh_random " + " ".join(sys.argv[1:]),
                               "samples": samples, "calls": calls}, indent=0) + "\n")
    print(f"{len(calls)} calls written to {out}")
    return 0


main = script_main(fresh_cmd, "python -m tools.library.fresh_random")

if __name__ == "__main__":
    sys.exit(main())
