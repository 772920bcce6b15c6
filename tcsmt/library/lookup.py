"""Which plan cuBLAS runs for one call on one GPU, and why we know: the one place that answers or refuses.

The sources, in order:

1. the plan tables (``models/library/*.toml``): calls recorded with their outputs validated (:mod:`tcsmt.library.plans`);
2. the plan catalogs (``models/library/*.sqlite``, and the folders of user recordings: ``$TCSMT_PLANS``, a list
   of folders separated by ``:``, or the ``plans_dirs`` argument): calls recorded at scale
   (:mod:`tcsmt.library.catalog`), each plan converted by the tables' own rules;
3. nothing else: every other call is refused with one line that says what is unknown and the command that
   records it on a GPU (``tcsmt record``).  A plan is never guessed.

A catalog made on another GPU or library version answers only for its own ``gpu`` name; where several catalogs
of one GPU cover a call, they must agree on its arithmetic (:meth:`Plan.arithmetic`), else the call is refused.
With ``stamp`` (the running GPU's name, SM count and library versions, :func:`tcsmt.hwcheck.stamp.running_stamp`),
only catalogs recorded under exactly those are used, and a mismatch is named in the refusal.

A call is written, for ``tcsmt record --call`` and in refusals, as ``OP MxNxK DTYPE [key=value ...]``
(:func:`record_spec`, read back by :func:`parse_record_spec`).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcsmt.arith.registry import gpu_of_device
from tcsmt.errors import TcsmtError
from tcsmt.library.catalog import Catalog, Hit, catalogs_in
from tcsmt.library.checks import make_call
from tcsmt.library.plans import Call, Plan, PlanTable, gpus, plans_dir, table_lookup, tables
from tcsmt.library.predict import Prediction, continuation
from tcsmt.library.settings import DEFAULT, parse_settings_key, settings_key

PLANS_ENV = "TCSMT_PLANS"
RECORD_ENV = "TCSMT_RECORD"
"""A folder: the torch facade records there, on the spot, the CUDA calls no catalog holds (its ``record=``)."""


@dataclass(frozen=True)
class Target:
    """Where and how a call runs, beyond its shape and dtypes: the GPU's plan name, the running GPU's stamp (None:
    any recording of that GPU), the settings key (:mod:`tcsmt.library.settings`), the operand layouts, and the
    folders of user recordings (None: ``$TCSMT_PLANS``), and where a call no catalog under ``stamp`` holds is recorded
    on the spot (``record``: a folder; ``device_index``: the CUDA device the call's tensors live on;
    :mod:`tcsmt.library.record_missing`).  The torch facade makes one from the tensors and torch's state;
    ``tcsmt.library`` functions take it wherever they take ``gpu``."""

    gpu: str
    stamp: dict[str, Any] | None = field(default=None, hash=False)
    settings: str = "default"
    a_t: bool = False
    b_t: bool = False
    plans_dirs: tuple[str, ...] | None = None
    record: str | None = None
    device_index: int | None = None


def gpu_short_name(device_name: str) -> str:
    """The plan name of a GPU from its device name (``NVIDIA H100 80GB HBM3`` -> ``h100``): the model files' GPU
    it names (:func:`tcsmt.arith.registry.gpu_of_device`); one-line TcsmtError where it names none or several."""
    return gpu_of_device(device_name)


@dataclass(frozen=True)
class Answer:
    """A plan with where it came from: ``kind`` is ``"recorded table"``, ``"recorded catalog"`` or ``"predicted"``
    (beyond a catalog's recorded token counts: :mod:`tcsmt.library.predict`); ``evidence``
    lists the recordings (table or catalog, the run of calls) behind it."""

    plan: Plan
    kind: str
    evidence: tuple[str, ...] = field(default=())


def user_dirs(plans_dirs: tuple[str, ...] | None = None) -> tuple[Path, ...]:
    if plans_dirs is None:
        env = os.environ.get(PLANS_ENV, "")
        plans_dirs = tuple(p for p in env.split(":") if p)
    return tuple(Path(p) for p in plans_dirs)


def catalogs(plans_dirs: tuple[str, ...] | None = None) -> list[Catalog]:
    """The shipped catalogs, then the users' (``$TCSMT_PLANS`` or ``plans_dirs``)."""
    out = catalogs_in(plans_dir())
    for d in user_dirs(plans_dirs):
        if not d.is_dir():
            raise TcsmtError(f"plan folder {d} does not exist (from ${PLANS_ENV} or plans_dirs)")
        out += catalogs_in(d)
    return out


def known_gpus(plans_dirs: tuple[str, ...] | None = None) -> list[str]:
    return sorted(set(gpus()) | {c.gpu for c in catalogs(plans_dirs)})


def _stamp_mismatch(cat: Catalog, stamp: dict[str, Any]) -> str:
    diff = [f"{k} {cat.stamp.get(k)!r} (running: {v!r})" for k, v in stamp.items()
            if v is not None and cat.stamp.get(k) is not None and str(cat.stamp.get(k)) != str(v)]
    return f"{cat.name} was recorded under {', '.join(diff)}" if diff else ""


def _sources(gpu: str, plans_dirs: tuple[str, ...] | None,
             stamp: dict[str, Any] | None) -> tuple[str, list[Catalog], list[str]]:
    """The GPU's name, its catalogs usable under ``stamp``, and why the others were skipped."""
    gpu = str(gpu).lower()
    cats = [c for c in catalogs(plans_dirs) if c.gpu == gpu]
    if gpu not in known_gpus(plans_dirs):
        raise TcsmtError(f"unknown GPU {gpu!r} (plans exist for: {', '.join(known_gpus(plans_dirs)) or 'none'}; "
                         f"record plans on it with `tcsmt record`)")
    skipped = []
    if stamp is not None:
        for c in cats:
            why = _stamp_mismatch(c, stamp)
            if why:
                skipped.append(why)
        cats = [c for c in cats if not _stamp_mismatch(c, stamp)]
    return gpu, cats, skipped


def _decide(call: Call, gpu: str, cats: list[Catalog], skipped: list[str], stamped: bool,
            hits: list[Hit] | None, tabs: tuple[PlanTable, ...] | None = None) -> Answer:
    """The answer for ``call`` from the tables, then the catalogs' ``hits`` (found here where None)."""
    plan, why = table_lookup(call, gpu) if tabs is None else table_lookup(call, gpu, tabs)
    # with a stamp, the tables (recorded with the shipped catalogs' versions) count only where a catalog of this
    # GPU was recorded under the running versions
    if plan is not None and (not stamped or cats):
        return Answer(plan, "recorded table", (f"plan table {plan.table}",))
    if hits is None:
        hits = [h for c in cats for h in c.find(call)]
    planned = [h for h in hits if h.plan is not None]
    if planned:
        first = planned[0]
        assert first.plan is not None
        for other in planned[1:]:
            assert other.plan is not None
            if other.plan.arithmetic() != first.plan.arithmetic():
                raise TcsmtError(f"plan catalogs {first.catalog} and {other.catalog} disagree on {call.label()} "
                                 f"on {gpu}: refused")
        return Answer(first.plan, "recorded catalog", tuple(h.evidence() for h in planned))
    said = [continuation(c, call) for c in cats] if not hits else []
    predicted = [p for p in said if isinstance(p, Prediction)]
    if predicted and all(p.plan.arithmetic() == predicted[0].plan.arithmetic() for p in predicted):
        return Answer(predicted[0].plan, "predicted", tuple(p.evidence() for p in predicted))
    reasons = [why] if why else []
    reasons += [p for p in said if isinstance(p, str) and p]
    if len(predicted) > 1:
        reasons.append("the catalogs' predictions disagree")
    reasons += [h.why for h in hits if h.why]
    reasons += skipped
    plain = call.op in ("mm", "bmm") and not (call.bias or call.alpha != 1.0 or call.beta != 0.0)
    what = "; ".join(dict.fromkeys(reasons)) or \
        f"{'split-K' if plain else 'split-K and epilogue'} unknown (this call was not recorded)"
    raise TcsmtError(f"no recorded cuBLAS plan for {call.label()} on {gpu}: {what}; record it on that GPU with "
                     f"`tcsmt record --call '{record_spec(call)}'` (or pass plan=...)")


def answer(call: Call, gpu: str, *, plans_dirs: tuple[str, ...] | None = None,
           stamp: dict[str, Any] | None = None) -> Answer:
    """The plan of ``call`` on ``gpu`` with its provenance; TcsmtError with the reason and the recording command."""
    gpu, cats, skipped = _sources(gpu, plans_dirs, stamp)
    return _decide(call, gpu, cats, skipped, stamp is not None, None)


def recorded(call: Call, gpu: str, *, plans_dirs: tuple[str, ...] | None = None,
             stamp: dict[str, Any] | None = None) -> bool:
    """Whether a catalog of ``gpu`` usable under ``stamp`` holds a run covering ``call`` (with a plan or a refusal):
    where it does, recording the call again would read the same plan."""
    if str(gpu).lower() not in known_gpus(plans_dirs):
        return False
    _gpu, cats, _skipped = _sources(gpu, plans_dirs, stamp)
    return any(c.find(call) for c in cats)


def answers_over(call: Call, gpu: str, lo: int, hi: int, *, plans_dirs: tuple[str, ...] | None = None,
                 stamp: dict[str, Any] | None = None) -> list[tuple[int, Answer | None, str]]:
    """:func:`answer` for ``call`` at every M in lo..hi, read in one pass over each catalog: (M, the answer,
    '') or (M, None, the refusal's message) per M, in order."""
    if not 1 <= lo <= hi:
        raise TcsmtError(f"token counts run from 1 up: {lo}..{hi} is not a range")
    gpu, cats, skipped = _sources(gpu, plans_dirs, stamp)
    found: dict[int, list[Hit]] = {}
    for c in cats:
        for m, hs in c.find_over(call, lo, hi).items():
            found.setdefault(m, []).extend(hs)
    out: list[tuple[int, Answer | None, str]] = []
    tabs = tables()
    for m in range(lo, hi + 1):
        call_m = dataclasses.replace(call, M=m)
        try:
            out.append((m, _decide(call_m, gpu, cats, skipped, stamp is not None, found.get(m, []), tabs), ""))
        except TcsmtError as exc:
            out.append((m, None, str(exc)))
    return out


def lookup(call: Call, gpu: str, *, plans_dirs: tuple[str, ...] | None = None,
           stamp: dict[str, Any] | None = None) -> Plan:
    """The recorded plan of ``call`` on ``gpu`` (:func:`answer` without its provenance)."""
    return answer(call, gpu, plans_dirs=plans_dirs, stamp=stamp).plan


def _number(x: float) -> str:
    """A float as short as it reads back exactly."""
    return f"{x:g}" if float(f"{x:g}") == x else repr(x)


def record_spec(call: Call) -> str:
    """The call as ``tcsmt record --call`` and ``tcsmt explain`` write it: ``OP MxNxK DTYPE[ key=value ...]``
    (``bmm``: ``MxNxKxBATCH``; keys: ``b_dtype``, ``out_dtype``, ``tf32``, ``bias``, ``fast_accum``, ``a_t``,
    ``b_t``, ``scale``, ``alpha``, ``beta``, ``settings``, each written where it is not the default)."""
    parts = [call.op, f"{call.M}x{call.N}x{call.K}" + (f"x{call.batch}" if call.op == "bmm" else ""), call.a_dtype]
    if call.b_dtype != call.a_dtype:
        parts.append(f"b_dtype={call.b_dtype}")
    if call.out_dtype != call.a_dtype:
        parts.append(f"out_dtype={call.out_dtype}")
    for name in ("tf32", "bias", "fast_accum", "a_t", "b_t"):
        if getattr(call, name):
            parts.append(f"{name}=1")
    if call.scale:
        parts.append(f"scale={call.scale}")
    if call.alpha != 1.0:
        parts.append(f"alpha={_number(call.alpha)}")
    if call.beta != 0.0:
        parts.append(f"beta={_number(call.beta)}")
    if call.settings != DEFAULT:
        parts.append(f"settings={call.settings}")
    return " ".join(parts)


SPEC_FLAGS = ("tf32", "bias", "fast_accum", "a_t", "b_t")
SPEC_KEYS = ("b_dtype", "out_dtype", *SPEC_FLAGS, "scale", "alpha", "beta", "settings")
SPEC_FORM = "'OP MxNxK DTYPE [key=value ...]' (e.g. 'mm 4096x11008x4096 bfloat16 b_t=1')"


def _flag(text: str, key: str) -> bool:
    v = text.lower()
    if v in ("1", "true", "yes"):
        return True
    if v in ("0", "false", "no"):
        return False
    raise TcsmtError(f"{key}={text} is not 1 or 0")


def parse_record_spec(spec: str) -> Call:
    """The :class:`Call` a spec written as :func:`record_spec` writes names; one-line TcsmtError, quoting the spec,
    where it is not one (the form, a shape, a key or a value), or where torch refuses the call (:func:`make_call`)."""
    try:
        return _parse_spec(spec)
    except TcsmtError as exc:
        raise TcsmtError(f"call {spec!r}: {exc}") from None


def _parse_spec(spec: str) -> Call:
    parts = str(spec).split()
    if len(parts) < 3:
        raise TcsmtError(f"a call is {SPEC_FORM}")
    op, shape, a_dtype, *rest = parts
    dims = shape.lower().split("x")
    if len(dims) not in (3, 4) or not all(d.isdigit() for d in dims):
        raise TcsmtError(f"the shape is MxNxK (bmm: MxNxKxBATCH) of positive integers, not {shape!r}")
    if len(dims) == 4 and op != "bmm":
        raise TcsmtError("a batch (MxNxKxBATCH) applies to bmm only")
    kw: dict[str, Any] = {}
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or not value:
            raise TcsmtError(f"{item!r} is not key=value (keys: {', '.join(SPEC_KEYS)})")
        if key in kw:
            raise TcsmtError(f"{key} given twice")
        if key in SPEC_FLAGS:
            kw[key] = _flag(value, key)
        elif key in ("alpha", "beta"):
            try:
                kw[key] = float(value)
            except ValueError:
                raise TcsmtError(f"{key}={value} is not a number") from None
        elif key == "settings":
            fields = parse_settings_key(value)
            kw[key] = settings_key(a_dtype.removeprefix("torch."), **fields)
            if kw[key] != value:
                raise TcsmtError(f"settings={value} is not the canonical key of those settings "
                                 f"for {a_dtype} ({kw[key]})")
        elif key in SPEC_KEYS:
            kw[key] = value
        else:
            raise TcsmtError(f"unknown key {key!r} (keys: {', '.join(SPEC_KEYS)})")
    dm = [int(d) for d in dims]
    return make_call(op, dm[0], dm[1], dm[2], a_dtype=a_dtype, batch=dm[3] if len(dm) == 4 else 1, **kw)
