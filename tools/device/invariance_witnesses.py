"""Confirm ``tcsmt invariance`` witnesses on a GPU: the same row at two token counts gives the bits predicted.

Three steps (the middle one on the GPU host, torch and numpy only, no tcsmt):

    python -m tools.device.invariance_witnesses prepare --gpu h200 --out W.json [--layer MODEL:LAYER[:PRODUCT]]...
    python tools/device/invariance_witnesses.py run W.json RESULT.json          (on the GPU)
    python -m tools.device.invariance_witnesses analyze W.json RESULT.json --gpu h200 --json OUT.json

``prepare`` studies each layer over 1..16384 tokens (:func:`tcsmt.library.invariance.study`), makes a witness
row for every pair of its plans (library discriminate) and adds two random rows (normal-like values) per layer;
it lists the token counts to run: 1, each plan's first count, both sides of each change (the first 24), the
last count.  ``run`` computes, for each layer and each listed count M, the call with the witness row in a row of
A (random bf16 rows elsewhere) and its column in B, and keeps that output's bits.  ``analyze`` says, for each
witness of a pair of plans, whether the row at the two plans' counts gave different bits on the GPU and the
ones predicted, and for every count and row whether the GPU's bits are those of the plan recorded for that count.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_LAYERS = ("llama-3-8b:down_proj", "llama-3-8b:q_proj", "llama-3-8b:k_proj", "llama-3-8b:gate_proj",
                  "qwen2.5-7b:down_proj", "qwen2.5-7b:q_proj", "gpt2:lm_head", "mixtral-8x7b:block_sparse_moe.gate",
                  "bert-base:output.dense", "llama-3-8b:down_proj:input-grad")
MAX_CHANGES = 24
RANDOM_COLS = 128


# ------------------------------------------------------------------ run (GPU host: torch and numpy only)
def run(wfile: str, rfile: str) -> None:
    import torch

    doc = _read(wfile)
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "layers": []}
    for L in doc["layers"]:
        res["layers"].append(_run_layer(torch, L))
        print(f"{L['name']}: {len(L['counts'])} counts x {len(L['witnesses'])} witness rows", flush=True)
    Path(rfile).write_text(json.dumps(res) + "\n")


def _run_layer(torch: Any, L: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    dev = "cuda"
    i16 = torch.int16
    c = L["call"]
    dt = getattr(torch, c["a_dtype"])
    M_max, N, K = max(L["counts"]), c["N"], c["K"]
    g = torch.Generator(device=dev).manual_seed(L["seed"])
    X0 = (torch.randn(M_max, K, device=dev, generator=g) * 0.5).to(dt)
    W = (torch.randn(N, K, device=dev, generator=g) * 0.05).to(dt)  # column j of B is row j of W

    def t16(pairs: list, n: int) -> Any:
        v = np.zeros(n, dtype=np.uint16)
        for k, h in pairs:
            v[int(k)] = int(h, 16)
        return torch.from_numpy(v.view(np.int16)).to(dev).view(dt)

    rows = []
    if len(L["witnesses"]) > N:
        raise SystemExit(f"{L['name']}: {len(L['witnesses'])} rows need as many columns (N = {N})")
    for w, wit in enumerate(L["witnesses"]):
        rows.append(t16(wit["a"], K))
        W[w] = t16(wit["b"], K)

    def apply(X: Any) -> Any:
        if c["op"] == "linear":
            return torch.nn.functional.linear(X, W, bias)
        if c["op"] == "mm":
            return torch.mm(X, W.t() if c["b_t"] else W.t().contiguous())
        raise SystemExit(f"op {c['op']} not run here")

    bias = None
    nw_ = len(L["witnesses"])
    if c["bias"]:
        bias = (torch.randn(N, device=dev, generator=g) * 0.1).to(dt)
        bias[nw_:] = 0  # the random rows' columns: a zero bias, as predicted
        for w, wit in enumerate(L["witnesses"]):
            if "bias" in wit["extras"]:
                bias[w] = t16([[0, wit["extras"]["bias"][0]]], 1)[0]
    nw = len(rows)
    rand = []
    for r_ in L["random"]:
        a, Bc = random_block(r_, K)
        ok = int(a.astype(np.int64).sum() + Bc.astype(np.int64).sum()) == r_["checksum"]
        c0 = nw + sum(x["cols"] for x in L["random"][:len(rand)])
        W[c0:c0 + r_["cols"]] = torch.from_numpy(np.ascontiguousarray(Bc.T).view(np.int16)).to(dev).view(dt)
        rand.append((torch.from_numpy(a.view(np.int16)).to(dev).view(dt), c0, r_["cols"], ok))
    out, rout = [], []
    for M in L["counts"]:
        got_r = []
        for a_t, c0, nc, _ in rand:
            X = X0[:M].clone()
            X[0] = a_t
            Y = apply(X)
            got_r.append([f"0x{v & 0xFFFF:x}" for v in Y[0, c0:c0 + nc].view(i16).tolist()])
        rout.append(got_r)
        got = [None] * nw
        for s in range(0, nw, M):
            X = X0[:M].clone()
            ws = list(range(s, min(nw, s + M)))
            for r, w in enumerate(ws):
                X[r] = rows[w]
            Y = apply(X)
            for r, w in enumerate(ws):
                got[w] = f"0x{int(Y[r:r + 1, w].view(i16)[0].item()) & 0xFFFF:x}"
        out.append(got)
    return {"name": L["name"], "counts": L["counts"], "bits": out, "random_bits": rout,
            "random_checksums_match": [x[3] for x in rand]}


# ------------------------------------------------------------------ prepare / analyze (tcsmt)
def random_patterns(spec: dict[str, Any], n: int, seed: int) -> Any:
    """n normal-like patterns of a 16-bit format (spec: frac_bits, bias, storage_bits): random sign, exponent
    in [lo, lo + 4], random fraction; made by multiplication from numpy's seeded generator, on either machine
    (numpy only), so the GPU host makes the same rows as the CPU that predicts them."""
    import numpy as np

    rng = np.random.default_rng(seed)
    frac = 2 ** spec["frac_bits"]
    exp = rng.integers(spec["lo"], spec["lo"] + 5, size=n) + spec["bias"]
    pat = rng.integers(0, 2, size=n) * 2 ** (spec["storage_bits"] - 1) + exp * frac + rng.integers(0, frac, size=n)
    return pat.astype(np.uint16)


def random_block(spec: dict[str, Any], K: int) -> tuple[Any, Any]:
    """The random row (K,) and columns (K, cols) of one random-row entry."""
    import numpy as np

    a = random_patterns({**spec, "lo": -3}, K, spec["seed"])
    B = np.stack([random_patterns({**spec, "lo": -6}, K, spec["seed"] + 1 + c) for c in range(spec["cols"])], axis=1)
    return a, B


def prepare(gpu: str, layers: list[str], out: str, lo: int = 1, hi: int = 16384) -> None:
    import numpy as np

    from tcsmt.library.evaluate import fmt_of
    from tcsmt.library.invariance import find_layer, layer_call, study, witness

    doc: dict[str, Any] = {"what": "witness rows of tcsmt invariance to run on a GPU (tools/device/invariance_"
                                   "witnesses.py)", "gpu_plans": gpu, "token_counts": [lo, hi], "layers": []}
    for n, spec in enumerate(layers):
        model, layer, *rest = spec.split(":")
        product = rest[0] if rest else "forward"
        r = find_layer(model, layer)
        call = layer_call(int(r["N"]), int(r["K"]), "bfloat16", product=product, bias=bool(r["bias"]),
                          layout=r["layout"])
        st = study(call, gpu, lo, hi)
        wits = []
        for i, j in st.pairs("all"):
            w = witness(st, i, j)
            if w is not None:
                wits.append(w.to_json())
        fmt = fmt_of(call.a_dtype)
        cols = min(RANDOM_COLS, (call.N - len(wits)) // 2)  # two random rows, each on its own columns
        rand = [{"how": f"random row {t} at {cols} columns", "seed": 100_000 * n + 1000 * t, "cols": cols,
                 "frac_bits": fmt.frac_bits, "bias": fmt.bias, "storage_bits": fmt.storage_bits,
                 "checksum": None} for t in range(2)]
        for r_ in rand:
            a, B = random_block(r_, call.K)
            r_["checksum"] = int(a.astype(np.int64).sum() + B.astype(np.int64).sum())
        counts = {lo, hi, *(c.first for c in st.classes)}
        for ch in st.changes[:MAX_CHANGES]:
            counts.update((ch.at - 1, ch.at))
        doc["layers"].append({"name": f"{model} {r['layer']} {product}", "seed": n,
                              "call": {"op": call.op, "N": call.N, "K": call.K, "a_dtype": call.a_dtype,
                                       "bias": call.bias, "b_t": call.b_t, "label": st.to_json()["call"]},
                              "classes": [c.summary() for c in st.classes],
                              "runs": [list(x) for x in st.runs], "counts": sorted(counts), "witnesses": wits,
                              "random": rand})
        print(f"{spec}: {len(st.classes)} plans, {len(wits)} witness rows, {len(counts)} counts", flush=True)
    Path(out).write_text(json.dumps(doc) + "\n")


def _read(path: str) -> Any:
    import gzip

    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if path.endswith(".gz") else raw)


def _shown(seen: list, i: int, j: int, cls: dict[int, int]) -> dict[str, Any] | None:
    """A row whose GPU outputs at a count of plan i and one of plan j differ, each the predicted one."""
    for how, got, pred in seen:
        for mi in (M for M in got if cls.get(M) == i and got[M] == pred[i]):
            for mj in (M for M in got if cls.get(M) == j and got[M] == pred[j]):
                if got[mi] != got[mj]:
                    return {"row": how, "token_counts": [mi, mj],
                            "outputs_differing": sum(x != y for x, y in zip(got[mi], got[mj]))}
    return None


def analyze(wfile: str, rfile: str, gpu: str) -> dict[str, Any]:
    """Each output the GPU gave against the plan ``gpu``'s tables and catalogs record for its token count (a
    count without a recorded plan is counted as not predicted), and each pair witness: did the row give
    different bits at the pair's two counts, and the bits predicted there."""
    import numpy as np

    from tcsmt.library.api import run as run_plan
    from tcsmt.library.checks import make_call
    from tcsmt.library.discriminate import effective, evaluate
    from tcsmt.library.evaluate import fmt_of
    from tcsmt.library.invariance import dense, plan_summary
    from tcsmt.library.lookup import answers_over, catalogs
    from tcsmt.library.plans import tables

    W, R = _read(wfile), _read(rfile)
    out: dict[str, Any] = {"what": "tcsmt invariance witnesses run on a GPU: for each layer, the witness row of "
                                   "each pair of its plans (one output each; the plans and counts of the "
                                   "witness file's GPU) and two random rows (at the listed columns) at the "
                                   "listed token counts, against the outputs predicted under the plan that "
                                   f"the {gpu} tables and catalogs record for each count",
                           "device": R["device"], "torch": R["torch"], "plans_of": gpu,
                           "plans_from": [Path(t.path).name for t in tables() if t.gpu == gpu]
                           + [c.name for c in catalogs() if c.gpu == gpu],
                           "witness_plans_of": W.get("gpu_plans"), "witness_file": Path(wfile).name,
                           "result_file": Path(rfile).name, "layers": []}
    for L, G in zip(W["layers"], R["layers"]):
        c = L["call"]
        call = make_call(c["op"], 1, c["N"], c["K"], a_dtype=c["a_dtype"], bias=c["bias"], b_t=c["b_t"])
        fmt = fmt_of(c["a_dtype"])
        plan_at: dict[int, Any] = {}
        groups: dict[tuple, Any] = {}
        for M in G["counts"]:
            ans = answers_over(call, gpu, M, M)[0][1]
            if ans is not None:
                plan_at[M] = groups.setdefault(effective(ans.plan), ans.plan)
        keys = {id(p): n for n, p in enumerate(groups.values())}
        pairs, rows = [], []
        seen: list[tuple[str, dict[int, tuple], dict[int, tuple]]] = []
        agree = total = unpredicted = 0
        for w, wit in enumerate(L["witnesses"]):
            a, b = dense(wit["a"], c["K"], fmt.dtype), dense(wit["b"], c["K"], fmt.dtype)  # a pair's witness
            ex = {k: np.array([int(v[0], 16)], dtype=fmt.dtype if k == "bias" else np.uint32)
                  for k, v in wit["extras"].items()}
            pred = {keys[id(p)]: f"0x{evaluate(p, a, b, ex):x}" for p in groups.values()}
            got = {M: G["bits"][n][w] for n, M in enumerate(G["counts"])}
            seen.append((wit["how"], {M: (v,) for M, v in got.items()}, {k: (v,) for k, v in pred.items()}))
            for M, bits in got.items():
                if M in plan_at:
                    total += 1
                    agree += pred[keys[id(plan_at[M])]] == bits
                else:
                    unpredicted += 1
            mi, mj = wit["token_counts"]
            pi = pred[keys[id(plan_at[mi])]] if mi in plan_at else None
            pj = pred[keys[id(plan_at[mj])]] if mj in plan_at else None
            pairs.append({"row": wit["how"], "classes": wit["classes"], "token_counts": [mi, mj],
                          "predicted_by_witness_plans": wit["outputs"], "predicted": [pi, pj],
                          "gpu": [got[mi], got[mj]], "differ_on_gpu": got[mi] != got[mj],
                          "as_predicted": [got[mi], got[mj]] == [pi, pj],
                          "counts_unlike_first": [M for M in G["counts"] if got[M] != got[G["counts"][0]]]})
        # where the GPU's bits at a count are not the prediction: the plans (of this GPU's tables and
        # catalogs, met at any count of the layer) whose outputs are the GPU's at every witness row there
        wpred = []
        for wit in L["witnesses"]:
            a, b = dense(wit["a"], c["K"], fmt.dtype), dense(wit["b"], c["K"], fmt.dtype)
            ex = {k: np.array([int(v[0], 16)], dtype=fmt.dtype if k == "bias" else np.uint32)
                  for k, v in wit["extras"].items()}
            wpred.append({keys[id(p)]: f"0x{evaluate(p, a, b, ex):x}" for p in groups.values()})
        unlike: dict[int, list[int]] = {}
        for n, M in enumerate(G["counts"]):
            if M in plan_at and any(wp[keys[id(plan_at[M])]] != G["bits"][n][w] for w, wp in enumerate(wpred)):
                unlike[M] = [k for k in keys.values() if all(wp[k] == G["bits"][n][w] for w, wp in enumerate(wpred))]
        for t, r_ in enumerate(L["random"]):
            a, Bc = random_block(r_, c["K"])
            pred_r = {}
            for p in groups.values():
                kw = {"bias": np.zeros(r_["cols"], dtype=fmt.dtype)} if "bias" in p.epilogue else {}
                pred_r[keys[id(p)]] = [f"0x{int(v):x}" for v in np.asarray(run_plan(p, a[None, :], Bc, **kw))[0]]
            gotr = {M: G["random_bits"][n][t] for n, M in enumerate(G["counts"])}
            seen.append((r_["how"], {M: tuple(v) for M, v in gotr.items()}, {k: tuple(v) for k, v in pred_r.items()}))
            first = gotr[G["counts"][0]]
            ok = sum(sum(x == y for x, y in zip(pred_r[keys[id(plan_at[M])]], v)) for M, v in gotr.items()
                     if M in plan_at)
            n_pred = r_["cols"] * sum(1 for M in gotr if M in plan_at)
            agree += ok
            total += n_pred
            unpredicted += r_["cols"] * (len(gotr) - sum(1 for M in gotr if M in plan_at))
            rows.append({"row": r_["how"], "checksum_match": G["random_checksums_match"][t],
                         "outputs_as_predicted": [ok, n_pred],
                         "outputs_unlike_first_count": {M: sum(x != y for x, y in zip(v, first))
                                                        for M, v in gotr.items() if v != first}})
        shown = {}
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                shown[f"{i}/{j}"] = _shown(seen, i, j, {M: keys[id(p)] for M, p in plan_at.items()})
        out["layers"].append({"name": L["name"], "call": c["label"], "witness_plans": L["classes"],
                              "plan_pairs_shown_on_gpu": shown,
                              "witness_runs": L["runs"], "counts_run": G["counts"],
                              "counts_with_a_plan": sorted(plan_at),
                              "plans_met": [plan_summary(p) for p in groups.values()],
                              "plan_at": {M: keys[id(p)] for M, p in plan_at.items()},
                              "counts_unlike_prediction": {M: {"recorded_plan": keys[id(plan_at[M])],
                                                               "plans_whose_outputs_the_gpu_gave": v}
                                                           for M, v in unlike.items()},
                              "outputs_as_predicted": [agree, total],
                              "outputs_not_predicted": unpredicted, "pair_witnesses": pairs, "random_rows": rows,
                              "pairs_differ_on_gpu": sum(1 for p in pairs if p["differ_on_gpu"]),
                              "pairs_confirmed": sum(1 for p in pairs if p["differ_on_gpu"] and p["as_predicted"]),
                              "pairs": len(pairs)})
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "run" and len(args) == 3:
        run(args[1], args[2])
        return 0
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tools.device.invariance_witnesses")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--gpu", default="h200")
    p.add_argument("--out", required=True)
    p.add_argument("--layer", action="append", default=None, help="MODEL:LAYER[:PRODUCT] (repeatable)")
    a = sub.add_parser("analyze")
    a.add_argument("wfile")
    a.add_argument("rfile")
    a.add_argument("--gpu", default="h200")
    a.add_argument("--json", required=True)
    ns = ap.parse_args(args)
    if ns.cmd == "prepare":
        prepare(ns.gpu, ns.layer or list(DEFAULT_LAYERS), ns.out)
    else:
        doc = analyze(ns.wfile, ns.rfile, ns.gpu)
        Path(ns.json).write_text(json.dumps(doc, indent=1) + "\n")
        for L in doc["layers"]:
            sh = L["plan_pairs_shown_on_gpu"]
            print(f"{L['name']}: {len(L['plans_met'])} {doc['plans_of']} plans met, {sum(1 for v in sh.values() if v)} "
                  f"of {len(sh)} pairs shown different on the GPU (each side as predicted); "
                  f"outputs as predicted {L['outputs_as_predicted'][0]} "
                  f"of {L['outputs_as_predicted'][1]} ({L['outputs_not_predicted']} at counts without a "
                  f"{doc['plans_of']} plan)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
