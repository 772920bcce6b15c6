"""Convert a recorded cuBLAS plan file (raw GPU facts, JSON) into a plan table in ``models/library``.

Usage: ``python -m tcsmt.library.convert evidence/h100_cublas_plans.json.gz [-o OUT] [--gpu h100] [--force]``

The raw file (written on the device; format: evidence/library_plans.md, "Files"; JSON, or gzip-compressed JSON
as the recorded plan files are kept, named in the table's sources by their JSON name) lists
calls with the kernels the profiler saw and the split-K count S, and kernel
families with their slice rule (grain, contiguous/interleaved, remainder) and
reduction.  Each call becomes a plan when everything its arithmetic needs is
recorded; otherwise it goes to the table's ``[[unknown]]`` list with what is
missing, so a lookup names it.  Nothing is filled in by guessing, except:

* the K-chain of a slice comes from the input dtype (the library paths of the
  GPU's architecture file: fp16/bf16 -> the cuBLAS block chain, float32 with
  tf32 -> the tf32 chain, e4m3 -> ``scaled_mm_fast`` or ``scaled_mm``, e4m3 x e5m2
  -> ``scaled_mm_fast_xe5m2`` or ``scaled_mm_xe5m2``: the same chains with B decoded
  as e5m2), or from a family's ``chain`` field when it names one;
* the epilogue of ``mm``/``bmm`` (alpha = 1, beta = 0, no bias: none) and of
  ``_scaled_mm`` without bias (mmaemu's published FFMA), unless the call or its
  family records ``epilogue``; every other epilogue must be recorded.

Calls may also come from further recorded files of the same GPU and library
(``--calls``, e.g. the validation file: calls with ``kernels``, ``split_k``,
``split_k_source`` and ``family``); their slice and reduction rules are the
families of the plan file.  A call's family is the one it records
(``family``, chosen on the device by kernel names and cuBLASLt's
``reductionScheme``); a call without that field takes the family whose
``kernel_regex`` matches its kernels (and whose ``lt_reduction_scheme`` equals
the call's ``reduction_scheme`` where both are recorded).  A family's grain is
a number or ``"G if K % D == 0 else g"``; its reduction is a name of
:data:`REDUCE_NAMES`, or the device's summary ``"fp32 out: NAME (...); fp16/bf16
out: NAME (...)"`` (see :func:`reduction_of`).

A GPU whose own split-K rules were not probed (the H200) can borrow another GPU's rules where it recorded the
same plan: ``--same-as H100_PLANS.json [--same-as H100_CALLS.json]`` keeps a call only where a call of those
files with the same fields (op, shape, dtypes, flags) recorded the same kernel names, the same ``split_k`` and
the same cuBLASLt ``reductionScheme`` (``none`` where its trace has none); that call's family comes from the
first ``--same-as`` file's families, and ``--decisions`` may then be the other GPU's.  Every other call goes to
``[[unknown]]``, saying what differs, so a lookup refuses it.

Decisions made from recorded outputs (``--decisions FILE``, written by
``tools/library/decide.py``) fill what the plan file cannot say: the fp32 ->
tf32 input rounding of tf32 calls (``in_round``), K tiles, the K-chain of the fp32
CUDA-core kernels (``chain``) and epilogues; each carries
its evidence, which becomes the plan's source.  A tf32 call no decision covers
gets no ``in_round`` (its plan takes tf32 values only).
"""
from __future__ import annotations

import gzip
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.io import load
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.call_plans import ConvertContext
from tcsmt.library.families import class_of
from tcsmt.library.plans import load_table, plans_dir
from tcsmt.library.rules import VariantRules, checked_entry, variant_rules


