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
// partials stay within the golden tolerance. For decode 16 weight rows are
// the MMA's M side and the activation rows its N side (columns 0..m-1 of
// 8, the rest zero), so one MMA covers 512 weight bytes (fp8) and each lane
// reads 8 contiguous bytes of two rows: full 32-byte sectors.
//
// fp4 codes are widened to e4m3 by placing the 3 magnitude bits at bits
// 2..4 (and the sign at 7): that e4m3 code is exactly the e2m1 value ·
// 2^-6, subnormal 0.5 and zero included (the 2^6 is restored on P). The
// low nibbles of a word give K elements 0,2,4,6 of the lane's 8 and the
// high nibbles 1,3,5,7, so the activation codes are stored in that order.
//
// Order: the blocks of a chunk of K (an item) are added in ascending K,
// then the chunks of a row in ascending order (below): a fixed order given
// the shape (the results do not depend on the grid), not the reference's
// single chain, so outputs may differ from cpu-ref by the rounding of a
// reassociated fp32 sum (≤ 1 bf16 ulp, rarely). kernels.go keeps
// gemv.cuh's exact kernels for the cuda-exact option.
//
// The activation codes are derived in the kernel from the fake-quantised
// fp32 activations (act_quant's bf16 values q·s): per 32-block, s' =
// act_quant's scale of the block's largest magnitude and q' = e4m3(x/s'),
// checked to give back x exactly; a CTA whose activations fail the check
// (not act_quant's output: NaN, Inf, values off the e4m3 grid) computes its
// rows with the reference's scalar sums instead, bit for bit.
//
// CTA: 8 warps. Requires rows of a multiple of 128 bytes (k % 128 == 0
// fp8, k % 256 == 0 fp4), 16-byte aligned weights and activations with
// lda % 4 == 0, 8-byte aligned scale rows, and gmma_ring_offset(rows, k) +
// 8·GMMA_STAGES·STAGE (twice that for the SwiGLU pair) bytes of dynamic
// shared memory (the launcher checks).
#pragma once
#include "common.cuh"
#include "gemv.cuh"

#define GMMA_THREADS 256
#define GMMA_WARPS 8
#define GMMA_RED 8 // chunk sums a reducing lane loads before adding them

