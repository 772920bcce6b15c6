"""Architectures from ``models/*.toml``, reference semantics, and model specs.

A model spec names one semantics:

* ``ARCH`` or an alias (``volta``, ``v100``), with the path chosen by the
  input/output formats and instruction asked for;
* ``ARCH:HYPOTHESIS`` (a named alternative listed in the model file) and/or
  ``ARCH:key=value,key=value`` overrides, e.g. ``volta:carry_bits=2``;
* a reference: ``exact`` (exact dot product rounded once, RNE),
  ``ieee-fma32`` / ``ieee-fma64`` (sequential IEEE FMAs from C in k order),
  ``pairwise-rne`` (products rounded to fp32, RNE pairwise tree, then + C).
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tcsmt.arith.formats import get_format
from tcsmt.arith.params import ModelParams, coerce, validate
from tcsmt.errors import TcsmtError
from tcsmt.io import load
from tcsmt.io.limits import shown


def models_dir() -> Path:
    env = os.environ.get("TCSMT_MODELS")
    if env:
        return Path(env)
    found = _shipped_models_dir()
    if found is None:
        raise TcsmtError("cannot find the models/ directory (set TCSMT_MODELS)")
    return found


@cache
def _shipped_models_dir() -> Path | None:
    """The package's models/ folder, looked up once (resolving this file's path costs a system call per component,
    and every :func:`resolve` asks)."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "models", here.parent.parent / "models"):  # installed, source checkout
        if cand.is_dir():
            return cand
    return None


@dataclass
class ModelPath:
    """One path of an architecture in its model file (``[[paths]]``): its parameters and named hypotheses.

    (The same path on a GPU, with its kernel, is :class:`tcsmt.hwcheck.paths.PathSpec`.)"""

    params: ModelParams
    hypotheses: dict[str, dict[str, Any]] = field(default_factory=dict)
    hypothesis_sources: dict[str, str] = field(default_factory=dict)
    library: bool = False
    """A library GEMM call (cuBLAS through PyTorch), not one instruction: K is the whole GEMM depth."""


@dataclass
class Arch:
    name: str
    title: str
    gpus: list[str]
    aliases: list[str]
    sm: str
    paths: list[ModelPath]
    sources: list[str]
    notes: str = ""
    mixed_paths: list[ModelPath] = field(default_factory=list)
    """Paths whose B has a format of its own (``b_fmt``) or that read block scales (``scale_fmt``).

    Kept apart from ``paths`` because identify's hypothesis space (``identify_space.named_points``)
    reads ``paths`` as paths with one input format and no scale inputs; every other reader goes
    through :meth:`every_path`.  (Merge the two once identify generates B formats and scales.)"""

    def every_path(self) -> list[ModelPath]:
        """``paths`` and ``mixed_paths``, in the model file's order within each."""
        return [*self.paths, *self.mixed_paths]

    def find_paths(self, in_fmt: str | None, out_fmt: str | None, instr: str | None) -> list[ModelPath]:
        out = []
        for p in self.every_path():
            if in_fmt and p.params.in_fmt != get_format(in_fmt).name:
                continue
            if out_fmt and p.params.out_fmt != get_format(out_fmt).name:
                continue
            if instr and p.params.instr != instr:
                continue
            out.append(p)
        return out


_META_KEYS = {"hypotheses", "sources", "notes"}


def _expand_source(path: Path, shared: dict, text: str) -> str:
    """A path's source, or ``@name``: the text of ``[shared.sources] name`` (written once per file)."""
    if not text.startswith("@"):
        return text
    try:
        return str(shared["sources"][text[1:]])
    except KeyError:
        raise TcsmtError(f"model file {path}: source {text} names no entry of [shared.sources]") from None


