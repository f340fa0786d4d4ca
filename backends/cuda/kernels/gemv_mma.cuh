// Decode products on tensor cores: the block-scaled fp8/fp4 products for a
// few activation rows (m <= 8), the routed experts and the routed gate/up
// projections with SwiGLU, at HBM bandwidth. gemv.cuh's kernels keep the
// reference's order by adding every product on a scalar lane, which makes
// them instruction-bound at a quarter of the bandwidth; here the block
// partials come from mma.sync and the scalar work per weight byte is a few
// bit operations.
//
// The reference's product is out = bf16(Σ_kb fp32(P_kb · sa_kb · sw_kb)),
// P_kb = Σ_{k∈kb} qa·qw over e4m3 activation codes qa (act_quant's, scale
// sa) and weight codes qw. One mma.sync m16n8k32 e4m3 with a zero
// accumulator gives one block's P, as in gemm_tc.cuh, whose mma.sync
// partials stay within the golden tolerance. The roles are swapped for
// decode: the activation rows are the MMA's M side (rows 0..m-1 of 16, the
// rest zero) and 8 weight rows its N side, so a warp streams 8 rows × 32
// bytes (fp8) a block: one 8-byte load a lane, full 32-byte sectors.
//
// fp4 codes are widened to e4m3 by placing the 3 magnitude bits at bits
// 2..4 (and the sign at 7): that e4m3 code is exactly the e2m1 value ·
// 2^-6, subnormal 0.5 and zero included (the 2^6 is restored on P). The
// low nibbles of a word give K elements 0,2,4,6 of the lane's 8 and the
// high nibbles 1,3,5,7, so the activation codes are stored in that order.
//
// Order: each warp adds its blocks' scaled partials in ascending K over a
// contiguous K range, and the warps' sums are added in ascending K range
// after: a fixed order (the results do not depend on the launch), not the
// reference's single chain, so outputs may differ from cpu-ref by the
// rounding of a reassociated fp32 sum (≤ 1 bf16 ulp, rarely). kernels.go
// keeps gemv.cuh's exact kernels for the cuda-exact option.
//
// The activation codes are derived in the kernel from the fake-quantised
// fp32 activations (act_quant's bf16 values q·s): per 32-block, s' =
// act_quant's scale of the block's largest magnitude and q' = e4m3(x/s'),
// checked to give back x exactly; a CTA whose activations fail the check
// (not act_quant's output: NaN, Inf, values off the e4m3 grid) computes its
// rows with the reference's scalar sums instead, bit for bit.
//
// CTA: 8 warps; 8·RT rows (RT row tiles of 8), each tile's K split over
// 8/RT warps. Requires rows of a multiple of 128 bytes (k % 128 == 0 fp8,
// k % 256 == 0 fp4), 16-byte aligned weights and activations with lda % 4
// == 0, and gmma_ring_offset(m, k) + 8·GMMA_STAGES·GMMA_STAGE (twice that
// for the SwiGLU pair) bytes of dynamic shared memory (the launcher checks).
#pragma once
#include "common.cuh"
#include "gemv.cuh"

#define GMMA_THREADS 256
#define GMMA_WARPS 8

// gmma_mma: d = A·B for one 32-wide K block, zero accumulator (gemm_tc's
// tc_mma, redeclared so this file stands alone).
__device__ __forceinline__ void gmma_mma(float d[4], unsigned a0, unsigned a2, unsigned b0, unsigned b1) {
#ifdef GMMA_EMULATE
    gmma_emulate(d, a0, a2, b0, b1);
#else
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1), "f"(0.0f));
#endif
}

// gmma_widen_lo / _hi: the e4m3 codes (value · 2^-6) of the low / high
// nibbles of the 4 bytes of q.
__device__ __forceinline__ unsigned gmma_widen_lo(unsigned q) { return ((q << 2) & 0x1c1c1c1cu) | ((q << 4) & 0x80808080u); }
__device__ __forceinline__ unsigned gmma_widen_hi(unsigned q) { return ((q >> 2) & 0x1c1c1c1cu) | (q & 0x80808080u); }