// gmma_mma: d = A·B for one 32-wide K block, zero accumulator: A 16 rows
// (a0, a2 row g; a1, a3 row g+8), B 8 columns (b0, b1 column g); lane (g,
// t) gets D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
__device__ __forceinline__ void gmma_mma(float d[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
#ifdef GMMA_EMULATE
    gmma_emulate(d, a0, a1, a2, a3, b0, b1);
#else
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
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
// when every block's codes give back its values exactly. Four consecutive
// lanes take a block, 8 elements each, and share its largest magnitude by
// shuffles. Every thread calls it (blockDim.x a multiple of 32).
template <bool FP4>
__device__ bool gmma_codes(unsigned char* codes, float* scales, const float* a, int lda, int m, int k) {
    const int kb = k / 32, total = m * kb * 4;
    constexpr int T = 4; // turns whose loads are in flight together (one latency, not T)
    int ok = 1;
    for (int i0 = 0; i0 < total; i0 += T * blockDim.x) { // every lane of a warp takes the same turns
        float4 f[T][2];
#pragma unroll
        for (int u = 0; u < T; u++) {
            const int i = i0 + u * blockDim.x + threadIdx.x, q = i & 3, mi = (i >> 2) / kb, b = (i >> 2) % kb;
            f[u][0] = f[u][1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (i < total) {
                const float4* src = (const float4*)(a + (size_t)mi * lda + 32 * b + 8 * q);
                f[u][0] = __ldg(src), f[u][1] = __ldg(src + 1);
            }
        }
#pragma unroll
        for (int u = 0; u < T; u++) {
            const int i = i0 + u * blockDim.x + threadIdx.x, q = i & 3, mi = (i >> 2) / kb, b = (i >> 2) % kb;
            const float4 f0 = f[u][0], f1 = f[u][1];
            const float v[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
            float am = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) am = fmaxf(am, fabsf(v[j]));
            am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 1));
            am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 2));
            if (i >= total) continue;
            const float s = ceil_pow2(gomax(am, 1e-4f) * (1.0f / 448.0f));
            unsigned c[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                c[j] = gmma_e4m3x2(div_scale(v[2 * j], s), div_scale(v[2 * j + 1], s));
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

// Work and streaming. The weight rows are cut into tiles of 16 (the MMA's
// M side) and each row into chunks of `chunk` spans of 128 bytes; an item
// is one (routed row q, tile, chunk). The items, q-major, are split into
// contiguous ranges, one per warp of the grid (a wave of CTAs that stay
// resident), so every warp streams the same number of spans within one
// item however the shape falls. A warp's spans go through its own ring of
// GMMA_STAGES stages in shared memory, filled with cp.async ahead of use
// across item boundaries (no drain between items); a stage is 16 rows ×
// 128 bytes, each copy instruction 4 rows × 128 contiguous bytes (whole
// lines), and the fragments are read from rows GMMA_RS bytes apart
// (conflict-free: 8-byte reads need RS ≡ 32 mod 128, 4-byte reads RS ≡
// 16 mod 64). The span's weight scales ride in the rows' padding (fp4: 8
// bytes of row r at 128 of row r; fp8: the tile's 4 bytes at 128 of row
// 0), so no load waits in the loop.
//
// A chunk's sums (per output, the blocks of the chunk in ascending K) go to
// part when a row has more than one chunk; the warp that completes a
// tile's last chunk (a counter per tile, cnt, read back to 0 after) adds
// the tile's chunk sums in ascending chunk order and writes the outputs.
// The order depends on the shape and chunk only, not on the grid or which
// warp finishes first.
#define GMMA_SPAN 128
#define GMMA_STAGES 4

template <bool FP4>
struct GmmaGeom {
    static constexpr int RS = FP4 ? 144 : 160;       // bytes between a stage's rows
    static constexpr int STAGE = 16 * RS;           // bytes of one stage
    static constexpr int BPS = FP4 ? 8 : 4;          // K blocks a span
};

__device__ __forceinline__ void gmma_cp16(void* dst, const void* src) {
#ifdef GMMA_EMULATE
    memcpy(dst, src, 16);
#else
    unsigned d;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(d) : "l"(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#endif
}
// gmma_cp8 / gmma_cp4: cp.async of 8 / 4 bytes (the weight scales).
template <int N>
__device__ __forceinline__ void gmma_cpn(void* dst, const void* src) {
#ifdef GMMA_EMULATE
    memcpy(dst, src, N);
#else
    unsigned d;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(d) : "l"(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(N));
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

// gmma_fence orders a lane's chunk sums before the tile counter's atomic
// (release) and the last warp's reads of them after it (acquire):
// fence.acq_rel is enough for that pattern and lighter than
// __threadfence's fence.sc.
__device__ __forceinline__ void gmma_fence() {
#ifdef GMMA_EMULATE
    __threadfence();
#else
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
}

// gmma_shared is the dynamic shared memory of gmma_run (the launcher's
// gmmaShared): codes, scales, then the warps' rings.
__host__ __device__ constexpr int gmma_ring_offset(int mr, int k) { return mr * k + 4 * mr * (k / 32); }

// GmmaJob is one product: out row r (plain: activation row r; routed: row
// q) at out + r·ldo. Plain: m activation rows of a (lda apart) times one
// weight. Routed (ids set): Q rows, row q is a[q / adiv] times expert
// ids[q] (weights wstride, scales sstride bytes apart); a bad id gives a
// NaN row. DUAL: w2/ws2 is a second weight and out gets swiglu(bf16(a·W),
// bf16(a·W2)) with limit and rw (rw[q] for routed row q; may be null).
struct GmmaJob {
    float* out;
    int ldo;
    const float* a;
    int lda, m, k, n;
    const unsigned char *w, *ws, *w2, *ws2;
    long long wstride, sstride;
    const long long* ids;
    int nexp, Q, adiv, chunk;
    float* part;
    unsigned* cnt;
    float limit;
    const float* rw;
};

template <bool FP4, int MR, bool DUAL, bool ROUTED>
__device__ void gmma_run(const GmmaJob J) {
    GEMV_DYN_SHARED(float, dyn);
    using G = GmmaGeom<FP4>;
    constexpr int NW = DUAL ? 2 : 1, RS = G::RS, STAGE = G::STAGE, BPS = G::BPS;
    const int k = J.k, n = J.n, kb = k / 32;
    const int arows = ROUTED ? (J.Q + J.adiv - 1) / J.adiv : J.m; // activation rows converted
    const int mcols = ROUTED ? 1 : J.m;                                // MMA columns in use
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    unsigned char* codes = (unsigned char*)dyn;
    float* scales = (float*)(codes + (size_t)arows * k);
    unsigned char* ring = codes + gmma_ring_offset(arows, k) + (size_t)warp * GMMA_STAGES * NW * STAGE;
    const size_t rowBytes = FP4 ? (size_t)k / 2 : (size_t)k;
    const int nspan = (int)(rowBytes / GMMA_SPAN), C = J.chunk, NC = (nspan + C - 1) / C;
    const int tiles = (n + 15) / 16;
    // 32-bit item arithmetic (a 64-bit division is a long software
    // routine: a quarter of a small product's issued instructions went to
    // the partition and item decoding); the first items % GW warps take one
    // item more
    const int perQ = tiles * NC, items = (ROUTED ? J.Q : 1) * perQ;
    const int GW = gridDim.x * GMMA_WARPS, gw = blockIdx.x * GMMA_WARPS + warp;
    const int per = items / GW, extra = items % GW;
    const int i0 = gw * per + min(gw, extra), i1 = i0 + per + (gw < extra ? 1 : 0);
    auto expert = [&](int q) -> long long { // the weights' index of routed row q (clamped: a bad id reads expert 0)
        if (!ROUTED) return 0;
        const long long e = J.ids[q];
        return e < 0 || e >= J.nexp ? 0 : e;
    };

    // The issue cursor: item ii, span sp of [.., spEnd); lane (cq, cc) copies
    // 16 bytes at 16cc of rows cq, cq+4, cq+8, cq+12 of the tile (rows past n
    // read row n-1 and are not stored).
    const int cq = lane >> 3, cc = lane & 7;
    int ii = i0;
    int sp = 0, spEnd = 0, slotI = 0;
    const unsigned char *wb = J.w, *wb2 = J.w2, *sb = J.ws, *sb2 = J.ws2;
    size_t roff[4];
    auto itemStart = [&]() {
        const int q = (int)(ii / perQ), rem = (int)(ii % perQ), tile = rem / NC, c = rem % NC;
        const long long e = expert(q);
        wb = J.w + e * J.wstride;
        if (DUAL) wb2 = J.w2 + e * J.wstride;
        // the scale bytes this lane copies: fp4 row lane of the tile (lanes
        // 0..15), fp8 the tile's row of 32-row blocks (lane 0)
        const size_t srow = FP4 ? (size_t)min(16 * tile + (lane & 15), n - 1) * kb : (size_t)(16 * tile / 32) * kb;
        sb = J.ws + e * J.sstride + srow;
        if (DUAL) sb2 = J.ws2 + e * J.sstride + srow;
#pragma unroll
        for (int h = 0; h < 4; h++) roff[h] = (size_t)min(16 * tile + cq + 4 * h, n - 1) * rowBytes + 16 * cc;
        sp = c * C;
        spEnd = min(sp + C, nspan);
    };
    auto issue = [&]() {
        if (ii < i1) {
            unsigned char* st = ring + (size_t)slotI * NW * STAGE;
#pragma unroll
            for (int h = 0; h < 4; h++) {
                const int r = cq + 4 * h;
                gmma_cp16(st + r * RS + 16 * cc, wb + roff[h] + (size_t)sp * GMMA_SPAN);
                if (DUAL) gmma_cp16(st + STAGE + r * RS + 16 * cc, wb2 + roff[h] + (size_t)sp * GMMA_SPAN);
            }
            if (FP4 && lane < 16) {
                gmma_cpn<8>(st + lane * RS + GMMA_SPAN, sb + (size_t)sp * BPS);
                if (DUAL) gmma_cpn<8>(st + STAGE + lane * RS + GMMA_SPAN, sb2 + (size_t)sp * BPS);
            } else if (!FP4 && lane == 0) {
                gmma_cpn<4>(st + GMMA_SPAN, sb + (size_t)sp * BPS);
                if (DUAL) gmma_cpn<4>(st + STAGE + GMMA_SPAN, sb2 + (size_t)sp * BPS);
            }
            if (++sp == spEnd && ++ii < i1) itemStart();
        }
        slotI = slotI + 1 == GMMA_STAGES ? 0 : slotI + 1;
        gmma_cp_commit(); // one group a span, empty past the end, so the waits count alike
    };
    // the first spans are requested before the activations are converted,
    // so the two latencies overlap
    if (ii < i1) itemStart();
#pragma unroll
    for (int i = 0; i < GMMA_STAGES - 1; i++) issue();
    // plain products open with pdl_trigger: their first spans (weights
    // only) are requested while the kernel before them finishes; the
    // activations, part and cnt are read after this wait. Routed ones read
    // ids in itemStart, so they waited on entry.
    if (!ROUTED) pdl_wait();

    if (!gmma_codes<FP4>(codes, scales, J.a, J.lda, arows, k)) {
        gmma_cp_wait<0>();
        // not act_quant's output: the reference's sums, one thread an output
        const long long outs = (long long)(ROUTED ? J.Q : J.m) * n;
        for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < outs; o += (long long)gridDim.x * blockDim.x) {
            const int r = (int)(o / n), j = (int)(o % n);
            float* dst = J.out + (size_t)r * J.ldo + j;
            if (ROUTED && (J.ids[r] < 0 || J.ids[r] >= J.nexp)) {
                *dst = __uint_as_float(0x7fc00000u);
                continue;
            }
            const long long e = expert(r);
            const float* ar = J.a + (size_t)(ROUTED ? r / J.adiv : r) * J.lda;
            const float v = bf16r(gmma_exact<FP4>(ar, k, J.w + e * J.wstride, J.ws + e * J.sstride, j));
            if (DUAL)
                *dst = gmma_swiglu(v, bf16r(gmma_exact<FP4>(ar, k, J.w2 + e * J.wstride, J.ws2 + e * J.sstride, j)), J.limit,
                                   J.rw ? J.rw + (ROUTED ? r : 0) : nullptr);
            else *dst = v;
        }
        return;
    }

    int slotC = 0;
    for (int it = i0; it < i1; it++) {
        const int q = (int)(it / perQ), rem = (int)(it % perQ), tile = rem / NC, c = rem % NC;
        // B: MMA column col is activation row col (plain) or a[q / adiv] in
        // column 0 (routed); the D columns 2t, 2t+1 take those rows' scales
        const bool bOK = ROUTED ? g == 0 : g < J.m;
        const int brow = ROUTED ? q / J.adiv : (bOK ? g : 0);
        const unsigned char* crow = codes + (size_t)brow * k + 8 * t;
        const float* sr0 = scales + (size_t)(ROUTED ? q / J.adiv : min(2 * t, J.m - 1)) * kb;
        const float* sr1 = scales + (size_t)(ROUTED ? q / J.adiv : min(2 * t + 1, J.m - 1)) * kb;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const int s0 = c * C, s1 = min(s0 + C, nspan);
        for (int s = s0; s < s1; s++) {
            gmma_cp_wait<GMMA_STAGES - 2>(); // span s has landed (this lane's copies)
            __syncwarp();                    // ... and every lane's; the stage of the span before is free
            issue();
            const unsigned char* st = ring + (size_t)slotC * NW * STAGE;
            slotC = slotC + 1 == GMMA_STAGES ? 0 : slotC + 1;
            const int b0 = s * BPS;
            // the span's activation scales of columns 2t and 2t+1 (times 2^6
            // for the widened fp4 codes)
            float sa0[BPS], sa1[BPS];
#pragma unroll
            for (int v = 0; v < BPS / 4; v++) {
                const float4 x = *(const float4*)(sr0 + b0 + 4 * v);
                sa0[4 * v] = x.x, sa0[4 * v + 1] = x.y, sa0[4 * v + 2] = x.z, sa0[4 * v + 3] = x.w;
                if (MR > 1) {
                    const float4 y = *(const float4*)(sr1 + b0 + 4 * v);
                    sa1[4 * v] = y.x, sa1[4 * v + 1] = y.y, sa1[4 * v + 2] = y.z, sa1[4 * v + 3] = y.w;
                }
            }
            if (FP4) {
#pragma unroll
                for (int j = 0; j < BPS; j++) sa0[j] *= 64.0f, sa1[j] = MR > 1 ? sa1[j] * 64.0f : 0.0f;
            }
            // the span's weight scale bytes (from the stage): fp4 rows g and
            // g+8, fp8 the tile's
            unsigned long long qA, qB, rA = 0, rB = 0;
            if (FP4) {
                qA = *(const unsigned long long*)(st + g * RS + GMMA_SPAN), qB = *(const unsigned long long*)(st + (g + 8) * RS + GMMA_SPAN);
                if (DUAL) rA = *(const unsigned long long*)(st + STAGE + g * RS + GMMA_SPAN), rB = *(const unsigned long long*)(st + STAGE + (g + 8) * RS + GMMA_SPAN);
            } else {
                qA = qB = *(const unsigned*)(st + GMMA_SPAN);
                if (DUAL) rA = rB = *(const unsigned*)(st + STAGE + GMMA_SPAN);
            }
#pragma unroll
            for (int j = 0; j < BPS; j++) {
                unsigned bx = 0u, by = 0u;
                if (bOK) {
                    const uint2 ac = *(const uint2*)(crow + 32 * (size_t)(b0 + j));
                    bx = ac.x, by = ac.y;
                }
#pragma unroll
                for (int wi = 0; wi < NW; wi++) {
                    const unsigned char* sw = st + wi * STAGE;
                    float d[4];
                    if (FP4) {
                        const unsigned x = *(const unsigned*)(sw + g * RS + 16 * j + 4 * t);
                        const unsigned y = *(const unsigned*)(sw + (g + 8) * RS + 16 * j + 4 * t);
                        gmma_mma(d, gmma_widen_lo(x), gmma_widen_lo(y), gmma_widen_hi(x), gmma_widen_hi(y), bx, by);
                    } else {
                        const uint2 x = *(const uint2*)(sw + g * RS + 32 * j + 8 * t);
                        const uint2 y = *(const uint2*)(sw + (g + 8) * RS + 32 * j + 8 * t);
                        gmma_mma(d, x.x, y.x, x.y, y.y, bx, by);
                    }
                    // P·(sa·sw): sa and sw are powers of two, so this is the
                    // reference's (P·sa)·sw while their product is a normal float
                    const unsigned long long wa = wi ? rA : qA, wbq = wi ? rB : qB;
                    const float swa = gemv_e8m0((unsigned)(wa >> (8 * j)) & 0xffu);
                    const float swb = FP4 ? gemv_e8m0((unsigned)(wbq >> (8 * j)) & 0xffu) : swa;
                    float* ac = wi ? acc2 : acc;
                    ac[0] += d[0] * (sa0[j] * swa);
                    ac[2] += d[2] * (sa0[j] * swb);
                    if (MR > 1) {
                        ac[1] += d[1] * (sa1[j] * swa);
                        ac[3] += d[3] * (sa1[j] * swb);
                    }
                }
            }
        }
        // the item's sums: lane (g, t) holds rows g, g+8 of the tile for
        // columns 2t, 2t+1
        const bool bad = ROUTED && (J.ids[q] < 0 || J.ids[q] >= J.nexp);
        auto emit = [&](int col, int r, float v, float v2) { // output col (or q), tile row r
            const int j = 16 * tile + r;
            if (j >= n) return;
            float* dst = J.out + (size_t)(ROUTED ? q : col) * J.ldo + j;
            if (bad) *dst = __uint_as_float(0x7fc00000u);
            else if (DUAL) *dst = gmma_swiglu(bf16r(v), bf16r(v2), J.limit, J.rw ? J.rw + (ROUTED ? q : 0) : nullptr);
            else *dst = bf16r(v);
        };
        if (NC == 1) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int col = 2 * t + h;
                if (col < mcols) emit(col, g, acc[h], acc2[h]), emit(col, g + 8, acc[2 + h], acc2[2 + h]);
            }
            continue;
        }
        const int qt = q * tiles + tile;
        float* P = J.part + ((size_t)qt * NC + c) * (MR * 16);
        float* P2 = J.part + ((size_t)items + (size_t)qt * NC + c) * (MR * 16);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int col = 2 * t + h;
            if (col < mcols) {
                P[col * 16 + g] = acc[h], P[col * 16 + g + 8] = acc[2 + h];
                if (DUAL) P2[col * 16 + g] = acc2[h], P2[col * 16 + g + 8] = acc2[2 + h];
            }
        }
        gmma_fence(); // the sums are visible before the count says so
        __syncwarp();
        unsigned done = 0;
        if (lane == 0) done = atomicAdd(J.cnt + qt, 1u);
        done = __shfl_sync(0xffffffffu, done, 0);
        if (done != (unsigned)NC - 1) continue;
        gmma_fence();
        // the last chunk of the tile: add the chunks in order, GMMA_RED of
        // their sums loaded at a time (one after another, the adds waited
        // on a round trip to L2 each: most of a small product's time)
        for (int o = lane; o < 16 * mcols; o += 32) {
            const int col = o / 16, r = o % 16;
            float v = 0.0f, v2 = 0.0f;
            const float* P0 = J.part + (size_t)qt * NC * (MR * 16) + col * 16 + r;
            for (int c0 = 0; c0 < NC; c0 += GMMA_RED) {
                float pv[GMMA_RED], pv2[GMMA_RED];
#pragma unroll
                for (int u = 0; u < GMMA_RED; u++) {
                    const size_t at = (size_t)min(c0 + u, NC - 1) * (MR * 16);
                    pv[u] = __ldcg(P0 + at);
                    if (DUAL) pv2[u] = __ldcg(P0 + (size_t)items * (MR * 16) + at);
                }
#pragma unroll
                for (int u = 0; u < GMMA_RED; u++) {
                    if (c0 + u < NC) {
                        v += pv[u];
                        if (DUAL) v2 += pv2[u];
                    }
                }
            }
            emit(col, r, v, v2);
        }
        if (lane == 0) J.cnt[qt] = 0u; // for the next launch
    }
    gmma_cp_wait<0>();
}

// gemv_mma_fp8_mR / gemv_mma_fp4_mR: matmul_fp8/fp4 for m <= R rows (out
// [m, n], a [m, k]); grid a wave (any size), block 256, shared
// gmma_ring_offset(m, k) + 8·GMMA_STAGES·STAGE bytes; chunk spans an item,
// part (when a row has more than one chunk) m·16 floats an item, cnt a
// zero counter a 16-row tile.
#define GMMA_BS(NAME, FP4, MR)                                                                                                               \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS) NAME(float* out, const float* a, int m, int k, const unsigned char* w,       \
                                                                    const unsigned char* ws, int n, int chunk, float* part, unsigned* cnt) { pdl_trigger(); \
        gmma_run<FP4, MR, false, false>(                                                                                                   \
            GmmaJob{out, n, a, k, m, k, n, w, ws, nullptr, nullptr, 0, 0, nullptr, 0, 1, 1, chunk, part, cnt, 0.0f, nullptr});             \
    }
