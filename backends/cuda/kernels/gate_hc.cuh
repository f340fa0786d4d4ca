// The MoE gate (kernels.Gate) and the hyper-connection ops (kernels.HCMixes,
// HCSplitSinkhorn, HCPre, HCPost).
#pragma once
#include "common.cuh"

#ifndef HC_DYN_SHARED
#define HC_DYN_SHARED(T, name) extern __shared__ T name[] // dynamic shared memory (the emulation redefines it)
#endif

#define GATE_EPB 2                          // experts per gate_logits block
#define GATE_WPE 4                          // warps per expert
#define GATE_TPE (GATE_WPE * 32)            // threads per expert
#define GATE_THREADS (GATE_EPB * GATE_TPE)  // gate_logits' blockDim

// gate_logits: logits[t, e] = fp32(Σ_d x[t,d]·w[e,d]) with the products and
// the sum in float64 (products of fp32 and bf16 values are exact there, so
// the order changes the sum only in float64's last bits). GATE_TPE threads
// per (token, expert): thread u takes the groups of 4 elements j with
// j % GATE_TPE == u, ascending (float4 loads when the rows are 16-byte
// aligned, the same order otherwise), then a fixed shuffle tree per warp
// and the GATE_WPE warp sums in order. grid (n, ceil(experts/GATE_EPB)),
// block GATE_THREADS.
extern "C" __global__ void __launch_bounds__(GATE_THREADS)
    gate_logits(float* logits, const float* x, const float* w, int n, int dim, int experts) {
    pdl_entry();
    __shared__ double part[GATE_EPB][GATE_WPE];
    const int g = threadIdx.x / GATE_TPE, u = threadIdx.x % GATE_TPE, lane = threadIdx.x & 31;
    const int e = blockIdx.y * GATE_EPB + g, t = blockIdx.x;
    double acc = 0.0;
    if (e < experts) {
        const float* xr = x + (size_t)t * dim;
        const float* wr = w + (size_t)e * dim;
        const int groups = dim / 4;
        if ((dim & 3) == 0 && (((size_t)xr | (size_t)wr) & 15) == 0) {
            const float4* x4 = (const float4*)xr;
            const float4* w4 = (const float4*)wr;
            int j = u;
            for (; j + 3 * GATE_TPE < groups; j += 4 * GATE_TPE) { // four groups' loads in flight
                float4 a[4], b[4];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    a[q] = w4[j + q * GATE_TPE];
                    b[q] = x4[j + q * GATE_TPE];
                }
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    acc += (double)a[q].x * (double)b[q].x;
                    acc += (double)a[q].y * (double)b[q].y;
                    acc += (double)a[q].z * (double)b[q].z;
                    acc += (double)a[q].w * (double)b[q].w;
                }
            }
            for (; j < groups; j += GATE_TPE) {
                const float4 a = w4[j], b = x4[j];
                acc += (double)a.x * (double)b.x;
                acc += (double)a.y * (double)b.y;
                acc += (double)a.z * (double)b.z;
                acc += (double)a.w * (double)b.w;
            }
        } else {
            for (int j = u; j < groups; j += GATE_TPE)
                for (int q = 0; q < 4; q++) acc += (double)wr[4 * j + q] * (double)xr[4 * j + q];
        }
        if (u == 0) // the last dim % 4 elements, after thread 0's groups
            for (int d = groups * 4; d < dim; d++) acc += (double)wr[d] * (double)xr[d];
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, off);
    if (lane == 0) part[g][u / 32] = acc;
    __syncthreads();
    if (u == 0 && e < experts) {
        double s = part[g][0];
        for (int k = 1; k < GATE_WPE; k++) s += part[g][k];
        logits[(size_t)t * experts + e] = (float)s;
    }
}

// gate_rank_greater: does biased score b[q] come before b[p] in the
// selection order (descending, ties to the lower id, NaN after every
// number)?
__device__ __forceinline__ bool gate_rank_greater(float wq, int q, float vp, int p) {
    if (vp != vp) return wq == wq || q < p;
    return wq > vp || (wq == vp && q < p);
}

#define GATE_SELECT_THREADS 512