// gmma_e4m3x2 converts (lo, hi) to e4m3 codes (lo in the low byte), round
// to nearest even, saturating; gmma_e4m3x2_back decodes them. On the GPU
// one cvt each (sm_89+); the emulation uses common.cuh's conversions.
__device__ __forceinline__ unsigned gmma_e4m3x2(float lo, float hi) {
#ifdef GMMA_EMULATE
    return f32_to_e4m3(lo) | (f32_to_e4m3(hi) << 8);
#else
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
#endif
}
__device__ __forceinline__ void gmma_e4m3x2_back(unsigned c, float& lo, float& hi) {
#ifdef GMMA_EMULATE
    lo = e4m3_to_f32(c & 0xffu), hi = e4m3_to_f32((c >> 8) & 0xffu);
#else
    unsigned h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)c));
    asm("{.reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;}" : "=f"(lo), "=f"(hi) : "r"(h2));
#endif
}

// gmma_codes fills codes [m][k] (fp4: each 8-group as elements 0,2,4,6,
// 1,3,5,7) and scales [m][k/32] from a [m, lda]; true (for the whole CTA)
// when every block's codes give back its values exactly. A thread takes 8
// elements of a block (it reads the whole block for the block's scale).
// Every thread calls it.
template <bool FP4>
__device__ bool gmma_codes(unsigned char* codes, float* scales, const float* a, int lda, int m, int k) {
    const int kb = k / 32;
    int ok = 1;
    for (int i = threadIdx.x; i < m * kb * 4; i += blockDim.x) {
        const int q = i & 3, mi = (i >> 2) / kb, b = (i >> 2) % kb;
        const float4* src = (const float4*)(a + (size_t)mi * lda + 32 * b);
        float am = 0.0f, v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float4 f = __ldg(src + j);
            am = fmaxf(am, fmaxf(fmaxf(fabsf(f.x), fabsf(f.y)), fmaxf(fabsf(f.z), fabsf(f.w))));
            if (j == 2 * q) v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
            if (j == 2 * q + 1) v[4] = f.x, v[5] = f.y, v[6] = f.z, v[7] = f.w;
        }
        const float s = ceil_pow2(gomax(am, 1e-4f) * (1.0f / 448.0f));
        unsigned c[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            c[j] = gmma_e4m3x2(v[2 * j] / s, v[2 * j + 1] / s);
            float lo, hi;
            gmma_e4m3x2_back(c[j], lo, hi);
            if (!(lo * s == v[2 * j] && hi * s == v[2 * j + 1])) ok = 0; // NaN fails too
        }
        unsigned w0, w1;
        if (FP4) { // elements 0,2,4,6 then 1,3,5,7
            w0 = (c[0] & 0xffu) | ((c[1] & 0xffu) << 8) | ((c[2] & 0xffu) << 16) | ((c[3] & 0xffu) << 24);
            w1 = (c[0] >> 8) | ((c[1] >> 8) << 8) | ((c[2] >> 8) << 16) | ((c[3] >> 8) << 24);
        } else {
            w0 = c[0] | (c[1] << 16), w1 = c[2] | (c[3] << 16);
        }
        *(uint2*)(codes + (size_t)mi * k + 32 * b + 8 * q) = make_uint2(w0, w1);
        if (q == 0) scales[(size_t)mi * kb + b] = s;
    }
    return __syncthreads_and(ok) != 0;
}

// gmma_exact is the reference's product of weight row j with activation
// row ar (cpu-ref's order: each block's sequential sum, then the blocks in
// ascending K), unrounded: the fallback.
template <bool FP4>
__device__ float gmma_exact(const float* ar, int k, const unsigned char* w, const unsigned char* ws, int j) {
    const int kb = k / 32;
    float acc = 0.0f;
    for (int b = 0; b < kb; b++) {
        float p = 0.0f;
        for (int c = 32 * b; c < 32 * b + 32; c++) {
            const size_t e = (size_t)j * k + c;
            const float wv = FP4 ? e2m1_to_f32((e & 1) ? (w[e / 2] >> 4) : (w[e / 2] & 0xfu)) : e4m3_to_f32(w[e]);
            p += ar[c] * wv;
        }
        acc += p * gemv_e8m0(FP4 ? ws[(size_t)j * kb + b] : ws[(size_t)(j / 32) * kb + b]);
    }
    return acc;
}

