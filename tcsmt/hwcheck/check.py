"""Differential checking: device outputs against model outputs, bit for bit.

(Over 400 lines: the comparison, campaigns and result records share the tally types and are read
together; each function has one job.)

A model is *confirmed* on a set of inputs when its output bit pattern equals
the device's for every input, and *refuted* otherwise (NaNs are compared as bit
patterns too: the models claim NVIDIA's canonical NaN).  This module holds the
comparison, the random campaigns of ``tcsmt hwcheck --random``, the reading of
input files, the counterexample records and the result JSON.
"""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.values import format_value
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.device import expand_scales, expand_tiles
from tcsmt.hwcheck.dists import DISTRIBUTIONS, generate, random_scales
from tcsmt.hwcheck.paths import PathSpec, find_path, pad_k, unit_scale
from tcsmt.io import load
from tcsmt.io.limits import GPU_K, VALUES, at_most, require_memory
from tcsmt.io.load import Node
from tcsmt.sim.inputs import dot_patterns

SIM_CHUNK = 1 << 14
BATCH_ENTRIES = 1 << 26
"""Products (rows x K) of one random batch at most: the default --batch of 2^17 rows up to K = 512 (every
built-in path's default K, so their campaigns draw the inputs they always drew)."""
LONG_K = 512
LONG_BATCH_ENTRIES = 1 << 22
"""Beyond K = LONG_K (no built-in path's default) a batch holds at most this many products, so that a progress
line comes every few seconds."""
ENTRY_BYTES = 48
"""Host memory per product of a batch (A and B, their expanded copies, the models' int64 chunks)."""


# ----------------------------------------------------------------- helpers
def hex_bits(fmt: Format, bits: int) -> str:
    return f"0x{int(bits):0{fmt.hex_digits}x}"


def exact_value(fmt: Format, bits: int) -> str:
    """The exact value of one pattern as a short power-of-two sum (``1-2^-24``, ``NaN``)."""
    return format_value(fmt.to_fraction(int(bits)))


def exact_dot_text(fin: Format, fc: Format, a: np.ndarray, b: np.ndarray, c: int, fin_b: Format | None = None) -> str:
    """The exact (unrounded) a.b + c, or NaN/Inf when a special value is involved."""
    fb = fin_b or fin
    vals = [fin.to_fraction(int(x)) for x in a] + [fb.to_fraction(int(x)) for x in b] + [fc.to_fraction(int(c))]
    if any(not isinstance(v, Fraction) for v in vals):
        return "special"
    k = len(a)
    s = sum((vals[i] * vals[k + i] for i in range(k)), Fraction(0)) + vals[-1]
    return format_value(s)


def git_commit(directory: Path | None = None) -> str:
    """The commit of the git checkout ``directory`` (``+dirty`` when tracked files differ), else ``unknown``.
    Without ``directory``: this checkout's, where $TCSMT_COMMIT (set on a device that ships no .git) wins."""
    if directory is None and os.environ.get("TCSMT_COMMIT"):
        return os.environ["TCSMT_COMMIT"]
    root = Path(__file__).resolve().parent.parent if directory is None else directory
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ------------------------------------------------------------ simulation
def _simulate_chunk(p: ModelParams, a: np.ndarray, b: np.ndarray, c: np.ndarray, sa: np.ndarray | None = None,
                    sb: np.ndarray | None = None) -> np.ndarray:
    from tcsmt.sim.simulator import simulate_params

    return simulate_params(p, a, b, c, sa=sa, sb=sb, bits=sa is not None)


