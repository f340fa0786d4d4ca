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
    gemm_block_scaled<false>(out, a, m, k, w, wscale, n);
}

// matmul_fp4: as matmul_fp8 with w packed e2m1 [n, k/2] (even element in
// the low nibble) and wscale [n, ceil(k/32)].
extern "C" __global__ void __launch_bounds__(256) matmul_fp4(float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* wscale, int n) {
    gemm_block_scaled<true>(out, a, m, k, w, wscale, n);
}

// gemm_routed: the rows of a routed-expert product. Row q of out [Q, n] is
// a[q / adiv] · W_e with e = ids[q], the expert's weights at w + e·wstride
// (bytes) and its scales at wscale + e·sstride; adiv is topk for the first
// projections (one activation row per token, shared by its experts) and 1
// for the down projection. Every output is computed as in
// gemm_block_scaled, so a row equals MatmulFP4/FP8 of that expert's rows.
// The expert ids stay on the GPU. grid (ceil(n/32), Q), block 32.
template <bool FP4>
__device__ void gemm_routed(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride,
                            const unsigned char* wscale, long long sstride, int n, const int* ids, int nexperts) {
    __shared__ float ws[GEMM_BN][GEMM_BK + 1];
    __shared__ float as[GEMM_BK];
    const int tx = threadIdx.x, q = blockIdx.y;
    const int j = blockIdx.x * GEMM_BN + tx;
    const int e = ids[q];
    const int kb = (k + GEMM_BK - 1) / GEMM_BK;
    if (e < 0 || e >= nexperts) { // an id the gate cannot produce: poison the row
        if (j < n) out[(size_t)q * n + j] = __uint_as_float(0x7fc00000u);
        return;
    }
    const unsigned char* we = w + (size_t)e * wstride;
    const unsigned char* se = wscale + (size_t)e * sstride;
    const float* ar = a + (size_t)(q / adiv) * k;
    float acc = 0.0f;
    for (int b = 0; b < kb; b++) {
        const int lo = b * GEMM_BK, cnt = min(GEMM_BK, k - lo);
        for (int jj = 0; jj < GEMM_BN; jj++) {
            const int jw = blockIdx.x * GEMM_BN + jj;
            float v = 0.0f;
            if (jw < n && tx < cnt) {
                const size_t c = (size_t)jw * k + lo + tx;
                if (FP4) {
                    const unsigned byte = we[c / 2];
                    v = e2m1_to_f32((c & 1) ? (byte >> 4) : (byte & 0xfu));
                } else {
                    v = e4m3_to_f32(we[c]);
                }
            }
            ws[jj][tx] = v;
        }
        as[tx] = tx < cnt ? ar[lo + tx] : 0.0f;
        __syncthreads();
        if (j < n) {
            float p = 0.0f;
            for (int c = 0; c < cnt; c++) p += as[c] * ws[tx][c];
            const unsigned sb = FP4 ? se[(size_t)j * kb + b] : se[(size_t)(j / 32) * kb + b];
            acc += p * e8m0_to_f32(sb);
        }
        __syncthreads();
    }
    if (j < n) out[(size_t)q * n + j] = bf16r(acc);
}

extern "C" __global__ void matmul_fp4_routed(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride,
                                             const unsigned char* wscale, long long sstride, int n, const int* ids, int nexperts) {
    gemm_routed<true>(out, a, adiv, k, w, wstride, wscale, sstride, n, ids, nexperts);
}

extern "C" __global__ void matmul_fp8_routed(float* out, const float* a, int adiv, int k, const unsigned char* w, long long wstride,
                                             const unsigned char* wscale, long long sstride, int n, const int* ids, int nexperts) {
    gemm_routed<false>(out, a, adiv, k, w, wstride, wscale, sstride, n, ids, nexperts);
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
    gemm_plain(out, a, m, k, LoadF32{w, w_z, k}, n, lda, ldo, a_z, o_z, round);
}

extern "C" __global__ void __launch_bounds__(256) matmul_bf16w(float* out, const float* a, int m, int k, const unsigned short* w, int n, int lda, int ldo,
                                                              long long a_z, long long w_z, long long o_z, int round) {
    gemm_plain(out, a, m, k, LoadBF16{w, w_z, k}, n, lda, ldo, a_z, o_z, round);
}

// matmul_fp8w: the plain product on fp8 weights widened first (the stored
// fp8 wo_a): w [groups·n, k] e4m3, wscale [ceil(groups·n/32), ceil(k/32)].
extern "C" __global__ void __launch_bounds__(256) matmul_fp8w(float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* wscale,
                                                             int n, int lda, int ldo, long long a_z, long long o_z, int round) {
    gemm_plain(out, a, m, k, LoadFP8{w, wscale, k, n}, n, lda, ldo, a_z, o_z, round);
}
