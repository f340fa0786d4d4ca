// Block-scaled fp8 / fp4 products on FP8 tensor cores, for prefill
// (kernels.MatmulFP8TC, MatmulFP4TC): the reference's
//   out[m,n] = bf16( Σ_kb fp32(P(m,n,kb) · sa(m,kb) · sw(n,kb)) ),  P = Σ_{k∈kb} qa[m,k]·qw[n,k]
// with qa, qw e4m3 codes. One mma.sync m16n8k32 e4m3 with a zero
// accumulator is exactly one 32-wide K block, so P comes out of the tensor
// core (each fp8×fp8 product is exact; only the MMA's internal sum order and
// precision differ from the reference's sequential fp32 sum), and the
// scaled partial is added to an fp32 register in ascending K block, as the
// reference does: P·sa is exact (sa a power of two), ·sw rounds once.
// fp4 weights (e2m1, every value of which is an e4m3 value) are widened to
// e4m3 codes in registers after the shared-memory load.
//
// Tiling: a CTA of 8 warps computes 128×128 outputs (warps 2 along M × 4
// along N, 64×32 each: 4×4 MMA tiles); K advances 128 (four scale blocks) a
// stage through a 4-stage cp.async pipeline. The K order inside one 32-block
// is permuted identically for A and B (thread t of a quad holds K 8t..8t+7
// of its row, which the MMA reads as K 4t..4t+3 and 16+4t..16+4t+3): the
// block partial is the same sum. Shared rows are XOR-swizzled in 16-byte
// chunks so the 64-bit fragment loads are bank-conflict free.
//
// Requires k % 128 == 0 (every prefill shape of the model); m and n are
// free (rows and columns past the edge are zero-filled and not stored).
#pragma once
#include "common.cuh"

#define TC_BM 128
#define TC_BN 128
#define TC_BK 128
#ifndef TC_STAGES
#define TC_STAGES 4
#endif
#ifndef TC_MINB
#define TC_MINB 1 // CTAs per SM the registers are budgeted for
#endif
#define TC_THREADS 256

// Shared memory of one stage (bytes): A codes, B codes (fp4: packed), A
// scales (fp32 per row and K block), W scales (e8m0 bytes).
template <bool FP4>
struct TCStage {
    static constexpr int a = TC_BM * TC_BK;
    static constexpr int b = TC_BN * (FP4 ? TC_BK / 2 : TC_BK);
    static constexpr int as = TC_BM * (TC_BK / 32) * 4;
    static constexpr int ws = FP4 ? TC_BN * (TC_BK / 32) : (TC_BN / 32) * (TC_BK / 32);
    static constexpr int ws_pad = (ws + 15) / 16 * 16;
    static constexpr int bytes = a + b + as + ws_pad;
};

