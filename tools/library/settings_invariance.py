"""Batch invariance of the model layers under library settings: for each setting and each distinct layer shape
(bf16 forward product, ``models/library/model_layers.json``), the plans the catalogs record at every recorded
token count (1..1024 and the multiples of 8 up to 16384: the settings recordings' grid), grouped by the bits they
compute (:func:`tcsmt.library.discriminate.effective`, as ``tcsmt invariance`` groups them), and the counts where
a row's plan arithmetic changes.

    python -m tools.library.settings_invariance [--gpu h100] [--setting NAME=KEY ...] [--json OUT.json]

No witness is computed here (``tcsmt invariance --settings KEY`` makes one per pair): two groups are two plans
whose arithmetic (K-chain, slices, reduction, epilogue) differs.  A layer whose count has no recorded plan under
a setting is reported with the first refusal.  Progress: a line per setting; the JSON is written at the end.
"""
from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import click

from tcsmt.io.progress import Progress
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.discriminate import effective
from tcsmt.library.invariance import layer_call, model_layers
from tcsmt.library.lookup import answers_over

SETTINGS = {
    "default": "default",
    "CUBLAS_WORKSPACE_CONFIG=:4096:8": "CUBLAS_WORKSPACE_CONFIG=:4096:8",
    "use_deterministic_algorithms(True)": "CUBLAS_WORKSPACE_CONFIG=:4096:8,deterministic=on",
    "split-K off (cuBLASLt, reduced=(False, False))": "blas=cublaslt,reduced=off",
    "CUBLAS_WORKSPACE_CONFIG=:16:8": "CUBLAS_WORKSPACE_CONFIG=:16:8",
    "CUBLAS_WORKSPACE_CONFIG=:0:0": "CUBLAS_WORKSPACE_CONFIG=:0:0",
    "batch-invariant recipe (:16:8, CUBLASLT_WORKSPACE_SIZE=1, reduced precision off)":
        "reduced=no_reduced_precision,CUBLAS_WORKSPACE_CONFIG=:16:8,CUBLASLT_WORKSPACE_SIZE=1",
}
COUNTS = [*range(1, 1025), *range(1032, 16385, 8)]


def one(gpu: str, r: dict[str, Any], key: str) -> dict[str, Any]:
    call = layer_call(int(r["N"]), int(r["K"]), "bfloat16", bias=bool(r["bias"]), layout=r["layout"])
    import dataclasses

    call = dataclasses.replace(call, settings=key)
    wanted = set(COUNTS)
    got = [x for x in answers_over(call, gpu, 1, COUNTS[-1]) if x[0] in wanted]  # counts off the grid: not recorded
    refused = [(m, why) for m, a, why in got if a is None]
    if refused:
        return {"refused": len(refused), "first": refused[0][0], "why": refused[0][1][:300]}
    groups: dict[Any, int] = {}
    by_arith: dict[Any, int] = {}
    seq = []
    for m, ans, _ in got:
        assert ans is not None
        k = ans.plan.arithmetic()
        if k not in by_arith:
            by_arith[k] = groups.setdefault(effective(ans.plan), len(groups))
        seq.append((m, by_arith[k]))
    changes = [m for (_, a), (m, b) in itertools.pairwise(seq) if a != b]
    return {"plans": len(groups), "changes": changes}


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--gpu", default="h100", show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--progress", is_flag=True, help="progress lines on stderr")
def settings_invariance_cmd(gpu: str, json_out: Path | None, progress: bool) -> int:
    say = Progress.for_cli(progress)
    rows = model_layers()["layers"]
    shapes: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        shapes.setdefault((r["N"], r["K"], bool(r["bias"]), r["layout"]), r)
    out: dict[str, Any] = {"tool": "python -m tools.library.settings_invariance", "gpu": gpu,
                           "token_counts": "1..1024 and the multiples of 8 up to 16384", "settings": {}}
    for name, key in SETTINGS.items():
        res = {f"{N}x{K}{' bias' if b else ''}{' conv1d' if lay == 'conv1d' else ''}": one(gpu, r, key)
               for (N, K, b, lay), r in shapes.items()}
        inv = sum(1 for v in res.values() if v.get("plans") == 1)
        ref = sum(1 for v in res.values() if "refused" in v)
        out["settings"][name] = {"key": key, "invariant": inv, "refused": ref, "shapes": len(res), "layers": res}
        say(f"{name}: {inv} of {len(res)} layer shapes batch-invariant, {ref} not answered at every count")
        click.echo(f"{gpu} {name}: {inv} of {len(res)} shapes invariant, {len(res) - inv - ref} change, {ref} refused")
    if json_out is not None:
        json_out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


main = script_main(settings_invariance_cmd, "python -m tools.library.settings_invariance")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
