// Block-scaled fp8 (e4m3, ue8m0 32×32 blocks) and fp4 (e2m1, ue8m0 per 32
// along K) matrix products, dequantising inside the kernel
// (kernels.MatmulFP8, kernels.MatmulFP4):
//   out[m,n] = bf16( Σ_kb fp32(P(m,n,kb) · scale) ),  P = Σ_{k∈kb} a[m,k]·w[n,k]
// with the block partial and the accumulator summed in K order in fp32, as
// the reference does, so the result is bit-identical. A block of 32×8
// threads computes a 32-column × 8-row tile; each K block of the weights is
// decoded once into shared memory. (Correct first: the tensor-core version
// replaces the inner loop, keeping this tiling of K by scale blocks.)
#pragma once
#include "common.cuh"

#define GEMM_BN 32
#define GEMM_BM 8
#define GEMM_BK 32

template <bool FP4>
__device__ void gemm_block_scaled(float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* wscale, int n) {
    __shared__ float ws[GEMM_BN][GEMM_BK + 1]; // +1: a warp reads a column without bank conflicts
    __shared__ float as[GEMM_BM][GEMM_BK];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * GEMM_BN + tx;
    const int j = blockIdx.x * GEMM_BN + tx, i = blockIdx.y * GEMM_BM + ty;
    const int kb = (k + GEMM_BK - 1) / GEMM_BK;
    float acc = 0.0f;
    for (int b = 0; b < kb; b++) {
        const int lo = b * GEMM_BK, cnt = min(GEMM_BK, k - lo);
        for (int e = tid; e < GEMM_BN * GEMM_BK; e += GEMM_BN * GEMM_BM) {
            const int jj = e / GEMM_BK, kk = e % GEMM_BK, jw = blockIdx.x * GEMM_BN + jj;
            float v = 0.0f;
            if (jw < n && kk < cnt) {
                if (FP4) {
                    const size_t c = (size_t)jw * k + lo + kk;
                    const unsigned byte = w[c / 2];
                    v = e2m1_to_f32((c & 1) ? (byte >> 4) : (byte & 0xfu));
                } else {
                    v = e4m3_to_f32(w[(size_t)jw * k + lo + kk]);
                }
            }
            ws[jj][kk] = v;
        }
        as[ty][tx] = (i < m && tx < cnt) ? a[(size_t)i * k + lo + tx] : 0.0f;
        __syncthreads();
        if (i < m && j < n) {
            float p = 0.0f;
            for (int c = 0; c < cnt; c++) p += as[ty][c] * ws[tx][c];
            const unsigned sb = FP4 ? wscale[(size_t)j * kb + b] : wscale[(size_t)(j / 32) * kb + b];
            acc += p * e8m0_to_f32(sb);
        }
        __syncthreads();
    }
    if (i < m && j < n) out[(size_t)i * n + j] = bf16r(acc);
}

// matmul_fp8: a [m,k] fake-quantised activations (fp32 holding bf16), w
// [n,k] e4m3, wscale [ceil(n/32), ceil(k/32)] ue8m0; out [m,n].
// grid (ceil(n/32), ceil(m/8)), block (32, 8).
extern "C" __global__ void __launch_bounds__(256) matmul_fp8(float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* wscale, int n) {
    pdl_entry();
    gemm_block_scaled<false>(out, a, m, k, w, wscale, n);
}

// matmul_fp4: as matmul_fp8 with w packed e2m1 [n, k/2] (even element in
// the low nibble) and wscale [n, ceil(k/32)].
extern "C" __global__ void __launch_bounds__(256) matmul_fp4(float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* wscale, int n) {
    pdl_entry();
    gemm_block_scaled<true>(out, a, m, k, w, wscale, n);
}

