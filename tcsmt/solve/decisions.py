"""Decision vectors: per GPU generation, solver-chosen inputs that settle the open questions.

Each open question (docs/open_questions.md) is a pair of readings of one path: the model file's
primary reading (``ampere``) and a named hypothesis (``ampere:carry3``).  For every question of a
generation, ``build`` asks the solver (:func:`tcsmt.solve.discriminate.discriminate`, the same query as
``tcsmt discriminate PRIMARY HYPOTHESIS --in IN --out OUT --instr I --k K --count N``) for inputs on
which the two readings give different bits, checks by simulation that they still differ once the
hardware check pads them to whole instructions with +0 products, and writes all questions into one
bundle (schema ``tcsmt.decisions/1``): every question holds the discriminate record (its command,
solver, inputs and each reading's predicted output), so ``tcsmt hwcheck BUNDLE`` on a GPU of that
generation runs every question and says which reading the GPU confirms.

    python -m tcsmt.solve.decisions ampere            # writes vectors/ampere.json
    python -m tcsmt.solve.decisions --list            # the questions of every generation

A question the solver proves to have no discriminating input (the readings are equal on that path)
is recorded as such, with no inputs.
"""
from __future__ import annotations

import datetime as _dt
import shlex
import sys
from dataclasses import dataclass
from typing import Any

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.io.options import timeout_option
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main

SCHEMA = "tcsmt.decisions/1"


@dataclass(frozen=True)
class Question:
    """One open question on one path: the primary reading against a named hypothesis."""

    cls: str
    """The disagreement class of docs/open_questions.md (``zero-operands``, ``overflow``, ...)."""
    primary: str
    hypothesis: str
    in_fmt: str
    out_fmt: str
    instr: str
    k: int
    """The dot-product length asked for: the hardware check's instruction k where it has a kernel for the path
    (m16n8k16 for fp16/bf16 on every NVIDIA generation, so Volta's and Turing's vectors chain 4 and 2 of their
    own instructions), so that no +0 padding changes what the inputs separate (an all-(-0) sum, say)."""
    count: int = 4
    where: str = ""

    def command(self) -> str:
        words = ["tcsmt", "discriminate", self.primary, self.hypothesis, "--in", self.in_fmt, "--out", self.out_fmt,
                 "--instr", self.instr, "--k", str(self.k), "--count", str(self.count)]
        if self.where:
            words += ["--where", self.where]
        return shlex.join(words)


_TWO_BLOCK_UNDERFLOW = ",".join(f"a{i}=0" for i in range(8)) + ",|a|<=2^-60,|b|<=2^-60,|c|<=2^-120"
"""A solver hint for the underflow-sign question on paths of two blocks of 8: the first block's products zero, the
second's tiny (the sign of a sum that truncates to zero shows in the instruction's last block only: a later +0
block would make both readings +0)."""


def _zero_from(k0: int, k: int) -> str:
    """Solver hint: products k0..k-1 are 0 * 0 (the later blocks pass the first one's result on unchanged)."""
    return ",".join(f"a{i}=0,b{i}=0" for i in range(k0, k))


_TINY = "|a|<=2^-60,|b|<=2^-60,|c|<=2^-120"