__device__ __forceinline__ unsigned tc_smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// cp.async of 16 (or 4) bytes; src_bytes 0 zero-fills the destination.
__device__ __forceinline__ void tc_cp16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void tc_cp4(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void tc_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void tc_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// tc_mma: d = A·B over one 32-wide K block (zero accumulator in).
__device__ __forceinline__ void tc_mma(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
}

// e2m1x4_to_e4m3x4 widens 4 e2m1 codes (nibbles of p, the first lowest) to 4
// e4m3 codes (bytes, the first lowest): exact, every e2m1 value is an e4m3
// value (magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 → 0x00, 0x30, 0x38, 0x3c,
// 0x40, 0x44, 0x48, 0x4c; the sign bit moves from bit 3 to bit 7).
__device__ __forceinline__ unsigned e2m1x4_to_e4m3x4(unsigned p) {
    const unsigned mag = __byte_perm(0x3c383000u, 0x4c484440u, p & 0x7777u);
    const unsigned s = p & 0x8888u;
    return mag | ((s & 0x8u) << 4) | ((s & 0x80u) << 8) | ((s & 0x800u) << 12) | ((s & 0x8000u) << 16);
}

// tc_e8m0 is e8m0_to_f32 on the bits (no ldexpf): 2^(b-127), 0 → 2^-127
// (a subnormal), 0xff → NaN.
__device__ __forceinline__ float tc_e8m0(unsigned b) {
    return __uint_as_float(b == 0u ? 0x00400000u : b == 0xffu ? 0x7fc00000u : b << 23);
}

// Swizzled byte offsets inside a stage. A and fp8 B rows are 128 bytes (8
// chunks; chunk c of row r at c ^ 2(r&3)); fp4 B rows are 64 bytes (4
// chunks; chunk c of row r at c ^ ((r>>1)&3)).
__device__ __forceinline__ int tc_off128(int r, int c) { return r * 128 + ((c ^ ((r & 3) << 1)) << 4); }
__device__ __forceinline__ int tc_off64(int r, int c) { return r * 64 + ((c ^ ((r >> 1) & 3)) << 4); }

// tc_load_stage issues the cp.async copies of K tile kt into stage st.
// a: e4m3 codes [m,k]; asc: fp32 scales [m,k/32]; w: e4m3 [n,k] or packed
// e2m1 [n,k/2]; wsc: e8m0 [ceil(n/32),k/32] (fp8) or [n,k/32] (fp4).
template <bool FP4>
__device__ __forceinline__ void tc_load_stage(unsigned char* st, int kt, const unsigned char* a, const float* asc, int m, int k,
                                              const unsigned char* w, const unsigned char* wsc, int n, int m0, int n0) {
    typedef TCStage<FP4> S;
    const int tid = threadIdx.x, kb = k / 32, k0 = kt * TC_BK;
    const unsigned sa = tc_smem_addr(st), sb = sa + S::a, sas = sb + S::b, sws = sas + S::as;
#pragma unroll
    for (int i = 0; i < TC_BM * 8 / TC_THREADS; i++) { // A: 128 rows × 8 chunks
        const int e = tid + i * TC_THREADS, r = e >> 3, c = e & 7, gr = m0 + r;
        const bool ok = gr < m;
        tc_cp16(sa + tc_off128(r, c), a + (ok ? (size_t)gr * k + k0 + c * 16 : 0), ok ? 16 : 0);
    }
    if (FP4) {
#pragma unroll
        for (int i = 0; i < TC_BN * 4 / TC_THREADS; i++) { // B: 128 rows × 4 chunks of packed codes
            const int e = tid + i * TC_THREADS, r = e >> 2, c = e & 3, gn = n0 + r;
            const bool ok = gn < n;
            tc_cp16(sb + tc_off64(r, c), w + (ok ? (size_t)gn * (k / 2) + k0 / 2 + c * 16 : 0), ok ? 16 : 0);
        }
    } else {
#pragma unroll
        for (int i = 0; i < TC_BN * 8 / TC_THREADS; i++) {
            const int e = tid + i * TC_THREADS, r = e >> 3, c = e & 7, gn = n0 + r;
            const bool ok = gn < n;
            tc_cp16(sb + tc_off128(r, c), w + (ok ? (size_t)gn * k + k0 + c * 16 : 0), ok ? 16 : 0);
        }
    }
    if (tid < TC_BM) { // A scales: 4 floats a row
        const int gr = m0 + tid;
        const bool ok = gr < m;
        tc_cp16(sas + tid * 16, asc + (ok ? (size_t)gr * kb + kt * 4 : 0), ok ? 16 : 0);
    }
    if (FP4) {
        if (tid < TC_BN) { // 4 scale bytes per column
            const int gn = n0 + tid;
            const bool ok = gn < n;
            tc_cp4(sws + tid * 4, wsc + (ok ? (size_t)gn * kb + kt * 4 : 0), ok ? 4 : 0);
        }
    } else if (tid < TC_BN / 32) { // 4 scale bytes per 32-column block
        const int gb = n0 / 32 + tid;
        const bool ok = gb < (n + 31) / 32;
        tc_cp4(sws + tid * 4, wsc + (ok ? (size_t)gb * kb + kt * 4 : 0), ok ? 4 : 0);
    }
}

template <bool FP4>
__device__ void gemm_tc(float* out, const unsigned char* a, const float* asc, int m, int k, const unsigned char* w, const unsigned char* wsc, int n) {
    typedef TCStage<FP4> S;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm = warp >> 2, wn = warp & 3; // warp tile: rows wm·64, columns wn·32
    const int m0 = blockIdx.y * TC_BM, n0 = blockIdx.x * TC_BN;
    const int ktiles = k / TC_BK;

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < TC_STAGES - 1; s++) {
        if (s < ktiles) tc_load_stage<FP4>(tc_smem + s * S::bytes, s, a, asc, m, k, w, wsc, n, m0, n0);
        tc_cp_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        tc_cp_wait<TC_STAGES - 2>();
        __syncthreads(); // tile kt has landed; every warp is done with tile kt-1's stage
        {
            const int nk = kt + TC_STAGES - 1;
            if (nk < ktiles) tc_load_stage<FP4>(tc_smem + (nk % TC_STAGES) * S::bytes, nk, a, asc, m, k, w, wsc, n, m0, n0);
            tc_cp_commit();
        }
        const unsigned char* st = tc_smem + (kt % TC_STAGES) * S::bytes;
        const unsigned char* sA = st;
        const unsigned char* sB = st + S::a;
        const float* sAS = (const float*)(st + S::a + S::b);
        const unsigned char* sWS = st + S::a + S::b + S::as;
#pragma unroll
        for (int b = 0; b < TC_BK / 32; b++) {
            // B fragments of the warp's 4 column tiles: column g, K 8t..8t+7 of block b.
            unsigned bf[4][2];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int r = wn * 32 + j * 8 + g;
                if (FP4) {
                    const unsigned p = *(const unsigned*)(sB + tc_off64(r, b) + t * 4);
                    bf[j][0] = e2m1x4_to_e4m3x4(p & 0xffffu);
                    bf[j][1] = e2m1x4_to_e4m3x4(p >> 16);
                } else {
                    const uint2 v = *(const uint2*)(sB + tc_off128(r, 2 * b + (t >> 1)) + (t & 1) * 8);
                    bf[j][0] = v.x;
                    bf[j][1] = v.y;
                }
            }
            // Every block partial of the warp's 64×32 tile first (16 MMAs in
            // flight), then the scaled adds in K order.
            float p[4][4][4];
            float sa[4][2];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r0 = wm * 64 + i * 16 + g, r1 = r0 + 8;
                const uint2 lo = *(const uint2*)(sA + tc_off128(r0, 2 * b + (t >> 1)) + (t & 1) * 8);
                const uint2 hi = *(const uint2*)(sA + tc_off128(r1, 2 * b + (t >> 1)) + (t & 1) * 8);
                const unsigned af[4] = {lo.x, hi.x, lo.y, hi.y};
                sa[i][0] = sAS[r0 * 4 + b];
                sa[i][1] = sAS[r1 * 4 + b];
#pragma unroll
                for (int j = 0; j < 4; j++) tc_mma(p[i][j], af, bf[j][0], bf[j][1]);
            }
            if (FP4) {
                // one weight scale per column (2t, 2t+1 of each column tile): (P·sa)·sw
                float sw[4][2];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int c = wn * 32 + j * 8 + 2 * t;
                    sw[j][0] = tc_e8m0(sWS[c * 4 + b]);
                    sw[j][1] = tc_e8m0(sWS[(c + 1) * 4 + b]);
                }
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        acc[i][j][0] += (p[i][j][0] * sa[i][0]) * sw[j][0];
                        acc[i][j][1] += (p[i][j][1] * sa[i][0]) * sw[j][1];
                        acc[i][j][2] += (p[i][j][2] * sa[i][1]) * sw[j][0];
                        acc[i][j][3] += (p[i][j][3] * sa[i][1]) * sw[j][1];
                    }
            } else {
                // the warp's 32 columns are one scale block: P·(sa·sw), which is
                // (P·sa)·sw while sa·sw is a normal float (both powers of two)
                const float sw = tc_e8m0(sWS[wn * 4 + b]);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float s0 = sa[i][0] * sw, s1 = sa[i][1] * sw;
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        acc[i][j][0] += p[i][j][0] * s0;
                        acc[i][j][1] += p[i][j][1] * s0;
                        acc[i][j][2] += p[i][j][2] * s1;
                        acc[i][j][3] += p[i][j][3] * s1;
                    }
                }
            }
        }
    }
    tc_cp_wait<0>();

    // Epilogue: rows g and g+8 of each tile, columns 2t and 2t+1.
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = m0 + wm * 64 + i * 16 + g + h * 8;
            if (row >= m) continue;
            float* orow = out + (size_t)row * n;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int col = n0 + wn * 32 + j * 8 + 2 * t;
                const float v0 = bf16r(acc[i][j][2 * h]), v1 = bf16r(acc[i][j][2 * h + 1]);
                if (col + 1 < n && (n & 1) == 0) {
                    *(float2*)(orow + col) = make_float2(v0, v1);
                } else {
                    if (col < n) orow[col] = v0;
                    if (col + 1 < n) orow[col + 1] = v1;
                }
            }
        }
    }
}