def _shared_hypotheses(path: Path, shared: dict, names: list[str]) -> dict[str, dict[str, Any]]:
    """The hypotheses of the ``[shared.hypotheses.NAME]`` groups a path lists in ``shared_hypotheses``."""
    out: dict[str, dict[str, Any]] = {}
    for group in names:
        try:
            out.update({h: dict(v) for h, v in shared["hypotheses"][group].items()})
        except KeyError:
            raise TcsmtError(f"model file {path}: shared_hypotheses names {group!r}, which [shared.hypotheses] "
                             "does not define") from None
    return out


def _expand_b_fmts(path: Path, raws: list[dict]) -> list[dict]:
    """Paths with ``b_fmts = [...]`` (instructions that take any B format of a list with the A format,
    as kind::f8f6f4) become one path per B format, each with the instruction name
    ``INSTR.A.B`` in PTX's order of types (``tcgen05.mma.kind::f8f6f4.e4m3.e2m1``)."""
    out = []
    for raw in raws:
        if "b_fmts" not in raw:
            out.append(raw)
            continue
        raw = dict(raw)
        b_fmts = raw.pop("b_fmts")
        if not isinstance(b_fmts, list) or not b_fmts or "instr" not in raw or "in_fmt" not in raw:
            raise TcsmtError(f"model file {path}: b_fmts must be a non-empty list on a path with in_fmt and instr")
        a = get_format(raw["in_fmt"]).name
        for b in b_fmts:
            b = get_format(b).name
            out.append({**raw, "b_fmt": "" if b == a else b, "instr": f"{raw['instr']}.{a}.{b}"})
    return out


def _load_arch(path: Path) -> Arch:
    try:
        data = load.read_toml(path, "model file")
    except TcsmtError as exc:
        raise TcsmtError(f"cannot read model file: {exc}") from None
    defaults = data.get("defaults", {})
    shared = data.get("shared", {})
    paths = []
    for raw in _expand_b_fmts(path, data.get("paths", [])):
        merged = {**defaults, **raw}
        hyps = dict(merged.pop("hypotheses", {}))
        for hname, hval in _shared_hypotheses(path, shared, merged.pop("shared_hypotheses", [])).items():
            hyps.setdefault(hname, hval)
        sources = tuple(_expand_source(path, shared, s) for s in merged.pop("sources", ()))
        notes = merged.pop("notes", "")
        library = bool(merged.pop("library", False))
        kwargs = {k: coerce(k, v) for k, v in merged.items()}
        name = f"{data['name']}/{kwargs['in_fmt']}.{kwargs['out_fmt']}/{kwargs.get('instr', 'mma')}"
        params = validate(ModelParams(**kwargs, name=name, sources=sources, notes=notes))
        hyp_over, hyp_src = {}, {}
        for hname, hval in hyps.items():
            hval = dict(hval)
            hyp_src[hname] = hval.pop("source", "")
            for k, v in hval.items():
                coerce(k, v)
            hyp_over[hname] = hval
        paths.append(ModelPath(params, hyp_over, hyp_src, library))
    plain = [q for q in paths if not (q.params.b_fmt or q.params.scale_fmt)]
    mixed = [q for q in paths if q.params.b_fmt or q.params.scale_fmt]
    return Arch(
        name=data["name"], title=data.get("title", ""), gpus=list(data.get("gpus", [])),
        aliases=list(data.get("aliases", [])), sm=str(data.get("sm", "")), paths=plain,
        sources=list(data.get("sources", [])), notes=data.get("notes", ""), mixed_paths=mixed,
    )


@cache
def _archs_cached(directory: str) -> dict[str, Arch]:
    archs = {}
    for f in sorted(Path(directory).glob("*.toml")):
        a = _load_arch(f)
        archs[a.name] = a
    return archs


def architectures() -> dict[str, Arch]:
    return _archs_cached(str(models_dir()))


REFERENCES = ("exact", "ieee-fma32", "ieee-fma64", "pairwise-rne")


