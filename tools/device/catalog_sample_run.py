"""Run calls that the plan catalogs answer on this GPU and keep sampled output bits, for a bit-exact replay on the CPU.

    python3 tools/device/catalog_sample_run.py LIST.json OUT.json.gz [SECONDS]   (GPU host; torch, numpy, tcsmt)

LIST (``python -m tools.library.catalog_samples pick``): ``calls``, each a call spec as ``tcsmt record`` takes it
(:func:`tcsmt.library.lookup.record_spec`: op, shape, dtypes, layouts ``a_t``/``b_t``, flags, ``settings``), an
input distribution ``dist`` and a ``seed``; optionally ``samples``, the positions asked per call (default
:data:`SAMPLES`).  For each call: the inputs of
:func:`tcsmt.hwcheck.library_calls.make_inputs` (seeded, rebuilt on the CPU), the call made through torch with its
operand layouts (:func:`tcsmt.hwcheck.library_calls.run_call`) under its BLAS library and split-K switch
(:func:`tcsmt.hwcheck.stamp.apply_setting`; settings that are environment variables act at process start and are
refused here), the outputs at :func:`tcsmt.hwcheck.library_calls.sample_positions` kept as hex patterns, and the
kernels torch.profiler saw.  Calls are run in the list's order until SECONDS (default 240) have passed; the rest are
listed as not run.  OUT holds the device stamp (:func:`tcsmt.hwcheck.stamp.running_stamp`) and the list's fields.
``python -m tools.library.catalog_samples replay OUT --gpu G`` then evaluates every sample under the shipped catalog.
"""
import gzip
import json
import sys
import time

SAMPLES = 128
"""Sampled output positions asked per call (:func:`tcsmt.hwcheck.library_calls.sample_positions`; a ``bmm`` gets them
in its first and last batch and a few in the others)."""
KEPT = 256
"""Samples kept per call (the first ones: what ``catalog_samples replay`` reads)."""


def main() -> int:
    import torch

    from tcsmt.hwcheck.library_calls import make_inputs, run_call, sample_positions
    from tcsmt.hwcheck.stamp import apply_setting, read_setting, running_stamp
    from tcsmt.library.lookup import parse_record_spec
    from tcsmt.library.settings import parse_settings_key

    spec_list = json.load(open(sys.argv[1]))
    out_path = sys.argv[2]
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 240.0
    asked = int(spec_list.get("samples", SAMPLES))  # a probe list may ask for more (16-bit outputs hide K-chain changes)
    kept = max(KEPT, asked)
    t0 = time.time()
    before = read_setting(torch)
    done, failed, not_run = [], [], []
    for n, item in enumerate(spec_list["calls"]):
        if time.time() - t0 > budget:
            not_run = [x["spec"] for x in spec_list["calls"][n:]]
            break
        call = parse_record_spec(item["spec"])
        vc = {k: getattr(call, k) for k in ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias",
                                            "alpha", "beta", "tf32", "scale", "fast_accum", "a_t", "b_t")}
        vc["dist"] = item["dist"]
        try:
            s = parse_settings_key(call.settings)
            if set(s) - {"blas", "reduced"}:
                raise ValueError(f"settings {call.settings!r} act at process start")
            inputs = make_inputs(vc, int(item["seed"]))
            apply_setting(torch, s.get("blas", "cublas"), s.get("reduced", (True, True)))
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                out = run_call(torch, vc, inputs, "cuda")
                torch.cuda.synchronize()
            kernels = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
        except Exception as exc:  # a device host tool: every failure is recorded, the run goes on
            failed.append({**item, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"})
            continue
        finally:
            apply_setting(torch, before["blas"], before["reduced"]["bfloat16"])
        width = out.dtype.itemsize * 2
        pos = sample_positions(vc, int(item["seed"]), asked)[:kept]
        done.append({**item, "kernels": kernels, "samples": [[*map(int, p), f"0x{int(out[p]):0{width}x}"] for p in pos]})
        if len(done) % 50 == 0:
            print(f"{len(done)} calls run, {time.time() - t0:.0f} s", flush=True)
    doc = {**{k: v for k, v in spec_list.items() if k != "calls"}, "stamp": running_stamp(torch),
           "tool": "tools/device/catalog_sample_run.py", "seconds": round(time.time() - t0, 1),
           "calls": done, "failed": failed, "not_run": not_run}
    with gzip.open(out_path, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{len(done)} calls run, {len(failed)} failed, {len(not_run)} not run, {time.time() - t0:.0f} s -> {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