// gate_select: scores, biased top-k and weights for one token per block
// (blockDim GATE_SELECT_THREADS; dynamic shared memory 2·experts floats,
// then topk ints).
// score: 0 sqrt(softplus), 1 sigmoid, 2 softmax. Selection by biased score
// descending, ties to the lower expert id (NaN last); weights =
// s[sel]/(Σ s[sel] + 1e-20)·route_scale (renormalised only when topk > 1;
// the sum in selection order). Each expert's rank is counted by its own
// thread (stopping at topk). bias may be null. indices are int64 expert ids
// (as the graph's topk_idx), kept on the GPU for the routed products.
extern "C" __global__ void __launch_bounds__(GATE_SELECT_THREADS)
    gate_select(float* weights, long long* indices, const float* logits, const float* bias, int experts, int topk,
                float route_scale, int score) {
    pdl_entry();
    HC_DYN_SHARED(float, sh);
    float* s = sh;
    float* biased = sh + experts;
    int* sel_sh = (int*)(sh + 2 * experts);
    __shared__ float red[GATE_SELECT_THREADS / 32];
    const int t = blockIdx.x, tid = threadIdx.x;
    const float* lg = logits + (size_t)t * experts;
    for (int e = tid; e < experts; e += blockDim.x) {
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
    if (score == 2) { // softmax over the experts: max (order-free), exp, the sum in order
        float m = NEG_INF;
        for (int e = tid; e < experts; e += blockDim.x) m = gomax(m, s[e]);
        for (int off = 16; off > 0; off >>= 1) m = gomax(m, __shfl_xor_sync(FULL_MASK, m, off));
        if ((tid & 31) == 0) red[tid / 32] = m;
        __syncthreads();
        m = red[0];
        for (int k = 1; k < (int)blockDim.x / 32; k++) m = gomax(m, red[k]);
        for (int e = tid; e < experts; e += blockDim.x) s[e] = expf32(s[e] - m);
        __syncthreads();
        if (tid == 0) {
            float sum = 0.0f;
            for (int e = 0; e < experts; e++) sum += s[e];
            red[0] = 1.0f / sum;
        }
        __syncthreads();
        const float inv = red[0];
        for (int e = tid; e < experts; e += blockDim.x) s[e] *= inv;
        __syncthreads();
    }
    for (int e = tid; e < experts; e += blockDim.x) biased[e] = bias ? s[e] + bias[e] : s[e];
    __syncthreads();
    for (int p = tid; p < experts; p += blockDim.x) {
        const float v = biased[p];
        int rank = 0, q = 0;
        for (; q + 8 <= experts && rank < topk; q += 8) {
            float b8[8];
#pragma unroll
            for (int u = 0; u < 8; u++) b8[u] = biased[q + u];
#pragma unroll
            for (int u = 0; u < 8; u++) rank += gate_rank_greater(b8[u], q + u, v, p) ? 1 : 0;
        }
        for (; q < experts && rank < topk; q++) rank += gate_rank_greater(biased[q], q, v, p) ? 1 : 0;
        if (rank < topk) sel_sh[rank] = p;
    }
    __syncthreads();
    if (tid != 0) return;
    float* wt = weights + (size_t)t * topk;
    long long* ix = indices + (size_t)t * topk;
    float sum = 0.0f;
    for (int r = 0; r < topk; r++) {
        const int e = sel_sh[r];
        ix[r] = e;
        wt[r] = s[e];
        sum += s[e];
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
    pdl_entry();
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
// HCT > 0 fixes hc at compile time (the matrix then stays in registers);
// the operations are the same.
template <int HCT>
__device__ __forceinline__ void hc_sinkhorn_token_t(float* pre, float* post, float* comb, const float* m, int hc_,
                                                    const float* scale, const float* base, int iters, float eps) {
    const int hc = HCT > 0 ? HCT : hc_;
    for (int i = 0; i < hc; i++) {
        pre[i] = sigmoidf32(m[i] * scale[0] + base[i]) + eps;
        post[i] = 2.0f * sigmoidf32(m[hc + i] * scale[1] + base[hc + i]);
    }
    float c[HCT > 0 ? HCT * HCT : HC_MAX * HC_MAX];
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

__device__ __forceinline__ void hc_sinkhorn_token(float* pre, float* post, float* comb, const float* m, int hc,
                                                  const float* scale, const float* base, int iters, float eps) {
    hc_sinkhorn_token_t<0>(pre, post, comb, m, hc, scale, base, iters, eps);
}

// hc_split_sinkhorn: one thread per token, the reference's sequence
// exactly (see kernels.HCSplitSinkhorn). hc <= HC_MAX.
extern "C" __global__ void hc_split_sinkhorn(float* pre, float* post, float* comb, const float* mixes, int tokens, int hc,
                                             const float* scale, const float* base, int iters, float eps) {
    pdl_entry();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tokens || hc > HC_MAX) return;
    const int mix = (2 + hc) * hc;
    hc_sinkhorn_token(pre + (size_t)t * hc, post + (size_t)t * hc, comb + (size_t)t * hc * hc, mixes + (size_t)t * mix, hc,
                      scale, base, iters, eps);
}

// hc_pre: out[t,d] = bf16(Σ_i fp32(pre[t,i]·h[t,i,d])), i ascending.
extern "C" __global__ void hc_pre(float* out, const float* h, const float* pre, int tokens, int hc, int dim) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)tokens * dim) return;
    const int t = (int)(u / dim), d = (int)(u % dim);
    float s = 0.0f;
    for (int i = 0; i < hc; i++) s += pre[t * hc + i] * h[((size_t)t * hc + i) * dim + d];
    out[u] = bf16r(s);
}