class ModelRunner:
    """Runs model simulations, in worker processes when ``jobs`` > 1.

    Workers are started with the forkserver method, so they never inherit a
    CUDA context.  ``seconds`` accumulates wall time spent in :meth:`simulate`.
    """

    def __init__(self, jobs: int = 1):
        self.jobs = max(1, int(jobs))
        self._pool: ProcessPoolExecutor | None = None
        self.seconds = 0.0

    def __enter__(self) -> ModelRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            ctx = multiprocessing.get_context("forkserver")
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=ctx)
        return self._pool

    def warm_up(self, p: ModelParams) -> None:
        """Start the worker processes (and their imports) before anything is timed."""
        if self.jobs == 1:
            return
        fin, fc = get_format(p.in_fmt), get_format(p.c_fmt)
        z = np.zeros((4, max(1, p.instr_k)), dtype=fin.dtype)
        zc = np.zeros(4, dtype=fc.dtype)
        futs = [self._get_pool().submit(_simulate_chunk, p, z, z, zc) for _ in range(2 * self.jobs)]
        for f in futs:
            f.result()

    def simulate(self, p: ModelParams, a: np.ndarray, b: np.ndarray, c: np.ndarray, sa: np.ndarray | None = None,
                 sb: np.ndarray | None = None) -> np.ndarray:
        """Output bit patterns of model ``p`` for dot products a (n, K), b (n, K), c (n,) (and on a block-scaled
        path the scale patterns sa, sb (n, K / scale_block))."""
        t0 = time.perf_counter()
        n = a.shape[0]
        try:
            if self.jobs == 1 or n <= SIM_CHUNK:
                out = _simulate_chunk(p, a, b, c, sa, sb)
            else:
                pool = self._get_pool()
                step = max(SIM_CHUNK // 4, -(-n // (self.jobs * 4)))
                cut = lambda x, s: None if x is None else x[s:s + step]  # noqa: E731
                futs = [pool.submit(_simulate_chunk, p, a[s:s + step], b[s:s + step], c[s:s + step], cut(sa, s),
                                    cut(sb, s)) for s in range(0, n, step)]
                out = np.concatenate([f.result() for f in futs])
        except TcsmtError:
            raise
        except Exception as exc:  # a crash inside the simulator is reported, not hidden
            raise TcsmtError(f"the simulator failed for model {p.name}: {type(exc).__name__}: {exc}") from None
        self.seconds += time.perf_counter() - t0
        return out


# ----------------------------------------------------------- comparison
@dataclass
class ModelTally:
    """Mismatch count and first counterexamples of one model over a set of inputs."""

    label: str
    params: ModelParams
    checked: int = 0
    mismatches: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "confirmed" if self.mismatches == 0 else "refuted"

    def as_json(self) -> dict[str, Any]:
        return {"model": self.label, "resolved": self.params.name, "checked": self.checked,
                "mismatches": self.mismatches, "verdict": self.verdict, "kinds": dict(self.kinds),
                "counterexamples": self.examples}


def counterexample(spec: PathSpec, a: np.ndarray, b: np.ndarray, c: int, gpu: int, model: int,
                   index: int) -> dict[str, Any]:
    """A JSON-able record of one disagreement: inputs and both outputs as hex and exact values."""
    fin, fb, fc, fo = spec.fin, spec.fin_b, spec.c_fmt, spec.fout
    return {
        "index": int(index),
        "a": [hex_bits(fin, x) for x in a], "b": [hex_bits(fb, x) for x in b], "c": hex_bits(fc, c),
        "a_values": [exact_value(fin, x) for x in a], "b_values": [exact_value(fb, x) for x in b],
        "c_value": exact_value(fc, c), "exact": exact_dot_text(fin, fc, a, b, c, fb),
        "gpu": hex_bits(fo, gpu), "gpu_value": exact_value(fo, gpu),
        "model": hex_bits(fo, model), "model_value": exact_value(fo, model),
    }


def mismatch_kinds(fmt: Format, dev: np.ndarray, model: np.ndarray) -> dict[str, int]:
    """Classify disagreeing output pairs (device, model) of ``fmt``.

    Kinds: ``nan`` (either is NaN), ``inf/finite`` (the device gives an
    infinity, the model a finite value), ``finite/inf`` (the reverse),
    ``zero sign`` (+0 against -0), ``sign`` (other sign differences), and for
    finite values of one sign ``device +1 ulp`` / ``device -1 ulp`` (device one
    pattern step larger / smaller in magnitude) or ``|diff| > 1 ulp``.
    """
    from tcsmt.arith.formats import INF, NAN, ZERO

    cd, cm = fmt.classify(dev), fmt.classify(model)
    sbit = np.uint64(1 << (fmt.storage_bits - 1))
    ud, um = dev.astype(np.uint64), model.astype(np.uint64)
    sd, sm = (ud & sbit) != 0, (um & sbit) != 0
    step = 1 << fmt.pad_bits
    diff = ((ud & ~sbit).astype(np.int64) - (um & ~sbit).astype(np.int64)) // step
    out: dict[str, int] = {}
    nan = (cd == NAN) | (cm == NAN)
    inf_f = ~nan & (cd == INF) & (cm != INF)
    f_inf = ~nan & (cd != INF) & (cm == INF)
    zero = ~nan & (cd == ZERO) & (cm == ZERO)
    rest = ~(nan | inf_f | f_inf | zero)
    sign = rest & (sd != sm)
    same = rest & ~sign
    for name, mask in (("nan", nan), ("inf/finite", inf_f), ("finite/inf", f_inf), ("zero sign", zero),
                       ("sign", sign), ("device +1 ulp", same & (diff == 1)),
                       ("device -1 ulp", same & (diff == -1)), ("|diff| > 1 ulp", same & (np.abs(diff) > 1))):
        n = int(mask.sum())
        if n:
            out[name] = n
    return out


def compare(spec: PathSpec, tally: ModelTally, a: np.ndarray, b: np.ndarray, c: np.ndarray,
            d_dev: np.ndarray, d_model: np.ndarray, offset: int, keep: int, sa: np.ndarray | None = None,
            sb: np.ndarray | None = None) -> np.ndarray:
    """Add one batch to ``tally``: bitwise comparison, up to ``keep`` counterexamples kept (with their scale
    patterns ``sa``, ``sb`` on a block-scaled path); returns the mask."""
    bad = d_dev != d_model
    tally.checked += int(bad.size)
    nbad = int(bad.sum())
    if nbad:
        for kind, cnt in mismatch_kinds(spec.fout, d_dev[bad], d_model[bad]).items():
            tally.kinds[kind] = tally.kinds.get(kind, 0) + cnt
        for i in np.flatnonzero(bad)[: max(0, keep - len(tally.examples))]:
            ex = counterexample(spec, a[i], b[i], int(c[i]), int(d_dev[i]), int(d_model[i]), offset + int(i))
            if sa is not None and sb is not None:
                ex.update(sa=[f"0x{int(x):02x}" for x in sa[i]], sb=[f"0x{int(x):02x}" for x in sb[i]])
            tally.examples.append(ex)
        tally.mismatches += nbad
    return bad


def resolve_models(specs: list[str], spec: PathSpec) -> list[tuple[str, ModelParams]]:
    """(label, params) of each model spec for the path (TcsmtError for an unknown spec or path)."""
    from tcsmt.arith.registry import resolve

    out = []
    for s in specs:
        p = resolve(s, spec.in_fmt, spec.out_fmt, spec.instr)
        out.append((s, p))
    return out


# -------------------------------------------------------- random campaign
@dataclass
class DistResult:
    dist: str
    n: int
    k: int
    tallies: list[ModelTally]
    device_seconds: float = 0.0
    model_seconds: float = 0.0
    gen_seconds: float = 0.0
    wall_seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"distribution": self.dist, "n": self.n, "k": self.k,
                "models": [t.as_json() for t in self.tallies],
                "seconds": {"generate": round(self.gen_seconds, 3), "device": round(self.device_seconds, 3),
                            "model": round(self.model_seconds, 3), "wall": round(self.wall_seconds, 3)}}