def convert(raw: dict[str, Any], source_name: str, gpu: str | None = None,
            more_calls: Sequence[tuple[str, dict[str, Any]]] = (), decisions: dict[str, Any] | None = None,
            decisions_name: str = "", same_as: Sequence[tuple[str, dict[str, Any]]] = (),
            confirmed: tuple[str, dict[str, Any]] | None = None,
            probe_files: Sequence[tuple[str, dict[str, Any]]] = (), certain: bool = True) -> str:
    """The plan table (TOML text) for one raw plan file, its calls and those of ``more_calls`` ((name, file)
    pairs of the same GPU and library), with the ``decisions`` (a decision file's object) applied.  With
    ``same_as`` ((name, file) pairs of another GPU, the first a plan file): only calls that recorded the same
    plan there (:func:`plan_signature`) get a plan, with that file's families; the rest are unknown, except, with
    ``confirmed`` ((name, object) of a confirmation file: per :func:`class_of` class, ``confirmed`` true or false and,
    for split-K family classes, ``probed_split_k``), the calls of a class confirmed on this GPU (a family class at a
    probed S), which get their own recorded plan under those families.

    Every plan then passes the catalogs' certainty check (:func:`tcsmt.library.rules.checked_entry`): a split-K plan
    takes the slice rule that bits read for its kernels' operand layout (the family's, or a layout probe's of
    ``probe_files``, :func:`tcsmt.library.rules.variant_rules`) and is refused where none was read; the CUDA-core
    matrix-vector kernels whose K order no probe read and a CUTLASS kernel whose undecided K iteration cuts a block are
    refused too, so that a table never answers a call that the catalogs refuse.  ``certain`` = False leaves the check
    out: the H200 confirmation (``tools/library/h200_confirm.py``) computes the families' plans in order to test them."""
    for key in ("gpu", "calls"):
        if key not in raw:
            raise TcsmtError(f"{source_name}: not a recorded plan file (no {key!r})")
    for name, other in more_calls:
        if not isinstance(other, dict) or "calls" not in other:
            raise TcsmtError(f"{name}: not a recorded call file (no 'calls')")
        for key in ("gpu", "cublas", "cublaslt", "torch"):
            if other.get(key) != raw.get(key):
                raise TcsmtError(f"{name}: {key} {other.get(key)!r} differs from {source_name}'s {raw.get(key)!r}")
    ctx = ConvertContext.make(raw, source_name, gpu, more_calls, decisions, decisions_name, same_as, confirmed)
    arch, gpu = ctx.arch, ctx.gpu
    probed = variant_rules(same_as[0][1] if same_as else raw, ctx.families, probe_files)
    method = raw.get("method")
    lib = f"cuBLAS {raw.get('cublas')}, cuBLASLt {raw.get('cublaslt')}, torch {raw.get('torch')}, CUDA {raw.get('cuda')}"
    made_from = ", ".join([source_name] + [n for n, _ in more_calls] + ([decisions_name] if decisions else []) +
                          [f"{n} (--same-as)" for n, _ in same_as])
    header = [f"# Converted by python -m tcsmt.library.convert from {made_from}; do not edit by hand.",
              f"gpu = {json.dumps(gpu)}", f"arch = {json.dumps(arch.name)}", f"device = {json.dumps(raw['gpu'])}",
              f"library = {json.dumps(lib)}",
              "sources = " + json.dumps([f"{source_name}: method {method}, workspace_bytes {raw.get('workspace_bytes')}"]
                                        + ([f"plans only where {raw['gpu']} recorded the same kernels, split_k and "
                                            f"reductionScheme as {ctx.rules_gpu} in {', '.join(n for n, _ in same_as)}; "
                                            f"slice rules, reductions and decisions are {ctx.rules_gpu}'s"]
                                           if same_as else []))]
    plans: dict[str, dict[str, Any]] = {}
    unknown: dict[str, dict[str, Any]] = {}
    for file_name, n, call in [(source_name, n, c) for n, c in enumerate(raw["calls"])] + \
            [(name, n, c) for name, other in more_calls for n, c in enumerate(other["calls"])]:
        ident, fields, why = ctx.entry(file_name, n, call)
        shape = [int(call["M"]), int(call["N"]), int(call["K"]), int(call.get("batch", 1))]
        if not why and certain:
            fields, why = _certain(ctx, call, ident, fields, shape, f"{file_name}: call {n}", probed)
        if why:
            key = json.dumps([ident, why], sort_keys=True)
            unknown.setdefault(key, {**ident, "why": why, "shapes": []})["shapes"].append(shape)
        else:
            key = json.dumps([ident, fields], sort_keys=True)
            plans.setdefault(key, {**ident, **fields, "shapes": []})["shapes"].append(shape)
    out = header
    for entry in plans.values():
        out += ["", "[[plans]]"] + [f"{k} = {_toml(v)}" for k, v in entry.items()]
    for entry in unknown.values():
        out += ["", "[[unknown]]"] + [f"{k} = {_toml(v)}" for k, v in entry.items()]
    return "\n".join(out) + "\n"


def _certain(ctx: ConvertContext, call: dict[str, Any], ident: dict[str, Any], fields: dict[str, Any],
             shape: list[int], where: str, probed: VariantRules) -> tuple[dict[str, Any], str]:
    """(the plan fields under the slice rule read for the call's layout, or a GEMV kernel's K order for the kernel
    and block dims the call recorded, '') or ({}, why the plan is not certain): :func:`tcsmt.library.rules.checked_entry`
    on the call's plan class, as the catalogs check theirs."""
    kernels = [str(k) for k in call.get("kernels") or []]
    entry = {**ident, **{k: v for k, v in fields.items() if k not in ("kernels", "sources")},
             "kernels": [class_of(call, ctx.families) or " + ".join(kernels)], "sources": list(fields["sources"])}
    checked = checked_entry(entry, ident, shape, kernels, ctx.gpu, where, probed, blocks=call.get("blocks"),
                            b_t=bool(call.get("b_t")))
    if "why" in checked:
        return {}, str(checked["why"])
    # the checked fields (a layout's grain and k_floor, a GEMV kernel's K order) in the fields' order, the call's own
    # kernels, then what the check added (k_floor last, as the tables have always written it)
    out = {k: fields[k] if k == "kernels" else checked[k] for k in fields
           if k == "kernels" or (k in checked and k != "k_floor")}
    out.update({k: v for k, v in checked.items() if k not in ident and k not in out and k != "kernels"})
    return out, ""


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    raise TcsmtError(f"cannot write {v!r} to a plan table")