// hc_post: out[t,j,d] = bf16(fp32(post[t,j]·y[t,d]) + Σ_i fp32(comb[t,i,j]·res[t,i,d])).
extern "C" __global__ void hc_post(float* out, const float* y, const float* res, const float* post, const float* comb, int tokens, int hc, int dim) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)tokens * hc * dim) return;
    const int d = (int)(u % dim), j = (int)((u / dim) % hc), t = (int)(u / ((long long)dim * hc));
    float s = 0.0f;
    for (int i = 0; i < hc; i++) s += comb[((size_t)t * hc + i) * hc + j] * res[((size_t)t * hc + i) * dim + d];
    out[u] = bf16r(post[t * hc + j] * y[(size_t)t * dim + d] + s);
}

#define HCF_THREADS 512 // hc_mixes_fast's blockDim
#define HCF_WIN 64      // torch_sum_block: cascade blocks per column per pass

// torch_sum_block is torch_sum_warp (the same operations on the same values
// in the same order, so the same bits) spread over a block: the cascade's
// blocks of step rows of a column, each summed from zero, are independent,
// so the block sums them in parallel (HCF_WIN per column a pass, into bs
// [HCF_WIN·32]), then thread c runs column c's cascade over those sums, and
// thread 0 the leftovers, the tail and the lanes in order. Every thread of
// the block must call it; every thread gets the sum. res is one shared float.
template <class Get>
__device__ float torch_sum_block(Get get, int n, float* bs, float* cols, float* res) {
    const int tid = threadIdx.x, T = blockDim.x;
    const int lanes = n < 8 ? 1 : 8;
    const int nv = n / lanes;
    const int wide = lanes * 4;
    const int rows = nv / 4;
    const int p = max(4, ceil_log2(rows) / 4);
    const int step = 1 << p, mask = step - 1;
    const int nb = rows / step; // complete blocks of step rows per column
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int i = 0;
    for (int k0 = 0; k0 < nb; k0 += HCF_WIN) {
        const int kw = min(HCF_WIN, nb - k0);
        for (int u = tid; u < kw * wide; u += T) {
            const int col = u % wide, r0 = (k0 + u / wide) * step;
            float b = 0.0f;
            for (int r = r0; r < r0 + step; r += 16) {
                float v[16];
#pragma unroll
                for (int q = 0; q < 16; q++) v[q] = get((r + q) * wide + col);
#pragma unroll
                for (int q = 0; q < 16; q++) b += v[q];
            }
            bs[u] = b;
        }
        __syncthreads();
        if (tid < wide)
            for (int kb = 0; kb < kw; kb++) {
                acc[0] = bs[kb * wide + tid]; // acc[0] is zero here, and b never -0
                i += step;
                for (int j = 1; j < 4; j++) {
                    acc[j] += acc[j - 1];
                    acc[j - 1] = 0.0f;
                    if ((i & (mask << (j * p))) != 0) break;
                }
            }
        __syncthreads(); // before the next pass writes bs
    }
    if (tid < wide) {
        for (int r = i; r < rows; r++) acc[0] += get(r * wide + tid);
        float col = acc[0];
        col += acc[1];
        col += acc[2];
        col += acc[3];
        cols[tid] = col;
    }
    __syncthreads();
    if (tid == 0) {
        float s = 0.0f;
        for (int j = nv * lanes; j < n; j++) s += get(j);
        for (int l = 0; l < lanes; l++) {
            float a0 = cols[l];
            for (int v = rows * 4; v < nv; v++) a0 += get(v * lanes + l);
            for (int k = 1; k < 4; k++) a0 += cols[k * lanes + l];
            s += a0;
        }
        *res = s;
    }
    __syncthreads();
    return *res;
}

