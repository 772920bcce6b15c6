"""Record tf32 calls that run cuBLAS's ``segment_k_on`` kernels with their launch words, run them on seeded random
inputs, and keep sampled output bits (many in split tiles), for a bit-exact replay on the CPU.

    python3 tools/device/segment_k_samples.py LIST.json OUT.json.gz [SECONDS]   (GPU host; torch, numpy, tcsmt)

LIST (``python -m tools.library.segment_k_sample_list``): ``calls``, each a call spec as ``tcsmt record`` takes it,
an input distribution ``dist`` and a ``seed``.  First every call is recorded as ``tcsmt record`` records it
(:func:`tcsmt.hwcheck.record.record_calls`, CUDA graph capture: kernels, cuBLASLt's trace, and each ``segment_k_on``
launch's words, plan field ``segment_k_launch``); the recording is kept whole.  Then, call by call until SECONDS
(default 240) have passed: the inputs of :func:`tcsmt.hwcheck.library_calls.make_inputs` (seeded, rebuilt on the
CPU), the call made through torch on them (its operand layouts as the spec says) under torch.profiler (the kernels it
ran), then the same call on the same tensors once more under graph capture, not executed, whose ``segment_k_on``
launch words are kept too (``launch``: the words of the very operands; the replay uses the recording's and reports
where the two differ).  Kept outputs: the positions of :func:`tcsmt.hwcheck.library_calls.sample_positions` and up to
:data:`IN_SPLIT` more drawn (seeded) inside the tiles the recorded launch splits (:mod:`tcsmt.library.segment_k`), as
hex fp32 patterns.  ``python -m tools.library.segment_k_replay OUT`` replays them.
"""
import gzip
import json
import sys
import time

import numpy as np

SAMPLES = 96
IN_SPLIT = 160
FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32", "scale",
          "fast_accum", "a_t", "b_t")


def split_positions(launch, M: int, N: int, seed: int, n: int) -> list[tuple[int, int]]:
    """Up to ``n`` distinct outputs (i, j) inside the launch's split tiles, drawn with a seeded generator."""
    from tcsmt.library.segment_k import split_tiles

    tiles = sorted(split_tiles(launch))
    if not tiles:
        return []
    rng = np.random.default_rng([seed, 0x5E6])
    out: set[tuple[int, int]] = set()
    for _ in range(8 * n):
        if len(out) >= n:
            break
        ti, tj = tiles[int(rng.integers(0, len(tiles)))]
        a = ti * launch.tile_m + int(rng.integers(0, launch.tile_m))
        b = tj * launch.tile_n + int(rng.integers(0, launch.tile_n))
        if a < launch.m and b < launch.n:
            out.add((a, b) if launch.m_is_rows else (b, a))
    return sorted((i, j) for i, j in out if i < M and j < N)


def captured_launch(torch, gr, stream, vc, t):
    """The ``segment_k_launch`` words of each kernel of the call captured (not run) on tensors ``t``."""
    from tcsmt.hwcheck.plan_capture import graph_handle
    try:
        from tools.device.segment_k_params import capture_call
    except ImportError:  # run as a script: its sibling
        from segment_k_params import capture_call

    g, out = capture_call(torch, stream, vc, t)
    del out
    nodes, _chain = gr.ordered_nodes(graph_handle(g.raw_cuda_graph()))
    got = [gr.kernel(nd) for nd in nodes if gr.node_type(nd) == 0]
    del g
    return [{"name": k["name"], "segment_k_launch": k.get("segment_k_launch")} for k in got]


def main() -> int:
    import torch

    from tcsmt.hwcheck.library_calls import build_tensors, call_torch, make_inputs, out_bits, sample_positions
    from tcsmt.hwcheck.plan_capture import GraphReader
    from tcsmt.hwcheck.record import record_calls
    from tcsmt.hwcheck.stamp import running_stamp
    from tcsmt.library.lookup import parse_record_spec
    from tcsmt.library.recordings import raw_call, recorded_calls
    from tcsmt.library.segment_k import launch_of_words

    items = json.load(open(sys.argv[1]))["calls"]
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 240.0
    t0 = time.time()
    calls = []
    for item in items:
        c = parse_record_spec(item["spec"])
        calls.append({k: getattr(c, k) for k in FIELDS})
    setting = {"name": "default", "blas": "cublas", "reduced": [True, True]}
    rec = record_calls(torch, calls, setting, method="capture", batch=64, name="segment_k_samples")
    print(f"recorded {len(calls)} calls, {time.time() - t0:.0f} s", flush=True)
    recorded = []
    for tmpl, vary, ts, pid in recorded_calls(rec):
        for t in ts:
            recorded.append(raw_call(tmpl, vary, t, rec["tables"]["plans"][pid], rec["tables"]))
    gr, stream = GraphReader(), torch.cuda.Stream()
    done, failed, not_run = [], [], []
    for n, item in enumerate(items):
        if time.time() - t0 > budget:
            not_run = [x["spec"] for x in items[n:]]
            break
        vc = {**calls[n], "dist": item["dist"]}
        try:
            inputs = make_inputs(vc, int(item["seed"]))
            t = build_tensors(torch, vc, inputs, "cuda")
            call_torch(torch, vc, t)  # warm: cuBLAS handle, workspace
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                out = call_torch(torch, vc, t)
                torch.cuda.synchronize()
            kernels = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
            bits = out_bits(torch, out)
            del out
            captured = captured_launch(torch, gr, stream, vc, t)
            del t
            torch.cuda.empty_cache()
        except Exception as exc:  # a device host tool: every failure is recorded, the run goes on
            failed.append({**item, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"})
            continue
        pos = set(sample_positions(vc, int(item["seed"]), SAMPLES))
        r = recorded[n]
        words = [w for w in (r.get("segment_k_launch") or []) if w]
        seg = [k for k in r["kernels"] if "_segment_k_on_" in k]
        if words and seg:
            la = launch_of_words(words[0], seg[0])
            if not isinstance(la, str):
                pos |= set(split_positions(la, vc["M"], vc["N"], int(item["seed"]), IN_SPLIT))
        done.append({**item, "index": n, "kernels": kernels, "recorded_kernels": r["kernels"], "captured": captured,
                     "samples": [[i, j, f"0x{int(bits[i, j]):08x}"] for i, j in sorted(pos)]})
        if len(done) % 10 == 0:
            print(f"{len(done)} calls run, {time.time() - t0:.0f} s", flush=True)
    doc = {"what": "tf32 segment_k_on calls: recordings with launch words and sampled outputs "
                   "(tools/device/segment_k_samples.py)",
           "command": " ".join(sys.argv), "stamp": running_stamp(torch), "seconds": round(time.time() - t0, 1),
           "recording": rec, "calls": done, "failed": failed, "not_run": not_run}
    with gzip.open(sys.argv[2], "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{len(done)} calls run, {len(failed)} failed, {len(not_run)} not run, {time.time() - t0:.0f} s -> {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
