// Decode products (a few activation rows against a weight matrix), built to
// stream the weights at HBM bandwidth while keeping the reference's bits
// (kernels.MatmulFP8/FP4 block-scaled, kernels.MatmulF32/BF16 plain):
//  - weights read with 16-byte non-coherent loads (ld.global.nc), 32 bytes
//    of one row per thread per step (one full sector), several steps in
//    flight;
//  - e2m1/e4m3 decoded in registers on the float bits: the code's magnitude
//    bits are placed in the fp32 exponent/mantissa fields, which gives the
//    value times 2^-126 (e2m1) or 2^-120 (e4m3), subnormal codes included,
//    and one exact multiply by the power of two restores it;
//  - the activation rows (m <= GEMV_MR) share each weight read.
// Block-scaled: each 32-wide K block partial is the reference's sequential
// fp32 sum, written to shared memory; after a barrier one thread per (row,
// activation row) adds the partials in ascending K block from 0, so the
// result equals gemm_block_scaled's bit for bit. Rows of a block are split
// into rb rows × (256/rb) K groups so that short matrices (wkv: 512 rows)
// still fill 132 SMs. Plain: one thread per output row, the whole K in
// ascending order, as gemm_plain.
#pragma once
#include "common.cuh"

#define GEMV_THREADS 256
#ifndef GEMV_DYN_SHARED
#define GEMV_DYN_SHARED(T, name) extern __shared__ T name[] // dynamic shared memory (shim/emu.h redefines it)
#endif
#define GEMV_MR 8 // most activation rows one launch takes

// gemv_shl shifts left by s (right by -s when s < 0).
__device__ __forceinline__ unsigned gemv_shl(unsigned x, int s) { return s >= 0 ? x << s : x >> -s; }

// gemv_e2m1x8 decodes the 8 nibbles of q (element i in bits 4i..4i+3) in
// pairs (i, i+4), 16 bits apart: one shift and mask place both magnitudes
// in the bf16 halves of a word (bits 6..8 and 22..24, the low exponent and
// top mantissa bits), one more the signs (15, 31); each half widened to
// fp32 is the value times 2^-126 (subnormal codes included), restored by an
// exact multiply.
__device__ __forceinline__ void gemv_e2m1x8(float* w, unsigned q) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const unsigned p = (gemv_shl(q, 6 - 4 * j) & 0x01c001c0u) | (gemv_shl(q, 12 - 4 * j) & 0x80008000u);
        w[j] = __uint_as_float(p << 16) * 0x1p126f;
        w[j + 4] = __uint_as_float(p & 0xffff0000u) * 0x1p126f;
    }
}

// gemv_e4m3x4 decodes the 4 bytes of x the same way, pairs (i, i+2):
// magnitudes to bits 4..10 and 20..26, signs to 15 and 31, times 2^120.
// The NaN codes (0x7f, 0xff) are not decoded: the caller checks the word
// with gemv_e4m3_nan first.
__device__ __forceinline__ void gemv_e4m3x4(float* w, unsigned x) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const unsigned p = (gemv_shl(x, 4 - 8 * j) & 0x07f007f0u) | (gemv_shl(x, 8 - 8 * j) & 0x80008000u);
        w[j] = __uint_as_float(p << 16) * 0x1p120f;
        w[j + 2] = __uint_as_float(p & 0xffff0000u) * 0x1p120f;
    }
}

// gemv_e8m0 is e8m0_to_f32 on the float bits (no ldexpf call): 2^(b-127),
// 2^-127 (subnormal) for 0, NaN for 0xff.
__device__ __forceinline__ float gemv_e8m0(unsigned b) {
    if (b == 0xffu) return __uint_as_float(0x7fc00000u);
    return __uint_as_float(b ? b << 23 : 0x00400000u);
}

