"""What torch offers for deterministic / batch-invariant matmuls: a device probe (torch only) that prints JSON.

    python3 tools/device/torch_settings_probe.py > PROBE.json

Reads ``torch.backends.cuda.matmul``'s values and ``torch.backends.cuda``'s names, the deterministic switches,
every mention of batch invariance in torch's Python tree, libtorch_cuda's strings about split-K, workspaces and
reduced precision, runs a bf16 ``mm`` in deterministic mode without ``CUBLAS_WORKSPACE_CONFIG`` and reads the
(reduced precision, split-K) pair back (``evidence/library/h100_torch_settings_probe.json``)."""
import json
import os
import re
import sys

import torch

out = {"torch": torch.__version__, "cuda": torch.version.cuda}
m = torch.backends.cuda.matmul
out["matmul_dir"] = [n for n in dir(m) if not n.startswith("__")]
vals = {}
for n in out["matmul_dir"]:
    try:
        vals[n] = repr(getattr(m, n))[:200]
    except Exception as exc:
        vals[n] = f"unreadable: {type(exc).__name__}: {exc}"
out["matmul_values"] = vals
out["backends_cuda_dir"] = [n for n in dir(torch.backends.cuda) if not n.startswith("_")]
out["deterministic"] = {"enabled": torch.are_deterministic_algorithms_enabled(),
                        "warn_only": torch.is_deterministic_algorithms_warn_only_enabled()}
try:
    import torch.utils.deterministic as ud
    out["deterministic"]["fill_uninitialized_memory"] = ud.fill_uninitialized_memory
except Exception as exc:
    out["deterministic"]["fill_uninitialized_memory"] = repr(exc)
out["use_deterministic_algorithms_doc"] = (torch.use_deterministic_algorithms.__doc__ or "")[:6000]
for n in ("allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction"):
    try:
        out[n + "_doc"] = (type(m).__dict__.get(n).__doc__ or "")[:1500] if type(m).__dict__.get(n) else None
    except Exception as exc:
        out[n + "_doc"] = repr(exc)
# every name in torch's python tree that mentions batch invariance
root = os.path.dirname(torch.__file__)
hits = []
for dp, _dn, fn in os.walk(root):
    for f in fn:
        if f.endswith((".py", ".pyi")):
            p = os.path.join(dp, f)
            try:
                txt = open(p, errors="replace").read()
            except OSError:
                continue
            for mt in re.finditer(r"batch[_ ]invarian\w*", txt, re.I):
                line = txt[:mt.start()].count("\n") + 1
                hits.append(f"{os.path.relpath(p, root)}:{line}: {txt.splitlines()[line - 1].strip()[:160]}")
out["batch_invariant_mentions"] = hits[:200]
out["batch_invariant_mentions_total"] = len(hits)
try:
    import torch._inductor.config as ic
    out["inductor_batch_invariant"] = repr(getattr(ic, "batch_invariant", "absent"))
except Exception as exc:
    out["inductor_batch_invariant"] = repr(exc)
# the C++ library: strings about split-K / determinism in libtorch_cuda
try:
    lib = os.path.join(root, "lib", "libtorch_cuda.so")
    data = open(lib, "rb").read()
    strs = set()
    for mt in re.finditer(rb"[\x20-\x7e]{12,200}", data):
        s = mt.group().decode()
        if re.search(r"(?i)split.?k|deterministic.*cublas|cublas.*deterministic|batch.?invariant|CUBLAS_WORKSPACE|"
                     r"CUBLASLT_WORKSPACE|reduced.precision", s):
            strs.add(s)
    out["libtorch_cuda_strings"] = sorted(strs)[:150]
except Exception as exc:
    out["libtorch_cuda_strings"] = repr(exc)
# does deterministic mode require the workspace config here?
env = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
try:
    torch.use_deterministic_algorithms(True)
    a = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    out["deterministic_mm_without_env"] = f"ran (CUBLAS_WORKSPACE_CONFIG={env!r})"
except Exception as exc:
    out["deterministic_mm_without_env"] = f"{type(exc).__name__}: {str(exc)[:600]}"
finally:
    torch.use_deterministic_algorithms(False)
try:
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = (False, True)
    out["set_bf16_pair_false_true"] = repr(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    out["set_bf16_false"] = repr(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
except Exception as exc:
    out["set_bf16_pair"] = repr(exc)
json.dump(out, sys.stdout, indent=1)
