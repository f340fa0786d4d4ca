// Fused kernels (backends/cuda/fuse.go): a run of graph ops as one launch.
// Each keeps the arithmetic of the unfused kernels in the same order (the
// shared device functions of gate_hc.cuh and norm_quant.cuh, the same sum
// orders), so every value it writes is bit-identical to theirs.
#pragma once
#include "common.cuh"
#include "norm_quant.cuh"
#include "gate_hc.cuh"

#define HC_MIX_THREADS 256
#define HC_MIX_SH 3200                               // floats per product buffer (two buffers: 25.6 KB)
#define HC_MIX_PER (HC_MIX_SH / HC_MIX_THREADS + 1) // products a thread stages per chunk

// seq_add returns s + p[0] + p[1] + ... + p[len-1], added one by one in
// ascending order (fp32). The loads of a group of 16 are issued before its
// adds, so the chain waits on the adds alone, not on each shared load.
__device__ __forceinline__ float seq_add(float s, const float* p, int len) {
    int j = 0;
    for (; j + 16 <= len; j += 16) {
        float a[16];
#pragma unroll
        for (int u = 0; u < 16; u++) a[u] = p[j + u];
#pragma unroll
        for (int u = 0; u < 16; u++) s += a[u];
    }
    for (; j < len; j++) s += p[j];
    return s;
}

// seq_add_dot returns s + fp32(x[0]·f[0]) + ... in ascending order, the
// same way (each product rounded, then added: -fmad=false).
__device__ __forceinline__ float seq_add_dot(float s, const float* x, const float* f, int len) {
    int j = 0;
    for (; j + 16 <= len; j += 16) {
        float a[16];
#pragma unroll
        for (int u = 0; u < 16; u++) a[u] = x[j + u] * f[j + u];
#pragma unroll
        for (int u = 0; u < 16; u++) s += a[u];
    }
    for (; j < len; j++) s += x[j] * f[j];
    return s;
}

// hc_mix_split is hc_mix + hc_split_sinkhorn + the slicing of its result
// into pre [tokens, hc], post [tokens, hc] and comb [tokens, hc·hc], one
// token per block (blockDim HC_MIX_THREADS). As hc_mixes: ρ by one warp in
// torch_sum_warp's order, and each mix's dot Σ_c fp32(x_c·fn[i,c]) added
// in ascending c in fp32 by one thread (thread i). What changes is only who
// computes the products: the whole block, a chunk ahead, into shared memory
// (double-buffered), so the adding threads wait on neither loads nor
// products; the products are rounded to fp32 before they are added, as
// -fmad=false makes hc_mixes round them. Then thread 0 runs the reference's
// Sinkhorn sequence (hc_sinkhorn_token) on the mixes. h [tokens, n = hc·dim],
// fn [(2+hc)·hc, n]; hc <= HC_MAX.
// CC is the chunk of c when a constant (hc <= 4: 128, so the index
// arithmetic is shifts), 0 when computed from mix.
template <int CC>
__device__ __forceinline__ void hc_mix_split_body(float* pre, float* post, float* comb, const float* h, int n, const float* fn, int hc,
                                                  float norm_eps, const float* scale, const float* base, int iters, float eps,
                                                  float (*prod)[HC_MIX_SH], float* mixes, float* rho_sh) {
    const int t = blockIdx.x, tid = threadIdx.x;
    const int mix = (2 + hc) * hc;
    const float* x = h + (size_t)t * n;
    const int C = CC > 0 ? CC : min(HC_MIX_SH / mix - 1, 1024); // chunk of c; a mix's products at stride C+1 (no bank conflicts)
    const int per = mix * C;                      // products in a chunk (<= HC_MIX_SH - mix)
    const int chunks = (n + C - 1) / C;
    float xv[HC_MIX_PER], fv[HC_MIX_PER];
    auto load = [&](int k) {
        const int c0 = k * C;
        for (int q = 0; q < HC_MIX_PER; q++) {
            const int e = tid + q * HC_MIX_THREADS;
            const int i = e / C, c = c0 + e % C;
            const bool ok = e < per && c < n;
            xv[q] = ok ? x[c] : 0.0f;
            fv[q] = ok ? fn[(size_t)i * n + c] : 0.0f;
        }
    };
    auto store = [&](int k) {
        float* p = prod[k & 1];
        for (int q = 0; q < HC_MIX_PER; q++) {
            const int e = tid + q * HC_MIX_THREADS;
            if (e < per) p[(e / C) * (C + 1) + e % C] = xv[q] * fv[q];
        }
    };
    if (tid >= HC_MIX_THREADS - 32) { // the last warp: ρ, as hc_mixes
        const float ms = torch_sum_warp([&](int j) { float v = x[j]; return v * v; }, n) / (float)n;
        if (tid == HC_MIX_THREADS - 32) *rho_sh = rsqrtf32(ms + norm_eps);
    }
    load(0);
    store(0);
    __syncthreads();
    float s = 0.0f;
    for (int k = 0; k < chunks; k++) {
        const bool next = k + 1 < chunks;
        if (next) load(k + 1); // in flight while thread i adds chunk k
        if (tid < mix) {
            s = seq_add(s, prod[k & 1] + tid * (C + 1), min(C, n - k * C));
        }
        if (next) store(k + 1);
        __syncthreads();
    }
    if (tid < mix) mixes[tid] = s * *rho_sh;
    __syncthreads();
    if (tid == 0)
        hc_sinkhorn_token(pre + (size_t)t * hc, post + (size_t)t * hc, comb + (size_t)t * hc * hc, mixes, hc, scale, base,
                          iters, eps);
}

