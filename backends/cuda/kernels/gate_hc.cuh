// The MoE gate (kernels.Gate) and the hyper-connection ops (kernels.HCMixes,
// HCSplitSinkhorn, HCPre, HCPost).
#pragma once
#include "common.cuh"

// gate_logits: logits[t, e] = fp32(Σ_d x[t,d]·w[e,d]) with the products and
// the sum in float64 (products of fp32 and bf16 values are exact there, so
// the order changes the sum only in float64's last bits), one warp per
// (token, expert). grid (ceil(experts/8), n), block 256.
extern "C" __global__ void gate_logits(float* logits, const float* x, const float* w, int n, int dim, int experts) {
    const int e = blockIdx.x * 8 + threadIdx.x / 32, t = blockIdx.y, lane = threadIdx.x & 31;
    if (e >= experts) return;
    const float* xr = x + (size_t)t * dim;
    const float* wr = w + (size_t)e * dim;
    double acc = 0.0;
    for (int d = lane; d < dim; d += 32) acc += (double)wr[d] * (double)xr[d];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, off);
    if (lane == 0) logits[(size_t)t * experts + e] = (float)acc;
}

// gate_select: scores, biased top-k and weights for one token per block
// (blockDim 256; dynamic shared memory 2·experts floats). score: 0
// sqrt(softplus), 1 sigmoid, 2 softmax. Selection by biased score
// descending, ties to the lower expert id; weights = s[sel]/(Σ s[sel] +
// 1e-20)·route_scale (renormalised only when topk > 1). bias may be null.
// indices are int64 expert ids (as the graph's topk_idx), kept on the GPU
// for the routed products.
extern "C" __global__ void gate_select(float* weights, long long* indices, const float* logits, const float* bias, int experts, int topk, float route_scale, int score) {
    extern __shared__ float sh[];
    float* s = sh;
    float* biased = sh + experts;
    const int t = blockIdx.x;
    const float* lg = logits + (size_t)t * experts;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) {
        const float x = lg[e];
        if (score == 0) {
            float sp = x;
            if (x <= 20.0f) sp = (float)log1p(exp((double)x));
            s[e] = (float)sqrt((double)sp);
        } else if (score == 1) {
            s[e] = (float)(1.0 / (1.0 + exp(-(double)x)));
        } else {
            s[e] = x;
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    if (score == 2) { // softmax over the experts, sums in order
        float m = NEG_INF;
        for (int e = 0; e < experts; e++) m = gomax(m, s[e]);
        float sum = 0.0f;
        for (int e = 0; e < experts; e++) {
            s[e] = expf32(s[e] - m);
            sum += s[e];
        }
        const float inv = 1.0f / sum;
        for (int e = 0; e < experts; e++) s[e] *= inv;
    }
    for (int e = 0; e < experts; e++) biased[e] = bias ? s[e] + bias[e] : s[e];
    float* wt = weights + (size_t)t * topk;
    long long* ix = indices + (size_t)t * topk;
    float sum = 0.0f;
    for (int r = 0; r < topk; r++) {
        int best = -1;
        for (int e = 0; e < experts; e++) {
            if (biased[e] != biased[e] && best >= 0) continue; // NaN is not expected; never preferred
            bool taken = false;
            for (int q = 0; q < r; q++) taken |= ix[q] == e;
            if (!taken && (best < 0 || biased[e] > biased[best])) best = e;
        }
        ix[r] = best;
        wt[r] = s[best];
        sum += s[best];
    }
    if (topk > 1) {
        const float den = sum + 1e-20f;
        for (int r = 0; r < topk; r++) wt[r] /= den;
    }
    for (int r = 0; r < topk; r++) wt[r] *= route_scale;
}

// hc_mixes: for each token (one warp per token; blockDim 32)
//   ρ = rsqrt(torch_sum(fp32(x²))/(hc·dim) + eps),  out[t,i] = fp32(Σ_c x_c·fn[i,c])·ρ
// with each dot summed in ascending c in fp32 (one lane per mix), as the
// reference's gemmDot. h [tokens, hc·dim], fn [mix, hc·dim], out [tokens, mix].
extern "C" __global__ void hc_mixes(float* out, const float* h, int tokens, int n, const float* fn, int mix, float eps) {
    const int t = blockIdx.x, lane = threadIdx.x & 31;
    const float* x = h + (size_t)t * n;
    const float ms = torch_sum_warp([&](int j) { float v = x[j]; return v * v; }, n) / (float)n;
    const float rho = rsqrtf32(ms + eps);
    for (int i = lane; i < mix; i += 32) {
        const float* f = fn + (size_t)i * n;
        float s = 0.0f;
        for (int c = 0; c < n; c++) s += x[c] * f[c];
        out[(size_t)t * mix + i] = s * rho;
    }
}

#define HC_MAX 8

// hc_sinkhorn_token is the reference's split and Sinkhorn sequence for one
// token's mixes m (see kernels.HCSplitSinkhorn): pre and post [hc], comb
// [hc, hc]. hc <= HC_MAX. Shared by hc_split_sinkhorn and the fused
// hc_mix_split (fused.cuh), so both round at the same points.
__device__ __forceinline__ void hc_sinkhorn_token(float* pre, float* post, float* comb, const float* m, int hc,
                                                  const float* scale, const float* base, int iters, float eps) {
    for (int i = 0; i < hc; i++) {
        pre[i] = sigmoidf32(m[i] * scale[0] + base[i]) + eps;
        post[i] = 2.0f * sigmoidf32(m[hc + i] * scale[1] + base[hc + i]);
    }
    float c[HC_MAX * HC_MAX];
    for (int k = 0; k < hc * hc; k++) c[k] = m[2 * hc + k] * scale[2] + base[2 * hc + k];
    for (int i = 0; i < hc; i++) { // row softmax, + eps
        float mx = c[i * hc];
        for (int j = 1; j < hc; j++) mx = gomax(mx, c[i * hc + j]);
        float s = 0.0f;
        for (int j = 0; j < hc; j++) {
            c[i * hc + j] = expf32(c[i * hc + j] - mx);
            s += c[i * hc + j];
        }
        for (int j = 0; j < hc; j++) c[i * hc + j] = c[i * hc + j] / s + eps;
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int i = 0; i < hc; i++) { // rows
                float s = 0.0f;
                for (int j = 0; j < hc; j++) s += c[i * hc + j];
                const float d = s + eps;
                for (int j = 0; j < hc; j++) c[i * hc + j] /= d;
            }
        for (int j = 0; j < hc; j++) { // columns
            float s = 0.0f;
            for (int i = 0; i < hc; i++) s += c[i * hc + j];
            const float d = s + eps;
            for (int i = 0; i < hc; i++) c[i * hc + j] /= d;
        }
    }
    for (int k = 0; k < hc * hc; k++) comb[k] = c[k];
}