def run_random(device, spec: PathSpec, models: list[tuple[str, ModelParams]], dist: str, n: int, K: int,
               seed: int, runner: ModelRunner, batch: int = 1 << 17, keep: int = 5,
               progress: Callable[[str], None] | None = None) -> DistResult:
    """Check ``n`` random dot products (rounded up to whole tiles) of distribution ``dist``.

    Batches of ``batch`` dot products (fewer where K is long: at most :data:`BATCH_ENTRIES` products per
    batch, :data:`LONG_BATCH_ENTRIES` beyond K = :data:`LONG_K`, so memory stays bounded and progress comes) are generated from the seed sequence
    (seed, distribution index, batch index), so a run is reproducible and a
    batch's inputs do not depend on the batch size of other batches.  A batch that would not fit the
    memory available is refused before the first is generated.
    """
    if K <= 0 or K % spec.instr_k:
        raise TcsmtError(f"--k must be a positive multiple of {spec.instr_k} for {spec.shape}, not {K}")
    at_most(K, GPU_K, "--k", "products per dot product on a GPU")
    per = spec.per_tile
    tiles_total = -(-n // per)
    tiles_batch = max(1, min(batch, (BATCH_ENTRIES if K <= LONG_K else LONG_BATCH_ENTRIES) // K) // per)
    rows = min(tiles_batch, tiles_total) * per
    require_memory(rows * K * ENTRY_BYTES, f"a batch of {rows:,} dot products of K = {K:,}", "lower --batch or --k")
    res = DistResult(dist, tiles_total * per, K, [ModelTally(lbl, p) for lbl, p in models])
    t_start = time.perf_counter()
    done = 0
    bi = 0
    d_idx = DISTRIBUTIONS.index(dist)
    while done < tiles_total:
        T = min(tiles_batch, tiles_total - done)
        rng = np.random.default_rng([seed, d_idx, bi])
        t0 = time.perf_counter()
        a, b, c = generate(dist, spec, T, K, rng)
        sa = sb = xa = xb = None
        if spec.scale_fmt:  # block-scaled: every row of A, column of B and scale block its own random scale
            sa, sb = random_scales(spec, T, K, rng)
            xa, xb = expand_scales(sa, sb)
        res.gen_seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
        d = (device.run_tiles(spec, a, b, c, sa=sa, sb=sb) if sa is not None else device.run_tiles(spec, a, b, c)
             ).reshape(-1)
        res.device_seconds += time.perf_counter() - t0
        aa, bb, cc = expand_tiles(a, b, c)
        for tally in res.tallies:
            t0 = time.perf_counter()
            dm = runner.simulate(tally.params, aa, bb, cc, xa, xb)
            res.model_seconds += time.perf_counter() - t0
            compare(spec, tally, aa, bb, cc, d, dm, done * per, keep, xa, xb)
        done += T
        bi += 1
        if progress:
            mm = ", ".join(f"{t.label}: {t.mismatches}" for t in res.tallies)
            progress(f"[{spec.label} {dist} K={K}] {done * per}/{tiles_total * per} checked; mismatches {mm}")
    res.wall_seconds = time.perf_counter() - t_start
    return res


# ------------------------------------------------------------ input files
@dataclass
class FileInputs:
    """Dot products read from a generated JSON file or an .npz file."""

    spec: PathSpec
    models: list[str]
    a: list[np.ndarray]       # one (K,) array per input (lengths may differ)
    b: list[np.ndarray]
    c: np.ndarray
    sa: list[np.ndarray] | None = None
    """Block-scaled paths: one (ceil(K / scale_block),) array of scale patterns per input, for A and B."""
    sb: list[np.ndarray] | None = None


def load_inputs(path: str, in_fmt: str | None = None, out_fmt: str | None = None,
                instr: str | None = None) -> FileInputs:
    """Read FILE (.json from ``generated/`` or .npz with a, b, c) for ``tcsmt hwcheck FILE``.

    JSON keys: "in_fmt", "out_fmt", "instr" (default mma), "models" (spec
    strings), "inputs": [{"a": [hex], "b": [hex], "c": hex}].  For .npz the
    formats come from the arguments (or the file's optional in_fmt/out_fmt/instr
    string arrays).  The file is read through :mod:`tcsmt.io.load` (a regular file, its size and every
    field checked); every problem is a TcsmtError naming the file and the field.
    """
    if str(path).endswith(".npz"):
        return _load_npz(path, in_fmt, out_fmt, instr)
    return inputs_from_doc(path, load.document(path, "JSON input file").value, in_fmt, out_fmt, instr)


def inputs_from_doc(path: str, data: Any, in_fmt: str | None = None, out_fmt: str | None = None,
                    instr: str | None = None) -> FileInputs:
    """The dot products of one JSON document (a ``discriminate`` or ``query`` record; see :func:`load_inputs`);
    ``path`` names it in errors (a file, or a file and a question of a decision bundle)."""
    doc = _as_inputs_doc(Node(data, path))
    fi = in_fmt or doc["in_fmt"].as_str(200)
    fo = out_fmt or doc["out_fmt"].as_str(200)
    ins = instr or _file_instr(doc.get("instr"))
    b_fmt = doc.get("b_fmt")
    bf = b_fmt.as_str(200) if b_fmt is not None else ""
    for key, given, text in (("in_fmt", in_fmt, fi), ("out_fmt", out_fmt, fo), ("b_fmt", None, bf)):
        if text and not given:
            try:
                get_format(text)
            except TcsmtError as exc:
                raise doc[key].error(str(exc)) from None
    if bf and ins.lower() in ("mma", "wgmma"):  # a mixed-format file: its family
        ins = f"{ins}_x{get_format(bf).name}"
    spec = find_path(fi, fo, ins.lower())
    m = doc.get("models")
    models = [] if m is None else [m.as_str(1000)] if isinstance(m.value, str) else m.as_str_list(1000, 0, 1000)
    items = doc["inputs"].as_list(VALUES, 1)
    fin, fc = spec.fin, spec.c_fmt
    A, B, C = [], [], []
    SA: list[np.ndarray] = []
    SB: list[np.ndarray] = []
    for item in items:
        item.as_dict()
        a_list, b_list = item["a"].as_list(GPU_K, 1), item["b"].as_list(GPU_K, 1)
        if len(a_list) != len(b_list):
            raise item.error(f"a and b need the same, non-zero length (got {len(a_list)} and {len(b_list)})")
        A.append(np.array([x.as_hex(fin.storage_bits, fin.name) for x in a_list], dtype=fin.dtype))
        B.append(np.array([x.as_hex(spec.fin_b.storage_bits, spec.fin_b.name) for x in b_list], dtype=fin.dtype))
        C.append(_pattern(item["c"], fc))
        if spec.scale_fmt:
            sa, sb = _scales(item, spec, len(a_list))
            SA.append(sa)
            SB.append(sb)
        elif item.has("sa") or item.has("sb"):
            raise item.error(f"scale factors sa, sb given, but {spec.label} is not block-scaled")
    for arr, fmt, key in ((A, fin, "a"), (B, spec.fin_b, "b")):
        for i, x in enumerate(arr):
            bad = ~np.asarray(fmt.valid_pattern(x.astype(np.uint64)))
            if bad.any():
                j = int(np.argmax(bad))
                raise items[i][key].as_list()[j].error(f"0x{int(x[j]):x} is not a bit pattern of {fmt.name}")
    if spec.scale_fmt:
        return FileInputs(spec, models, A, B, np.array(C, dtype=fc.dtype), SA, SB)
    return FileInputs(spec, models, A, B, np.array(C, dtype=fc.dtype))


def _pattern(node: Node, fmt: Format) -> int:
    """One bit pattern of ``fmt`` (its width, and a pattern the format has: tf32's pad bits zero)."""
    v = node.as_hex(fmt.storage_bits, fmt.name)
    if not bool(fmt.valid_pattern(np.array([v], dtype=np.uint64))[0]):
        raise node.error(f"0x{v:x} is not a bit pattern of {fmt.name}")
    return v


def _scales(item: Node, spec: PathSpec, K: int) -> tuple[np.ndarray, np.ndarray]:
    """The scale patterns sa, sb of one input of a block-scaled path: ceil(K / scale_block) hex patterns each."""
    fs = get_format(spec.scale_fmt)
    m = -(-K // spec.scale_block)
    out = []
    for key in ("sa", "sb"):
        v = item.get(key)
        if v is None or not isinstance(v.value, list) or len(v.value) != m:
            raise item.error(f"{spec.label} is block-scaled: {key} must be a list of {m} {fs.name} hex "
                             f"pattern(s), one per {spec.scale_block} products")
        out.append(np.array([_pattern(x, fs) for x in v.as_list(m, m)], dtype=np.uint8))
    return out[0], out[1]


def _as_inputs_doc(doc: Node) -> Node:
    """A ``tcsmt query`` file in the shape ``discriminate`` writes (in_fmt, out_fmt, instr, models, inputs).

    A feature query's inputs are those of its pairs (each pair a discriminate document), its models the
    base model and every hypothesis of a pair; a monotonicity query's inputs are its x and y.
    """
    doc.as_dict()
    if doc.has("pairs") and not doc.has("inputs"):
        pairs = [p for p in doc["pairs"].as_list() if isinstance(p.value, dict)]
        if not pairs:
            raise doc.error("a query file with no answered pair holds no input to run")
        models: list[Any] = [doc.value.get("model")]
        instrs: list[str] = []
        inputs: list[Any] = []
        for p in pairs:
            m = p.get("models")
            models += m.as_str_list(1000) if m is not None else []
            i = p.get("instr")
            if i is not None:
                instrs += [i.as_str(200)] if isinstance(i.value, str) else i.as_str_list(1000, 0, 200)
            ins = p.get("inputs")
            inputs += [x.value for x in ins.as_list()] if ins is not None else []
        first = pairs[0]
        return Node({"in_fmt": first["in_fmt"].value, "out_fmt": first["out_fmt"].value, "instr": instrs or None,
                     "models": [m for m in dict.fromkeys(models) if isinstance(m, str)], "inputs": inputs},
                    doc.file, doc.path)
    if doc.has("x") and doc.has("y") and not doc.has("inputs"):
        model = doc.value.get("model")
        return Node({**doc.value, "models": [model] if isinstance(model, str) else [],
                     "inputs": [doc["x"].value, doc["y"].value]}, doc.file, doc.path)
    return doc


def _file_instr(node: Node | None) -> str:
    """The instruction a JSON file names: a string, or (as ``discriminate``/``query`` write it) the list of
    its models' instructions; "ref" (a reference semantics) names none.  Default mma; several: ask --instr."""
    if node is None:
        return "mma"
    names = [node.as_str(200)] if isinstance(node.value, str) else node.as_str_list(1000, 0, 200)
    real = sorted({x.lower() for x in names} - {"ref"})
    if len(real) > 1:
        raise node.error(f"the models use different instructions ({', '.join(real)}); "
                         "choose the one to run with --instr")
    return real[0] if real else "mma"


def _load_npz(p: str, in_fmt, out_fmt, instr) -> FileInputs:
    data = load.read_npz(p, ("a", "b", "c"))

    def meta(key, given):
        if given:
            return given
        if key in data and data[key].shape == () and data[key].dtype.kind in "US" and data[key].dtype.itemsize <= 160:
            v = data[key].item()
            return v.decode("ascii", "replace") if isinstance(v, bytes) else str(v)
        return None

    fi, fo, ins = meta("in_fmt", in_fmt), meta("out_fmt", out_fmt), meta("instr", instr) or "mma"
    if not fi or not fo:
        raise TcsmtError(f"{load.name_of(p)}: give --path IN.OUT (or store in_fmt/out_fmt strings in the file)")
    spec = find_path(fi, fo, ins)
    a = np.asarray(data["a"])
    if a.ndim == 2:
        at_most(a.shape[1], GPU_K, f"{load.name_of(p)}: K", "products per dot product on a GPU")
    a, b, c = dot_patterns(data["a"], data["b"], data["c"], spec.fin, spec.c_fmt, source=str(p), b_fmt=spec.fin_b)
    return FileInputs(spec, [], list(a), list(b), c)


def check_inputs(device, inputs: FileInputs, models: list[tuple[str, ModelParams]], runner: ModelRunner,
                 keep: int = 3) -> list[ModelTally]:
    """Run the file's dot products on the device and compare with each model.

    Inputs are grouped by length; each group is padded with +0 products to a
    whole number of instructions, and the models see the same padded vectors.
    """
    from tcsmt.hwcheck.runner import run_dot

    spec = inputs.spec
    tallies = [ModelTally(lbl, p) for lbl, p in models]
    lengths = sorted({len(x) for x in inputs.a})
    for K in lengths:
        idx = np.array([i for i, x in enumerate(inputs.a) if len(x) == K])
        Kp = pad_k(K, spec)
        a = np.zeros((len(idx), Kp), dtype=spec.fin.dtype)
        b = np.zeros_like(a)
        a[:, :K] = np.stack([inputs.a[i] for i in idx])
        b[:, :K] = np.stack([inputs.b[i] for i in idx])
        c = inputs.c[idx]
        sa, sb = padded_scales(inputs, idx, Kp)
        d = run_dot(spec, a, b, c, device=device, sa=sa, sb=sb)
        for t in tallies:
            dm = runner.simulate(t.params, a, b, c, sa, sb)
            bad = d != dm
            t.checked += int(bad.size)
            t.mismatches += int(bad.sum())
            for j in np.flatnonzero(bad)[: max(0, keep - len(t.examples))]:
                t.examples.append(counterexample(spec, a[j], b[j], int(c[j]), int(d[j]), int(dm[j]), int(idx[j])))
    return tallies


def padded_scales(inputs: FileInputs, idx: np.ndarray, Kp: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The scale patterns (len(idx), Kp / scale_block) of the inputs ``idx`` padded to Kp products: the file's
    scales, then unit scales (ue8m0 0x7F, ue4m3 0x38) for the scale blocks of the +0 padding products (the
    device and the models see the same padded inputs); (None, None) on a path without scales."""
    spec = inputs.spec
    if not spec.scale_fmt or inputs.sa is None or inputs.sb is None:
        return None, None
    m = Kp // spec.scale_block
    out = []
    for arr in (inputs.sa, inputs.sb):
        s = np.full((len(idx), m), unit_scale(spec.scale_fmt), dtype=np.uint8)
        for r, i in enumerate(idx):
            s[r, :len(arr[i])] = arr[i]
        out.append(s)
    return out[0], out[1]


# ----------------------------------------------------------------- output
def format_example(ex: dict[str, Any], indent: str = "    ") -> list[str]:
    """Human-readable lines for one counterexample record (vectors over 32 entries shortened)."""
    def vec(hexes, vals, show: int = 32):
        items = [f"{h} ({v})" for h, v in zip(hexes, vals)]
        if len(items) <= show:
            return ", ".join(items)
        return ", ".join(items[:show // 2]) + f", ... ({len(items) - show} more; --save keeps all), " \
            + ", ".join(items[-show // 2:])
    return [
        f"{indent}input #{ex['index']}:",
        f"{indent}  a = [{vec(ex['a'], ex['a_values'])}]",
        f"{indent}  b = [{vec(ex['b'], ex['b_values'])}]",
        f"{indent}  c = {ex['c']} ({ex['c_value']})    exact a.b+c = {ex['exact']}",
        f"{indent}  gpu   {ex['gpu']} = {ex['gpu_value']}",
        f"{indent}  model {ex['model']} = {ex['model_value']}",
    ]


def summary_table(spec: PathSpec, results: list[DistResult]) -> list[str]:
    """Lines of the end-of-run table: distribution, N, mismatches per model, first counterexample."""
    rows = [("distribution", "model", "N", "mismatches", "first counterexample (gpu vs model)")]
    for r in results:
        for t in r.tallies:
            first = ""
            if t.examples:
                ex = t.examples[0]
                first = f"#{ex['index']}: {ex['gpu']} vs {ex['model']}"
            rows.append((r.dist, t.label, str(t.checked), str(t.mismatches), first))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    out = []
    for j, row in enumerate(rows):
        out.append("  ".join(row[i].ljust(widths[i]) if i < 2 else row[i].rjust(widths[i]) for i in range(4))
                   + "  " + row[4])
        if j == 0:
            out.append("-" * (sum(widths) + 8 + len(rows[0][4])))
    return out


def result_json(device, spec: PathSpec, results: list[DistResult], seed: int,
                layout: dict[str, Any] | None = None) -> dict[str, Any]:
    """The --save document: device, path, per-distribution counts and counterexamples, commit."""
    doc = {
        "tool": "tcsmt hwcheck --random",
        "tcsmt_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": device.info(),
        "path": f"{spec.label.split('/')[0]}", "in_fmt": spec.in_fmt, "out_fmt": spec.out_fmt,
        "instr": spec.instr, "shape": spec.shape, "seed": seed,
        "kernel_checked_on_hardware": not spec.unchecked,
        "results": [r.as_json() for r in results],
    }
    if spec.library and hasattr(device, "library_info"):
        doc["library"] = device.library_info()
    if layout is not None:
        doc["layout_check"] = layout
    return doc


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)