def _nv(arch: str, *, bf16: bool = True, tf32: bool = True, carry: str = "", floor: bool = True,
        f16_floor: bool = True, k16: int = 16, k8: int = 8, zero_hint: str = "",
        extra: tuple[Question, ...] = ()) -> list[Question]:
    """The questions every NVIDIA generation after Volta shares (classes 1-4 and the floors)."""
    q: list[Question] = []
    wide = "bf16" if bf16 else "fp16"
    kw = k16
    first = _zero_from(8, kw) if zero_hint else ""  # two blocks of 8: ask about the first one
    q.append(Question("zero-operands", arch, f"{arch}:zero_exp126", wide, "fp32", "mma", kw, where=first))
    if tf32:
        q.append(Question("zero-operands", arch, f"{arch}:zero_exp126", "tf32", "fp32", "mma", k8))
    q.append(Question("overflow", arch, f"{arch}:overflow_max", wide, "fp32", "mma", kw))
    q.append(Question("zero-sign", arch, f"{arch}:zero_ieee", wide, "fp32", "mma", kw, where=zero_hint))
    q.append(Question("zero-sign", arch, f"{arch}:zero_positive", "fp16", "fp32", "mma", kw))
    if carry:
        q.append(Question("carry-bits", arch, f"{arch}:{carry}", "fp16", "fp32", "mma", kw))
    tiny = ",".join(x for x in (first, _TINY) if x)
    if floor:
        q.append(Question("floor", arch, f"{arch}:no_floor", wide, "fp32", "mma", kw, where=tiny))
    if f16_floor:
        small = "|a|<=2^-11,|b|<=2^-11,|c|<=2^-22"  # every product and C below 2^-21: the floor can bind
        q.append(Question("floor", arch, f"{arch}:no_floor", "fp16", "fp16", "mma", kw,
                          where=",".join(x for x in (first, small) if x)))
    return q + list(extra)


_MXF8 = "kind::mxf8f6f4.block_scale.block32.ue8m0"
_MXF4 = "kind::mxf4nvf4.block_scale"


def _nonzero_only(keep: tuple[int, ...], k: int) -> str:
    """Solver hint: every product but those at ``keep`` is 0 * 0 (the instruction stays whole, so its scale
    blocks and groups are those the GPU sees, and the circuit stays small)."""
    return ",".join(f"a{i}=0,b{i}=0" for i in range(k) if i not in keep)


def _block_scaled(arch: str, prefix: str, mxf4_instrs: tuple[str, ...]) -> list[Question]:
    """The block-scaled questions of a Blackwell generation (docs/open_questions.md, "Block-scaled paths"):
    where the scales enter (mxf8f6f4: each product or the block's exact sum; mxf4nvf4: groups of 16 or each
    product), the accumulator width (mxf8f6f4 fp4 inputs: 25 or 13 bits; mxf4nvf4: 35 or 34/36 bits), whether
    a zero group's scale exponent joins the alignment, whether a group aligns by its scales or its leading
    bit, and (ue4m3 scales) whether a group with a zero scale joins the alignment at the format's emin.  K is
    one whole instruction (32 or 64 products), with all but a few products 0 * 0."""
    mx8 = f"{prefix}.{_MXF8}"
    few8 = _nonzero_only((0, 1, 2), 32)
    q = [Question("scale-entry", arch, f"{arch}:exact_block_sum", "e4m3", "fp32", f"{mx8}.e4m3.e4m3", 32, where=few8),
         Question("scale-entry", arch, f"{arch}:exact_block_sum", "e2m1", "fp32", f"{mx8}.e2m1.e2m1", 32, where=few8),
         Question("accumulator-bits", arch, f"{arch}:hopper13", "e2m1", "fp32", f"{mx8}.e2m1.e2m1", 32, where=few8)]
    few4 = _nonzero_only((0, 1, 16, 17, 32, 48), 64)
    for instr in mxf4_instrs:
        full = f"{prefix}.{_MXF4}.{instr}"
        q += [Question("scale-entry", arch, f"{arch}:scale_products", "e2m1", "fp32", full, 64, where=few4),
              Question("zero-group", arch, f"{arch}:zero_group_skipped", "e2m1", "fp32", full, 64, where=few4),
              Question("accumulator-bits", arch, f"{arch}:f34", "e2m1", "fp32", full, 64, where=few4),
              Question("accumulator-bits", arch, f"{arch}:f36", "e2m1", "fp32", full, 64, where=few4),
              Question("group-exponent", arch, f"{arch}:group_leading_bit", "e2m1", "fp32", full, 64, where=few4)]
        if instr.endswith("ue4m3"):  # a zero scale: its group left out of E, or joining at the format's emin
            q.append(Question("zero-scale", arch, f"{arch}:zero_scale_emin", "e2m1", "fp32", full, 64, where=few4))
    return q


