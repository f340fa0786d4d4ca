// Number formats and the reference's rounding points, shared by the kernels.
// Everything here mirrors internal/numfmt and backends/cpu/kernels bit for
// bit: the build passes -fmad=false so that a*b+c is two roundings, as the
// Go reference computes it, and keeps IEEE division and square root.
#pragma once

#define FULL_MASK 0xffffffffu
#define NEG_INF __uint_as_float(0xff800000u)

// pdl_entry opens every kernel (each of them calls it first, before any
// load or store of global memory; module_test checks the sources): under
// programmatic dependent launch (Hopper) it lets the next kernel of the
// stream start launching now (pdl_trigger), then waits until the kernels
// before this one have finished and their writes are visible (pdl_wait).
// So the host may launch any kernel of this image with the
// programmatic-serialization attribute, and a kernel's launch and
// prologue overlap the previous one's tail instead of following its
// completion. Launched without the attribute, both do nothing. A kernel
// may instead open with pdl_trigger and call pdl_wait itself, after a
// prologue that reads only what no kernel writes (weights: they are
// uploaded by copies, which stay ordered).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_entry() {
    pdl_trigger();
    pdl_wait();
}

// bf16r rounds f to the nearest bfloat16 (ties to even) and returns it as a
// float; NaN becomes a quiet NaN with the same sign (numfmt.BF16Bits).
__device__ __forceinline__ float bf16r(float f) {
    unsigned b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((b >> 16) | 0x40u) << 16);
    b += 0x7fffu + ((b >> 16) & 1u);
    return __uint_as_float(b & 0xffff0000u);
}

// bf16w widens stored bfloat16 bits.
__device__ __forceinline__ float bf16w(unsigned short b) { return __uint_as_float((unsigned)b << 16); }

// gomin and gomax are Go's min and max on floats: NaN if either is NaN, and
// -0 below +0.
__device__ __forceinline__ float gomin(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    if (a < b) return a;
    if (b < a) return b;
    return signbit(a) ? a : b;
}
__device__ __forceinline__ float gomax(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    if (a > b) return a;
    if (b > a) return b;
    return signbit(a) ? b : a;
}

// goclamp is numfmt's clamp: lo below lo, hi above hi, else v (NaN stays).
__device__ __forceinline__ float goclamp(float v, float lo, float hi) {
    if (v < lo) return lo;
    if (v > hi) return hi;
    return v;
}

// expf32 is the reference's elemExp: exp in float64, rounded to float32.
__device__ __forceinline__ float expf32(float x) { return (float)exp((double)x); }

// sigmoidf32 is elemSigmoid: 1/(1+exp(-x)) in fp32 with exp as expf32.
__device__ __forceinline__ float sigmoidf32(float x) { return 1.0f / (1.0f + expf32(-x)); }

// rsqrtf32 is elemRsqrt: a correctly rounded fp32 sqrt, then an fp32 division.
__device__ __forceinline__ float rsqrtf32(float x) { return 1.0f / __fsqrt_rn(x); }

// e4m3_to_f32 decodes float8_e4m3fn (0x7f, 0xff are NaN).
__device__ __forceinline__ float e4m3_to_f32(unsigned c) {
    unsigned e = (c >> 3) & 0xfu, m = c & 7u;
    float v;
    if (e == 0xfu && m == 7u) v = __uint_as_float(0x7fc00000u);
    else if (e == 0u) v = (float)m * 0.001953125f; // m·2^-9, exact
    else v = __uint_as_float(((e + 120u) << 23) | (m << 20));
    return (c & 0x80u) ? -v : v;
}

// f32_to_e4m3 is numfmt.F32ToE4M3: round to nearest even, saturating to
// ±448, keeping the sign of zero; NaN gives 0x7f.
__device__ __forceinline__ unsigned f32_to_e4m3(float f) {
    if (f != f) return 0x7fu;
    unsigned b = __float_as_uint(f);
    unsigned sign = (b >> 24) & 0x80u;
    float a = __uint_as_float(b & 0x7fffffffu);
    if (a >= 448.0f) return sign | 0x7eu;
    if (a < 0.015625f) return sign | (unsigned)rintf(a * 512.0f); // 2^-9 quantum
    unsigned u = __float_as_uint(a);
    u += 0x7ffffu + ((u >> 20) & 1u); // 3 mantissa bits, ties to even
    unsigned e = (u >> 23) - 120u;    // (exponent + 7), after any carry
    return sign | (e << 3) | ((u >> 20) & 7u);
}

// e8m0_to_f32 decodes a ue8m0 scale: 2^(b-127); 0xff is NaN.
__device__ __forceinline__ float e8m0_to_f32(unsigned b) {
    if (b == 0xffu) return __uint_as_float(0x7fc00000u);
    return ldexpf(1.0f, (int)b - 127);
}

// e2m1_to_f32 decodes a 4-bit e2m1 code (bit 3 the sign): magnitudes 0,
// 0.5 for codes 0, 1, else (1 + m/2)·2^(e-1) with e = code>>1, m = code&1,
// built on the float bits (no table, which would live in local memory).
__device__ __forceinline__ float e2m1_to_f32(unsigned c) {
    const unsigned m = c & 7u;
    const unsigned bits = m < 2u ? (m ? 0x3f000000u : 0u) : ((((m >> 1) + 126u) << 23) | ((m & 1u) << 22));
    return __uint_as_float(bits | ((c & 8u) << 28));
}