GMMA_BS(gemv_mma_fp8_m1, false, 1)
GMMA_BS(gemv_mma_fp8_m2, false, 2)
GMMA_BS(gemv_mma_fp8_m4, false, 4)
GMMA_BS(gemv_mma_fp8_m8, false, 8)
GMMA_BS(gemv_mma_fp4_m1, true, 1)
GMMA_BS(gemv_mma_fp4_m2, true, 2)
GMMA_BS(gemv_mma_fp4_m4, true, 4)
GMMA_BS(gemv_mma_fp4_m8, true, 8)
#undef GMMA_BS

// gemv_mma_routed_fp4 / _fp8: gemv_routed's contract (row q of out [Q, n]
// is a[q / adiv] · W_{ids[q]}; a bad id poisons its row) on tensor cores;
// grid a wave, block 256, shared gmma_ring_offset(ceil(Q / adiv), k) +
// 8·GMMA_STAGES·STAGE bytes, part 16 floats an item.
#define GMMA_ROUTED(NAME, FP4)                                                                                                               \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS)                                                                             \
        NAME(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride, const unsigned char* ws,                \
             long long sstride, int n, const long long* ids, int nexperts, int Q, int chunk, float* part, unsigned* cnt) { pdl_entry();    \
        gmma_run<FP4, 1, false, true>(                                                                                                     \
            GmmaJob{out, n, a, k, 1, k, n, w, ws, nullptr, nullptr, wstride, sstride, ids, nexperts, Q, adiv, chunk, part, cnt, 0.0f, nullptr}); \
    }
