// Sparse attention with sinks (kernels.SparseAttn, spec §4.9): one shared
// KV head, rows gathered by idx, an online softmax over blocks of 64 index
// entries with the probabilities rounded to bf16 before P·V.
#pragma once
#include "common.cuh"

#define ATTN_BLOCK 64
#define ATTN_THREADS 128

// sparse_attn: one block of 128 threads per (b, m, h); dynamic shared
// memory d floats (the accumulator, each thread owning the dims d ≡ tid
// mod 128). q [b,m,h,d], kv [b,n,d], sink [h], idx [b,m,t] (int32, -1 =
// empty; an index outside [0, n) counts as empty), out [b,m,h,d].
//   logits: fp32(q·kv) (float64 sum, one rounding) · scale, in a warp each
//   per block: μ' = max(μ, max s), α = exp(μ−μ'), p = exp(s−μ'),
//     l = fp32(l·α) + fp32(Σ p in float64, in order),
//     acc = fp32(acc·α) + fp32(Σ bf16(p)·kv in float64, in order)
//   out = bf16(acc / (l + exp(sink − μ)))
extern "C" __global__ void __launch_bounds__(ATTN_THREADS) sparse_attn(float* out, const float* q, int b, int m, int h, int d,
                                                                      const float* kv, int n, const float* sink, const int* idx, int t, float scale) {
    extern __shared__ float acc[];
    __shared__ float s[ATTN_BLOCK], pb[ATTN_BLOCK];
    __shared__ int rowix[ATTN_BLOCK];
    __shared__ float sh_alpha, sh_mu, sh_l;
    const int u = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
    const int bi = u / (m * h), mi = (u / h) % m, hi = u % h;
    const float* kvb = kv + (size_t)bi * n * d;
    const int* row = idx + ((size_t)bi * m + mi) * t;
    const float* qv = q + (((size_t)bi * m + mi) * h + hi) * d;
    for (int di = tid; di < d; di += ATTN_THREADS) acc[di] = 0.0f;
    if (tid == 0) {
        sh_mu = -1e30f;
        sh_l = 0.0f;
    }
    for (int t0 = 0; t0 < t; t0 += ATTN_BLOCK) {
        const int len = min(ATTN_BLOCK, t - t0);
        if (tid < ATTN_BLOCK) {
            int ix = tid < len ? row[t0 + tid] : -1;
            rowix[tid] = (ix >= 0 && ix < n) ? ix : -1;
        }
        __syncthreads();
        for (int j = warp; j < len; j += ATTN_THREADS / 32) {
            const int r = rowix[j];
            if (r < 0) {
                if (lane == 0) s[j] = NEG_INF;
                continue;
            }
            const float* kr = kvb + (size_t)r * d;
            double dot = 0.0;
            for (int di = lane; di < d; di += 32) dot += (double)qv[di] * (double)kr[di];
            for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(FULL_MASK, dot, off);
            if (lane == 0) s[j] = (float)dot * scale;
        }
        __syncthreads();
        if (tid == 0) {
            float bmax = NEG_INF;
            for (int j = 0; j < len; j++)
                if (rowix[j] >= 0) bmax = gomax(bmax, s[j]);
            const float mu = sh_mu, nmu = gomax(mu, bmax);
            sh_alpha = expf32(mu - nmu);
            sh_mu = nmu;
        }
        __syncthreads();
        const float nmu = sh_mu, alpha = sh_alpha;
        float p = 0.0f;
        if (tid < len) {
            p = expf32(s[tid] - nmu);
            s[tid] = p; // s now holds the unrounded p
            pb[tid] = bf16r(p);
        }
        __syncthreads();
        if (tid == 0) {
            double psum = 0.0;
            for (int j = 0; j < len; j++) psum += (double)s[j];
            sh_l = sh_l * alpha + (float)psum;
        }
        for (int di = tid; di < d; di += ATTN_THREADS) {
            double pv = 0.0;
            for (int j = 0; j < len; j++) {
                const int r = rowix[j];
                if (r < 0 || pb[j] == 0.0f) continue;
                pv += (double)pb[j] * (double)kvb[(size_t)r * d + di];
            }
            acc[di] = acc[di] * alpha + (float)pv;
        }
        __syncthreads();
    }
    const float l = sh_l + expf32(sink[hi] - sh_mu);
    float* o = out + (((size_t)bi * m + mi) * h + hi) * d;
    for (int di = tid; di < d; di += ATTN_THREADS) o[di] = bf16r(acc[di] / l);
}