extern "C" __global__ void __launch_bounds__(HC_MIX_THREADS)
    hc_mix_split(float* pre, float* post, float* comb, const float* h, int n, const float* fn, int hc, float norm_eps,
                 const float* scale, const float* base, int iters, float eps) {
    pdl_entry();
    __shared__ float prod[2][HC_MIX_SH];
    __shared__ float mixes[HC_MAX * (HC_MAX + 2)];
    __shared__ float rho_sh;
    if (hc < 1 || hc > HC_MAX) return;
    if ((2 + hc) * hc * 129 <= HC_MIX_SH)
        hc_mix_split_body<128>(pre, post, comb, h, n, fn, hc, norm_eps, scale, base, iters, eps, prod, mixes, &rho_sh);
    else
        hc_mix_split_body<0>(pre, post, comb, h, n, fn, hc, norm_eps, scale, base, iters, eps, prod, mixes, &rho_sh);
}

// pre_norm_quant is [hc_pre →] rmsnorm [→ act_quant | fp4_quant] for one
// row per block (blockDim a multiple of 32 with dim <= PNQ_PER·blockDim;
// dynamic shared memory dim floats):
//   x   = hc > 0 ? bf16(Σ_i fp32(pre[i]·h[t,i,d])) (hc_pre, i ascending) : h[t,d]
//   y   = bf16(w·fp32(x·rsqrt(torch_sum(x²)/dim + eps)))   (rms_norm's bits)
//   q   = act_quant(y) (qkind 1), fp4_quant(y) ue8m0 (2) or e4m3 (3) scales, per block of the row
// norm_out (y) and q_out may be null. pre_stride is hc (a mix per token)
// or 0 (one mix for all). block divides dim (the groups never cross rows).
// With hc 0 it is rms_norm for few rows (out may alias h: the row is in
// shared memory before any of it is written). A row is one block's: every
// load of x (and w) is issued before any is used, and the sum of squares
// is torch_sum_block's (torch_sum_warp's bits over the block), so a decode
// token's norm is not one warp's chain of dependent loads. With gridDim.y
// > 1 (few rows; outputs that are not h) each of a row's blocks computes
// the row and its sum (the same bits) and writes the element steps k with
// k % gridDim.y == blockIdx.y, so one row's elementwise work and
// quantisation is spread over several multiprocessors.
#define PNQ_PER 12
extern "C" __global__ void __launch_bounds__(1024, 1)
    pre_norm_quant(float* norm_out, float* q_out, const float* __restrict__ h, const float* __restrict__ pre, int pre_stride,
                   int hc, const float* __restrict__ w, int dim, float eps, int qkind, int block) {
    pdl_trigger(); // the norm's weights (no kernel writes them) load before the wait
    HC_DYN_SHARED(float, row);
    __shared__ float bs[HCF_WIN * 32];
    __shared__ float cols[32];
    __shared__ float res;
    const int t = blockIdx.x, tid = threadIdx.x, T = blockDim.x;
    float wv[PNQ_PER];
#pragma unroll
    for (int k = 0; k < PNQ_PER; k++) {
        const int d = k * T + tid;
        wv[k] = d < dim ? w[d] : 0.0f;
    }
    pdl_wait();
    if (hc == 4) { // the released hc: the four streams' loads in flight together
        const float* p = pre + (size_t)t * pre_stride;
        const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
        const float* ht = h + (size_t)t * 4 * dim;
#pragma unroll
        for (int k = 0; k < PNQ_PER; k++) {
            const int d = k * T + tid;
            if (d < dim) {
                float s = 0.0f;
                s += p0 * ht[d];
                s += p1 * ht[(size_t)dim + d];
                s += p2 * ht[(size_t)2 * dim + d];
                s += p3 * ht[(size_t)3 * dim + d];
                row[d] = bf16r(s);
            }
        }
    } else if (hc > 0) {
        const float* p = pre + (size_t)t * pre_stride;
        const float* ht = h + (size_t)t * hc * dim;
        for (int d = tid; d < dim; d += T) {
            float s = 0.0f;
            for (int i = 0; i < hc; i++) s += p[i] * ht[(size_t)i * dim + d];
            row[d] = bf16r(s);
        }
    } else {
        const float* hr = h + (size_t)t * dim;
#pragma unroll
        for (int k = 0; k < PNQ_PER; k++) {
            const int d = k * T + tid;
            if (d < dim) row[d] = hr[d];
        }
    }
    __syncthreads();
    const float ms = torch_sum_block([&](int j) { float v = row[j]; return v * v; }, dim, bs, cols, &res) / (float)dim;
    const float rs = rsqrtf32(ms + eps);
#pragma unroll
    for (int k = 0; k < PNQ_PER; k++) { // whole warps: the groups' shuffles
        if (k * T >= dim) break;        // the same for the whole block
        if (k % gridDim.y != blockIdx.y) continue;
        const int d = k * T + tid;
        const bool ok = d < dim;
        const float y = ok ? bf16r(wv[k] * (row[d] * rs)) : 0.0f;
        const size_t u = (size_t)t * dim + d;
        if (ok && norm_out) norm_out[u] = y;
        if (qkind == 1) {
            const float s = act_quant_scale(group_absmax(y, block));
            const unsigned c = f32_to_e4m3(goclamp(div_scale(y, s), -448.0f, 448.0f));
            if (ok) q_out[u] = bf16r(e4m3_to_f32(c) * s);
        } else if (qkind >= 2) {
            const float s = fp4_quant_scale(group_absmax(y, block), qkind == 3);
            const unsigned c = ok ? e2m1_quant(y, s) : 0u;
            if (ok) q_out[u] = bf16r(e2m1_to_f32(c) * s);
        }
    }
}

