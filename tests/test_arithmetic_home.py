"""No model arithmetic outside the semantics layer (docs/architecture.md, "Checking 'no arithmetic
outside semantics.py'").

A syntactic guard, cheap enough for every CI run: outside the arithmetic layer (``semantics.py``, the back ends,
``formats.py``) and the declared second implementations of the semantics (the compiled CPU and CUDA kernels of
``tcsmt/kernels/``, tied to it bit for bit by tests/test_gemm_kernel.py and tests/test_gemm_cuda.py), every
function of ``tcsmt/`` and ``tools/`` that shifts a non-constant integer (``<<``, ``>>``: the way significands
are aligned, truncated and packed) or calls a rounding function (``round``, ``floor``, ``ceil``, ``trunc``,
``rint``, ``ldexp``, ``frexp``) is listed in :data:`ALLOWED` with the reason it is not model arithmetic (input
generation, bit patterns of a format's fields, presentation, a solver threshold, a static bound). A new such
function fails this test: move the arithmetic into ``semantics.py`` (and call it), or, where it is not model
arithmetic, add it here with its reason. An entry that no longer matches anything fails too, so the list stays
exact.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the arithmetic layer and the declared second implementation: shifts and roundings belong here
ARITHMETIC = {"tcsmt/arith/semantics.py", "tcsmt/arith/contract.py", "tcsmt/backends/numpy.py", "tcsmt/backends/smt.py",
              "tcsmt/backends/cupy.py", "tcsmt/arith/formats.py",
              "tcsmt/kernels/cpu.py", "tcsmt/kernels/cpu_numba.py", "tcsmt/kernels/cpu_rows.py", "tcsmt/kernels/cuda.py"}

ROUNDING = {"round", "floor", "ceil", "trunc", "rint", "around", "fix", "ldexp", "frexp"}

_INPUTS = "input generation: builds bit patterns of chosen inputs, computes no model output"
_FIELDS = "bit patterns of a format's fields (sign masks, largest pattern), not values"
_SHOW = "presentation: digits or rounded numbers for people and JSON, after the semantics computed"
_PROOF = "a solver threshold or exponent bound of a proof query (proof modules, left to the proofs work)"
_DEVICE = "device script for a bare GPU host: builds and reads probe inputs with numpy's own IEEE conversions"

#: (file, function) -> why the shift or rounding there is not model arithmetic
ALLOWED: dict[tuple[str, str], str] = {
    ("tcsmt/hwcheck/campaign.py", "_run"): _SHOW,
    ("tcsmt/hwcheck/check.py", "DistResult.as_json"): _SHOW,
    ("tcsmt/hwcheck/check.py", "mismatch_kinds"): "classifies differing output patterns by their fields (reporting)",
    ("tcsmt/hwcheck/dists.py", "_generate"): _INPUTS,
    ("tcsmt/hwcheck/dists.py", "from_exponents"): _INPUTS,
    ("tools/vectors/hopper_vectors.py", "c_alone"): _INPUTS,
    ("tools/vectors/hopper_vectors.py", "zero_c"): _INPUTS,
    ("tools/vectors/hopper_vectors.py", "zero_product"): _INPUTS,
    ("tools/vectors/hopper_vectors.py", "zero_sign"): _INPUTS,
    ("tcsmt/hwcheck/library_calls.py", "_max_finite_exp"): _FIELDS,
    ("tcsmt/hwcheck/library_calls.py", "compose"): _INPUTS,
    ("tcsmt/hwcheck/library_calls.py", "make_inputs"): _INPUTS,
    ("tcsmt/hwcheck/library_calls.py", "_c_cancel_operands"): _INPUTS,
    ("tcsmt/hwcheck/library_calls.py", "_beta_split_inputs"): _INPUTS,
    ("tcsmt/hwcheck/library_calls.py", "_truncated"): "input generation: cuts a value to a piece of the 16-bit format "
                                                      "(beta_split's exact pieces of RN32(beta * c)), no model output",
    ("tcsmt/hwcheck/library_calls.py", "_patterns"): "input generation: bit patterns of values the format holds "
                                                     "exactly (checked), not a rounding",
    ("tcsmt/hwcheck/library_calls.py", "random_matrix"): _INPUTS,
    ("tcsmt/hwcheck/library_calls.py", "values"): "reads recorded probe patterns back as values (exact decoding)",
    ("tools/device/gemv_probes.py", "main"): "rounds seconds for the progress line",
    ("tools/device/gemv_scan.py", "main"): "rounds seconds for the progress line",
    ("tools/device/gemv_params.py", "main"): "rounds seconds for the run's header",
    ("tools/device/gemv_scan.py", "scan_params"): "probe positions: a power of two times a small multiple (1 << n)",
    ("tools/device/gemv_scan.py", "kept"): "rounds exact integer counts held as float64 to uint8 (probe read-out)",
    ("tools/library/gemv_scan_fit.py", "table_points"): "index arithmetic: evenly spread picks among call shapes",
    ("tools/device/catalog_sample_run.py", "main"): "rounds seconds for the run's header",
    ("tools/device/record_missing_check.py", "main"): "rounds seconds for the run's rows",
    ("tools/library/gemv_probe_lists.py", "spread"): "evenly spaced list positions (ranks), not values",
    ("tools/device/segment_k_samples.py", "main"): "rounds seconds for the run's header",
    ("tools/device/gemv_probes.py", "random_bits"): "input generation: bf16/fp16 bit patterns from random fields",
    ("tools/device/gemv_probes.py", "reveal"): "rounds exact integer counts held as float64 to int (probe read-out)",
    ("tools/device/library_plans.py", "<module>"): _DEVICE,
    ("tools/device/record_plans.py", "parse_mspec"): _DEVICE,
    ("tools/device/record_plans.py", "log_uniform"): _DEVICE,
    ("tools/device/record_plans.py", "random_calls"): _DEVICE,
    ("tools/device/record_plans.py", "worker.run_task"): _DEVICE,
    ("tools/device/record_plans.py", "merge"): _DEVICE,
    ("tools/device/record_plans.py", "_write"): _DEVICE,
    ("tcsmt/library/recordings.py", "token_counts"): "the recorded token-count grid (powers of two), not values",
    ("tools/device/library_plans.py", "candidate_starts"): _DEVICE,
    ("tools/device/library_plans.py", "extra_calls"): _DEVICE,
    ("tools/device/library_plans.py", "pattern"): _DEVICE,
    ("tools/device/library_plans.py", "reduce_probe"): _DEVICE,
    ("tools/device/library_plans.py", "reduce_probe2"): _DEVICE,
    ("tools/device/library_plans.py", "round_to"): _DEVICE,
    ("tools/device/library_plans.py", "run_probe_list"): _SHOW,
    ("tools/device/library_plans.py", "slice_probe"): _DEVICE,
    ("tcsmt/solve/discriminate.py", "_mag_mask"): _FIELDS,
    ("tcsmt/solve/probe.py", "_probe_values"): _INPUTS,
    ("tcsmt/solve/probe.py", "_random_finite"): _INPUTS,
    ("tcsmt/solve/probe.py", "probe_row"): _INPUTS,
    ("tcsmt/identify/report.py", "result_json"): _SHOW,
    ("tcsmt/peers/mmasim.py", "MmaSim.tensor"): "packs two e2m1 patterns per byte for MMA-Sim's input tensors",
    ("tcsmt/peers/mmasim.py", "MmaSim.patterns"): "reads MMA-Sim's output tensors back as bit patterns (a width mask)",
    ("tcsmt/peers/mmasim.py", "compare_path"): _SHOW,
    ("tcsmt/peers/rows.py", "_kind"): _INPUTS,
    ("tcsmt/identify/result.py", "Experiment.as_json"): _SHOW,
    ("tcsmt/identify/search.py", "_patterns"): _INPUTS,
    ("tcsmt/identify/search.py", "random_rows"): _INPUTS,
    ("tcsmt/solve/inert.py", "_largest"): "static pass: a bound on the values a stage can reach (docs/architecture.md)",
    ("tcsmt/solve/inert.py", "_round"): "static pass: a bound on the values a stage can reach (docs/architecture.md)",
    ("tcsmt/sim/inputs.py", "_convert_chunk"): "exact conversion of user arrays to bit patterns (input layer)",
    ("tcsmt/sim/inputs.py", "_integer_patterns"): "checks that integer arrays fit the format's width (input layer)",
    ("tcsmt/library/discriminate.py", "_random_value"): _INPUTS,
    ("tcsmt/solve/query_report.py", "feature_report"): _SHOW,
    ("tcsmt/solve/query_report.py", "monotonicity_report"): _SHOW,
    ("tcsmt/solve/report.py", "bit_diagram"): "presentation: the digits of an exact value; the cut is "
                                        "semantics.first_block_cut",
    ("tcsmt/solve/report.py", "outcome_json"): _SHOW,
    ("tcsmt/solve/encode.py", "finite_constraint"): _FIELDS,
    ("tcsmt/solve/evaluate.py", "_eval_node"): "SMT-LIB's own bit-vector operators, evaluated by their definitions",
    ("tcsmt/solve/evaluate.py", "_mask"): "SMT-LIB's own bit-vector operators, evaluated by their definitions",
    ("tcsmt/solve/evaluate.py", "_signed"): "SMT-LIB's own bit-vector operators, evaluated by their definitions",
    ("tcsmt/arith/values.py", "naf_terms"): _SHOW,
    ("tcsmt/cli/verify_lines.py", "_num"): _SHOW,
    ("tcsmt/verify/domain.py", "Domain.exp_range"): _FIELDS,
    ("tcsmt/verify/evaluate.py", "random_inputs"): _INPUTS,
    ("tcsmt/verify/absolute.py", "compose_abs"): _PROOF,
    ("tcsmt/verify/absolute.py", "_ootomo"): _PROOF,
    ("tcsmt/verify/absolute.py", "_top_split"): _PROOF,
    ("tcsmt/verify/compare.py", "_short"): _INPUTS,
    ("tcsmt/verify/compare.py", "candidate_rows"): _INPUTS,
    ("tcsmt/verify/compare.py", "_transfer"): _INPUTS,
    ("tcsmt/verify/rounding_rows.py", "cut"): _INPUTS,
    ("tcsmt/verify/rounding_rows.py", "midpoint_distance"): "a filter of input generation: ranks seeded rows by "
    "the fp64 distance of their sum to an fp32 midpoint; every answer is replayed exactly",
    ("tcsmt/verify/rounding_rows.py", "factored_rows"): _INPUTS,
    ("tcsmt/verify/rounding_rows.py", "factored_rows.place"): _INPUTS,
    ("tcsmt/verify/rounding_rows.py", "_tune_last"): _INPUTS,
    ("tcsmt/verify/rounding_rows.py", "short_tuned_rows"): _INPUTS,
    ("tcsmt/verify/search.py", "wrap_rows"): _INPUTS,
    ("tcsmt/verify/search.py", "refine_abs"): _INPUTS,
    ("tcsmt/verify/lemmas.py", "chain_lemma"): _PROOF,
    ("tcsmt/verify/proof.py", "_block_const"): _PROOF,
    ("tcsmt/verify/proof.py", "_rn32_const"): _PROOF,
    ("tcsmt/verify/proof.py", "compose"): _PROOF,
    ("tcsmt/verify/proof.py", "_ootomo_chains"): _PROOF,
    ("tcsmt/verify/stages.py", "round_lemma"): _PROOF,
    ("tcsmt/verify/stages.py", "band_round_lemma"): _PROOF,
    ("tcsmt/verify/stages.py", "_round_query"): _PROOF,
    ("tcsmt/verify/absolute.py", "_Chain._align"): _PROOF,
    ("tcsmt/verify/lemmas.py", "instr_lemma"): _PROOF,
    ("tcsmt/verify/lemmas.py", "lo_within"): _PROOF,
    ("tcsmt/verify/lemmas.py", "short_dyadic"): _PROOF,
    ("tcsmt/verify/search.py", "_dyadic"): _PROOF,
    ("tcsmt/verify/smt.py", "exceeds"): _PROOF,
    ("tcsmt/solve/where.py", "parse_where"): _FIELDS,
}


def _is_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) or (isinstance(node, ast.BinOp) and _is_constant(node.left)
                                                and _is_constant(node.right))


def arithmetic_sites() -> dict[tuple[str, str], set[str]]:
    """(file, function) -> the kinds of shift or rounding found there, outside :data:`ARITHMETIC`."""
    found: dict[tuple[str, str], set[str]] = {}

    def visit(node: ast.AST, where: str, fn: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            fn = f"{fn}.{node.name}" if fn != "<module>" else node.name
        kind = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.LShift, ast.RShift)) and not _is_constant(node):
            kind = "shift"
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.LShift, ast.RShift)):
            kind = "shift"
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in ROUNDING:
                kind = name
        if kind:
            found.setdefault((where, fn), set()).add(kind)
        for child in ast.iter_child_nodes(node):
            visit(child, where, fn)

    for folder in ("tcsmt", "tools"):
        for path in sorted((REPO / folder).rglob("*.py")):
            where = path.relative_to(REPO).as_posix()
            if where not in ARITHMETIC:
                visit(ast.parse(path.read_text(), where), where, "<module>")
    return found


def test_no_model_arithmetic_outside_the_semantics():
    sites = arithmetic_sites()
    new = {site: sorted(kinds) for site, kinds in sites.items() if site not in ALLOWED}
    assert not new, (f"shifts or roundings outside semantics.py: {new}; model arithmetic belongs in "
                     "tcsmt/arith/semantics.py (call it from there); anything else goes into ALLOWED with its reason")
    stale = sorted(set(ALLOWED) - set(sites))
    assert not stale, f"ALLOWED names functions with no shift or rounding any more (remove them): {stale}"


def test_the_guard_sees_a_shift_and_a_rounding(tmp_path, monkeypatch):
    """The scan finds what it is meant to find (a check that cannot fail checks nothing)."""
    fake = tmp_path / "tcsmt"
    fake.mkdir()
    (tmp_path / "tools").mkdir()
    (fake / "report_x.py").write_text("def cut(m, e):\n    return m >> e\n\n\ndef show(x):\n    return round(x, 3)\n"
                                      "\n\nLIMIT = 1 << 18\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert arithmetic_sites() == {("tcsmt/report_x.py", "cut"): {"shift"}, ("tcsmt/report_x.py", "show"): {"round"}}
