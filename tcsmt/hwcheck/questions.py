"""Run question files (inputs chosen to separate readings) on a device and keep every row.

``python -m tcsmt.hwcheck.questions --out FILE.json [--device cuda] FILE.json[:INSTR,...] ...``

Each FILE is a JSON of inputs as ``tcsmt discriminate`` or :mod:`tools.vectors.hopper_vectors`
writes it (in_fmt, out_fmt, models, inputs); the suffix ``:mma,wgmma`` names the instruction
families to run it on (default: the file's own, else mma).  Unlike ``tcsmt hwcheck FILE``, which
keeps counterexamples only, the output keeps the device's output bits of every row (``gpu``, in the
file's order; the inputs are the file's, padded with +0 products to ``k``, a whole number of
instructions) with the file's SHA-256, so a test can replay the device's answers through the
simulator without a GPU.  Exit 0 when the first model of
every file matches the device on every row, 1 otherwise, 2 on errors.
"""
from __future__ import annotations

import sys
import time
from typing import Any

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.check import ModelRunner, default_jobs, git_commit, hex_bits, load_inputs, padded_scales, resolve_models
from tcsmt.hwcheck.device import get_device
from tcsmt.hwcheck.paths import pad_k
from tcsmt.hwcheck.runner import run_dot
from tcsmt.io import files
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main


def padded_rows(inputs) -> tuple[np.ndarray, np.ndarray]:
    """The rows of A and B of an input file, zero-padded to a whole number of the path's instructions
    (``pad_k``; a zero product changes no output)."""
    spec = inputs.spec
    n, Kp = len(inputs.a), pad_k(max(len(x) for x in inputs.a), spec)
    a = np.zeros((n, Kp), dtype=spec.fin.dtype)
    b = np.zeros_like(a)
    for i in range(n):
        a[i, :len(inputs.a[i])] = inputs.a[i]
        b[i, :len(inputs.b[i])] = inputs.b[i]
    return a, b


def run_question(dev, path: str, instr: str, runner: ModelRunner) -> dict[str, Any]:
    """One file on one instruction family: every row with the device's and the models' bits."""
    inputs = load_inputs(path, instr=instr)
    spec = inputs.spec
    why = dev.supports(spec)
    if why:
        return {"file": path, "path": spec.label, "skipped": why}
    models = resolve_models(inputs.models, spec)
    a, b = padded_rows(inputs)
    n, Kp = a.shape
    c = inputs.c
    sa, sb = padded_scales(inputs, np.arange(n), Kp)
    d = run_dot(spec, a, b, c, device=dev, sa=sa, sb=sb)
    preds = {label: runner.simulate(p, a, b, c, sa, sb) for label, p in models}
    fo, fc = spec.fout, spec.c_fmt
    rows = []
    for i in range(n):
        rows.append({"a": [hex_bits(spec.fin, x) for x in a[i]], "b": [hex_bits(spec.fin_b, x) for x in b[i]],
                     "c": hex_bits(fc, c[i]), "gpu": hex_bits(fo, d[i]),
                     **({"sa": [f"0x{int(x):02x}" for x in sa[i]], "sb": [f"0x{int(x):02x}" for x in sb[i]]}
                        if sa is not None and sb is not None else {}),
                     "models": {label: hex_bits(fo, preds[label][i]) for label, _ in models}})
    verdict = {label: {"mismatches": int((preds[label] != d).sum()), "rows": n} for label, _ in models}
    return {"file": path, "path": spec.label, "shape": spec.shape, "k": Kp, "models": [m for m, _ in models],
            "verdict": verdict, "rows": rows}


def compact(doc: dict[str, Any], root: str = "") -> dict[str, Any]:
    """The document with each question's rows reduced to the device's output bits (``gpu``): the
    inputs are those of the question file (padded with +0 products to ``k``), named relative to
    ``root`` with its SHA-256, and every model's bits follow from the simulator."""
    import hashlib
    from pathlib import Path

    out = dict(doc)
    qs = []
    for q in doc["questions"]:
        q = dict(q)
        name = q["file"]
        if root and name.startswith(root):
            name = name[len(root):].lstrip("/")
        q["file"] = name
        if "rows" in q:
            try:
                q["file_sha256"] = hashlib.sha256(Path(doc_path(q, doc, root)).read_bytes()).hexdigest()
            except OSError:
                pass
            q["gpu"] = [r["gpu"] for r in q.pop("rows")]
        qs.append(q)
    out["questions"] = qs
    return out


def doc_path(q: dict[str, Any], doc: dict[str, Any], root: str) -> str:
    """Where a question's file lies now (its name as run, else under ``root``)."""
    from pathlib import Path

    name = q["file"]
    return name if Path(name).is_file() else str(Path(root or ".") / name)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("items", nargs=-1, required=True, metavar="FILE.json[:INSTR,...]...")
@click.option("--out", required=True, help="the JSON document to write")
@click.option("--device", default="cuda", show_default=True)
@click.option("--force", is_flag=True, help="overwrite --out (a regular file only)")
@click.option("--root", default="", help="question file names are written relative to this folder")
def questions_cmd(items: tuple[str, ...], out: str, device: str, force: bool, root: str) -> int:
    from pathlib import Path

    for item in items:  # a missing file is a typo: refused before anything runs, not skipped
        if not Path(item.partition(":")[0]).is_file():
            raise TcsmtError(f"no such question file: {item.partition(':')[0]}")
    out_file = files.output(out, force)
    dev = get_device(device)
    doc: dict[str, Any] = {"tool": "tcsmt.hwcheck.questions", "tcsmt_commit": git_commit(),
                           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "device": dev.info(), "questions": []}
    status = 0
    with ModelRunner(min(4, default_jobs())) as runner:
        for item in items:
            path, _, fams = item.partition(":")
            for instr in (fams.split(",") if fams else [""]):
                try:
                    rec = run_question(dev, path, instr or None, runner)  # type: ignore[arg-type]
                except TcsmtError as exc:  # one file's problem (a path or model it lacks): the others run
                    rec = {"file": path, "instr": instr, "path": "?", "skipped": str(exc)}
                doc["questions"].append(rec)
                if "skipped" in rec:
                    print(f"{path} [{rec['path']}]: skipped ({rec['skipped']})", file=sys.stderr)
                    continue
                v = ", ".join(f"{m}: {r['mismatches']}/{r['rows']}" for m, r in rec["verdict"].items())
                print(f"{path} [{rec['path']}] {v}", flush=True)
                if rec["verdict"][rec["models"][0]]["mismatches"]:
                    status = 1
    out_file.write_json(compact(doc, root))
    return status


main = script_main(questions_cmd, "python -m tcsmt.hwcheck.questions")

if __name__ == "__main__":
    sys.exit(main())