// hc_mixes_fast is hc_mixes with each mix's dot in float64 (the products
// of fp32 values are exact there; one rounding to fp32 at the end) in a
// fixed tree instead of cpu-ref's ascending fp32 order (Kernels.Exact
// keeps hc_mixes): one block per (token t, mix i), grid (tokens, mix),
// blockDim HCF_THREADS. Thread u takes the groups of 4 elements j with
// j % HCF_THREADS == u, ascending (float4 loads when 16-byte aligned, the
// same order otherwise); a shuffle tree per warp, the warp sums in order.
// ρ is hc_mixes' (torch_sum_block: the same bits), so
//   mix[t,i] = fp32(Σ_c x_c·fn[i,c]) · ρ.
// Mix i of token t goes to p0[t·s0 + i] (i < hc), p1[t·s1 + i - hc]
// (i < 2hc) or p2[t·s2 + i - 2hc]: one [tokens, mix] array (hc_mixes' out)
// or the pre, post and comb slots that hc_sinkhorn_slots then reads.
extern "C" __global__ void __launch_bounds__(HCF_THREADS)
    hc_mixes_fast(float* p0, int s0, float* p1, int s1, float* p2, int s2, const float* h, int n, const float* fn, int hc,
                  float eps) {
    pdl_entry();
    __shared__ float bs[HCF_WIN * 32];
    __shared__ float cols[32];
    __shared__ float res;
    __shared__ double part[HCF_THREADS / 32];
    const int t = blockIdx.x, i = blockIdx.y, tid = threadIdx.x, lane = tid & 31;
    const int mix = (2 + hc) * hc;
    if (i >= mix) return;
    const float* x = h + (size_t)t * n;
    const float* f = fn + (size_t)i * n;
    double acc = 0.0;
    const int groups = n / 4;
    if ((n & 3) == 0 && (((size_t)x | (size_t)f) & 15) == 0) {
        const float4* x4 = (const float4*)x;
        const float4* f4 = (const float4*)f;
        for (int j0 = tid; j0 < groups; j0 += 8 * HCF_THREADS) { // up to eight groups' loads in flight
            float4 a[8], b[8];
#pragma unroll
            for (int q = 0; q < 8; q++)
                if (j0 + q * HCF_THREADS < groups) {
                    a[q] = f4[j0 + q * HCF_THREADS];
                    b[q] = x4[j0 + q * HCF_THREADS];
                }
#pragma unroll
            for (int q = 0; q < 8; q++)
                if (j0 + q * HCF_THREADS < groups) {
                    acc += (double)a[q].x * (double)b[q].x;
                    acc += (double)a[q].y * (double)b[q].y;
                    acc += (double)a[q].z * (double)b[q].z;
                    acc += (double)a[q].w * (double)b[q].w;
                }
        }
    } else {
        for (int j = tid; j < groups; j += HCF_THREADS)
            for (int q = 0; q < 4; q++) acc += (double)f[4 * j + q] * (double)x[4 * j + q];
    }
    if (tid == 0) // the last n % 4 elements, after thread 0's groups
        for (int c = groups * 4; c < n; c++) acc += (double)f[c] * (double)x[c];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, off);
    if (lane == 0) part[tid / 32] = acc;
    const float ms = torch_sum_block([&](int j) { float v = x[j]; return v * v; }, n, bs, cols, &res) / (float)n;
    if (tid == 0) {
        const float rho = rsqrtf32(ms + eps);
        double d = part[0];
        for (int k = 1; k < HCF_THREADS / 32; k++) d += part[k];
        const float v = (float)d * rho;
        if (i < hc) p0[(size_t)t * s0 + i] = v;
        else if (i < 2 * hc) p1[(size_t)t * s1 + (i - hc)] = v;
        else p2[(size_t)t * s2 + (i - 2 * hc)] = v;
    }
}

// hc_sinkhorn_slots is hc_split_sinkhorn on the mixes hc_mixes_fast left
// in pre, post and comb themselves (mix i < hc in pre, then post, then
// comb): one thread per token reads its mixes, then runs
// hc_sinkhorn_token over them, in place. hc <= HC_MAX.
extern "C" __global__ void hc_sinkhorn_slots(float* pre, float* post, float* comb, int tokens, int hc, const float* scale,
                                             const float* base, int iters, float eps) {
    pdl_entry();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tokens || hc < 1 || hc > HC_MAX) return;
    float *pr = pre + (size_t)t * hc, *po = post + (size_t)t * hc, *co = comb + (size_t)t * hc * hc;
    if (hc == 4) { // the released hc: everything in registers
        float m4[24];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            m4[k] = pr[k];
            m4[4 + k] = po[k];
        }