def reference_params(name: str, in_fmt: str, out_fmt: str) -> ModelParams:
    """The reference semantics ``name`` for the given formats."""
    fin, fout = get_format(in_fmt).name, get_format(out_fmt).name
    common: dict[str, Any] = {"in_fmt": fin, "out_fmt": fout, "c_fmt": fout, "extra_bits": "exact", "block_round": "rne",
                               "out_round": "rne", "instr": "ref", "name": name}
    if name == "exact":
        p = ModelParams(**common, acc_fmt=fout, block_k=0, instr_k=0,
                        notes="exact dot product plus C, rounded once to the output format (RNE)")
    elif name in ("ieee-fma32", "ieee-fma64"):
        acc = "fp32" if name.endswith("32") else "fp64"
        p = ModelParams(**common, acc_fmt=acc, block_k=1, instr_k=0,
                        notes=f"sequential IEEE {acc} FMAs d = fma(a_k, b_k, d) from d = C, k = 0, 1, ...")
    elif name == "pairwise-rne":
        p = ModelParams(**common, acc_fmt="fp32", block_k=0, instr_k=0, reduction="pairwise",
                        notes="products rounded to fp32 (RNE), balanced pairwise RNE sums, then + C (RNE)")
    else:
        raise TcsmtError(f"unknown reference {name!r} (known: {', '.join(REFERENCES)})")
    return validate(p)


def find_arch(name: str) -> Arch:
    key = name.strip().lower()
    archs = architectures()
    for a in archs.values():
        if key == a.name or key in [x.lower() for x in a.aliases]:
            return a
    known = ", ".join(sorted(archs)) + "; references: " + ", ".join(REFERENCES)
    raise TcsmtError(f"unknown architecture {name!r} (known: {known})")


def gpu_of_device(device: str) -> str:
    """The GPU name (``h100``, ``h200``, ``a100``, ...) of a device name as the driver reports it (``NVIDIA H100 80GB
    HBM3``): the model file's ``gpus`` entry found in it as a whole word, lower case without spaces, where it is one
    of that model's aliases.  TcsmtError where no entry or several GPUs' entries match."""
    found: dict[str, str] = {}
    for a in architectures().values():
        aliases = {x.lower() for x in a.aliases}
        for g in a.gpus:
            pat = r"(?<![A-Za-z0-9])" + r"\s*".join(re.escape(w) for w in g.split()) + r"(?![A-Za-z0-9])"
            short = "".join(g.split()).lower()
            if re.search(pat, device or "", re.IGNORECASE) and short in aliases:
                found[short] = a.name
    if len(found) != 1:
        what = "several GPUs (" + ", ".join(sorted(found)) + ")" if found else "no GPU of the model files"
        raise TcsmtError(f"cannot tell which GPU {device!r} is: its name matches {what}; name it (gpu=NAME, or "
                         f"--gpu NAME: an alias that `tcsmt models` lists)")
    return next(iter(found))


def split_spec(spec: str) -> tuple[str, list[str], dict[str, str]]:
    """``arch:hyp,key=value`` -> (arch, [hyp], {key: value})."""
    base, _, rest = spec.partition(":")
    hyps, over = [], {}
    for part in filter(None, (x.strip() for x in rest.split(","))):
        if "=" in part:
            k, v = part.split("=", 1)
            if k.strip() in over:
                raise TcsmtError(f"the parameter {shown(k.strip(), 40)} is given twice in the model spec {shown(spec)}")
            over[k.strip()] = v.strip()
        else:
            hyps.append(part)
    return base.strip(), hyps, over


_RESOLVED: dict[tuple[str, str | None, str | None, str | None], tuple[dict[str, Arch], ModelParams]] = {}
""":func:`resolve`'s answers, each with the :func:`architectures` it was read from (an answer is used again only while
that is still the one in use: another models folder or a cleared cache reads the files anew)."""