// gemm_plain: out[i, j] = f(Σ_c a[i, c]·w[j, c]) with the products rounded
// to fp32 and summed in ascending c from 0 (kernels.MatmulF32, MatmulBF16,
// GroupedLoRA); f rounds to bf16 when round is set. Strides: a row i at
// a + i·lda, out row i at out + i·ldo; blockIdx.z selects a group, offset
// by a_z and o_z elements, its weights chosen by the loader (the grouped
// output LoRA). A loader returns w[j, c] of group z as fp32: fp32 values,
// bf16 bits, or fp8 codes dequantised as the cpu backend widens them,
// bf16(e4m3 · e8m0 of the 32×32 block). grid (ceil(n/32), ceil(m/8),
// groups), block (32, 8).
struct LoadF32 {
    const float* w;
    long long z_off;
    int k;
    __device__ float operator()(int z, int j, int c) const { return w[z * z_off + (size_t)j * k + c]; }
};
struct LoadBF16 {
    const unsigned short* w;
    long long z_off;
    int k;
    __device__ float operator()(int z, int j, int c) const { return bf16w(w[z * z_off + (size_t)j * k + c]); }
};
struct LoadFP8 {
    const unsigned char* w;
    const unsigned char* s;
    int k, rows_per_z;
    __device__ float operator()(int z, int j, int c) const {
        const size_t row = (size_t)z * rows_per_z + j;
        const int kb = (k + 31) / 32;
        return bf16r(e4m3_to_f32(w[row * k + c]) * e8m0_to_f32(s[(row / 32) * kb + c / 32]));
    }
};

template <class L>
__device__ void gemm_plain(float* out, const float* a, int m, int k, L load, int n, int lda, int ldo, long long a_z, long long o_z, int round) {
    __shared__ float ws[GEMM_BN][GEMM_BK + 1];
    __shared__ float as[GEMM_BM][GEMM_BK];
    const int z = blockIdx.z;
    a += z * a_z;
    out += z * o_z;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * GEMM_BN + tx;
    const int j = blockIdx.x * GEMM_BN + tx, i = blockIdx.y * GEMM_BM + ty;
    float acc = 0.0f;
    for (int lo = 0; lo < k; lo += GEMM_BK) {
        const int cnt = min(GEMM_BK, k - lo);
        for (int e = tid; e < GEMM_BN * GEMM_BK; e += GEMM_BN * GEMM_BM) {
            const int jj = e / GEMM_BK, kk = e % GEMM_BK, jw = blockIdx.x * GEMM_BN + jj;
            ws[jj][kk] = (jw < n && kk < cnt) ? load(z, jw, lo + kk) : 0.0f;
        }
        as[ty][tx] = (i < m && tx < cnt) ? a[(size_t)i * lda + lo + tx] : 0.0f;
        __syncthreads();
        if (i < m && j < n)
            for (int c = 0; c < cnt; c++) acc += as[ty][c] * ws[tx][c];
        __syncthreads();
    }
    if (i < m && j < n) out[(size_t)i * ldo + j] = round ? bf16r(acc) : acc;
}

extern "C" __global__ void __launch_bounds__(256) matmul_f32w(float* out, const float* a, int m, int k, const float* w, int n, int lda, int ldo,
                                                             long long a_z, long long w_z, long long o_z, int round) {
    pdl_entry();
    gemm_plain(out, a, m, k, LoadF32{w, w_z, k}, n, lda, ldo, a_z, o_z, round);
}

extern "C" __global__ void __launch_bounds__(256) matmul_bf16w(float* out, const float* a, int m, int k, const unsigned short* w, int n, int lda, int ldo,
                                                              long long a_z, long long w_z, long long o_z, int round) {
    pdl_entry();
    gemm_plain(out, a, m, k, LoadBF16{w, w_z, k}, n, lda, ldo, a_z, o_z, round);
}

// matmul_fp8w: the plain product on fp8 weights widened first (the stored
// fp8 wo_a): w [groups·n, k] e4m3, wscale [ceil(groups·n/32), ceil(k/32)].
extern "C" __global__ void __launch_bounds__(256) matmul_fp8w(float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* wscale,
                                                             int n, int lda, int ldo, long long a_z, long long o_z, int round) {
    pdl_entry();
    gemm_plain(out, a, m, k, LoadFP8{w, wscale, k, n}, n, lda, ldo, a_z, o_z, round);
}

// gemv_splitk: one row of the block-scaled products (decode: m = 1, and
// each row of the routed products) with the K blocks spread over 8 warps
// and the reference's order kept: each block partial P·scale is the same
// sequential sum over its 32 columns, written to shared memory, and warp 0
// adds the partials in ascending K block from 0, so the bits equal
// gemm_block_scaled's. Each thread reads its row's 32 codes of a K block
// with 16-byte loads where aligned. Dynamic shared memory: kb·32 floats.
#define GEMV_WARPS 8