GMMA_ROUTED(gemv_mma_routed_fp4, true)
GMMA_ROUTED(gemv_mma_routed_fp8, false)
#undef GMMA_ROUTED

// gemv_mma_routed_swiglu_fp4 / _fp8: gemv_routed_swiglu's contract on
// tensor cores (w1 and w3 rows of the chosen expert read together); shared
// with two rings, part 2·16 floats an item.
#define GMMA_SWIGLU(NAME, FP4)                                                                                                               \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS)                                                                             \
        NAME(float* out, const float* a, int adiv, int k, const unsigned char* w1, const unsigned char* ws1, const unsigned char* w3,        \
             const unsigned char* ws3, long long wstride, long long sstride, int n, const long long* ids, int nexperts, float limit,         \
             const float* rw, int Q, int chunk, float* part, unsigned* cnt) { pdl_entry();                                                 \
        gmma_run<FP4, 1, true, true>(                                                                                                      \
            GmmaJob{out, n, a, k, 1, k, n, w1, ws1, w3, ws3, wstride, sstride, ids, nexperts, Q, adiv, chunk, part, cnt, limit, rw});     \
    }
GMMA_SWIGLU(gemv_mma_routed_swiglu_fp4, true)
GMMA_SWIGLU(gemv_mma_routed_swiglu_fp8, false)
#undef GMMA_SWIGLU

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
// with kw > 1 (few rows: rpw 1) kw warps share a row, warp part p taking
// the step batches p, p + kw, ..., and the row's first warp adds their 32·kw
// lane sums in (part, lane) order. grid (ceil(n·kw / (8·rpw)), 1, groups),
// block 256, kw a power of two <= 8. Rows must be 16-byte aligned
// (k·sizeof(weight) % 16 == 0, the launcher checks), a and lda too.
//
// bf16 and fp8 weights times activations holding bf16 values are exact
// products in fp32, so they are fused multiply-adds (the same sums as a
// product then an add, one instruction a weight). fp8 steps widen their 16
// codes exactly with the hardware's e4m3 conversion (NaN codes to NaN) and
// scale the step's partial by its 32×32 block's e8m0 factor (a power of
// two) instead of each weight: the reference's bf16(e4m3 · 2^e) is the same
// value for every scale in 2^-117 .. 2^118.
template <class L> struct gemv_warp_kind { static constexpr int v = 0; }; // fp32: products rounded, then added
template <> struct gemv_warp_kind<GemvBF16> { static constexpr int v = 1; };
template <> struct gemv_warp_kind<GemvFP8W> { static constexpr int v = 2; };