// matmul_fp8_tc: out [m,n] fp32 (bf16 values) = the block-scaled product of
// the e4m3 activation codes a [m,k] with fp32 scales asc [m,k/32] (act_quant's
// codes and scales, or tc_quant_a's) and the e4m3 weights w [n,k] with e8m0
// scales wsc [ceil(n/32), k/32]. k % 128 == 0. grid (ceil(n/128),
// ceil(m/128)), block 256, dynamic shared memory TC_STAGES·TCStage<false>::bytes.
extern "C" __global__ void __launch_bounds__(TC_THREADS, TC_MINB)
    matmul_fp8_tc(float* out, const unsigned char* a, const float* asc, int m, int k, const unsigned char* w, const unsigned char* wsc, int n) {
    gemm_tc<false>(out, a, asc, m, k, w, wsc, n);
}

// matmul_fp4_tc: as matmul_fp8_tc with w packed e2m1 [n, k/2] (even element
// in the low nibble) and wsc e8m0 [n, k/32]. Shared memory
// TC_STAGES·TCStage<true>::bytes.
extern "C" __global__ void __launch_bounds__(TC_THREADS, TC_MINB)
    matmul_fp4_tc(float* out, const unsigned char* a, const float* asc, int m, int k, const unsigned char* w, const unsigned char* wsc, int n) {
    gemm_tc<true>(out, a, asc, m, k, w, wsc, n);
}

