"""What the catalog conversion answers of some recorded calls (default: ``addmm`` with beta = 1), without building a
catalog: every such recorded call of the recordings run through the catalog builder's own conversion
(:func:`tcsmt.library.catalog_build.convert_one` under :func:`tcsmt.library.rules.make_context`), counted as
answered or by the reason of its refusal.

    python -m tools.library.beta1_coverage RECORDINGS... --gpu h100 [--decisions F] [--probes P ...] [--same-as ...]
        [--op mm --beta any --kernel-regex REGEX]      # e.g. the nvjet weight-gradient split-K calls

The options are the catalog builder's (models/library/README.md).  A token-count run is converted at its first,
middle and last count; where the three entries agree, the run counts as one of them, else every count is converted.
"""
from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

import click

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.catalog_build import convert_one, read_recording, recorded_calls
from tcsmt.library.rules import make_context

_IN = click.Path(exists=True, dir_okay=False, path_type=Path)


def reason(entry: dict | None) -> str:
    """'answered', or the refusal's reason without its numbers and kernel class."""
    if entry is None:
        return "refused by the library's own checks"
    if "why" not in entry:
        return "answered"
    why = re.sub(r"\(kernels of class [^)]*\)", "", entry["why"])
    return re.sub(r"\b\d[\d,]*\b", "N", why.split("; undecided in")[0])[:160] + \
        ("; undecided: " + why.split(": ", 2)[1][:90] if "; undecided in" in why else "")


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("recordings", nargs=-1, required=True, type=_IN)
@click.option("--gpu", required=True)
@click.option("--rules", type=_IN, default=None)
@click.option("--decisions", type=_IN, default=None)
@click.option("--same-as", type=_IN, multiple=True)
@click.option("--confirmed", type=_IN, default=None)
@click.option("--probes", type=_IN, multiple=True)
@click.option("--op", default="addmm", show_default=True)
@click.option("--beta", default="1", show_default=True, help="the calls' beta, or 'any'")
@click.option("--kernel-regex", default="", help="only calls one of whose recorded kernels this matches")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def beta1_coverage_cmd(recordings, gpu, rules, decisions, same_as, confirmed, probes, op, beta, kernel_regex,
                       json_out) -> int:
    ctx, _srcs, probed = make_context(gpu, rules, decisions, same_as, confirmed, probes)
    counts: collections.Counter = collections.Counter()
    for path in recordings:
        rec = read_recording(path)
        tables = rec["tables"]
        setting = (rec.get("setting") or {}).get("name")
        for tmpl, vary, ts, pid in recorded_calls(rec):
            if tmpl["op"] != op or (beta != "any" and float(tmpl["beta"]) != float(beta)):
                continue
            plan = tables["plans"][pid]
            if kernel_regex and not any(re.search(kernel_regex, tables["kernels"][k]) for k in plan[0]):
                continue

            def one(t, tmpl=tmpl, vary=vary, plan=plan, name=path.name, tables=tables):
                return reason(convert_one(ctx, name, {**tmpl, **dict.fromkeys(vary, None)}, vary, t, plan,
                                          tables, probed))
            ends = {one(t) for t in dict.fromkeys((ts[0], ts[len(ts) // 2], ts[-1]))}
            per = [(r, len(ts)) for r in ends] if len(ends) == 1 else [(one(t), 1) for t in ts]
            for r, n in per:
                counts[(setting, tmpl["a_dtype"], r)] += n
    total = collections.Counter()
    for (setting, a, r), n in sorted(counts.items(), key=lambda x: -x[1]):
        click.echo(f"{n:8d}  {setting} {a}: {r}")
        total[(a, r == "answered")] += n
    for a in sorted({a for a, _ in total}):
        click.echo(f"{a}: {total[(a, True)]} of {total[(a, True)] + total[(a, False)]} answered")
    if json_out:
        json_out.write_text(json.dumps([{"setting": s, "a_dtype": a, "answer": r, "calls": n}
                                        for (s, a, r), n in sorted(counts.items())], indent=0) + "\n")
    return 0


main = script_main(beta1_coverage_cmd, "python -m tools.library.beta1_coverage")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