#define GATE_TAIL_MAX_TOPK 32

// gate_tail is the score and selection chain of the sqrt-softplus gate
// after its logits, one row (token) per block (blockDim a multiple of 32,
// dynamic shared memory 2·e floats), each step as its unfused kernel:
//   s   = sqrt(softplus(logits))           (unary_op softplus, sqrt)
//   b   = s + bias                         (binary_op add)
//   idx = topk_idx(b, k)                   (descending, ties to the lower id)
//   g   = s[idx]                           (gather_rows)
//   w   = g / (torch_sum(g) + add) · mul   (sum_inner, add_scalar, div, mul_scalar)
// idx (int64) and w are [rows, k]; k <= GATE_TAIL_MAX_TOPK.
extern "C" __global__ void gate_tail(long long* idx_out, float* w_out, const float* logits, const float* bias, int e, int k,
                                     float add, float mul) {
    pdl_entry();
    HC_DYN_SHARED(float, sh);
    float* s = sh;
    float* b = sh + e;
    __shared__ int sel[GATE_TAIL_MAX_TOPK];
    __shared__ float g[GATE_TAIL_MAX_TOPK];
    if (k < 1 || k > GATE_TAIL_MAX_TOPK || k > e) return;
    const int row = blockIdx.x, tid = threadIdx.x;
    const float* lg = logits + (size_t)row * e;
    for (int j = tid; j < e; j += blockDim.x) {
        const float v = lg[j];
        const float sp = v > 20.0f ? v : (float)log1p(exp((double)v));
        const float sq = __fsqrt_rn(sp);
        s[j] = sq;
        b[j] = sq + bias[j];
    }
    __syncthreads();
    for (int p = tid; p < e; p += blockDim.x) {
        const float v = b[p];
        int rank = 0, q = 0;
        for (; q + 8 <= e && rank < k; q += 8) { // eight loads, then their compares
            float w8[8];
#pragma unroll
            for (int u = 0; u < 8; u++) w8[u] = b[q + u];
#pragma unroll
            for (int u = 0; u < 8; u++) rank += (w8[u] > v || (w8[u] == v && q + u < p)) ? 1 : 0;
        }
        for (; q < e && rank < k; q++) {
            const float w = b[q];
            rank += (w > v || (w == v && q < p)) ? 1 : 0;
        }
        if (rank < k) sel[rank] = p;
    }
    __syncthreads();
    if (tid < 32) {
        if (tid < k) g[tid] = s[sel[tid]];
        __syncwarp();
        const float sum = torch_sum_warp([&](int j) { return g[j]; }, k);
        const float den = sum + add;
        if (tid < k) {
            idx_out[(size_t)row * k + tid] = sel[tid];
            w_out[(size_t)row * k + tid] = (g[tid] / den) * mul;
        }
    }
}