template <class L, int MR>
__device__ void gemv_warp(float* out, const float* a, int m, int k, L ld, int n, int lda, int ldo, long long a_z, long long o_z, int round, int rpw,
                          int kw) {
    __shared__ float red[GMMA_WARPS][MR][33];
    constexpr int KIND = gemv_warp_kind<L>::v;
    const int z = blockIdx.z, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int part = warp & (kw - 1), rows_cta = GMMA_WARPS / kw;
    a += z * a_z;
    out += z * o_z;
    const int steps = k / L::V;
    constexpr int U = 8;
    for (int i = 0; i < rpw; i++) {
        const int j = (blockIdx.x * rows_cta + warp / kw) * rpw + i;
        const bool live = j < n; // uniform in the warp (and in a row's kw warps)
        const size_t row = (size_t)z * n + (live ? j : 0);
        float acc[MR];
#pragma unroll
        for (int mi = 0; mi < MR; mi++) acc[mi] = 0.0f;
        if (live) {
            const uint4* src = (const uint4*)ld.row_ptr(row, k);
            for (int s0 = lane + 32 * U * part; s0 < steps; s0 += 32 * U * kw) {
                uint4 u[U];
#pragma unroll
                for (int t = 0; t < U; t++) u[t] = s0 + 32 * t < steps ? __ldg(src + s0 + 32 * t) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
                for (int t = 0; t < U; t++) {
                    const int s = s0 + 32 * t;
                    if (s < steps) {
                        float wv[L::V];
                        float sc = 1.0f;
                        if constexpr (KIND == 2) {
                            const unsigned x[4] = {u[t].x, u[t].y, u[t].z, u[t].w};
#pragma unroll
                            for (int q = 0; q < 4; q++) {
                                gmma_e4m3x2_back(x[q] & 0xffffu, wv[4 * q], wv[4 * q + 1]);
                                gmma_e4m3x2_back(x[q] >> 16, wv[4 * q + 2], wv[4 * q + 3]);
                            }
                            sc = gemv_e8m0(ld.s[(row / 32) * ((k + 31) / 32) + s * L::V / 32]); // 16 values never straddle a block
                        } else {
                            ld.step(wv, u[t], row, s * L::V);
                        }
#pragma unroll
                        for (int mi = 0; mi < MR; mi++) {
                            if (mi < m) {
                                const float4* ar = (const float4*)(a + (size_t)mi * lda + s * L::V);
                                float p = KIND == 2 ? 0.0f : acc[mi];
#pragma unroll
                                for (int v4 = 0; v4 < L::V / 4; v4++) {
                                    const float4 x = __ldg(ar + v4);
                                    if constexpr (KIND == 0) {
                                        p += x.x * wv[4 * v4];
                                        p += x.y * wv[4 * v4 + 1];
                                        p += x.z * wv[4 * v4 + 2];
                                        p += x.w * wv[4 * v4 + 3];
                                    } else {
                                        p = __fmaf_rn(x.x, wv[4 * v4], p);
                                        p = __fmaf_rn(x.y, wv[4 * v4 + 1], p);
                                        p = __fmaf_rn(x.z, wv[4 * v4 + 2], p);
                                        p = __fmaf_rn(x.w, wv[4 * v4 + 3], p);
                                    }
                                }
                                acc[mi] = KIND == 2 ? __fmaf_rn(p, sc, acc[mi]) : p;
                            }
                        }
                    }
                }
            }
            if (lane == 0 && part == kw - 1) { // the columns past the last full step
                for (int c = steps * L::V; c < k; c++) {
                    const float wv = ld.one(row, k, c);
#pragma unroll
                    for (int mi = 0; mi < MR; mi++)
                        if (mi < m) acc[mi] += a[(size_t)mi * lda + c] * wv;
                }
            }
        }
#pragma unroll
        for (int mi = 0; mi < MR; mi++) red[warp][mi][lane] = acc[mi];
        if (kw == 1) __syncwarp();
        else __syncthreads();
        if (live && part == 0 && lane < m) {
            float sum = 0.0f;
            for (int p = 0; p < kw; p++)
                for (int l = 0; l < 32; l++) sum += red[warp + p][lane][l];
            out[(size_t)lane * ldo + j] = round ? bf16r(sum) : sum;
        }
        if (kw == 1) __syncwarp();
        else __syncthreads();
    }
}