// gmma_swiglu is gemv_routed_swiglu's epilogue (swiglu_clamp's arithmetic)
// on the bf16 products g and u; rw may be null.
__device__ __forceinline__ float gmma_swiglu(float g, float u, float limit, const float* rw) {
    const float gv = limit > 0.0f ? gomin(g, limit) : g;
    const float ex = expf32(-gv);
    float uv = u;
    if (limit > 0.0f) uv = gomin(gomax(uv, -limit), limit);
    float h = gv / (1.0f + ex) * uv;
    if (rw) h = rw[0] * h;
    return bf16r(h);
}

// The weights stream through a ring of GMMA_STAGES stages per warp in
// shared memory, filled with cp.async: a stage is the warp's 8 rows × 128
// bytes (4 fp8 blocks, 8 fp4 blocks), each copy instruction 4 rows × 128
// contiguous bytes (whole lines: a request per line), and the fragments
// are read from the stage (rows GMMA_RS bytes apart: conflict-free 8-byte
// reads).
#define GMMA_SPAN 128
#define GMMA_RS 160
#define GMMA_STAGE (8 * GMMA_RS)
#define GMMA_STAGES 5

__device__ __forceinline__ void gmma_cp16(void* dst, const void* src) {
#ifdef GMMA_EMULATE
    memcpy(dst, src, 16);
#else
    unsigned d;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(d) : "l"(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#endif
}
__device__ __forceinline__ void gmma_cp_commit() {
#ifndef GMMA_EMULATE
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void gmma_cp_wait() {
#ifndef GMMA_EMULATE
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// gmma_shared is the dynamic shared memory of gmma_rows (the launcher's
// gmmaShared): codes, scales, then the warps' rings.
__host__ __device__ constexpr int gmma_ring_offset(int mr, int k) { return mr * k + 4 * mr * (k / 32); }

// gmma_rows computes out [m, ldo] = bf16(a [m, lda] · W) for a
// block-scaled weight (fp4: w packed [n, k/2], ws [n, k/32]; fp8: w [n, k],
// ws [n/32 rounded up, k/32]); m <= MR. The CTA takes the blocks of 8·RT
// rows blockIdx.x, blockIdx.x + gridDim.x, ... (a grid of one wave that
// converts the activations once a CTA). DUAL (m = 1): w2/ws2 is a second
// weight of the same shape and out gets swiglu(bf16(a·W), bf16(a·W2)) with
// limit and rw. k·(1 or 1/2) must be a multiple of 128 bytes.
template <bool FP4, int MR, bool DUAL>
__device__ void gmma_rows(float* out, int ldo, const float* a, int lda, int m, int k, const unsigned char* __restrict__ w,
                          const unsigned char* __restrict__ ws, const unsigned char* __restrict__ w2, const unsigned char* __restrict__ ws2, int n,
                          int rt_log2, float limit, const float* rw) {
    GEMV_DYN_SHARED(float, dyn);
    __shared__ float red[DUAL ? 2 : 1][GMMA_WARPS][MR][8];
    constexpr int NW = DUAL ? 2 : 1;
    unsigned char* codes = (unsigned char*)dyn;
    float* scales = (float*)(codes + (size_t)MR * k);
    const int kb = k / 32, RT = 1 << rt_log2, KG = GMMA_WARPS >> rt_log2;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int rt = warp & (RT - 1), kg = warp >> rt_log2;
    const int R = 8 * RT;
    int row0 = blockIdx.x * R, tile0 = row0 + 8 * rt; // the row block's first row, the warp's tile's
    const size_t rowBytes = FP4 ? (size_t)k / 2 : (size_t)k;
    const int nspan = (int)(rowBytes / GMMA_SPAN), bps = FP4 ? 8 : 4; // K blocks a span
    const int sBeg = kg * nspan / KG, sEnd = (kg + 1) * nspan / KG;
    unsigned char* ring = codes + gmma_ring_offset(MR, k) + (size_t)warp * GMMA_STAGES * NW * GMMA_STAGE;

    // lane (q, c) copies 16 bytes at 16c of rows q and q+4 (clamped: rows
    // past n are loaded from row n-1 and not stored)
    const int cq = lane >> 3, cc = lane & 7;
    auto issue = [&](int sp) {
        if (sp < sEnd) {
            unsigned char* st = ring + (size_t)((sp - sBeg) % GMMA_STAGES) * NW * GMMA_STAGE;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = cq + 4 * h;
                const size_t off = (size_t)min(tile0 + r, n - 1) * rowBytes + (size_t)sp * GMMA_SPAN + 16 * cc;
                gmma_cp16(st + r * GMMA_RS + 16 * cc, w + off);
                if (DUAL) gmma_cp16(st + GMMA_STAGE + r * GMMA_RS + 16 * cc, w2 + off);
            }
        }
        gmma_cp_commit(); // one group a span, empty past the end, so the waits count alike
    };
    // the first spans are requested before the activations are converted,
    // so the two latencies overlap
#pragma unroll
    for (int i = 0; i < GMMA_STAGES - 1; i++) issue(sBeg + i);

    if (!gmma_codes<FP4>(codes, scales, a, lda, m, k)) {
        gmma_cp_wait<0>();
        // not act_quant's output: the reference's sums, one thread an output
        for (int o = threadIdx.x; o < (n + R - 1) / R * R * m; o += blockDim.x) {
            const int rb = o / (R * m), r = o % R, mi = (o / R) % m, j = rb * R + r;
            if (rb % gridDim.x != blockIdx.x || j >= n) continue;
            const float v = bf16r(gmma_exact<FP4>(a + (size_t)mi * lda, k, w, ws, j));
            if (DUAL) out[j] = gmma_swiglu(v, bf16r(gmma_exact<FP4>(a, k, w2, ws2, j)), limit, rw);
            else out[(size_t)mi * ldo + j] = v;
        }
        return;
    }

    for (;;) {
        float acc[2] = {0.0f, 0.0f}, acc2[2] = {0.0f, 0.0f};
        const bool tokenOK = g < m;
        const unsigned char* crow = codes + (size_t)(tokenOK ? g : 0) * k + 8 * t;
        const float* srow = scales + (size_t)(tokenOK ? g : 0) * kb;
        // weight scales: fp8 one row of the 32-row scale blocks for the tile;
        // fp4 the rows of the lane's two outputs (2t, 2t+1 of the tile). A span
        // takes 4 (fp8) or 8 (fp4) consecutive scale bytes of each, read as one
        // word (kb is a multiple of 4 or 8: rows of 128-byte multiples).
        const int jo0 = min(tile0 + 2 * t, n - 1), jo1 = min(tile0 + 2 * t + 1, n - 1);
        const unsigned char* sw0 = FP4 ? ws + (size_t)jo0 * kb : ws + (size_t)(tile0 / 32) * kb;
        const unsigned char* sw1 = FP4 ? ws + (size_t)jo1 * kb : sw0;
        const unsigned char* sv0 = DUAL ? (FP4 ? ws2 + (size_t)jo0 * kb : ws2 + (size_t)(tile0 / 32) * kb) : sw0;
        const unsigned char* sv1 = DUAL ? (FP4 ? ws2 + (size_t)jo1 * kb : sv0) : sw1;

        for (int sp = sBeg; sp < sEnd; sp++) {
            gmma_cp_wait<GMMA_STAGES - 2>(); // span sp has landed (this lane's copies)
            __syncwarp();                    // ... and every lane's; the stage of sp-1 is free
            issue(sp + GMMA_STAGES - 1);
            const unsigned char* st = ring + (size_t)((sp - sBeg) % GMMA_STAGES) * NW * GMMA_STAGE + g * GMMA_RS;
            const int b0 = sp * bps;
            // the span's activation scales (times 2^6 for the widened fp4 codes)
            float sa[8];
            {
                const float4 x = *(const float4*)(srow + b0);
                sa[0] = x.x, sa[1] = x.y, sa[2] = x.z, sa[3] = x.w;
                if (FP4) {
                    const float4 y = *(const float4*)(srow + b0 + 4);
                    sa[4] = y.x, sa[5] = y.y, sa[6] = y.z, sa[7] = y.w;
    #pragma unroll
                    for (int j = 0; j < 8; j++) sa[j] *= 64.0f;
                }
            }
            // the span's weight scale bytes: fp8 4 of the tile's row, fp4 8 of each output row
            unsigned long long q0, q1, r0 = 0, r1 = 0;
            if (FP4) {
                q0 = __ldg((const unsigned long long*)(sw0 + b0)), q1 = __ldg((const unsigned long long*)(sw1 + b0));
                if (DUAL) r0 = __ldg((const unsigned long long*)(sv0 + b0)), r1 = __ldg((const unsigned long long*)(sv1 + b0));
            } else {
                q0 = q1 = __ldg((const unsigned*)(sw0 + b0));
                if (DUAL) r0 = r1 = __ldg((const unsigned*)(sv0 + b0));
            }
    #pragma unroll
            for (int j = 0; j < (FP4 ? 8 : 4); j++) {
                unsigned a0 = 0u, a2 = 0u;
                if (tokenOK) {
                    const uint2 ac = *(const uint2*)(crow + 32 * (size_t)(b0 + j));
                    a0 = ac.x, a2 = ac.y;
                }
                float d[4];
                if (FP4) {
                    const unsigned q = *(const unsigned*)(st + 16 * j + 4 * t);
                    gmma_mma(d, a0, a2, gmma_widen_lo(q), gmma_widen_hi(q));
                } else {
                    const uint2 v = *(const uint2*)(st + 32 * j + 8 * t);
                    gmma_mma(d, a0, a2, v.x, v.y);
                }
                // P·(sa·sw): sa and sw are powers of two, so this is the
                // reference's (P·sa)·sw while their product is a normal float
                const float s0 = sa[j] * gemv_e8m0((unsigned)(q0 >> (8 * j)) & 0xffu);
                const float s1 = FP4 ? sa[j] * gemv_e8m0((unsigned)(q1 >> (8 * j)) & 0xffu) : s0;
                acc[0] += d[0] * s0;
                acc[1] += d[1] * s1;
                if (DUAL) {
                    if (FP4) {
                        const unsigned q = *(const unsigned*)(st + GMMA_STAGE + 16 * j + 4 * t);
                        gmma_mma(d, a0, a2, gmma_widen_lo(q), gmma_widen_hi(q));
                    } else {
                        const uint2 v = *(const uint2*)(st + GMMA_STAGE + 32 * j + 8 * t);
                        gmma_mma(d, a0, a2, v.x, v.y);
                    }
                    const float t0 = sa[j] * gemv_e8m0((unsigned)(r0 >> (8 * j)) & 0xffu);
                    const float t1 = FP4 ? sa[j] * gemv_e8m0((unsigned)(r1 >> (8 * j)) & 0xffu) : t0;
                    acc2[0] += d[0] * t0;
                    acc2[1] += d[1] * t1;
                }
            }
        }
        // the next row block's first spans go into the ring now (every lane
        // is past the last stage), so they land during this block's sums
        gmma_cp_wait<0>();
        __syncwarp();
        const int next0 = row0 + gridDim.x * R;
        if (next0 < n) {
            tile0 = next0 + 8 * rt;
#pragma unroll
            for (int i = 0; i < GMMA_STAGES - 1; i++) issue(sBeg + i);
        }
        if (tokenOK) {
            red[0][warp][g][2 * t] = acc[0], red[0][warp][g][2 * t + 1] = acc[1];
            if (DUAL) red[DUAL ? 1 : 0][warp][g][2 * t] = acc2[0], red[DUAL ? 1 : 0][warp][g][2 * t + 1] = acc2[1];
        }
        __syncthreads();
        // one thread an output: the K groups' sums in ascending K
        for (int o = threadIdx.x; o < R * m; o += blockDim.x) {
            const int r = o % R, mi = o / R, j = row0 + r;
            if (j >= n) continue;
            const int tr = r >> 3, rr = r & 7;
            float s = 0.0f, s2 = 0.0f;
            for (int q = 0; q < KG; q++) {
                s += red[0][q * RT + tr][mi][rr];
                if (DUAL) s2 += red[DUAL ? 1 : 0][q * RT + tr][mi][rr];
            }
            if (DUAL) out[j] = gmma_swiglu(bf16r(s), bf16r(s2), limit, rw);
            else out[(size_t)mi * ldo + j] = bf16r(s);
        }
        __syncthreads(); // red is read before the next block's sums are written
        row0 = next0;
        if (row0 >= n) break;
    }
    gmma_cp_wait<0>();
}

#define GMMA_BS(NAME, FP4, MR)                                                                                                               \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS) NAME(float* out, const float* a, int m, int k, const unsigned char* w,       \
                                                                    const unsigned char* ws, int n, int rt_log2) {                         \
        gmma_rows<FP4, MR, false>(out, n, a, k, m, k, w, ws, nullptr, nullptr, n, rt_log2, 0.0f, nullptr);                                 \
    }
// gemv_mma_fp8_mR / gemv_mma_fp4_mR: matmul_fp8/fp4 for m <= R rows. grid
// at most ceil(n / (8·2^rt_log2)) (the CTAs loop over the row blocks),
// block 256, shared gmma_ring_offset(R, k) + 8·GMMA_STAGES·GMMA_STAGE bytes.
GMMA_BS(gemv_mma_fp8_m1, false, 1)
GMMA_BS(gemv_mma_fp8_m2, false, 2)
GMMA_BS(gemv_mma_fp8_m4, false, 4)
GMMA_BS(gemv_mma_fp8_m8, false, 8)
GMMA_BS(gemv_mma_fp4_m1, true, 1)
GMMA_BS(gemv_mma_fp4_m2, true, 2)
GMMA_BS(gemv_mma_fp4_m4, true, 4)
GMMA_BS(gemv_mma_fp4_m8, true, 8)
#undef GMMA_BS

// gmma_poison writes NaN to the rows of out (a routed row) that this CTA's
// row blocks of R rows cover (a bad expert id).
__device__ __forceinline__ void gmma_poison(float* out, int n, int R) {
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        if ((j / R) % gridDim.x == blockIdx.x) out[j] = __uint_as_float(0x7fc00000u);
}

// gemv_mma_routed_fp4 / _fp8: gemv_routed's contract (row q of out [Q, n]
// is a[q / adiv] · W_{ids[q]}; a bad id poisons its row) on tensor cores.
// grid (at most ceil(n / (8·2^rt_log2)), Q), block 256, shared as gemv_mma's.
template <bool FP4>
__device__ void gmma_routed(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride, const unsigned char* ws,
                            long long sstride, int n, const long long* ids, int nexperts, int rt_log2) {
    const int q = blockIdx.y;
    const long long e = ids[q];
    if (e < 0 || e >= nexperts) {
        gmma_poison(out + (size_t)q * n, n, 8 << rt_log2);
        return;
    }
    gmma_rows<FP4, 1, false>(out + (size_t)q * n, n, a + (size_t)(q / adiv) * k, k, 1, k, w + (size_t)e * wstride, ws + (size_t)e * sstride, nullptr,
                             nullptr, n, rt_log2, 0.0f, nullptr);
}
extern "C" __global__ void __launch_bounds__(GMMA_THREADS) gemv_mma_routed_fp4(float* out, const float* a, int adiv, int k, const unsigned char* w,
                                                                              long long wstride, const unsigned char* ws, long long sstride, int n,
                                                                              const long long* ids, int nexperts, int rt_log2) {
    gmma_routed<true>(out, a, adiv, k, w, wstride, ws, sstride, n, ids, nexperts, rt_log2);
}
extern "C" __global__ void __launch_bounds__(GMMA_THREADS) gemv_mma_routed_fp8(float* out, const float* a, int adiv, int k, const unsigned char* w,
                                                                              long long wstride, const unsigned char* ws, long long sstride, int n,
                                                                              const long long* ids, int nexperts, int rt_log2) {
    gmma_routed<false>(out, a, adiv, k, w, wstride, ws, sstride, n, ids, nexperts, rt_log2);
}

// gemv_mma_routed_swiglu_fp4 / _fp8: gemv_routed_swiglu's contract on
// tensor cores (w1 and w3 rows of the chosen expert read together).
// grid (at most ceil(n / (8·2^rt_log2)), Q), block 256, shared as gemv_mma's.
template <bool FP4>
__device__ void gmma_routed_swiglu(float* out, const float* a, int adiv, int k, const unsigned char* w1, const unsigned char* ws1,
                                   const unsigned char* w3, const unsigned char* ws3, long long wstride, long long sstride, int n,
                                   const long long* ids, int nexperts, float limit, const float* rw, int rt_log2) {
    const int q = blockIdx.y;
    const long long e = ids[q];
    if (e < 0 || e >= nexperts) {
        gmma_poison(out + (size_t)q * n, n, 8 << rt_log2);
        return;
    }
    const size_t wo = (size_t)e * wstride, so = (size_t)e * sstride;
    gmma_rows<FP4, 1, true>(out + (size_t)q * n, n, a + (size_t)(q / adiv) * k, k, 1, k, w1 + wo, ws1 + so, w3 + wo, ws3 + so, n, rt_log2,
                            limit, rw ? rw + q : nullptr);
}
extern "C" __global__ void __launch_bounds__(GMMA_THREADS)
    gemv_mma_routed_swiglu_fp4(float* out, const float* a, int adiv, int k, const unsigned char* w1, const unsigned char* ws1, const unsigned char* w3,
                               const unsigned char* ws3, long long wstride, long long sstride, int n, const long long* ids, int nexperts, float limit,
                               const float* rw, int rt_log2) {
    gmma_routed_swiglu<true>(out, a, adiv, k, w1, ws1, w3, ws3, wstride, sstride, n, ids, nexperts, limit, rw, rt_log2);
}
extern "C" __global__ void __launch_bounds__(GMMA_THREADS)
    gemv_mma_routed_swiglu_fp8(float* out, const float* a, int adiv, int k, const unsigned char* w1, const unsigned char* ws1, const unsigned char* w3,
                               const unsigned char* ws3, long long wstride, long long sstride, int n, const long long* ids, int nexperts, float limit,
                               const float* rw, int rt_log2) {
    gmma_routed_swiglu<false>(out, a, adiv, k, w1, ws1, w3, ws3, wstride, sstride, n, ids, nexperts, limit, rw, rt_log2);
}

// ---------------------------------------------------------------------------
// Plain decode products with the lanes of a warp along K (gemv_plain's
// contract: out[mi·ldo + z·o_z + j] = f(Σ_c a[mi·lda + z·a_z + c]·W_z[j, c])
// for mi < m <= MR, f = bf16 rounding when round is set): the bf16 head,
// the fp32 products and the grouped fp8 wo_a. gemv_plain gives each thread
// a row, so a warp's 16-byte loads touch 32 rows' half sectors; here a
// warp reads 512 contiguous bytes of one row a step. Each lane adds its
// 16-byte steps (lane, lane + 32, ...) in order, then lane 0 adds the 32
// lane sums in lane order: a fixed order, not gemm_plain's single chain
// (the Exact option keeps gemv_plain). A warp takes rpw consecutive rows;
// grid (ceil(n / (8·rpw)), 1, groups), block 256. Rows must be 16-byte
// aligned (k·sizeof(weight) % 16 == 0, the launcher checks), a and lda too.
template <class L, int MR>
__device__ void gemv_warp(float* out, const float* a, int m, int k, L ld, int n, int lda, int ldo, long long a_z, long long o_z, int round, int rpw) {
    __shared__ float red[GMMA_WARPS][MR][33];
    const int z = blockIdx.z, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    a += z * a_z;
    out += z * o_z;
    const int steps = k / L::V;
    constexpr int U = 8;
    for (int i = 0; i < rpw; i++) {
        const int j = (blockIdx.x * GMMA_WARPS + warp) * rpw + i;
        if (j >= n) break; // uniform in the warp
        const size_t row = (size_t)z * n + j;
        const uint4* src = (const uint4*)ld.row_ptr(row, k);
        float acc[MR];
#pragma unroll
        for (int mi = 0; mi < MR; mi++) acc[mi] = 0.0f;
        for (int s0 = lane; s0 < steps; s0 += 32 * U) {
            uint4 u[U];
#pragma unroll
            for (int t = 0; t < U; t++) u[t] = s0 + 32 * t < steps ? __ldg(src + s0 + 32 * t) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int t = 0; t < U; t++) {
                const int s = s0 + 32 * t;
                if (s < steps) {
                    float wv[L::V];
                    ld.step(wv, u[t], row, s * L::V);
#pragma unroll
                    for (int mi = 0; mi < MR; mi++) {
                        if (mi < m) {
                            const float4* ar = (const float4*)(a + (size_t)mi * lda + s * L::V);
#pragma unroll
                            for (int v4 = 0; v4 < L::V / 4; v4++) {
                                const float4 x = __ldg(ar + v4);
                                acc[mi] += x.x * wv[4 * v4];
                                acc[mi] += x.y * wv[4 * v4 + 1];
                                acc[mi] += x.z * wv[4 * v4 + 2];
                                acc[mi] += x.w * wv[4 * v4 + 3];
                            }
                        }
                    }
                }
            }
        }
        if (lane == 0) { // the columns past the last full step
            for (int c = steps * L::V; c < k; c++) {
                const float wv = ld.one(row, k, c);
#pragma unroll
                for (int mi = 0; mi < MR; mi++)
                    if (mi < m) acc[mi] += a[(size_t)mi * lda + c] * wv;
            }
        }
#pragma unroll
        for (int mi = 0; mi < MR; mi++) red[warp][mi][lane] = acc[mi];
        __syncwarp();
        if (lane < m) {
            float sum = 0.0f;
            for (int l = 0; l < 32; l++) sum += red[warp][lane][l];
            out[(size_t)lane * ldo + j] = round ? bf16r(sum) : sum;
        }
        __syncwarp();
    }
}