def resolve(spec: str, in_fmt: str | None = None, out_fmt: str | None = None,
            instr: str | None = None) -> ModelParams:
    """The ModelParams a spec names for the given path (see module docstring).  ModelParams is frozen, so a repeated
    question (a plan table resolves the same few chains for thousands of calls) gets the same object back."""
    if not isinstance(spec, str):
        raise TcsmtError(f"a model spec is a string such as 'volta' or 'volta:carry_bits=2', not {spec!r}")
    for what, v in (("in_fmt", in_fmt), ("out_fmt", out_fmt), ("instr", instr)):
        if v is not None and not isinstance(v, str):
            raise TcsmtError(f"{what} must be a string such as 'fp16' or 'mma', not {v!r}")
    archs, key = architectures(), (spec, in_fmt, out_fmt, instr)
    hit = _RESOLVED.get(key)
    if hit is not None and hit[0] is archs:
        return hit[1]
    p = _resolve(spec, in_fmt, out_fmt, instr)
    _RESOLVED[key] = (archs, p)
    return p


def _resolve(spec: str, in_fmt: str | None, out_fmt: str | None, instr: str | None) -> ModelParams:
    base, hyps, over = split_spec(spec)
    if base.lower() in REFERENCES:
        if hyps:
            raise TcsmtError(f"reference {base!r} has no named hypotheses")
        p = reference_params(base.lower(), in_fmt or "fp16", out_fmt or "fp32")
        label = spec
    else:
        arch = find_arch(base)
        check_instr(instr, [spec], in_fmt, out_fmt)
        cands = arch.find_paths(in_fmt, out_fmt, instr)
        if not cands:
            have = ", ".join(f"{q.params.in_fmt}->{q.params.out_fmt} ({q.params.instr})" for q in arch.every_path())
            want = f"{in_fmt or '*'}->{out_fmt or '*'}" + (f" ({instr})" if instr else "")
            raise TcsmtError(f"{arch.name} has no path {want} (it has: {have})")
        path = cands[0]
        p = path.params
        for h in hyps:
            if h not in path.hypotheses:
                known = ", ".join(path.hypotheses) or "none"
                raise TcsmtError(f"{arch.name} {p.path_id} has no hypothesis {h!r} (known: {known})")
            p = p.with_overrides(path.hypotheses[h])
        label = spec
    if over:
        p = p.with_overrides(over)
    return dataclasses.replace(p, name=label if (hyps or over or base.lower() in REFERENCES) else p.name)


def instructions(spec: str, in_fmt: str | None = None, out_fmt: str | None = None) -> list[str]:
    """The instructions (``mma``, ``wgmma``, ``cublas``, ...) that ``spec``'s architecture has on a path
    (every path where a format is None); none for a reference."""
    base = split_spec(spec)[0]
    if base.lower() in REFERENCES:
        return []
    return sorted({p.params.instr for p in find_arch(base).find_paths(in_fmt, out_fmt, None)})


def check_instr(instr: str | None, specs: list[str], in_fmt: str | None = None, out_fmt: str | None = None) -> None:
    """Refuse an ``instr`` that none of ``specs`` has on the path (a TcsmtError listing what each has).

    With several specs (``discriminate``), ``--instr`` applies to the models that have it, so one is enough.
    """
    if instr is None:
        return
    have = {s: instructions(s, in_fmt, out_fmt) for s in specs}
    if any(instr in v for v in have.values()):
        return
    path = f"{get_format(in_fmt).name if in_fmt else '*'} -> {get_format(out_fmt).name if out_fmt else '*'}"
    listing = "; ".join(f"{s}: {', '.join(v) if v else 'none (a reference has no instruction)'}"
                        for s, v in have.items())
    who = f"{specs[0]} has no" if len(specs) == 1 else "none of the models has a"
    raise TcsmtError(f"{who} path {path} with --instr {instr!r} (instructions there: {listing})")


def all_paths() -> list[tuple[Arch, ModelPath]]:
    return [(a, p) for a in architectures().values() for p in a.every_path()]
