"""Probes of a kernel class's K-chain: whole torch calls run on the GPU, their inputs and every output kept.

    python -m tools.library.chain_probe pack OUT1/s1688.npz OUT1/s1688_meta.json [NPZ META ...] \
        --keep 4 --gpu h100 -o evidence/library/h100_sm75_cutlass_chain_probe

``pack`` reads what a device probe wrote (``<name>.npz``: ``<tag>_A``, ``<tag>_B``, ``<tag>_D`` bit patterns of the
first batches of each ``torch.bmm`` call; ``<name>_meta.json``: the device stamp of ``tcsmt.hwcheck.stamp.device_info``, each call's tag, shapes
and the kernels the profiler saw) and writes ``OUT.npz`` (the first ``--keep`` batches of every call) and ``OUT.json``:
each call as the plan converter reads a recorded call (op, shape, dtypes, kernels, ``split_k`` 1: the profiler saw
one kernel and no split-K reduction), with ``arrays`` naming its tag.  :func:`replay` then compares every kept
output of a call with a plan's (``tools.library.decide``'s questions ``on`` = ``probe``).  Unlike the validation
calls, whose sampled outputs are a few per call, a probe keeps every output of its batches: a K-chain that differs
in the fp32 sum shows on about half of the fp32 outputs, but on only about one bf16 output in 10^4.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.io.load import read_json_object
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.api import run
from tcsmt.library.plans import Plan

_PATTERN = {"bfloat16": np.uint16, "float16": np.uint16, "float32": np.uint32}


def _in_dtype(tag: str) -> str:
    """The operands' dtype of a probe call: fp16 where its tag starts ``h_``, else bf16 (the probe scripts' naming)."""
    return "float16" if tag.startswith("h_") else "bfloat16"


def pack(pairs: list[tuple[Path, Path]], keep: int, gpu: str, out: Path) -> dict[str, Any]:
    """Write ``out``.npz and ``out``.json from device probe outputs (see the module docstring)."""
    arrays: dict[str, np.ndarray] = {}
    calls: list[dict[str, Any]] = []
    stamp: dict[str, Any] = {}
    wanted: set[str] = set()
    for npz_path, meta_path in pairs:
        meta = read_json_object(meta_path, "device probe meta file")
        if not isinstance(meta.get("stamp"), dict) or (stamp and meta["stamp"].get("gpu") != stamp.get("gpu")):
            raise TcsmtError(f"{meta_path}: no device stamp, or another GPU's than the other files'")
        stamp = meta["stamp"]
        with np.load(npz_path) as data:
            for c in meta["calls"]:
                tag = c["tag"]
                wanted.add(tag)
                if f"{tag}_A" not in data.files:  # its arrays are in another file of the same probe
                    continue
                A, B, D = (data[f"{tag}_{k}"][:keep] for k in "ABD")
                a_dtype = _in_dtype(tag)
                out_dtype = "float32" if D.dtype == np.int32 else a_dtype
                (batch, M, K), (_, _, N) = c["shape"][0], c["shape"][1]
                if A.shape[1:] != (M, K) or B.shape[1:] != (K, N) or D.shape[1:] != (M, N):
                    raise TcsmtError(f"{npz_path}: call {tag}: arrays do not have the recorded shapes")
                for k, v in (("A", A), ("B", B), ("D", D)):
                    arrays[f"{tag}_{k}"] = v
                calls.append({"op": "bmm", "M": M, "N": N, "K": K, "batch": batch, "a_dtype": a_dtype,
                              "b_dtype": a_dtype, "out_dtype": out_dtype, "bias": False, "alpha": 1.0, "beta": 0.0,
                              "tf32": False, "scale": None, "fast_accum": False,
                              "kernels": [k.split("(")[0].removeprefix("void ") for k in c["kernels"]], "split_k": 1,
                              "split_k_source": "the profiler's kernels of the call: one GEMM kernel, no split-K "
                                                "reduction kernel",
                              "strides": c.get("strides"), "arrays": tag, "batches_kept": int(A.shape[0])})
    missing = sorted(wanted - {c["arrays"] for c in calls})
    if missing:
        raise TcsmtError(f"no arrays of the probe calls {', '.join(missing)} in the files given")
    np.savez_compressed(out.with_suffix(".npz"), **arrays)
    doc = {**{k: stamp.get(k) for k in ("gpu", "torch", "cuda", "cublas", "cublaslt", "driver", "date_utc")},
           "gpu_short": gpu, "made_by": "python -m tools.library.chain_probe pack",
           "method": __doc__.split("\n\n")[2].replace("\n", " "), "arrays_file": out.with_suffix(".npz").name,
           "calls": calls}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def load(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(the probe's JSON, its arrays by key) from ``path`` (the .json; the .npz beside it)."""
    doc = read_json_object(path, "chain probe file")
    with np.load(path.with_name(doc["arrays_file"])) as data:
        return doc, {k: data[k] for k in data.files}


def replay(call: dict[str, Any], arrays: dict[str, np.ndarray], plan: Plan) -> np.ndarray:
    """For every kept output of ``call`` (batch, row, column, flattened in that order), whether ``plan`` gives its
    bits (:func:`tcsmt.library.api.run` on the whole batch)."""
    tag = call["arrays"]
    A, B, D = (arrays[f"{tag}_{k}"] for k in "ABD")
    in_t, out_t = _PATTERN[call["a_dtype"]], _PATTERN[call["out_dtype"]]
    ok = [np.asarray(run(plan, A[b].view(in_t), B[b].view(in_t))).view(out_t) == D[b].view(out_t)
          for b in range(A.shape[0])]
    return np.concatenate([o.reshape(-1) for o in ok])


@click.group(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
def cli() -> None:
    pass


@cli.command("pack")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--keep", type=click.IntRange(1, 128), default=4, show_default=True, help="batches kept per call")
@click.option("--gpu", required=True, help="the GPU's short name (h100, h200)")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="OUT(.json/.npz)")
def pack_cmd(files: tuple[Path, ...], keep: int, gpu: str, out: Path) -> int:
    if len(files) % 2:
        raise TcsmtError("give pairs of files: NPZ META [NPZ META ...]")
    doc = pack([(files[i], files[i + 1]) for i in range(0, len(files), 2)], keep, gpu, out)
    print(f"wrote {out.with_suffix('.json')} and .npz: {len(doc['calls'])} calls")
    return 0


main = script_main(cli, "python -m tools.library.chain_probe")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