#define GEMV_WARP(NAME, MR)                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS) NAME##_f32w(float* out, const float* a, int m, int k, const float* w, int n,  \
                                                                           int lda, int ldo, long long a_z, long long o_z, int round,       \
                                                                           int rpw) {                                                      \
        gemv_warp<GemvF32, MR>(out, a, m, k, GemvF32{w}, n, lda, ldo, a_z, o_z, round, rpw);                                               \
    }                                                                                                                                      \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS) NAME##_bf16w(float* out, const float* a, int m, int k,                       \
                                                                            const unsigned short* w, int n, int lda, int ldo,              \
                                                                            long long a_z, long long o_z, int round, int rpw) {            \
        gemv_warp<GemvBF16, MR>(out, a, m, k, GemvBF16{w}, n, lda, ldo, a_z, o_z, round, rpw);                                             \
    }                                                                                                                                      \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS) NAME##_fp8w(float* out, const float* a, int m, int k,                        \
                                                                           const unsigned char* w, const unsigned char* s, int n, int lda, \
                                                                           int ldo, long long a_z, long long o_z, int round, int rpw) {    \
        gemv_warp<GemvFP8W, MR>(out, a, m, k, GemvFP8W{w, s, k}, n, lda, ldo, a_z, o_z, round, rpw);                                       \
    }
// gemv_warp_mR_{f32w,bf16w,fp8w}: matmul_f32w/bf16w/fp8w for m <= R rows.
GEMV_WARP(gemv_warp_m1, 1)
GEMV_WARP(gemv_warp_m2, 2)
GEMV_WARP(gemv_warp_m4, 4)
GEMV_WARP(gemv_warp_m8, 8)
#undef GEMV_WARP