#define GEMV_WARP(NAME, MR)                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS) NAME##_f32w(float* out, const float* a, int m, int k, const float* w, int n,  \
                                                                           int lda, int ldo, long long a_z, long long o_z, int round,       \
                                                                           int rpw, int kw) { pdl_entry();                                         \
        gemv_warp<GemvF32, MR>(out, a, m, k, GemvF32{w}, n, lda, ldo, a_z, o_z, round, rpw, kw);                                               \
    }                                                                                                                                      \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS) NAME##_bf16w(float* out, const float* a, int m, int k,                       \
                                                                            const unsigned short* w, int n, int lda, int ldo,              \
                                                                            long long a_z, long long o_z, int round, int rpw, int kw) { pdl_entry(); \
        gemv_warp<GemvBF16, MR>(out, a, m, k, GemvBF16{w}, n, lda, ldo, a_z, o_z, round, rpw, kw);                                             \
    }                                                                                                                                      \
    extern "C" __global__ void __launch_bounds__(GMMA_THREADS) NAME##_fp8w(float* out, const float* a, int m, int k,                        \
                                                                           const unsigned char* w, const unsigned char* s, int n, int lda, \
                                                                           int ldo, long long a_z, long long o_z, int round, int rpw, int kw) { pdl_entry(); \
        gemv_warp<GemvFP8W, MR>(out, a, m, k, GemvFP8W{w, s, k}, n, lda, ldo, a_z, o_z, round, rpw, kw);                                       \
    }
// gemv_warp_mR_{f32w,bf16w,fp8w}: matmul_f32w/bf16w/fp8w for m <= R rows.
GEMV_WARP(gemv_warp_m1, 1)
GEMV_WARP(gemv_warp_m2, 2)
GEMV_WARP(gemv_warp_m4, 4)
GEMV_WARP(gemv_warp_m8, 8)
#undef GEMV_WARP