QUESTIONS: dict[str, list[Question]] = {
    "volta": [
        Question("zero-sign", "volta", "volta:zero_positive", "fp16", "fp32", "mma", 16),
        Question("carry-bits", "volta", "volta:carry_unbounded", "fp16", "fp32", "mma", 16),
        # one m8n8k4 instruction: +0 products padded after it leave an fp16 result unchanged (checked on build)
        Question("floor", "volta", "volta:no_floor", "fp16", "fp16", "mma", 4),
    ],
    "turing": [
        Question("turing-block", "turing", "turing:blocks4", "fp16", "fp32", "mma", 16, where=_zero_from(8, 16)),
        Question("turing-block", "turing", "turing:blocks4", "fp16", "fp16", "mma", 16, where=_zero_from(8, 16)),
        Question("carry-bits", "turing", "turing:carry3", "fp16", "fp32", "mma", 16),
        Question("zero-sign", "turing", "turing:zero_positive", "fp16", "fp32", "mma", 16),
    ],
    "ampere": _nv("ampere", carry="carry3", zero_hint=_TWO_BLOCK_UNDERFLOW),
    "ada": _nv("ada", carry="carry3", zero_hint=_TWO_BLOCK_UNDERFLOW, extra=(
        Question("zero-operands", "ada", "ada:zero_exp126", "e5m2", "fp32", "mma", 32, where=_zero_from(16, 32)),
        Question("floor", "ada", "ada:no_floor", "e4m3", "fp32", "mma", 32, where=_zero_from(16, 32)),
    )),
    "blackwell": _nv("blackwell", extra=(
        Question("zero-operands", "blackwell", "blackwell:zero_exp126", "bf16", "fp32", "tcgen05", 16),
        Question("floor", "blackwell", "blackwell:no_floor", "bf16", "fp32", "tcgen05", 16, where=_TINY),
        Question("overflow", "blackwell", "blackwell:overflow_max", "bf16", "fp32", "tcgen05", 16),
        Question("zero-sign", "blackwell", "blackwell:zero_positive", "fp16", "fp32", "tcgen05", 16),
        *_block_scaled("blackwell", "tcgen05.mma", ("block32.ue8m0", "block16.ue8m0", "block16.ue4m3")),
    )),
    "rtx_blackwell": _block_scaled("rtx_blackwell", "mma.sync", ("block32.ue8m0", "block16.ue4m3")),
    "cdna1": [
        Question("cdna-reduction", "cdna1", "cdna1:pairwise4", "fp16", "fp32", "mfma", 8, where=_zero_from(4, 8)),
        Question("cdna-reduction", "cdna1", "cdna1:pairwise2", "bf16", "fp32", "mfma", 4),
    ],
    "cdna2": [
        Question("cdna-reduction", "cdna2", "cdna2:pairwise4", "fp16", "fp32", "mfma", 8,
                 where=_zero_from(4, 8) + ",c=0,a>=0"),
        Question("cdna-reduction", "cdna2", "cdna2:pairwise4", "bf16", "fp32", "mfma", 8, where=_zero_from(4, 8)),
        Question("cdna-subnormal-c", "cdna2", "cdna2:keep_subnormal_c", "fp16", "fp32", "mfma", 8,
                 where="a=0,|c|<=2^-127"),  # a subnormal C with zero products: its sign survives only if kept
    ],
    "cdna3": [
        Question("zero-operands", "cdna3", "cdna3:zeros_left_out", "bf16", "fp32", "mfma", 16,
                 where=_zero_from(8, 16)),
        Question("cdna3-alignment", "cdna3", "cdna3:c_aligned", "fp16", "fp32", "mfma", 16, where=_zero_from(8, 16)),
        Question("cdna3-alignment", "cdna3", "cdna3:exact_block", "tf32", "fp32", "mfma", 8, where=_zero_from(4, 8)),
        Question("cdna3-fp8", "cdna3", "cdna3:one_window", "e4m3fnuz", "fp32", "mfma", 32, where=_zero_from(16, 32)),
        Question("cdna3-fp8", "cdna3", "cdna3:keep_small_c", "e5m2fnuz", "fp32", "mfma", 32,
                 where=_zero_from(16, 32)),
        Question("product-overflow", "cdna3", "cdna3:exact_products", "bf16", "fp32", "mfma", 16,
                 where=_zero_from(8, 16)),
    ],
}
"""The questions of each generation (docs/open_questions.md names the classes).  Volta and Turing have fp16
operands only: no fp16 dot product overflows fp32 or truncates to zero within a block (products lie in
2^-48 .. 2^32), so the overflow and IEEE-sign questions do not arise there (``tcsmt discriminate volta
volta:overflow_max --k 4`` proves the readings equal)."""


