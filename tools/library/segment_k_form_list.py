"""Calls of every tf32 ``segment_k_on`` launch form the recordings hold, for swamping probes and a capture of their
launch words on the GPU (``tools/device/segment_k_probe.py``, ``tools/device/segment_k_params.py``).

    python -m tools.library.segment_k_form_list RECORDING... [--out tools/device/segment_k_forms_list.json]

A launch's form (:func:`tcsmt.library.segment_k.launch_form`: kernel layout, tile, swizzle log, raster, grid y,
cluster x) gates the catalogs: a call of a form outside :data:`tcsmt.library.segment_k_checked.CHECKED_FORMS` is refused.
For each form the recordings' launch words (plan field ``segment_k_launch``) show with S > 1 (calls without a bias, whose
epilogue the catalogs refuse on these kernels), up to :data:`PER_FORM` calls of at most :data:`MAX_ELEMENTS` input and output elements each are listed: the smallest call;
the smallest whose split cluster tiles do not fill whole swizzle panels (the case a fresh call refuted,
``evidence/library/h100_catalog_samples_segment_k.json``); and calls drawn at random (seeded) among the rest.  A
form already checked gets the partial-panel call only.  With ``--tails N``: for each (panel width, rows or columns
left over) whose split tiles end inside the narrower last panels (:func:`tcsmt.library.segment_k.tail_of`), the N smallest such calls: how
those panels are cut decides which tiles are split there.  Nothing here is a rule: the probes' outputs judge it.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import click

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.checks import make_call
from tcsmt.library.lookup import record_spec
from tcsmt.library.recordings import raw_call, read_recording, recorded_calls
from tcsmt.library.rules import SEGMENT_K
from tcsmt.library.segment_k import KERNEL_FORM, launch_form, launch_of_words, tail_of
from tcsmt.library.segment_k_checked import CHECKED_FORMS

PER_FORM = 4
MAX_ELEMENTS = 1 << 27
"""Largest M K + K N + M N of a listed call (the probe builds A on the host)."""
TAIL_MAX_ELEMENTS = 1 << 28
"""The same with ``--tails``: the recorded calls whose split tiles end in panels 6 or 10 wide are all larger."""
SEED = 20261128


FormCalls = dict[tuple, list[tuple[int, bool, str]]]
TailCalls = dict[tuple[int, int], list[tuple[int, str]]]


def form_calls(paths: tuple[Path, ...], max_elements: int = MAX_ELEMENTS) -> tuple[FormCalls, TailCalls]:
    """form -> [(input and output elements, partial panel, record spec)] of the recorded calls with S > 1; and
    (panel width, left over) -> [(elements, spec)] of those whose split tiles end in the narrower panels, one call
    (the first recorded) per arrangement (cluster tiles, split count, raster)."""
    out: FormCalls = {}
    tails: TailCalls = {}
    tail_cases: set[tuple] = set()
    seen: set[str] = set()
    for path in paths:
        rec = read_recording(path)
        tables = rec["tables"]
        for tmpl, vary, ts, pid in recorded_calls(rec):
            plan = tables["plans"][pid]
            if len(plan) < 12 or not plan[11] or not any(w for w in plan[11]):
                continue
            for t in ts:
                raw = raw_call(tmpl, vary, t, plan, tables)
                seg = [i for i, k in enumerate(raw["kernels"]) if SEGMENT_K.search(k)]
                if len(seg) != 1 or raw["batch"] != 1 or raw["split_k"] not in (1, None) or raw["bias"]:
                    continue
                words = raw["segment_k_launch"][seg[0]]
                la = launch_of_words(words, raw["kernels"][seg[0]]) if words else "no words"
                if isinstance(la, str) or la.segments < 2:
                    continue
                layout = KERNEL_FORM.search(raw["kernels"][seg[0]])
                form = launch_form(la, layout.group(1) if layout else "")
                M, N, K = raw["M"], raw["N"], raw["K"]
                size = M * K + K * N + M * N
                if size > max_elements:
                    continue
                call = make_call(raw["op"], M, N, K, a_dtype=raw["a_dtype"], b_dtype=raw["b_dtype"],
                                 out_dtype=raw["out_dtype"], batch=1, tf32=True,
                                 **({} if raw["op"] == "linear" else {"a_t": bool(raw["a_t"]), "b_t": bool(raw["b_t"])}))
                spec = record_spec(call)
                if spec in seen:
                    continue
                seen.add(spec)
                tail = tail_of(la)
                out.setdefault(form, []).append((size, tail is not None, spec))
                case = (tail, la.cluster_tiles, la.split_cluster_tiles, la.raster_along_m)
                if tail and case not in tail_cases:  # one call per arrangement of split tiles
                    tail_cases.add(case)
                    tails.setdefault(tail, []).append((size, spec))
    return out, tails


def pick(calls: list[tuple[int, bool, str]], checked: bool, rng: random.Random) -> list[str]:
    """The specs listed for one form (module docstring): the smallest call, the smallest partial-panel one and
    random others up to :data:`PER_FORM`; for a checked form its smallest partial-panel call only."""
    calls = sorted(calls)
    partial = [c for c in calls if c[1]]
    chosen = ([partial[0]] if partial else []) if checked else [calls[0], *partial[:1]]
    rest = [c for c in calls if c not in chosen]
    if not checked:
        chosen += rng.sample(rest, min(len(rest), PER_FORM - len(chosen)))
    return [c[2] for c in dict.fromkeys(chosen)]


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("recordings", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--max-elements", type=click.IntRange(1, 1 << 31), default=None,
              help=f"largest M K + K N + M N of a listed call (default {MAX_ELEMENTS}, with --tails {TAIL_MAX_ELEMENTS})")
@click.option("--unchecked-only", is_flag=True, help="only forms outside CHECKED_FORMS")
@click.option("--also", multiple=True, help="a record spec to list too (first), e.g. a call a GPU check refuted")
@click.option("--tails", type=click.IntRange(0, 100), default=0,
              help="list instead, for each (panel width, left over) of the calls whose split tiles end in the narrower "
                   "last panels, this many calls (smallest first)")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path(__file__).resolve().parents[1] / "device" / "segment_k_forms_list.json")
def segment_k_form_list_cmd(recordings: tuple[Path, ...], max_elements: int | None, unchecked_only: bool,
                            also: tuple[str, ...], tails: int, out: Path) -> int:
    rng = random.Random(SEED)
    cap = max_elements or (TAIL_MAX_ELEMENTS if tails else MAX_ELEMENTS)
    by_form, by_tail = form_calls(recordings, cap)
    calls: list[dict[str, Any]] = [{"spec": s, "form": None} for s in also]
    if tails:
        for tail in sorted(by_tail):
            for _size, spec in sorted(by_tail[tail])[:tails]:
                calls.append({"spec": spec, "tail": list(tail)})
    else:
        for form in sorted(f for f in by_form if not (unchecked_only and f in CHECKED_FORMS)):
            for spec in pick(by_form[form], form in CHECKED_FORMS, rng):
                calls.append({"spec": spec, "form": list(form)})
    made_by = "python -m tools.library.segment_k_form_list " + " ".join(
        [*(f"--also '{s}'" for s in also), *([f"--tails {tails}"] if tails else []),
         *([f"--max-elements {max_elements}"] if max_elements else []), *(["--unchecked-only"] if unchecked_only else []),
         *(str(p) for p in recordings)])
    out.write_text(json.dumps({"made_by": made_by, "calls": calls}, indent=0) + "\n")
    unchecked = sum(1 for f in by_form if f not in CHECKED_FORMS)
    print(f"{len(calls)} calls of {len(by_form)} forms ({unchecked} not checked) -> {out}")
    return 0


main = script_main(segment_k_form_list_cmd, "python -m tools.library.segment_k_form_list")

if __name__ == "__main__":
    sys.exit(main())
