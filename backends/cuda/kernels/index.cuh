// The lightning indexer and the candidate pre-filter (kernels.IndexScore,
// IndexCausalMask, ApplyCandidates, IndexTopK, SelectCandidateBlocks).
#pragma once
#include "common.cuh"

// index_score: out[row, j] = bf16(Σ_h bf16(relu(bf16(fp32(q·k))) · w[row, h]))
// over the heads in order; one warp per (row, j), the dots in float64.
// q [b·s, h, di], k [b, nc, di], w [b·s, h], out [b·s, nc].
// grid (ceil(nc/8), b·s), block 256.
extern "C" __global__ void index_score(float* out, const float* q, int s, int h, int di, const float* k, int nc, const float* w) {
    pdl_entry();
    const int row = blockIdx.y, j = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (j >= nc) return;
    const float* kv = k + ((size_t)(row / s) * nc + j) * di;
    float sum = 0.0f;
    for (int hi = 0; hi < h; hi++) {
        const float* qv = q + ((size_t)row * h + hi) * di;
        double dot = 0.0;
        for (int d = lane; d < di; d += 32) dot += (double)qv[d] * (double)kv[d];
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(FULL_MASK, dot, off);
        float e = bf16r((float)dot);
        if (e <= 0.0f) e = 0.0f;
        sum += bf16r(e * w[(size_t)row * h + hi]);
    }
    if (lane == 0) out[(size_t)row * nc + j] = bf16r(sum);
}

// index_causal_mask: prefill causality of score [rows = b·s, nc]: query t
// sees the first ⌊(t+1)/ratio⌋ columns, the rest become -inf.
extern "C" __global__ void index_causal_mask(float* score, int rows, int s, int nc, int ratio) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)rows * nc) return;
    const int t = (int)(u / nc) % s, j = (int)(u % nc);
    if (j >= (t + 1) / ratio) score[u] = NEG_INF;
}

// apply_candidates: score[i] = -inf where mask[i] == 0.
extern "C" __global__ void apply_candidates(float* score, const unsigned char* mask, long long n) {
    pdl_entry();
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && mask[i] == 0) score[i] = NEG_INF;
}

// ranked reports whether position p of v [n] is among the k largest values,
// ties to the lower position (the reference's stable descending order).
__device__ __forceinline__ bool ranked(const float* v, int n, int p, int k) {
    const float x = v[p];
    int rank = 0;
    for (int q = 0; q < n && rank < k; q++) {
        const float u = v[q];
        rank += (u > x || (u == x && q < p)) ? 1 : 0;
    }
    return rank < k;
}

// index_topk: per row of score [rows, nc] (one block of 1024 threads), the
// k highest positions in ascending order, each written as p + offset when
// p < lens[row mod nlens], else -1. out [rows, k]. Positions are taken in
// chunks of 1024; a chunk's selected ones go after the earlier chunks'.
extern "C" __global__ void __launch_bounds__(1024) index_topk(int* out, const float* score, int nc, int k, const int* lens, int nlens, int offset) {
    pdl_entry();
    __shared__ int warp_off[32];
    const int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
    const float* sc = score + (size_t)r * nc;
    const int n = lens[r % nlens];
    int base = 0; // selected positions in earlier chunks (the same in every thread)
    for (int c0 = 0; c0 < nc; c0 += blockDim.x) {
        const int p = c0 + tid;
        const bool sel = p < nc && ranked(sc, nc, p, k);
        const unsigned ball = __ballot_sync(FULL_MASK, sel);
        if (lane == 0) warp_off[warp] = __popc(ball);
        const int total = __syncthreads_count(sel);
        if (tid == 0) {
            int acc = 0;
            for (int w = 0; w < (int)(blockDim.x / 32); w++) {
                const int c = warp_off[w];
                warp_off[w] = acc;
                acc += c;
            }
        }
        __syncthreads();
        if (sel) {
            const int slot = base + warp_off[warp] + __popc(ball & ((1u << lane) - 1u));
            out[(size_t)r * k + slot] = p < n ? p + offset : -1;
        }
        base += total;
        __syncthreads();
    }
}

// select_candidate_blocks: per row of logits [rows, wd] (one block of 1024
// threads; dynamic shared memory nb floats, nb = ceil(wd/bs)): block scores
// are the max of their positions, block ⌊(n−1)/bs⌋ is forced to +inf
// (n = lens[row mod nlens] > 0), the top min(topk_blocks, nb) blocks (ties
// to the lower block) whose score is not -inf are kept, and mask [rows, wd]
// is 1 on their positions, 0 elsewhere.
extern "C" __global__ void __launch_bounds__(1024) select_candidate_blocks(unsigned char* mask, const float* logits, int wd, const int* lens, int nlens,
                                                                            int topk_blocks, int bs) {
    pdl_entry();
    extern __shared__ float scores[];
    const int r = blockIdx.x, tid = threadIdx.x;
    const int nb = (wd + bs - 1) / bs;
    const float* lg = logits + (size_t)r * wd;
    for (int bk = tid; bk < nb; bk += blockDim.x) {
        float m = NEG_INF;
        for (int i = bk * bs; i < min((bk + 1) * bs, wd); i++) m = gomax(m, lg[i]);
        scores[bk] = m;
    }
    __syncthreads();
    const int n = lens[r % nlens];
    if (tid == 0 && n > 0 && (n - 1) / bs < nb) scores[(n - 1) / bs] = __uint_as_float(0x7f800000u);
    __syncthreads();
    const int kk = min(topk_blocks, nb);
    for (int bk = tid; bk < nb; bk += blockDim.x) {
        const unsigned char keep = (ranked(scores, nb, bk, kk) && scores[bk] != NEG_INF) ? 1 : 0;
        for (int i = bk * bs; i < min((bk + 1) * bs, wd); i++) mask[(size_t)r * wd + i] = keep;
    }
}