// hc_split_sinkhorn: one thread per token, the reference's sequence
// exactly (see kernels.HCSplitSinkhorn). hc <= HC_MAX.
extern "C" __global__ void hc_split_sinkhorn(float* pre, float* post, float* comb, const float* mixes, int tokens, int hc,
                                             const float* scale, const float* base, int iters, float eps) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tokens || hc > HC_MAX) return;
    const int mix = (2 + hc) * hc;
    hc_sinkhorn_token(pre + (size_t)t * hc, post + (size_t)t * hc, comb + (size_t)t * hc * hc, mixes + (size_t)t * mix, hc,
                      scale, base, iters, eps);
}

// hc_pre: out[t,d] = bf16(Σ_i fp32(pre[t,i]·h[t,i,d])), i ascending.
extern "C" __global__ void hc_pre(float* out, const float* h, const float* pre, int tokens, int hc, int dim) {
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)tokens * dim) return;
    const int t = (int)(u / dim), d = (int)(u % dim);
    float s = 0.0f;
    for (int i = 0; i < hc; i++) s += pre[t * hc + i] * h[((size_t)t * hc + i) * dim + d];
    out[u] = bf16r(s);
}

// hc_post: out[t,j,d] = bf16(fp32(post[t,j]·y[t,d]) + Σ_i fp32(comb[t,i,j]·res[t,i,d])).
extern "C" __global__ void hc_post(float* out, const float* y, const float* res, const float* post, const float* comb, int tokens, int hc, int dim) {
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)tokens * hc * dim) return;
    const int d = (int)(u % dim), j = (int)((u / dim) % hc), t = (int)(u / ((long long)dim * hc));
    float s = 0.0f;
    for (int i = 0; i < hc; i++) s += comb[((size_t)t * hc + i) * hc + j] * res[((size_t)t * hc + i) * dim + d];
    out[u] = bf16r(post[t * hc + j] * y[(size_t)t * dim + d] + s);
}
