"""A few library calls under cuBLAS / cuBLASLt logging (set CUBLASLT_LOG_LEVEL etc. in the environment):
shows what torch hands cuBLAS and which algorithm (split-K count included) the library logs."""
import torch

dev = "cuda"
a = torch.randn(64, 4096, device=dev).to(torch.bfloat16)
b = torch.randn(4096, 64, device=dev).to(torch.bfloat16)
bias = torch.randn(64, device=dev).to(torch.bfloat16)
print("mm bf16 64x64x4096", flush=True)
torch.mm(a, b)
print("mm bf16 -> fp32 64x64x4096", flush=True)
torch.mm(a, b, out_dtype=torch.float32)
print("addmm bias bf16 64x64x4096", flush=True)
torch.addmm(bias, a, b)
A = torch.randn(1024, 1024, device=dev).to(torch.bfloat16)
print("mm bf16 1024^3", flush=True)
torch.mm(A, A)
one = torch.ones((), device=dev)
a8 = a.to(torch.float8_e4m3fn)
b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
print("scaled_mm e4m3 -> bf16 64x64x4096", flush=True)
torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
torch.backends.cuda.matmul.allow_tf32 = True
x = torch.randn(64, 4096, device=dev)
y = torch.randn(4096, 64, device=dev)
print("mm tf32 64x64x4096", flush=True)
torch.mm(x, y)
torch.cuda.synchronize()