// f32_to_e2m1 is numfmt.F32ToE2M1 (ties to the even code).
__device__ __forceinline__ unsigned f32_to_e2m1(float f) {
    unsigned bits = __float_as_uint(f);
    unsigned sign = (bits >> 28) & 8u;
    float a = __uint_as_float(bits & 0x7fffffffu);
    unsigned c;
    if (a <= 0.25f) c = 0;
    else if (a < 0.75f) c = 1;
    else if (a <= 1.25f) c = 2;
    else if (a < 1.75f) c = 3;
    else if (a <= 2.5f) c = 4;
    else if (a < 3.5f) c = 5;
    else if (a <= 5.0f) c = 6;
    else c = 7;
    return sign | c;
}

// ceil_pow2 is numfmt's ceilPow2 on the float bits: 2^(exponent field - 127
// + (mantissa != 0)), +Inf past the float range.
// Inside the normal range the power is built from its bits (ldexpf is a
// dozen instructions); the edges keep ldexpf.
__device__ __forceinline__ float ceil_pow2(float v) {
    unsigned b = __float_as_uint(v);
    int e = (int)((b >> 23) & 0xffu) - 127 + ((b & 0x7fffffu) != 0u ? 1 : 0);
    if (e >= -126 && e <= 127) return __uint_as_float((unsigned)(e + 127) << 23);
    return ldexpf(1.0f, e);
}

// div_scale is v / s. For a scale s that is a power of two with a normal
// reciprocal it is v · (1/s): the same real quotient, rounded once, so the
// same float, without the division's instruction sequence (the
// quantisers divide every element by a block's power-of-two scale).
__device__ __forceinline__ float div_scale(float v, float s) {
    const unsigned b = __float_as_uint(s), e = (b >> 23) & 0xffu;
    if ((b & 0x807fffffu) == 0u && e >= 1u && e <= 253u) return v * __uint_as_float((254u - e) << 23);
    return v / s;
}

// ceil_log2 is c10's CeilLog2: 1 for n <= 2, else ceil(log2(n)).
__device__ __forceinline__ int ceil_log2(int n) {
    if (n <= 2) return 1;
    return 32 - __clz(n - 1);
}

// torch_sum_warp returns Σ_{i<n} get(i) in fp32 in the order of torch's CPU
// sum kernel (kernels.TorchSum): the input is cut into vectors of 8 lanes
// (1 lane for n < 8); rows of 4 vectors are summed lane-wise by a 4-level
// cascade into 32 (or 4) column accumulators; leftover vectors go into
// accumulator 0, accumulators 1..3 are added to it, the scalar tail is
// summed from 0 and the lanes of accumulator 0 are added to it in order.
// Each column's cascade is lane-wise, so lane c of the warp runs column c
// exactly as the CPU does. All 32 lanes must call it; every lane gets the sum.
template <class Get>
__device__ float torch_sum_warp(Get get, int n) {
    const int lane = threadIdx.x & 31;
    const int lanes = n < 8 ? 1 : 8;
    const int nv = n / lanes;
    const int wide = lanes * 4;
    const int rows = nv / 4;
    float col = 0.0f; // this lane's column accumulator (lane < wide)
    if (lane < wide) {
        const int p = max(4, ceil_log2(rows) / 4);
        const int step = 1 << p, mask = step - 1;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        int i = 0;
        while (i + step <= rows) {
            for (int r = i; r < i + step; r++) acc[0] += get(r * wide + lane);
            i += step;
            for (int j = 1; j < 4; j++) {
                acc[j] += acc[j - 1];
                acc[j - 1] = 0.0f;
                if ((i & (mask << (j * p))) != 0) break;
            }
        }
        for (int r = i; r < rows; r++) acc[0] += get(r * wide + lane);
        col = acc[0];
        col += acc[1];
        col += acc[2];
        col += acc[3];
    }
    // accumulator 0 (lanes 0..lanes-1): the leftover vectors, then 1..3
    float a0 = col;
    if (lane < lanes)
        for (int v = rows * 4; v < nv; v++) a0 += get(v * lanes + lane);
    for (int k = 1; k < 4; k++) {
        float o = __shfl_sync(FULL_MASK, col, (k * lanes + lane) & 31);
        if (lane < lanes) a0 += o;
    }
    float s = 0.0f;
    if (lane == 0)
        for (int i = nv * lanes; i < n; i++) s += get(i);
    for (int l = 0; l < lanes; l++) {
        float o = __shfl_sync(FULL_MASK, a0, l);
        if (lane == 0) s += o;
    }
    return __shfl_sync(FULL_MASK, s, 0);
}

// pdl_ready marks an image whose every kernel opens with pdl_entry: the
// host turns programmatic launches on only for an image that has it. It is
// never launched.
extern "C" __global__ void pdl_ready() {
    pdl_entry();
}