#pragma unroll
        for (int k = 0; k < 16; k++) m4[8 + k] = co[k];
        hc_sinkhorn_token_t<4>(pr, po, co, m4, 4, scale, base, iters, eps);
        return;
    }
    float m[HC_MAX * (HC_MAX + 2)];
    for (int k = 0; k < hc; k++) {
        m[k] = pr[k];
        m[hc + k] = po[k];
    }
    for (int k = 0; k < hc * hc; k++) m[2 * hc + k] = co[k];
    hc_sinkhorn_token(pr, po, co, m, hc, scale, base, iters, eps);
}

// hc_sinkhorn4_warp is hc_sinkhorn_token_t<4> spread over one warp: lane l
// (l & 15 = 4i + j) holds comb's element (i, j) and forms its row's and
// its column's sums from the neighbours' values (shuffles) in the one-
// thread order, so every rounding is the sequence's own and the bits are
// the same; lanes 16-31 repeat 0-15 and write nothing. The 32 divisions of
// an iteration, a thread's chain there, are two a lane here. m holds the
// token's 24 mixes (pre's 4, post's 4, comb's 16); each lane reads its
// values before any lane writes, so the outputs may be m's memory.
__device__ __forceinline__ void hc_sinkhorn4_warp(float* pre, float* post, float* comb, const float* m, const float* scale,
                                                  const float* base, int iters, float eps) {
    const int lane = threadIdx.x & 31, e = lane & 15, half = lane & 16;
    const int row0 = half + (e & ~3), col = half + (e & 3);
    const float mpp = lane < 8 ? m[lane] : 0.0f;
    float c = m[8 + e] * scale[2] + base[8 + e];
    __syncwarp();
    if (lane < 4) pre[lane] = sigmoidf32(mpp * scale[0] + base[lane]) + eps;
    else if (lane < 8) post[lane - 4] = 2.0f * sigmoidf32(mpp * scale[1] + base[lane]);
    float mx = __shfl_sync(FULL_MASK, c, row0); // row softmax, + eps
    for (int k = 1; k < 4; k++) mx = gomax(mx, __shfl_sync(FULL_MASK, c, row0 + k));
    const float x = expf32(c - mx);
    float s = 0.0f;
    for (int k = 0; k < 4; k++) s += __shfl_sync(FULL_MASK, x, row0 + k);
    c = x / s + eps;
    for (int it = 0; it < iters; it++) {
        if (it > 0) { // rows
            s = 0.0f;
            for (int k = 0; k < 4; k++) s += __shfl_sync(FULL_MASK, c, row0 + k);
            c /= s + eps;
        }
        s = 0.0f; // columns
        for (int k = 0; k < 4; k++) s += __shfl_sync(FULL_MASK, c, col + 4 * k);
        c /= s + eps;
    }
    if (lane < 16) comb[e] = c;
}

// hc_split_sinkhorn4 is hc_split_sinkhorn at hc 4 with a warp per token
// (hc_sinkhorn4_warp: the same bits); blockDim a multiple of 32.
extern "C" __global__ void hc_split_sinkhorn4(float* pre, float* post, float* comb, const float* mixes, int tokens,
                                              const float* scale, const float* base, int iters, float eps) {
    pdl_entry();
    const int t = (int)(((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    if (t >= tokens) return; // whole warps leave together
    hc_sinkhorn4_warp(pre + (size_t)t * 4, post + (size_t)t * 4, comb + (size_t)t * 16, mixes + (size_t)t * 24, scale, base,
                      iters, eps);
}

// hc_sinkhorn_slots4 is hc_sinkhorn_slots at hc 4 with a warp per token:
// the mixes in pre, post and comb turned into the split in place.
extern "C" __global__ void hc_sinkhorn_slots4(float* pre, float* post, float* comb, int tokens, const float* scale,
                                              const float* base, int iters, float eps) {
    pdl_entry();
    const int t = (int)(((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    if (t >= tokens) return;
    float *pr = pre + (size_t)t * 4, *po = post + (size_t)t * 4, *co = comb + (size_t)t * 16;
    const int lane = threadIdx.x & 31;
    // the mixes in one array for the warp function: lane l < 24 gathers one
    float v = lane < 4 ? pr[lane] : lane < 8 ? po[lane - 4] : lane < 24 ? co[lane - 8] : 0.0f;
    __shared__ float mix_sh[32][24]; // a block's warps, at most 32
    float* m = mix_sh[threadIdx.x / 32];
    if (lane < 24) m[lane] = v;
    __syncwarp();
    hc_sinkhorn4_warp(pr, po, co, m, scale, base, iters, eps);
}