// gemv_e4m3_nan is nonzero when a byte of x has its low 7 bits all set.
__device__ __forceinline__ unsigned gemv_e4m3_nan(unsigned x) { return ((x & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u; }

// gemv_madd is p + a·w with the product rounded first, as the reference
// computes it; FMA fuses the two, which gives the same bits when a·w is
// exact in fp32 (the caller has checked that with gemv_acts_exact: then
// round(a·w + p) = round(fl(a·w) + p)). One issue slot a weight fewer.
template <bool FMA>
__device__ __forceinline__ float gemv_madd(float p, float a, float w) {
    if (FMA) return __fmaf_rn(a, w, p);
    return p + a * w;
}

// gemv_acts_exact is true (for the whole block) when every activation of
// a [m, lda] (first k columns) is a bf16 value (low 16 bits zero) with |a|
// < 2^110: then a·w is exact in fp32 for every e2m1 or e4m3 weight (at most
// 8 + 4 significant bits, the lowest at or above 2^-133·2^-9, no overflow),
// which is what the fake-quantised activations of the block-scaled products
// are. Every thread of the block must call it.
__device__ __forceinline__ bool gemv_act_ok(float v) {
    return (__float_as_uint(v) & 0xffffu) == 0u && fabsf(v) < 0x1p110f; // NaN fails too
}
__device__ __forceinline__ bool gemv_acts_exact(const float* a, int lda, int m, int k) {
    int ok = 1;
    const bool vec = (((size_t)a & 15u) == 0) && (lda & 3) == 0 && (k & 3) == 0;
    for (int mi = 0; mi < m; mi++) {
        const float* ar = a + (size_t)mi * lda;
        if (vec) {
            for (int c = 4 * threadIdx.x; c < k; c += 4 * blockDim.x) {
                const float4 v = __ldg((const float4*)(ar + c));
                if (!(gemv_act_ok(v.x) && gemv_act_ok(v.y) && gemv_act_ok(v.z) && gemv_act_ok(v.w))) ok = 0;
            }
        } else {
            for (int c = threadIdx.x; c < k; c += blockDim.x)
                if (!gemv_act_ok(ar[c])) ok = 0;
        }
    }
    return __syncthreads_and(ok) != 0;
}

// gemv_prefetch asks for the 32-byte chunk at p in L2 (no register, no
// wait): a thread's first chunk, requested before the activation check so
// that the weights are on their way while the block reads the activations.
__device__ __forceinline__ void gemv_prefetch(const void* p) {
#ifdef __CUDA_ARCH__
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// gemv_prefetch_first prefetches the first chunk thread threadIdx.x will
// read of row row0 + r of w (gemv_bs_rows' split of rows and K groups).
template <bool FP4>
__device__ __forceinline__ void gemv_prefetch_first(const unsigned char* w, int k, int n, int row0, int rb_log2) {
    const int r = threadIdx.x & ((1 << rb_log2) - 1), g = threadIdx.x >> rb_log2;
    const size_t rowBytes = FP4 ? (size_t)k / 2 : (size_t)k;
    if (row0 + r < n && (size_t)g * 32 < rowBytes) gemv_prefetch(w + (size_t)(row0 + r) * rowBytes + (size_t)g * 32);
}

// gemv_block_partials adds the products of one full 32-wide K block of
// weights (words q: fp4 4 words of 8 nibbles, fp8 8 words of 4 bytes) with
// activation rows a + mi·lda (mi < m), sequentially in c, into p[mi]
// (zeroed by the caller), 8 columns at a time.
template <bool FP4, int MR, bool FMA>
__device__ __forceinline__ void gemv_block_partials(float* p, const unsigned* q, const float* a, int lda, int m) {
#pragma unroll
    for (int c8 = 0; c8 < 32; c8 += 8) {
        float wv[8];
        if (FP4) {
            gemv_e2m1x8(wv, q[c8 / 8]);
        } else {
            gemv_e4m3x4(wv, q[c8 / 4]);
            gemv_e4m3x4(wv + 4, q[c8 / 4 + 1]);
        }
#pragma unroll
        for (int mi = 0; mi < MR; mi++) {
            if (mi < m) {
                const float4 a0 = __ldg((const float4*)(a + (size_t)mi * lda + c8));
                const float4 a1 = __ldg((const float4*)(a + (size_t)mi * lda + c8 + 4));
                p[mi] = gemv_madd<FMA>(p[mi], a0.x, wv[0]);
                p[mi] = gemv_madd<FMA>(p[mi], a0.y, wv[1]);
                p[mi] = gemv_madd<FMA>(p[mi], a0.z, wv[2]);
                p[mi] = gemv_madd<FMA>(p[mi], a0.w, wv[3]);
                p[mi] = gemv_madd<FMA>(p[mi], a1.x, wv[4]);
                p[mi] = gemv_madd<FMA>(p[mi], a1.y, wv[5]);
                p[mi] = gemv_madd<FMA>(p[mi], a1.z, wv[6]);
                p[mi] = gemv_madd<FMA>(p[mi], a1.w, wv[7]);
            }
        }
    }
}

// gemv_block_slow is the same for a block the fast path cannot take (short,
// misaligned, or holding an e4m3 NaN code): codes read byte by byte and
// decoded as gemm_block_scaled does.
template <bool FP4, int MR>
__device__ void gemv_block_slow(float* p, const unsigned char* w, size_t first, int cnt, const float* a, int lda, int m) {
    for (int c = 0; c < cnt; c++) {
        const size_t e = first + c;
        float wv;
        if (FP4) {
            const unsigned byte = w[e / 2];
            wv = e2m1_to_f32((e & 1) ? (byte >> 4) : (byte & 0xfu));
        } else {
            wv = e4m3_to_f32(w[e]);
        }
#pragma unroll
        for (int mi = 0; mi < MR; mi++)
            if (mi < m) p[mi] += a[(size_t)mi * lda + c] * wv;
    }
}

// gemv_one_block computes one K block's scaled partials of row j (codes
// u0, u1: fp4 u0 holds the block, fp8 both) for activation rows a (at the
// block's first column) into dst[mi], taking the byte path when the block
// is not full (fast false) or holds an e4m3 NaN code.
template <bool FP4, int MR, bool FMA>
__device__ __forceinline__ void gemv_one_block(float* dst, bool fast, uint4 u0, uint4 u1, const unsigned char* w, size_t first, int cnt,
                                               const float* a, int lda, int m, float sc) {
    float p[MR];
#pragma unroll
    for (int mi = 0; mi < MR; mi++) p[mi] = 0.0f;
    unsigned q[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
    if (!FP4 && fast) {
        unsigned bad = 0;
#pragma unroll
        for (int t = 0; t < 8; t++) bad |= gemv_e4m3_nan(q[t]);
        fast = bad == 0;
    }
    if (fast) gemv_block_partials<FP4, MR, FMA>(p, q, a, lda, m);
    else gemv_block_slow<FP4, MR>(p, w, first, cnt, a, lda, m);
#pragma unroll
    for (int mi = 0; mi < MR; mi++) dst[mi] = p[mi] * sc;
}

// gemv_bs_rows computes the block partials of rows row0 .. row0+rb-1 of w
// ([n, k] codes; FP4: packed [n, k/2]) for activation rows a [m, lda]
// into part[(b·rb + r)·MR + mi] for every K block b; DUAL does the same for
// a second weight (w2, ws2) into part2 with the same activations (the
// routed gate and up projections). The caller synchronises and folds.
template <bool FP4, int MR, bool DUAL, bool FMA>
__device__ __forceinline__ void gemv_bs_rows(float* part, float* part2, const float* a, int lda, int m, int k,
                                             const unsigned char* __restrict__ w, const unsigned char* __restrict__ ws,
                                             const unsigned char* __restrict__ w2, const unsigned char* __restrict__ ws2,
                                             int n, int row0, int rb_log2) {
    const int rb = 1 << rb_log2, groups = GEMV_THREADS >> rb_log2;
    const int r = threadIdx.x & (rb - 1), g = threadIdx.x >> rb_log2;
    const int j = row0 + r;
    const int kb = (k + 31) / 32;
    if (j >= n) return;
    // a chunk is 32 bytes of the row: 2 K blocks of fp4, 1 of fp8
    constexpr int cb = FP4 ? 2 : 1;
    const int nch = (kb + cb - 1) / cb;
    const size_t rowBytes = FP4 ? (size_t)k / 2 : (size_t)k;
    const unsigned char* wr = w + (size_t)j * rowBytes;
    const unsigned char* wr2 = DUAL ? w2 + (size_t)j * rowBytes : wr;
    const bool aligned = (((size_t)wr | (size_t)wr2 | (size_t)a) & 15u) == 0 && (rowBytes & 15u) == 0 && (lda & 3) == 0;
    const size_t srow = FP4 ? (size_t)j * kb : (size_t)(j / 32) * kb;
    const uint4 zero = {0u, 0u, 0u, 0u};
    // chunk ch is full when the fast path may take it; its loads are issued
    // one chunk ahead of the arithmetic (the next chunk's 32 or 64 bytes are
    // in flight while this one is decoded)
    auto full = [&](int ch) { return aligned && (ch * cb + cb) * 32 <= k; };
    auto load = [&](int ch, uint4& v0, uint4& v1, uint4& x0, uint4& x1) {
        v0 = v1 = x0 = x1 = zero;
        if (ch < nch && full(ch)) {
            const uint4* src = (const uint4*)(wr + (size_t)ch * 32);
            v0 = __ldg(src);
            v1 = __ldg(src + 1);
            if (DUAL) {
                const uint4* src2 = (const uint4*)(wr2 + (size_t)ch * 32);
                x0 = __ldg(src2);
                x1 = __ldg(src2 + 1);
            }
        }
    };
    uint4 v0, v1, x0, x1;
    load(g, v0, v1, x0, x1);
    for (int ch = g; ch < nch; ch += groups) {
        uint4 n0, n1, y0, y1;
        load(ch + groups, n0, n1, y0, y1);
        const int b0 = ch * cb;
        const bool f = full(ch);
#pragma unroll
        for (int h = 0; h < cb; h++) {
            const int b = b0 + h;
            if (b < kb) {
                const int lo = b * 32, cnt = min(32, k - lo);
                const size_t first = (size_t)j * k + lo;
                float* d = part + ((size_t)b * rb + r) * MR;
                if (FP4) gemv_one_block<FP4, MR, FMA>(d, f, h ? v1 : v0, zero, w, first, cnt, a + lo, lda, m, gemv_e8m0(ws[srow + b]));
                else gemv_one_block<FP4, MR, FMA>(d, f, v0, v1, w, first, cnt, a + lo, lda, m, gemv_e8m0(ws[srow + b]));
                if (DUAL) {
                    float* d2 = part2 + ((size_t)b * rb + r) * MR;
                    if (FP4) gemv_one_block<FP4, MR, FMA>(d2, f, h ? x1 : x0, zero, w2, first, cnt, a + lo, lda, m, gemv_e8m0(ws2[srow + b]));
                    else gemv_one_block<FP4, MR, FMA>(d2, f, x0, x1, w2, first, cnt, a + lo, lda, m, gemv_e8m0(ws2[srow + b]));
                }
            }
        }
        v0 = n0, v1 = n1, x0 = y0, x1 = y1;
    }
}

// gemv_fold adds row r's partials of activation row mi in ascending K
// block from 0 (the reference's accumulator order) and rounds to bf16.
template <int MR>
__device__ __forceinline__ float gemv_fold(const float* part, int kb, int rb, int r, int mi) {
    float acc = 0.0f;
    for (int b = 0; b < kb; b++) acc += part[((size_t)b * rb + r) * MR + mi];
    return bf16r(acc);
}

// gemv_bs: out [m, ldo] (first n columns) = bf16(a [m, lda] · W) for a
// block-scaled weight (fp4: w packed [n, k/2], ws [n, ceil(k/32)]; fp8: w
// [n, k], ws [ceil(n/32), ceil(k/32)]); m <= MR. grid ceil(n/rb), block
// 256, dynamic shared memory ceil(k/32)·rb·MR floats (rb·MR <= 32).
template <bool FP4, int MR>
__device__ void gemv_bs(float* out, int ldo, const float* a, int lda, int m, int k, const unsigned char* w, const unsigned char* ws, int n,
                        int rb_log2) {
    GEMV_DYN_SHARED(float, part);
    const int rb = 1 << rb_log2, row0 = blockIdx.x * rb, kb = (k + 31) / 32;
    gemv_prefetch_first<FP4>(w, k, n, row0, rb_log2);
    if (gemv_acts_exact(a, lda, m, k)) gemv_bs_rows<FP4, MR, false, true>(part, nullptr, a, lda, m, k, w, ws, nullptr, nullptr, n, row0, rb_log2);
    else gemv_bs_rows<FP4, MR, false, false>(part, nullptr, a, lda, m, k, w, ws, nullptr, nullptr, n, row0, rb_log2);
    __syncthreads();
    const int t = threadIdx.x;
    if (t < rb * MR) {
        const int r = t % rb, mi = t / rb;
        if (mi < m && row0 + r < n) out[(size_t)mi * ldo + row0 + r] = gemv_fold<MR>(part, kb, rb, r, mi);
    }
}

#define GEMV_BS(NAME, FP4, MR)                                                                                                                \
    extern "C" __global__ void __launch_bounds__(GEMV_THREADS) NAME(float* out, const float* a, int m, int k, const unsigned char* w,        \
                                                                    const unsigned char* ws, int n, int rb_log2) { pdl_entry();             \
        gemv_bs<FP4, MR>(out, n, a, k, m, k, w, ws, n, rb_log2);                                                                            \
    }
// gemv_fp8_mR / gemv_fp4_mR: matmul_fp8/fp4 for m <= R activation rows.
GEMV_BS(gemv_fp8_m1, false, 1)
GEMV_BS(gemv_fp8_m2, false, 2)
GEMV_BS(gemv_fp8_m4, false, 4)
GEMV_BS(gemv_fp8_m8, false, 8)
GEMV_BS(gemv_fp4_m1, true, 1)
GEMV_BS(gemv_fp4_m2, true, 2)
GEMV_BS(gemv_fp4_m4, true, 4)
GEMV_BS(gemv_fp4_m8, true, 8)
#undef GEMV_BS

// gemv_routed_fp4 / gemv_routed_fp8: the routed-expert rows (matmul_fp4/
// fp8_routed's contract): row q of out [Q, n] is a[q / adiv] · W_e, e =
// ids[q] (int64, on the GPU), the expert at w + e·wstride bytes, its scales
// at ws + e·sstride; only the chosen experts' bytes are read. An id outside
// [0, nexperts) poisons its row (NaN). grid (ceil(n/rb), Q), block 256,
// shared memory ceil(k/32)·rb floats.
template <bool FP4>
__device__ void gemv_routed(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride, const unsigned char* ws,
                            long long sstride, int n, const long long* ids, int nexperts, int rb_log2) {
    const int q = blockIdx.y;
    const long long e = ids[q];
    const int rb = 1 << rb_log2;
    if (e < 0 || e >= nexperts) {
        const int j = blockIdx.x * rb + (int)threadIdx.x;
        if ((int)threadIdx.x < rb && j < n) out[(size_t)q * n + j] = __uint_as_float(0x7fc00000u);
        return;
    }
    gemv_bs<FP4, 1>(out + (size_t)q * n, n, a + (size_t)(q / adiv) * k, k, 1, k, w + (size_t)e * wstride, ws + (size_t)e * sstride, n, rb_log2);
}
extern "C" __global__ void __launch_bounds__(GEMV_THREADS) gemv_routed_fp4(float* out, const float* a, int adiv, int k, const unsigned char* w,
                                                                          long long wstride, const unsigned char* ws, long long sstride, int n,
                                                                          const long long* ids, int nexperts, int rb_log2) {
    pdl_entry();
    gemv_routed<true>(out, a, adiv, k, w, wstride, ws, sstride, n, ids, nexperts, rb_log2);
}
extern "C" __global__ void __launch_bounds__(GEMV_THREADS) gemv_routed_fp8(float* out, const float* a, int adiv, int k, const unsigned char* w,
                                                                          long long wstride, const unsigned char* ws, long long sstride, int n,
                                                                          const long long* ids, int nexperts, int rb_log2) {
    pdl_entry();
    gemv_routed<false>(out, a, adiv, k, w, wstride, ws, sstride, n, ids, nexperts, rb_log2);
}

// gemv_routed_swiglu_fp4 / _fp8: the routed gate and up projections and the
// clamped SwiGLU in one launch: out[q, j] = swiglu_clamp(g, u) [· rw[q]]
// with g = bf16(a[q/adiv] · W1_e)[j], u = bf16(a[q/adiv] · W3_e)[j] exactly
// as gemv_routed computes them and swiglu_clamp's arithmetic after
// (elementwise.cuh; limit <= 0: no clamps; rw may be null). Both weights
// share the expert strides (w1/w3 stacks of the same shape). grid
// (ceil(n/rb), Q), block 256, shared memory 2·ceil(k/32)·rb floats.
template <bool FP4>
__device__ void gemv_routed_swiglu(float* out, const float* a, int adiv, int k, const unsigned char* w1, const unsigned char* ws1,
                                   const unsigned char* w3, const unsigned char* ws3, long long wstride, long long sstride, int n,
                                   const long long* ids, int nexperts, float limit, const float* rw, int rb_log2) {
    GEMV_DYN_SHARED(float, part);
    const int q = blockIdx.y;
    const long long e = ids[q];
    const int rb = 1 << rb_log2, row0 = blockIdx.x * rb, kb = (k + 31) / 32;
    if (e < 0 || e >= nexperts) {
        const int j = row0 + (int)threadIdx.x;
        if ((int)threadIdx.x < rb && j < n) out[(size_t)q * n + j] = __uint_as_float(0x7fc00000u);
        return;
    }
    const size_t wo = (size_t)e * wstride, so = (size_t)e * sstride;
    const float* aq = a + (size_t)(q / adiv) * k;
    gemv_prefetch_first<FP4>(w1 + wo, k, n, row0, rb_log2);
    gemv_prefetch_first<FP4>(w3 + wo, k, n, row0, rb_log2);
    if (gemv_acts_exact(aq, k, 1, k))
        gemv_bs_rows<FP4, 1, true, true>(part, part + (size_t)kb * rb, aq, k, 1, k, w1 + wo, ws1 + so, w3 + wo, ws3 + so, n, row0, rb_log2);
    else gemv_bs_rows<FP4, 1, true, false>(part, part + (size_t)kb * rb, aq, k, 1, k, w1 + wo, ws1 + so, w3 + wo, ws3 + so, n, row0, rb_log2);
    __syncthreads();
    const int t = threadIdx.x;
    if (t < rb && row0 + t < n) {
        const float g = gemv_fold<1>(part, kb, rb, t, 0), u = gemv_fold<1>(part + (size_t)kb * rb, kb, rb, t, 0);
        // swiglu_clamp's arithmetic, element (q, row0 + t)
        const float gv = limit > 0.0f ? gomin(g, limit) : g;
        const float ex = expf32(-gv);
        float uv = u;
        if (limit > 0.0f) uv = gomin(gomax(uv, -limit), limit);
        float h = gv / (1.0f + ex) * uv;
        if (rw) h = rw[q] * h;
        out[(size_t)q * n + row0 + t] = bf16r(h);
    }
}
extern "C" __global__ void __launch_bounds__(GEMV_THREADS)
    gemv_routed_swiglu_fp4(float* out, const float* a, int adiv, int k, const unsigned char* w1, const unsigned char* ws1, const unsigned char* w3,
                           const unsigned char* ws3, long long wstride, long long sstride, int n, const long long* ids, int nexperts, float limit,
                           const float* rw, int rb_log2) {
    pdl_entry();
    gemv_routed_swiglu<true>(out, a, adiv, k, w1, ws1, w3, ws3, wstride, sstride, n, ids, nexperts, limit, rw, rb_log2);
}
extern "C" __global__ void __launch_bounds__(GEMV_THREADS)
    gemv_routed_swiglu_fp8(float* out, const float* a, int adiv, int k, const unsigned char* w1, const unsigned char* ws1, const unsigned char* w3,
                           const unsigned char* ws3, long long wstride, long long sstride, int n, const long long* ids, int nexperts, float limit,
                           const float* rw, int rb_log2) {
    pdl_entry();
    gemv_routed_swiglu<false>(out, a, adiv, k, w1, ws1, w3, ws3, wstride, sstride, n, ids, nexperts, limit, rw, rb_log2);
}

// Plain decode products: one thread per output row j of group z, the whole
// K in ascending order from 0 (gemm_plain's sum, so the same bits), with
// 16-byte weight loads where the row allows. A loader gives V weights of a
// 16-byte step (fp32: 4, bf16: 8, fp8: 16) as fp32, and one weight by index
// for the tail.
struct GemvF32 {
    static constexpr int V = 4;
    const float* w;
    __device__ void step(float* wv, const uint4& u, size_t, int) const {
        wv[0] = __uint_as_float(u.x), wv[1] = __uint_as_float(u.y), wv[2] = __uint_as_float(u.z), wv[3] = __uint_as_float(u.w);
    }
    __device__ float one(size_t row, int k, int c) const { return w[row * k + c]; }
    __device__ const unsigned char* row_ptr(size_t row, int k) const { return (const unsigned char*)(w + row * k); }
    static constexpr int bytes = 4;
};
struct GemvBF16 {
    static constexpr int V = 8;
    const unsigned short* w;
    __device__ void step(float* wv, const uint4& u, size_t, int) const {
        const unsigned x[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int t = 0; t < 4; t++) wv[2 * t] = __uint_as_float(x[t] << 16), wv[2 * t + 1] = __uint_as_float(x[t] & 0xffff0000u);
    }
    __device__ float one(size_t row, int k, int c) const { return bf16w(w[row * k + c]); }
    __device__ const unsigned char* row_ptr(size_t row, int k) const { return (const unsigned char*)(w + row * k); }
    static constexpr int bytes = 2;
};
// GemvFP8W widens as LoadFP8 does: bf16(e4m3 · e8m0 of the 32×32 block).
struct GemvFP8W {
    static constexpr int V = 16;
    const unsigned char* w;
    const unsigned char* s;
    __device__ void step(float* wv, const uint4& u, size_t row, int c0) const {
        const unsigned x[4] = {u.x, u.y, u.z, u.w};
        const int kb = kdim / 32 + (kdim % 32 != 0);
        const float sc = gemv_e8m0(s[(row / 32) * kb + c0 / 32]); // 16 values never straddle a 32 block (c0 % 16 == 0)
        unsigned bad = 0;
#pragma unroll
        for (int t = 0; t < 4; t++) bad |= gemv_e4m3_nan(x[t]);
        if (bad) {
#pragma unroll
            for (int t = 0; t < 16; t++) wv[t] = bf16r(e4m3_to_f32((x[t >> 2] >> (8 * (t & 3))) & 0xffu) * sc);
            return;
        }
#pragma unroll
        for (int t = 0; t < 4; t++) gemv_e4m3x4(wv + 4 * t, x[t]);
#pragma unroll
        for (int t = 0; t < 16; t++) wv[t] = bf16r(wv[t] * sc);
    }
    int kdim;
    __device__ float one(size_t row, int k, int c) const {
        const int kb = (k + 31) / 32;
        return bf16r(e4m3_to_f32(w[row * k + c]) * e8m0_to_f32(s[(row / 32) * kb + c / 32]));
    }
    __device__ const unsigned char* row_ptr(size_t row, int k) const { return w + row * k; }
    static constexpr int bytes = 1;
};

// gemv_plain: out[mi·ldo + z·o_z + j] = f(Σ_c a[mi·lda + z·a_z + c]·W_z[j, c])
// for mi < m <= MR, rows j < n of group z (weights row z·n + j of the
// loader's matrix), f = bf16 rounding when round is set. grid (ceil(n/bs),
// 1, groups), block bs.
template <class L, int MR>
__device__ void gemv_plain(float* out, const float* a, int m, int k, L ld, int n, int lda, int ldo, long long a_z, long long o_z, int round) {
    const int z = blockIdx.z;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    a += z * a_z;
    out += z * o_z;
    const size_t row = (size_t)z * n + j;
    float acc[MR];
#pragma unroll
    for (int mi = 0; mi < MR; mi++) acc[mi] = 0.0f;
    const unsigned char* wr = ld.row_ptr(row, k);
    int c = 0;
    if ((((size_t)wr) & 15u) == 0) {
        const uint4* src = (const uint4*)wr;
        const int steps = k / L::V;
        // U steps (16 bytes each) in flight: a thread's row is one long
        // dependent sum, so its loads must run far ahead of it (the grouped
        // wo_a has only 8192 rows to spread over 132 SMs)
        constexpr int U = MR <= 2 ? 16 : (MR == 4 ? 8 : 4);
        int s = 0;
        for (; s + U <= steps; s += U) {
            uint4 u[U];
#pragma unroll
            for (int t = 0; t < U; t++) u[t] = __ldg(src + s + t);
#pragma unroll
            for (int t = 0; t < U; t++) {
                float wv[L::V];
                ld.step(wv, u[t], row, (s + t) * L::V);
#pragma unroll
                for (int mi = 0; mi < MR; mi++) {
                    if (mi < m) {
                        const float* ar = a + (size_t)mi * lda + (s + t) * L::V;
#pragma unroll
                        for (int v = 0; v < L::V; v++) acc[mi] += ar[v] * wv[v];
                    }
                }
            }
        }
        for (; s < steps; s++) {
            float wv[L::V];
            ld.step(wv, __ldg(src + s), row, s * L::V);
#pragma unroll
            for (int mi = 0; mi < MR; mi++) {
                if (mi < m) {
                    const float* ar = a + (size_t)mi * lda + s * L::V;
#pragma unroll
                    for (int v = 0; v < L::V; v++) acc[mi] += ar[v] * wv[v];
                }
            }
        }
        c = steps * L::V;
    }
    for (; c < k; c++) {
        const float wv = ld.one(row, k, c);
#pragma unroll
        for (int mi = 0; mi < MR; mi++)
            if (mi < m) acc[mi] += a[(size_t)mi * lda + c] * wv;
    }
#pragma unroll
    for (int mi = 0; mi < MR; mi++)
        if (mi < m) out[(size_t)mi * ldo + j] = round ? bf16r(acc[mi]) : acc[mi];
}

#define GEMV_PLAIN(NAME, MR)                                                                                                                 \
    extern "C" __global__ void __launch_bounds__(GEMV_THREADS) NAME##_f32w(float* out, const float* a, int m, int k, const float* w, int n,  \
                                                                           int lda, int ldo, long long a_z, long long o_z, int round) { pdl_entry(); \
        gemv_plain<GemvF32, MR>(out, a, m, k, GemvF32{w}, n, lda, ldo, a_z, o_z, round);                                                   \
    }                                                                                                                                      \
    extern "C" __global__ void __launch_bounds__(GEMV_THREADS) NAME##_bf16w(float* out, const float* a, int m, int k,                       \
                                                                            const unsigned short* w, int n, int lda, int ldo,              \
                                                                            long long a_z, long long o_z, int round) { pdl_entry();        \
        gemv_plain<GemvBF16, MR>(out, a, m, k, GemvBF16{w}, n, lda, ldo, a_z, o_z, round);                                                 \
    }                                                                                                                                      \
    extern "C" __global__ void __launch_bounds__(GEMV_THREADS) NAME##_fp8w(float* out, const float* a, int m, int k,                        \
                                                                           const unsigned char* w, const unsigned char* s, int n, int lda, \
                                                                           int ldo, long long a_z, long long o_z, int round) { pdl_entry(); \
        gemv_plain<GemvFP8W, MR>(out, a, m, k, GemvFP8W{w, s, k}, n, lda, ldo, a_z, o_z, round);                                           \
    }
// gemv_plain_mR_{f32w,bf16w,fp8w}: matmul_f32w/bf16w/fp8w for m <= R rows.
GEMV_PLAIN(gemv_plain_m1, 1)
GEMV_PLAIN(gemv_plain_m2, 2)
GEMV_PLAIN(gemv_plain_m4, 4)
GEMV_PLAIN(gemv_plain_m8, 8)
#undef GEMV_PLAIN

// gemv_plain_fp8w_pc: gemv_plain on fp8 weights widened in the kernel (the
// grouped wo_a: 8 groups × 1024 rows, too few rows for one thread per row to
// keep enough bytes in flight or to widen and sum alone). A block of 128
// threads takes 32 rows: warps 1-3 load K tiles of the 32 rows two tiles
// ahead (registers) and widen them, bf16(e4m3 · e8m0) exactly as
// GemvFP8W, into a shared tile of bf16 bits; warp 0 runs the 32 rows'
// sums (one lane a row, ascending K from 0, gemm_plain's order) over the
// previous tile. k % 16 == 0 and 16-byte aligned rows (the launcher checks).
// grid (ceil(n/32), 1, groups), block 128.
#define GEMV_PC_KT 256                       // K values a tile
#define GEMV_PC_STRIDE (GEMV_PC_KT * 2 + 16) // bytes a tile row (+16: no bank conflicts for the reader)
#define GEMV_PC_LOADS 6                      // 16-byte loads a producer thread holds per tile (32·KT/16 / 96, rounded up)

template <int MR>
__device__ void gemv_plain_fp8w_pc(float* out, const float* a, int m, int k, const unsigned char* __restrict__ w,
                                   const unsigned char* __restrict__ s, int n, int lda, int ldo, long long a_z, long long o_z, int round) {
    __shared__ __align__(16) unsigned char tile[2][32 * GEMV_PC_STRIDE];
    const int z = blockIdx.z, row0 = blockIdx.x * 32;
    a += z * a_z;
    out += z * o_z;
    const int tiles = (k + GEMV_PC_KT - 1) / GEMV_PC_KT, kb = (k + 31) / 32;
    const int t = threadIdx.x, warp = t / 32, lane = t & 31;
    const int pt = t - 32; // producer index 0..95
    // producer: load tile ti into regs (its GEMV_PC_LOADS 16-byte pieces)
    auto load = [&](int ti, uint4* u) {
#pragma unroll
        for (int i = 0; i < GEMV_PC_LOADS; i++) {
            const int piece = pt + 96 * i, r = piece / (GEMV_PC_KT / 16), c16 = piece % (GEMV_PC_KT / 16);
            const int c0 = ti * GEMV_PC_KT + c16 * 16;
            u[i] = make_uint4(0u, 0u, 0u, 0u);
            if (piece < 32 * (GEMV_PC_KT / 16) && row0 + r < n && c0 < k)
                u[i] = __ldg((const uint4*)(w + ((size_t)z * n + row0 + r) * k + c0));
        }
    };
    // producer: widen the loaded pieces of tile ti into tile[buf]
    auto widen = [&](int ti, const uint4* u, int buf) {
#pragma unroll
        for (int i = 0; i < GEMV_PC_LOADS; i++) {
            const int piece = pt + 96 * i, r = piece / (GEMV_PC_KT / 16), c16 = piece % (GEMV_PC_KT / 16);
            const int c0 = ti * GEMV_PC_KT + c16 * 16;
            if (piece < 32 * (GEMV_PC_KT / 16) && row0 + r < n && c0 < k) {
                const size_t row = (size_t)z * n + row0 + r;
                const float sc = gemv_e8m0(s[(row / 32) * kb + c0 / 32]);
                const unsigned x[4] = {u[i].x, u[i].y, u[i].z, u[i].w};
                float wv[16];
                unsigned bad = 0;
#pragma unroll
                for (int q = 0; q < 4; q++) bad |= gemv_e4m3_nan(x[q]);
                if (bad) {
#pragma unroll
                    for (int q = 0; q < 16; q++) wv[q] = e4m3_to_f32((x[q >> 2] >> (8 * (q & 3))) & 0xffu);
                } else {
#pragma unroll
                    for (int q = 0; q < 4; q++) gemv_e4m3x4(wv + 4 * q, x[q]);
                }
                unsigned b[8];
#pragma unroll
                for (int q = 0; q < 8; q++) b[q] = (__float_as_uint(bf16r(wv[2 * q] * sc)) >> 16) | (__float_as_uint(bf16r(wv[2 * q + 1] * sc)) & 0xffff0000u);
                uint4* dst = (uint4*)(tile[buf] + r * GEMV_PC_STRIDE + c16 * 32);
                dst[0] = make_uint4(b[0], b[1], b[2], b[3]);
                dst[1] = make_uint4(b[4], b[5], b[6], b[7]);
            }
        }
    };
    float acc[MR];
#pragma unroll
    for (int mi = 0; mi < MR; mi++) acc[mi] = 0.0f;
    uint4 cur[GEMV_PC_LOADS], nxt[GEMV_PC_LOADS];
    if (warp > 0) {
        load(0, cur);
        load(1, nxt);
        widen(0, cur, 0);
#pragma unroll
        for (int i = 0; i < GEMV_PC_LOADS; i++) cur[i] = nxt[i];
    }
    __syncthreads();
    for (int ti = 0; ti < tiles; ti++) {
        if (warp > 0) {
            // tile ti+1 is in cur (loaded a tile ago): fetch ti+2, widen ti+1
            if (ti + 2 < tiles) load(ti + 2, nxt);
            if (ti + 1 < tiles) widen(ti + 1, cur, (ti + 1) & 1);
#pragma unroll
            for (int i = 0; i < GEMV_PC_LOADS; i++) cur[i] = nxt[i];
        } else if (row0 + lane < n) {
            const unsigned char* tr = tile[ti & 1] + lane * GEMV_PC_STRIDE;
            const int c0 = ti * GEMV_PC_KT, cnt = min(GEMV_PC_KT, k - c0);
            for (int c = 0; c < cnt; c += 8) {
                const uint4 u = *(const uint4*)(tr + 2 * c);
                const unsigned x[4] = {u.x, u.y, u.z, u.w};
                float wv[8];
#pragma unroll
                for (int q = 0; q < 4; q++) wv[2 * q] = __uint_as_float(x[q] << 16), wv[2 * q + 1] = __uint_as_float(x[q] & 0xffff0000u);
#pragma unroll
                for (int mi = 0; mi < MR; mi++) {
                    if (mi < m) {
                        const float* ar = a + (size_t)mi * lda + c0 + c;
                        const float4 a0 = __ldg((const float4*)ar), a1 = __ldg((const float4*)(ar + 4));
                        acc[mi] += a0.x * wv[0];
                        acc[mi] += a0.y * wv[1];
                        acc[mi] += a0.z * wv[2];
                        acc[mi] += a0.w * wv[3];
                        acc[mi] += a1.x * wv[4];
                        acc[mi] += a1.y * wv[5];
                        acc[mi] += a1.z * wv[6];
                        acc[mi] += a1.w * wv[7];
                    }
                }
            }
        }
        __syncthreads();
    }
    if (warp == 0 && row0 + lane < n) {
#pragma unroll
        for (int mi = 0; mi < MR; mi++)
            if (mi < m) out[(size_t)mi * ldo + row0 + lane] = round ? bf16r(acc[mi]) : acc[mi];
    }
}

#define GEMV_PC(NAME, MR)                                                                                                                    \
    extern "C" __global__ void __launch_bounds__(128) NAME(float* out, const float* a, int m, int k, const unsigned char* w,                \
                                                           const unsigned char* s, int n, int lda, int ldo, long long a_z, long long o_z,  \
                                                           int round) { pdl_entry();                                                       \
        gemv_plain_fp8w_pc<MR>(out, a, m, k, w, s, n, lda, ldo, a_z, o_z, round);                                                          \
    }
// gemv_pc_mR_fp8w: matmul_fp8w for m <= R rows, k % 16 == 0.
GEMV_PC(gemv_pc_m1_fp8w, 1)
GEMV_PC(gemv_pc_m2_fp8w, 2)
GEMV_PC(gemv_pc_m4_fp8w, 4)
GEMV_PC(gemv_pc_m8_fp8w, 8)
#undef GEMV_PC