// tc_quant_a: the e4m3 codes [rows·k] and fp32 scales [rows·k/32] of
// fake-quantised activations x (the bf16 values q·s act_quant writes back,
// blocks of 32 along K): s' = act_quant's scale of the block's largest
// magnitude (≤ the original s, both powers of two), codes = e4m3(x/s'),
// exact for act_quant's output, so q'·s' = x and the product is unchanged.
// One thread per 32-block; nblocks = rows·k/32.
extern "C" __global__ void tc_quant_a(unsigned char* codes, float* scales, const float* x, long long nblocks) {
    const long long bi = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (bi >= nblocks) return;
    const float4* src = (const float4*)(x + bi * 32);
    float v[32];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float4 f = src[i];
        v[4 * i] = f.x;
        v[4 * i + 1] = f.y;
        v[4 * i + 2] = f.z;
        v[4 * i + 3] = f.w;
    }
    float am = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; i++) {
        const float a = fabsf(v[i]);
        if (a > am) am = a;
    }
    const float s = ceil_pow2(gomax(am, 1e-4f) * (1.0f / 448.0f));
    unsigned q[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        q[i] = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) q[i] |= f32_to_e4m3(goclamp(v[4 * i + j] / s, -448.0f, 448.0f)) << (8 * j);
    }
    uint4* dst = (uint4*)(codes + bi * 32);
    dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
    dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
    scales[bi] = s;
}
