// RMSNorm and the activation quantisers (kernels.RMSNorm, numfmt.ActQuant,
// numfmt.FP4ActQuantE8M0 / E4M3). Activations are fp32 buffers holding bf16
// values, as in the reference.
#pragma once
#include "common.cuh"

// rms_norm: one warp per row of x [rows, dim]; out may alias x.
//   v = torch_sum(fp32(x²))/dim, r = 1/sqrt(v+eps), out = bf16(w·fp32(x·r))
extern "C" __global__ void rms_norm(float* out, const float* x, const float* w, int rows, int dim, float eps) {
    pdl_entry();
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return; // whole warps leave together
    const float* xr = x + (size_t)row * dim;
    float ms = torch_sum_warp([&](int j) { float v = xr[j]; return v * v; }, dim) / (float)dim;
    float rs = rsqrtf32(ms + eps);
    float* orow = out + (size_t)row * dim;
    for (int j = threadIdx.x & 31; j < dim; j += 32) orow[j] = bf16r(w[j] * (xr[j] * rs));
}

// group_absmax returns max|v| over the `block` consecutive lanes of v's
// group (block a power of two <= 32), NaN ignored as numfmt's absMax does.
__device__ __forceinline__ float group_absmax(float v, int block) {
    float a = fabsf(v);
    float m = (a > 0.0f) ? a : 0.0f;
    for (int off = block / 2; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(FULL_MASK, m, off, block);
        if (o > m) m = o;
    }
    return m;
}

// act_quant_scale is act_quant's ue8m0 block scale from the block's absmax.
__device__ __forceinline__ float act_quant_scale(float m) { return ceil_pow2(gomax(m, 1e-4f) * (1.0f / 448.0f)); }

// fp4_quant_scale is fp4_act_quant's block scale from the block's absmax
// (e4m3: e4m3 scales, else ue8m0).
__device__ __forceinline__ float fp4_quant_scale(float amax, int e4m3) {
    if (e4m3) {
        const float a = gomax(amax, 0.01171875f); // 6·2^-9
        return e4m3_to_f32(f32_to_e4m3(a / 6.0f));
    }
    const float a = gomax(amax, ldexpf(6.0f, -126));
    return ceil_pow2(a * (1.0f / 6.0f));
}

// act_quant: act_quant(x, block, "ue8m0") on n elements, one thread per
// element; block is a power of two <= 32 dividing n. out (may alias x)
// receives bf16(q·s); codes (e4m3, may be null) and scales (fp32 s per
// block, may be null) the quantised form.
extern "C" __global__ void act_quant(float* out, const float* x, unsigned char* codes, float* scales, long long n, int block) {
    pdl_entry();
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool ok = i < n;
    const float v = ok ? x[i] : 0.0f;
    const float m = group_absmax(v, block);
    const float s = act_quant_scale(m);
    if (!ok) return;
    const unsigned c = f32_to_e4m3(goclamp(div_scale(v, s), -448.0f, 448.0f));
    out[i] = bf16r(e4m3_to_f32(c) * s);
    if (codes) codes[i] = (unsigned char)c;
    if (scales && i % block == 0) scales[i / block] = s;
}

// e2m1_quant is the e2m1 code of clamp(v/s, ±6). Where v/s is an invalid
// quotient (±Inf/±Inf: s is Inf only for a block holding an Inf), x86,
// where the reference and torch ran, makes a negative NaN and the code
// becomes -6 (0xf); the GPU's NaN is positive, so that case is spelled out.
__device__ __forceinline__ unsigned e2m1_quant(float v, float s) {
    if (isinf(v) && isinf(s)) return 0xfu;
    return f32_to_e2m1(goclamp(div_scale(v, s), -6.0f, 6.0f));
}

// fp4_act_quant: fp4_act_quant(x, block, inplace, fmt) on n elements, one
// thread per element; e4m3 = 0 for ue8m0 scales (a = max(amax, 6·2^-126),
// s = 2^ceil(log2(a/6))), 1 for e4m3 scales (a = max(amax, 6·2^-9),
// s = e4m3(a/6)). q = e2m1(clamp(x/s, ±6)), out = bf16(q·s); packed (n/2
// bytes, the even element in the low nibble) and scales may be null.
extern "C" __global__ void fp4_act_quant(float* out, const float* x, unsigned char* packed, float* scales, long long n, int block, int e4m3) {
    pdl_entry();
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool ok = i < n;
    const float v = ok ? x[i] : 0.0f;
    const float amax = group_absmax(v, block);
    const float s = fp4_quant_scale(amax, e4m3);
    const unsigned c = ok ? e2m1_quant(v, s) : 0u;
    const unsigned hi = __shfl_down_sync(FULL_MASK, c, 1);
    if (!ok) return;
    out[i] = bf16r(e2m1_to_f32(c) * s);
    if (packed && (i & 1) == 0) packed[i / 2] = (unsigned char)(c | (hi << 4));
    if (scales && i % block == 0) scales[i / block] = s;
}