template <bool FP4>
__device__ __forceinline__ void gemv_load_codes(unsigned char* dst, const unsigned char* w, size_t first, int cnt) {
    // first: index of the block's first value in the row-major code array
    const size_t byte0 = FP4 ? first / 2 : first;
    const int nbytes = FP4 ? (cnt + 1) / 2 : cnt;
    if (nbytes == (FP4 ? 16 : 32) && ((size_t)(w + byte0) & 15u) == 0) {
        const uint4* src = (const uint4*)(w + byte0);
        ((uint4*)dst)[0] = src[0];
        if (!FP4) ((uint4*)dst)[1] = src[1];
        return;
    }
    for (int i = 0; i < nbytes; i++) dst[i] = w[byte0 + i];
}

template <bool FP4>
__device__ void gemv_splitk(float* out, const float* a, int k, const unsigned char* w, const unsigned char* wscale, int n) {
    extern __shared__ float part[];
    const int tx = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int j = blockIdx.x * 32 + tx;
    const int kb = (k + GEMM_BK - 1) / GEMM_BK;
    if (j < n) {
        for (int b = warp; b < kb; b += GEMV_WARPS) {
            const int lo = b * GEMM_BK, cnt = min(GEMM_BK, k - lo);
            __align__(16) unsigned char codes[32];
            gemv_load_codes<FP4>(codes, w, (size_t)j * k + lo, cnt);
            float p = 0.0f;
            for (int c = 0; c < cnt; c++) {
                const float wv = FP4 ? e2m1_to_f32((c & 1) ? (codes[c / 2] >> 4) : (codes[c / 2] & 0xfu)) : e4m3_to_f32(codes[c]);
                p += a[lo + c] * wv;
            }
            const unsigned sb = FP4 ? wscale[(size_t)j * kb + b] : wscale[(size_t)(j / 32) * kb + b];
            part[b * 32 + tx] = p * e8m0_to_f32(sb);
        }
    }
    __syncthreads();
    if (warp == 0 && j < n) {
        float acc = 0.0f;
        for (int b = 0; b < kb; b++) acc += part[b * 32 + tx];
        out[j] = bf16r(acc);
    }
}

// matmul_fp8_gemv / matmul_fp4_gemv: matmul_fp8/fp4 for m = 1.
// grid ceil(n/32), block 256.
extern "C" __global__ void __launch_bounds__(256) matmul_fp8_gemv(float* out, const float* a, int k, const unsigned char* w, const unsigned char* wscale, int n) {
    pdl_entry();
    gemv_splitk<false>(out, a, k, w, wscale, n);
}
extern "C" __global__ void __launch_bounds__(256) matmul_fp4_gemv(float* out, const float* a, int k, const unsigned char* w, const unsigned char* wscale, int n) {
    pdl_entry();
    gemv_splitk<true>(out, a, k, w, wscale, n);
}

// matmul_fp4_routed / matmul_fp8_routed: the rows of a routed-expert
// product. Row q of out [Q, n] is a[q / adiv] · W_e with e = ids[q]
// (int64, read on the GPU), the expert's weights at w + e·wstride (bytes)
// and its scales at wscale + e·sstride; adiv is topk for the first
// projections (one activation row per token, shared by its experts) and 1
// for the down projection. Each row goes through gemv_splitk, so it equals
// MatmulFP4/FP8 of that expert's rows. An id outside [0, nexperts) poisons
// its row (NaN). grid (ceil(n/32), Q), block 256.
template <bool FP4>
__device__ void gemv_routed(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride,
                            const unsigned char* wscale, long long sstride, int n, const long long* ids, int nexperts) {
    const int q = blockIdx.y;
    const long long e = ids[q];
    if (e < 0 || e >= nexperts) {
        const int j = blockIdx.x * 32 + (threadIdx.x & 31);
        if (threadIdx.x < 32 && j < n) out[(size_t)q * n + j] = __uint_as_float(0x7fc00000u);
        return;
    }
    gemv_splitk<FP4>(out + (size_t)q * n, a + (size_t)(q / adiv) * k, k, w + (size_t)e * wstride, wscale + (size_t)e * sstride, n);
}

extern "C" __global__ void __launch_bounds__(256) matmul_fp4_routed(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride,
                                                                        const unsigned char* wscale, long long sstride, int n, const long long* ids, int nexperts) {
    pdl_entry();
    gemv_routed<true>(out, a, adiv, k, w, wstride, wscale, sstride, n, ids, nexperts);
}
extern "C" __global__ void __launch_bounds__(256) matmul_fp8_routed(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride,
                                                                        const unsigned char* wscale, long long sstride, int n, const long long* ids, int nexperts) {
    pdl_entry();
    gemv_routed<false>(out, a, adiv, k, w, wstride, wscale, sstride, n, ids, nexperts);
}
