"""The torch facade recording on the spot, on the GPU: fresh calls through ``tcsmt.torch`` with ``record=DIR``, whole
outputs compared bit for bit with torch's.

    python3 tools/device/record_missing_check.py LIST.json DIR OUT.json [CALLS] [SECONDS]    (GPU host; torch, CuPy)

LIST: ``python -m tools.library.fresh_random list`` (its ``all_calls``).  The first CALLS (default 40) ``mm`` and
``linear`` calls with M N <= 2^22 and (M + N) K <= 2^26 are made on normal inputs (seeded) on the GPU: torch's output,
then the facade's (``gpu="auto"``, ``record=DIR``: the call, held by no catalog under this GPU's stamp, is recorded
first), then the facade again (answered from DIR, nothing recorded).  Each call's row: the seconds of both facade
calls, whether DIR's recording grew, and the outputs that differ, or the facade's refusal.
"""
import json
import sys
import time


def main() -> int:
    import torch

    import tcsmt.torch as tt
    from tcsmt.errors import TcsmtError
    from tcsmt.hwcheck.stamp import running_stamp
    from tcsmt.library.lookup import parse_record_spec

    listing, folder, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    n_calls = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    budget = float(sys.argv[5]) if len(sys.argv) > 5 else 200.0
    specs = json.load(open(listing))["all_calls"]
    F = torch.nn.functional
    int_of = {2: torch.int16, 4: torch.int32}
    rows, t0 = [], time.time()
    for spec in specs:
        if len(rows) >= n_calls or time.time() - t0 > budget:
            break
        c = parse_record_spec(spec)
        if c.op not in ("mm", "linear") or c.M * c.N > 1 << 22 or (c.M + c.N) * c.K > 1 << 26:
            continue
        g = torch.Generator(device="cuda").manual_seed(len(rows))
        dt = getattr(torch, c.a_dtype)
        A = (torch.randn(c.K, c.M, device="cuda", dtype=dt, generator=g).t() if c.a_t else
             torch.randn(c.M, c.K, device="cuda", dtype=dt, generator=g))
        torch.backends.cuda.matmul.allow_tf32 = bool(c.tf32)
        if c.op == "linear":
            W = torch.randn(c.N, c.K, device="cuda", dtype=dt, generator=g)
            ref = F.linear(A, W)

            def facade(A=A, W=W):
                return tt.linear(A, W, record=folder)
        else:
            B = torch.randn(c.K, c.N, device="cuda", dtype=dt, generator=g)
            od = None if c.out_dtype == c.a_dtype else getattr(torch, c.out_dtype)
            ref = torch.mm(A, B) if od is None else torch.mm(A, B, out_dtype=od)

            def facade(A=A, B=B, od=od):
                return tt.mm(A, B, out_dtype=od, record=folder)
        row = {"spec": spec}
        try:
            t1 = time.time()
            got = facade()
            t2 = time.time()
            again = facade()
            t3 = time.time()
            w = int_of[ref.element_size()]
            row.update(first_s=round(t2 - t1, 3), again_s=round(t3 - t2, 3), outputs=ref.numel(),
                       differ=int((got.view(w) != ref.view(w)).sum()), differ_again=int((again.view(w) != ref.view(w)).sum()))
        except TcsmtError as exc:
            row["refused"] = str(exc)[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    answered = [r for r in rows if "refused" not in r]
    doc = {"tool": "tools/device/record_missing_check.py", "list": listing, "stamp": running_stamp(torch),
           "calls": len(rows), "answered": len(answered),
           "bit_exact": sum(1 for r in answered if r["differ"] == 0 and r["differ_again"] == 0),
           "outputs": sum(r["outputs"] for r in answered), "outputs_differ": sum(r["differ"] for r in answered),
           "seconds": round(time.time() - t0, 1), "rows": rows}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    print({k: v for k, v in doc.items() if k != "rows"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