#ifndef FUSED_NO_CPASYNC // the host emulation (shim/emu.h) has no cp.async
#define HCW_THREADS 256
#define HCW_C 1024              // chunk of c
#define HCW_STRIDE (HCW_C + 4)  // row stride in floats: 16-byte rows, a 4-bank skew between mixes
#define HCW_MAX_MIX 24          // hc <= 4: 2 stages × 25 rows × HCW_STRIDE floats = 205,600 bytes

__device__ __forceinline__ unsigned fu_smem(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// hc_mix_split_wide is hc_mix_split for hc <= 4 and n % 4 == 0 (16-byte
// rows) with the raw fn rows and x of a chunk of 1024 copied to shared
// memory by cp.async, one chunk in flight while thread i adds the previous
// one: s += fp32(x_c·fn[i,c]) in ascending c, the same operations in the
// same order as hc_mixes (the product is rounded before it is added:
// -fmad=false). Dynamic shared memory 2·(mix+1)·HCW_STRIDE floats (past
// 48 KiB: the launcher raises the function's limit). blockDim HCW_THREADS.
extern "C" __global__ void __launch_bounds__(HCW_THREADS)
    hc_mix_split_wide(float* pre, float* post, float* comb, const float* h, int n, const float* fn, int hc, float norm_eps,
                      const float* scale, const float* base, int iters, float eps) {
    pdl_entry();
    extern __shared__ float4 shv[];
    float* sh = (float*)shv;
    __shared__ float mixes[HCW_MAX_MIX];
    __shared__ float rho_sh;
    const int mix = (2 + hc) * hc;
    if (hc < 1 || mix > HCW_MAX_MIX || (n & 3) != 0 || n < 32) return;
    const int t = blockIdx.x, tid = threadIdx.x;
    const float* x = h + (size_t)t * n;
    const int rowsPer = mix + 1; // the mixes' rows, then x
    const int stage = rowsPer * HCW_STRIDE;
    const int chunks = (n + HCW_C - 1) / HCW_C;
    auto issue = [&](int k) {
        float* buf = sh + (k & 1) * stage;
        const int c0 = k * HCW_C;
        for (int u = tid; u < rowsPer * (HCW_C / 4); u += HCW_THREADS) {
            const int r = u / (HCW_C / 4), c = c0 + (u % (HCW_C / 4)) * 4;
            if (c >= n) continue;
            const float* src = r < mix ? fn + (size_t)r * n + c : x + c;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(fu_smem(buf + r * HCW_STRIDE + (c - c0))), "l"(src));
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    // ρ: warp 1 runs torch_sum_warp's column cascade (n >= 32: 8-lane
    // vectors, 32 columns) over the rows of 32 of each chunk as it lands in
    // shared memory, then its leftovers and tail as torch_sum_warp does.
    const int lane = tid & 31;
    const int nv = n / 8, rows = nv / 4;
    const int p = max(4, ceil_log2(rows) / 4), step = 1 << p, mask = step - 1;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    issue(0);
    float s = 0.0f;
    for (int k = 0; k < chunks; k++) {
        if (k + 1 < chunks) issue(k + 1);
        else asm volatile("cp.async.commit_group;\n" ::); // an empty group: the wait below counts the same
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        __syncthreads(); // chunk k's copies, by every thread, visible
        if (tid >= 32 && tid < 64) { // ρ's rows of this chunk
            const float* xs = sh + (k & 1) * stage + mix * HCW_STRIDE;
            const int r1 = min(rows, (k + 1) * (HCW_C / 32));
            for (int r = k * (HCW_C / 32); r < r1; r++) {
                const float v = xs[(r - k * (HCW_C / 32)) * 32 + lane];
                acc[0] += v * v;
                if (((r + 1) & mask) == 0) { // a full block of step rows: the cascade
                    const int i = r + 1;
                    for (int j = 1; j < 4; j++) {
                        acc[j] += acc[j - 1];
                        acc[j - 1] = 0.0f;
                        if ((i & (mask << (j * p))) != 0) break;
                    }
                }
            }
        }
        if (tid < mix) {
            const float* buf = sh + (k & 1) * stage;
            const float* f = buf + tid * HCW_STRIDE;
            const float* xs = buf + mix * HCW_STRIDE;
            s = seq_add_dot(s, xs, f, min(HCW_C, n - k * HCW_C));
        }
        __syncthreads(); // before chunk k+2 is copied over chunk k
    }
    if (tid >= 32 && tid < 64) { // the rest of torch_sum_warp: leftover vectors, tail, lanes in order
        float col = acc[0];
        col += acc[1];
        col += acc[2];
        col += acc[3];
        float a0 = col;
        if (lane < 8)
            for (int v = rows * 4; v < nv; v++) {
                const float xv = x[v * 8 + lane];
                a0 += xv * xv;
            }
        for (int kk = 1; kk < 4; kk++) {
            const float o = __shfl_sync(FULL_MASK, col, (kk * 8 + lane) & 31);
            if (lane < 8) a0 += o;
        }
        float sum = 0.0f;
        if (lane == 0)
            for (int i = nv * 8; i < n; i++) sum += x[i] * x[i];
        for (int l = 0; l < 8; l++) {
            const float o = __shfl_sync(FULL_MASK, a0, l);
            if (lane == 0) sum += o;
        }
        if (lane == 0) rho_sh = rsqrtf32(sum / (float)n + norm_eps);
    }
    __syncthreads();
    if (tid < mix) mixes[tid] = s * rho_sh;
    __syncthreads();
    if (tid == 0)
        hc_sinkhorn_token(pre + (size_t)t * hc, post + (size_t)t * hc, comb + (size_t)t * hc * hc, mixes, hc, scale, base,
                          iters, eps);
}
#endif // FUSED_NO_CPASYNC