def _read_json(path: Path, what: str) -> dict[str, Any]:
    data = load.read_json(path, what)
    if not isinstance(data, dict):
        raise TcsmtError(f"{path}: not a {what} (a JSON object expected)")
    return data


def convert_file(raw_path: Path, out_path: Path | None = None, gpu: str | None = None, force: bool = False,
                 calls: Sequence[Path] = (), decisions: Path | None = None, same_as: Sequence[Path] = (),
                 confirmed: Path | None = None, probes: Sequence[Path] = ()) -> Path:
    """Convert ``raw_path`` (with the calls of ``calls`` and the ``decisions`` file); write the table (refusing
    to overwrite unless ``force``) and check it loads."""
    name = load.document_name  # h100_cublas_plans.json for evidence/h100_cublas_plans.json.gz
    raw = _read_json(raw_path, "recorded plan file")
    more = [(name(c), _read_json(c, "recorded call file")) for c in calls]
    dec = _read_json(decisions, "decision file") if decisions is not None else None
    ref = [(name(c), _read_json(c, "recorded plan or call file")) for c in same_as]
    conf = (name(confirmed), _read_json(confirmed, "confirmation file")) if confirmed is not None else None
    if conf is not None and not same_as:
        raise TcsmtError("--confirmed widens a --same-as table: pass the other GPU's files with --same-as")
    docs = [(name(p), _read_json(p, "layout-probe file")) for p in probes]
    text = convert(raw, name(raw_path), gpu, more, dec, name(decisions) if decisions is not None else "", ref, conf,
                   docs)
    if out_path is None:
        m = re.search(r'^gpu = "([^"]+)"', text, re.M)
        assert m is not None  # convert() writes gpu = "<name>" for a name that find_arch accepted
        g = m.group(1)
        major = str(raw.get("cublas") or "x")[:2]
        out_path = plans_dir() / f"{g}_cublas{major}_recorded.toml.gz"
    out_path = Path(out_path)
    if out_path.exists() and not force:
        raise TcsmtError(f"{out_path} exists (pass --force to replace it)")
    tmp = out_path.with_name(out_path.name + ".tmp")
    if out_path.name.endswith(".gz"):  # mtime 0: the same table gives the same bytes
        with gzip.GzipFile(tmp, "wb", mtime=0) as gz:
            gz.write(text.encode())
    else:
        tmp.write_text(text)
    try:
        load_table(tmp)
    except TcsmtError:
        tmp.unlink()
        raise
    tmp.replace(out_path)
    return out_path


_IN_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("raw", type=_IN_FILE)
@click.option("--calls", type=_IN_FILE, multiple=True,
              help="further recorded calls of the same GPU and library (e.g. the validation file); repeatable")
@click.option("--decisions", type=_IN_FILE, default=None,
              help="decisions made from recorded outputs (tools/library/decide.py): tf32 input rounding, epilogues")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="plan table to write (default models/library/...)")
@click.option("--gpu", default=None, help="GPU name of the table (default: from the file's gpu field)")
@click.option("--force", is_flag=True, help="replace an existing table")
@click.option("--same-as", type=_IN_FILE, multiple=True,
              help="another GPU's plan file (first) and call files: keep only calls that recorded the same "
                   "plan there, with its split-K rules; repeatable")
@click.option("--confirmed", type=_IN_FILE, default=None,
              help="with --same-as: a confirmation file (tools/library/h200_confirm.py summary): calls whose "
                   "own plan differs get it where their class is confirmed on this GPU")
@click.option("--probes", type=_IN_FILE, multiple=True,
              help="layout-probe files (evidence/library/*_layout_probes*.json): the slice rules read per layout")
def library_import_cmd(raw: Path, calls: tuple[Path, ...], decisions: Path | None, out: Path | None, gpu: str | None,
                       force: bool, same_as: tuple[Path, ...], confirmed: Path | None, probes: tuple[Path, ...]) -> int:
    """RAW: the recorded plan file (JSON, or gzip-compressed JSON)."""
    path = convert_file(raw, out, gpu, force, list(calls), decisions, list(same_as), confirmed, list(probes))
    t = load_table(path)
    print(f"wrote {path}: {len(t.plans)} plans, {len(t.unknown)} calls without a plan")
    return 0


main = script_main(library_import_cmd, "python -m tcsmt.library.convert")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
