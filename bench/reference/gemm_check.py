#!/usr/bin/env python3
"""Check run_ref.py's cuBLAS GEMM mode against the vendored port (kernel_cpu.fp8_gemm/fp4_gemm).

Both compute sum_k a_q[m,k] * b_q[n,k] * a_s[m,k/32] * b_s[n or n/32, k/32] from the same fp8
activation codes and fp8/fp4 weights; the port in 32-wide K blocks of fp32, the cuBLAS mode as one
bf16 GEMM on dequantised operands. The products are exact either way, so the bf16 outputs may only
differ by summation order: the check wants at most 1 bf16 ulp on >= 99 % of the elements, and
every difference either within 1 ulp or below 2^-16 of the element's sum of |products| (where
cancellation leaves a result far below its terms, a few fp32 roundings are many of its ulps), per
shape (the released projection and expert shapes, and odd ones).

    python3 bench/reference/gemm_check.py [--device cuda|cpu] [--ref .devbin/ref]

On a torch without the fp8/fp4 dtypes (Debian's 1.13) it stands float32 tensors holding exact
e4m3 values and powers of two in for them, and int8 for packed e2m1: the same index and scale
arithmetic is checked, only the dtype casts are not.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_ref  # noqa: E402

REAL = hasattr(torch, "float8_e8m0fnu") and hasattr(torch, "float4_e2m1fn_x2")
if not REAL:
    torch.float8_e4m3fn = torch.float32
    torch.float8_e8m0fnu = torch.float32
    torch.float4_e2m1fn_x2 = torch.int8

SHAPES = [  # (M, K, N): rows, reduction, outputs
    (1, 5120, 1280),  # wq_a, decode
    (1, 1280, 32768),  # wq_b
    (4, 8192, 5120),  # wo_b
    (16, 5120, 2304),  # expert w1/w3, a prefill's share
    (16, 2304, 5120),  # expert w2
    (3, 64, 40),  # N not a multiple of 32
]


def e4m3_values(g, shape, device):
    """Random exact e4m3 values (normal and subnormal, both signs, some zeros) as float32."""
    e = torch.randint(-9, 9, shape, generator=g, device="cpu").float()
    m = torch.randint(0, 8, shape, generator=g, device="cpu").float()
    v = torch.where(e < -6, m / 8 * 2.0**-6, (1 + m / 8) * torch.pow(2.0, e.clamp(min=-6)))
    v = torch.where(torch.rand(shape, generator=g, device="cpu") < 0.5, -v, v)
    return v.to(device)


def pow2(g, shape, lo, hi, device):
    return torch.pow(2.0, torch.randint(lo, hi, shape, generator=g, device="cpu").float()).to(device)


def as_fp8(v):
    return v.to(torch.float8_e4m3fn) if REAL else v


def as_e8m0(v):
    return v.to(torch.float8_e8m0fnu) if REAL else v


def dequant(q, s, rows_per_scale):
    """float64 values of codes q [R, K] (fp8, or e2m1 already unpacked) times scales s."""
    s = s.double().repeat_interleave(rows_per_scale, 0)[: q.size(0)].repeat_interleave(32, 1)
    return q.double() * s


def ulps(a, b):
    """|a - b| in bf16 ulps of b (a, b bf16)."""
    a, b = a.float(), b.float()
    ulp = torch.pow(2.0, torch.floor(torch.log2(b.abs().clamp(min=2.0**-126))) - 7)
    return ((a - b).abs() / ulp).round()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--ref", default=os.path.join(run_ref.REPO, ".devbin", "ref"))
    a = p.parse_args()
    torch.set_default_dtype(torch.bfloat16)
    if hasattr(torch, "set_default_device"):
        torch.set_default_device(a.device)
    try:
        M, K, _ = run_ref.import_reference(os.path.abspath(a.ref))
    except run_ref.BadInput as e:
        sys.exit(f"gemm_check: {e}")
    cub = run_ref.CublasGemms(torch, K)
    g = torch.Generator(device="cpu").manual_seed(7)
    ok = True
    for m, k, n in SHAPES:
        a_q = as_fp8(e4m3_values(g, (m, k), a.device))
        a_s = as_e8m0(pow2(g, (m, k // 32), -12, -2, a.device))
        # fp8 weight: one scale per 32x32 block
        b = as_fp8(e4m3_values(g, (n, k), a.device))
        b_s = as_e8m0(pow2(g, ((n + 31) // 32, k // 32), -10, -4, a.device))
        # fp4 weight: packed e2m1 codes, one scale per row and 32 along K
        codes = torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.int32, device="cpu").to(torch.uint8).to(a.device)
        w4 = codes.view(torch.int8).view(torch.float4_e2m1fn_x2) if REAL else codes.view(torch.int8)
        w4_s = as_e8m0(pow2(g, (n, k // 32), -6, 0, a.device))
        for name, port, mine in (
            ("fp8", K.fp8_gemm(a_q, a_s, b, b_s, None, 32), cub.fp8_gemm(a_q, a_s, b, b_s, None, 32)),
            ("fp4", K.fp4_gemm(a_q, a_s, w4, w4_s, None, 32), cub.fp4_gemm(a_q, a_s, w4, w4_s, None, 32)),
        ):
            u = ulps(mine, port)
            within1 = (u <= 1).float().mean().item()
            worst = u.max().item()
            A = dequant(a_q, a_s, 1)
            Bq = (b, b_s, 32) if name == "fp8" else (K.unpack_fp4(w4), w4_s, 1)
            terms = A.abs() @ dequant(*Bq).abs().T
            excess = ((mine.double() - port.double()).abs() / terms.clamp(min=1e-300))[u > 1]
            worst_rel = excess.max().item() if excess.numel() else 0.0
            good = port.shape == mine.shape and within1 >= 0.99 and worst_rel <= 2.0**-16
            ok &= good
            print(f"{name} M={m:<3} K={k:<5} N={n:<6} within 1 ulp {within1 * 100:6.2f} %  worst {worst:.0f} ulp"
                  f" (beyond 1 ulp: {worst_rel:.1e} of the sum of |products|)  {'ok' if good else 'FAIL'}")
    print(f"gemm_check: {'pass' if ok else 'FAIL'} ({'real fp8/fp4 dtypes' if REAL else 'stand-in dtypes'}, "
          f"torch {torch.__version__}, {a.device})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