def _outputs(doc: dict[str, Any], q: Question, pad: bool) -> list[tuple[int, int]]:
    """For each input of a discriminate record: the output bits of the primary reading and of the hypothesis
    under today's model files, the input as recorded or (``pad``) padded with +0 products to a whole number of
    ``q.k``-product instructions (as ``tcsmt hwcheck`` runs it)."""
    from tcsmt.arith.formats import get_format
    from tcsmt.arith.registry import resolve
    from tcsmt.hwcheck.paths import PATHS
    from tcsmt.sim.simulator import simulate_params

    fin, fc = get_format(doc["in_fmt"]), get_format(doc["c_fmt"])
    hw = PATHS.get((fin.name, get_format(q.out_fmt).name, q.instr))
    step = hw.instr_k if hw is not None and pad else 1
    out = []
    for item in doc["inputs"]:
        K = len(item["a"])
        Kp = -(-K // step) * step
        a = np.zeros((1, Kp), dtype=fin.dtype)
        b = np.zeros_like(a)
        a[0, :K] = [int(x, 16) for x in item["a"]]
        b[0, :K] = [int(x, 16) for x in item["b"]]
        c = np.array([int(item["c"], 16)], dtype=fc.dtype)
        scales: dict[str, np.ndarray] = {}
        if "sa" in item:  # a block-scaled path: K is whole instructions (QUESTIONS), so no scale block is padded
            if Kp != K:
                raise TcsmtError(f"{q.command()}: a block-scaled question needs K a multiple of {step}")
            scales = {k: np.array([[int(x, 16) for x in item[k]]], dtype=np.uint8) for k in ("sa", "sb")}
        p, h = (int(simulate_params(resolve(s, q.in_fmt, q.out_fmt, q.instr), a, b, c, bits=True,
                                    sa=scales.get("sa"), sb=scales.get("sb"))[0])
                for s in (q.primary, q.hypothesis))
        out.append((p, h))
    return out


def _padded_differ(doc: dict[str, Any], q: Question) -> list[bool]:
    """For each input of a discriminate record: do the two readings still differ after the input is padded
    with +0 products to a whole number of ``q.k``-product instructions (as ``tcsmt hwcheck`` runs it)?"""
    return [p != h for p, h in _outputs(doc, q, pad=True)]


def still_predicted(entry: dict[str, Any], q: Question) -> bool:
    """Do today's model files still give, on every input of a bundle entry, the outputs it records for the
    primary reading and the hypothesis (so that the entry still asks its question)?  A changed primary
    reading, or a hypothesis that changed meaning, makes the entry stale."""
    if entry.get("status") != "found":
        return True
    want = [(int(i["outputs"][q.primary], 16), int(i["outputs"][q.hypothesis], 16)) for i in entry["inputs"]]
    return _outputs(entry, q, pad=False) == want


def answer(q: Question, timeout: float) -> dict[str, Any]:
    """The discriminate record of one question (status found / equivalent / timeout), inputs checked."""
    from tcsmt.solve.discriminate import discriminate
    from tcsmt.solve.report import outcome_json

    o = discriminate([q.primary, q.hypothesis], q.in_fmt, q.out_fmt, q.instr, q.k, q.count, False,
                     q.where or None, "auto", timeout)
    doc = outcome_json(o, q.command())
    if doc["inputs"]:
        keep = _padded_differ(doc, q)
        if not all(keep):
            raise TcsmtError(f"{q.command()}: {keep.count(False)} input(s) no longer separate the readings "
                             "once padded to whole instructions")
    return doc


def build(arch: str, timeout: float = 120.0, progress=None, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The decision bundle of one generation (every question answered by the solver).

    ``previous``: an earlier bundle of the generation; its answered questions (status found or equivalent,
    same command, and every input still predicted as recorded: :func:`still_predicted`) are kept, and only
    the others are asked again."""
    from tcsmt.arith.registry import find_arch

    a = find_arch(arch)
    if a.name not in QUESTIONS:
        raise TcsmtError(f"no decision questions for {arch!r} (known: {', '.join(QUESTIONS)})")
    kept = {e.get("command"): e for e in (previous or {}).get("questions", [])
            if isinstance(e, dict) and e.get("status") in ("found", "equivalent")}
    entries = []
    for q in QUESTIONS[a.name]:
        if q.command() in kept and still_predicted(kept[q.command()], q):
            entries.append(kept[q.command()])
            continue
        if progress:
            progress(f"{q.command()} ...")
        doc = answer(q, timeout)
        if progress:
            progress(f"  {doc['status']}, {len(doc['inputs'])} input(s), {doc['solve_seconds']} s")
        entries.append({"class": q.cls, "primary": q.primary, "hypothesis": q.hypothesis, "k": q.k, **doc})
    return {
        "schema": SCHEMA,
        "arch": a.name,
        "gpus": a.gpus,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": f"python -m tcsmt.solve.decisions {a.name}",
        "settles": "docs/open_questions.md",
        "how": (f"run `tcsmt hwcheck vectors/{a.name}.json` on a {' / '.join(a.gpus)}: for each question "
                "it prints which reading the GPU's bits confirm"),
        "questions": entries,
    }


def is_bundle(data: Any) -> bool:
    return isinstance(data, dict) and data.get("schema") == SCHEMA


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n\n")[0])
@click.argument("arch", required=False)
@click.option("--output", default=None, help="file to write (default vectors/ARCH.json)")
@click.option("--force", is_flag=True, help="replace an existing output file")
@timeout_option(120.0, "seconds per question")
@click.option("--list", "list_questions", is_flag=True, help="print every generation's questions")
@click.option("--retry", is_flag=True,
              help="keep the answered questions of the existing bundle whose recorded outputs the model files still give, "
                   "ask the others again, rewrite it")
def decisions_cmd(arch: str | None, output: str | None, force: bool, timeout: float, list_questions: bool,
                  retry: bool) -> int:
    from tcsmt.io import files

    if list_questions:
        for g, qs in QUESTIONS.items():
            for q in qs:
                print(f"{g:10} {q.cls:17} {q.command()}")
        return 0
    if not arch:
        raise TcsmtError(f"name a generation ({', '.join(QUESTIONS)}) or --list")
    path = output or f"vectors/{arch.lower()}.json"
    previous = None
    if retry:
        from tcsmt.sim.inputs import read_json

        previous = read_json(path)
        if not is_bundle(previous):
            raise TcsmtError(f"{path} is not a decision bundle")
    out = files.output(path, force or retry)
    bundle = build(arch, timeout, progress=lambda m: print(m, file=sys.stderr), previous=previous)
    out.write_json(bundle)
    print(f"written: {out.path}")
    return 0


main = script_main(decisions_cmd, "python -m tcsmt.solve.decisions")

if __name__ == "__main__":
    sys.exit(main())
