// Sparse attention with sinks (kernels.SparseAttn, spec §4.9): one shared
// KV head, rows gathered by idx, an online softmax over blocks of 64 index
// entries with the probabilities rounded to bf16 before P·V.
#pragma once
#include "common.cuh"

#define ATTN_BLOCK 64                       // index entries per online-softmax step (kernels.SparseAttnBlock)
#define ATTN_THREADS 512                    // threads of a block
#define ATTN_WARPS (ATTN_THREADS / 32)      // 16
#define ATTN_SLOTS (ATTN_BLOCK / ATTN_WARPS) // index entries whose logits a warp computes, 4
#define ATTN_MAXHG 8                        // most heads a block takes
#define ATTN_FASTD 512                      // largest head dim of the register-cached logit path
#ifndef ATTN_DYN_SHARED
#define ATTN_DYN_SHARED(T, name) extern __shared__ __align__(16) T name[] // dynamic shared memory (shim/attn_emu.cpp redefines it)
#endif
#ifndef ATTN_SHFL_XOR
#define ATTN_SHFL_XOR(v, o) __shfl_xor_sync(FULL_MASK, (v), (o)) // (shim/attn_emu.cpp emulates it)
#endif

// attn_sum_warp is the sum of v over the warp by a butterfly: every lane
// gets the same value (each level adds the same two values).
__device__ __forceinline__ double attn_sum_warp(double v) {
    for (int off = 16; off > 0; off >>= 1) v += ATTN_SHFL_XOR(v, off);
    return v;
}

// attn_max_warp is gomax of v over the warp (gomax is commutative and
// associative but for NaN payloads, so the tree's result is the sequence's).
__device__ __forceinline__ float attn_max_warp(float v) {
    for (int off = 16; off > 0; off >>= 1) v = gomax(v, ATTN_SHFL_XOR(v, off));
    return v;
}

// attn_softmax is step 2 of a block of entries for head hh = warp (< HG),
// whose lanes all keep the head's running μ and l: μ' = max(μ, max s),
// α = exp(μ−μ'), p = exp(s−μ') (the entries j < len), l = fp32(l·α) +
// fp32(Σ p in float64); bf16(p) to pbs, α to alphas.
__device__ __forceinline__ void attn_softmax(int hh, int lane, int len, const float* ss, float* pbs, float* alphas, float& mu, float& l) {
    const float s0 = ss[hh * ATTN_BLOCK + lane], s1 = ss[hh * ATTN_BLOCK + lane + 32]; // -inf when empty
    const float bmax = attn_max_warp(gomax(s0, s1));
    const float nmu = gomax(mu, bmax), alpha = expf32(mu - nmu);
    const float p0 = lane < len ? expf32(s0 - nmu) : 0.0f;
    const float p1 = lane + 32 < len ? expf32(s1 - nmu) : 0.0f;
    pbs[hh * ATTN_BLOCK + lane] = bf16r(p0);
    pbs[hh * ATTN_BLOCK + lane + 32] = bf16r(p1);
    const double psum = attn_sum_warp((double)p0 + (double)p1);
    l = l * alpha + (float)psum;
    mu = nmu;
    if (lane == 0) alphas[hh] = alpha;
}

// attn_row is kv row ix: kv's rows 0..n-1, then kv2's.
__device__ __forceinline__ const float* attn_row(const float* kvb, const float* kv2b, int n, int ix, int d) {
    return ix < n ? kvb + (size_t)ix * d : kv2b + (size_t)(ix - n) * d;
}

// attn_pv is step 3 for the dims di ≡ tid: acc = fp32(acc·α) + fp32(Σ_j
// bf16(p_j)·v_j[di] in float64, in index order; zero p skipped as cpu-ref
// does), v_j row j of the staged tile, or without one kv row rix[j].
template <int HG>
__device__ __forceinline__ void attn_pv(int tid, int d, int len, const int* rix, const float* kvb, const float* kv2b, int n,
                                        const float* tile, const float* pbs, const float* alphas, float* acc) {
    for (int di = tid; di < d; di += ATTN_THREADS) {
        double pv[HG];
#pragma unroll
        for (int hh = 0; hh < HG; hh++) pv[hh] = 0.0;
        // four entries at a time (entries past len are empty, their p 0);
        // each head's sum still takes its terms in index order
        for (int j = 0; j < len; j += 4) {
            const uint4 r4 = *(const uint4*)(rix + j);
            const int rs[4] = {(int)r4.x, (int)r4.y, (int)r4.z, (int)r4.w};
            double x[4];
#pragma unroll
            for (int k = 0; k < 4; k++)
                x[k] = rs[k] < 0 ? 0.0 : (double)(tile ? tile[(j + k) * d + di] : __ldg(attn_row(kvb, kv2b, n, rs[k], d) + di));
#pragma unroll
            for (int hh = 0; hh < HG; hh++) {
                const float4 p4 = *(const float4*)(pbs + hh * ATTN_BLOCK + j);
                const float p[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
                for (int k = 0; k < 4; k++)
                    if (rs[k] >= 0 && p[k] != 0.0f) pv[hh] += (double)p[k] * x[k];
            }
        }
#pragma unroll
        for (int hh = 0; hh < HG; hh++) acc[hh * d + di] = acc[hh * d + di] * alphas[hh] + (float)pv[hh];
    }
}

// attn_fetch loads the kv rows of entries j0..j0+3 of rix into kr (lane:
// the float4 chunks 4·lane + 128c; zero for an empty entry).
__device__ __forceinline__ void attn_fetch(float4 (&kr)[ATTN_SLOTS][ATTN_FASTD / 128], int (&rr)[ATTN_SLOTS], const int* rix, int j0, int lane,
                                           const float* kvb, const float* kv2b, int n, int d) {
#pragma unroll
    for (int sl = 0; sl < ATTN_SLOTS; sl++) {
        rr[sl] = rix[j0 + sl];
#pragma unroll
        for (int c = 0; c < ATTN_FASTD / 128; c++) {
            const int e = 4 * lane + 128 * c;
            if (rr[sl] >= 0 && e < d) kr[sl][c] = __ldg((const float4*)(attn_row(kvb, kv2b, n, rr[sl], d) + e));
            else kr[sl][c] = float4{0.0f, 0.0f, 0.0f, 0.0f};
        }
    }
}

// attn_entry is idx entry i of a row as the kernel takes it: -1 past t or
// outside [0, n).
__device__ __forceinline__ int attn_entry(const int* row, int i, int t, int n) {
    const int ix = i < t ? row[i] : -1;
    return (ix >= 0 && ix < n) ? ix : -1;
}

// sparse_attn_run is one block's work: the HG heads h0.. of one (b, m),
// walking idx in blocks of 64 entries. Per block of entries:
//   0. a block whose entries are all empty is skipped: it would leave μ, l
//      and acc as they are (α = exp(0) = 1, p = 0), so the bits are the same.
//   1. logits: warp w computes entries 4w..4w+3 for every head. FAST (d <=
//      512, d % 4 == 0, kv and kv2 16-byte aligned): those four kv rows are
//      in registers (float4 loads, fetched during the previous block's steps
//      2 and 3, with the index entries one block ahead of them), q is staged
//      in shared memory, and the rows are stored to a shared tile [64][d]
//      for step 3. Else lane-strided loads, step 3 reading kv again.
//      s = fp32(q·kv in float64) · scale; -inf for an empty entry.
//   2. softmax (attn_softmax), 3. P·V (attn_pv).
// The fp32 roundings are cpu-ref's, in its order; only the float64 sums
// (q·kv, Σ p, P·V) are added in another order, which changes at most
// float64's last bit before the one rounding to fp32. (fp32 sums were no
// faster on the H200 and missed the golden tolerance by up to 72 bf16 ulp
// where P·V cancels.)
template <int HG, bool FAST>
__device__ __forceinline__ void sparse_attn_run(float* out, const float* q, int m, int h, int d, const float* kv, int n, const float* kv2,
                                                int n2, const float* sink, const int* idx, int t, float scale, float* dyn, float* ss,
                                                float* pbs, float* alphas, float* fin, int* rowix) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
    const int groups = h / HG;
    const int u = blockIdx.x, bi = u / (m * groups), mi = (u / groups) % m, h0 = (u % groups) * HG;
    const float* kvb = kv + (size_t)bi * n * d;
    const float* kv2b = kv2 + (size_t)bi * n2 * d;
    const int nt = n + n2;
    const int* row = idx + ((size_t)bi * m + mi) * t;
    const float* qg = q + (((size_t)bi * m + mi) * h + h0) * d; // the HG heads, consecutive
    float* acc = dyn;                                           // [HG][d]
    float* qs = dyn + HG * d;                                   // [HG][d], FAST only
    float* tile = dyn + 2 * HG * d;                             // [64][d], FAST only
    for (int e = tid; e < HG * d; e += ATTN_THREADS) {
        acc[e] = 0.0f;
        if (FAST) qs[e] = qg[e];
    }
    constexpr int KC = ATTN_FASTD / 128;
    const int j0 = warp * ATTN_SLOTS;
    float4 kr[ATTN_SLOTS][KC];
    int rr[ATTN_SLOTS];
    if (FAST) {
        if (tid < ATTN_BLOCK) rowix[tid] = attn_entry(row, tid, t, nt);
        __syncthreads();
        attn_fetch(kr, rr, rowix, j0, lane, kvb, kv2b, n, d);
    }
    float mu = -1e30f, l = 0.0f; // warp hh < HG: head hh's running max and denominator
    for (int t0 = 0, buf = 0; t0 < t; t0 += ATTN_BLOCK, buf ^= 1) {
        const int len = min(ATTN_BLOCK, t - t0);
        const int* rix = rowix + buf * ATTN_BLOCK;
        bool live;
        if (FAST) {
            // (the previous block's barriers make rix, and its tile reads, done)
            live = __syncthreads_or(tid < ATTN_BLOCK && rix[tid] >= 0);
            const int next = tid < ATTN_BLOCK ? attn_entry(row, t0 + ATTN_BLOCK + tid, t, nt) : -1;
            if (live) {
#pragma unroll
                for (int sl = 0; sl < ATTN_SLOTS; sl++)
#pragma unroll
                    for (int c = 0; c < KC; c++) {
                        const int e = 4 * lane + 128 * c;
                        if (e < d) *(float4*)(tile + (j0 + sl) * d + e) = kr[sl][c];
                    }
#pragma unroll
                for (int hh = 0; hh < HG; hh++) {
                    double sum[ATTN_SLOTS];
#pragma unroll
                    for (int sl = 0; sl < ATTN_SLOTS; sl++) sum[sl] = 0.0;
#pragma unroll
                    for (int c = 0; c < KC; c++) {
                        const int e = 4 * lane + 128 * c;
                        if (e < d) {
                            const float4 qv = *(const float4*)(qs + hh * d + e);
#pragma unroll
                            for (int sl = 0; sl < ATTN_SLOTS; sl++) {
                                sum[sl] += (double)qv.x * (double)kr[sl][c].x;
                                sum[sl] += (double)qv.y * (double)kr[sl][c].y;
                                sum[sl] += (double)qv.z * (double)kr[sl][c].z;
                                sum[sl] += (double)qv.w * (double)kr[sl][c].w;
                            }
                        }
                    }
#pragma unroll
                    for (int sl = 0; sl < ATTN_SLOTS; sl++) {
                        const double dot = attn_sum_warp(sum[sl]);
                        if (lane == sl) ss[hh * ATTN_BLOCK + j0 + sl] = rr[sl] >= 0 ? (float)dot * scale : NEG_INF;
                    }
                }
            }
            if (tid < ATTN_BLOCK) rowix[(buf ^ 1) * ATTN_BLOCK + tid] = next;
            __syncthreads();
            if (t0 + ATTN_BLOCK < t) attn_fetch(kr, rr, rowix + (buf ^ 1) * ATTN_BLOCK, j0, lane, kvb, kv2b, n, d);
        } else {
            if (tid < ATTN_BLOCK) rowix[buf * ATTN_BLOCK + tid] = attn_entry(row, t0 + tid, t, nt);
            live = __syncthreads_or(tid < ATTN_BLOCK && rix[tid] >= 0);
            if (live)
                for (int j = warp; j < ATTN_BLOCK; j += ATTN_WARPS) {
                    const int r = rix[j];
                    const float* kr0 = r >= 0 ? attn_row(kvb, kv2b, n, r, d) : kvb;
                    for (int hh = 0; hh < HG; hh++) {
                        double dot = 0.0;
                        if (r >= 0)
                            for (int di = lane; di < d; di += 32) dot += (double)qg[hh * d + di] * (double)kr0[di];
                        dot = attn_sum_warp(dot);
                        if (lane == 0) ss[hh * ATTN_BLOCK + j] = r >= 0 ? (float)dot * scale : NEG_INF;
                    }
                }
            __syncthreads();
        }
        if (!live) continue; // (uniform: every thread took the same vote)
        if (warp < HG) attn_softmax(warp, lane, len, ss, pbs, alphas, mu, l);
        __syncthreads();
        attn_pv<HG>(tid, d, len, rix, kvb, kv2b, n, FAST ? tile : nullptr, pbs, alphas, acc);
        __syncthreads();
    }
    if (warp < HG && lane == 0) fin[warp] = l + expf32(sink[h0 + warp] - mu);
    __syncthreads();
    float* o = out + (((size_t)bi * m + mi) * h + h0) * d;
    for (int e = tid; e < HG * d; e += ATTN_THREADS) o[e] = bf16r(acc[e] / fin[e / d]);
}

// sparse_attn: q [b,m,h,d], kv [b,n,d] then kv2 [b,n2,d] (the compressed
// rows, read in place; n2 may be 0), sink [h], idx [b,m,t] (int32, -1 =
// empty; an index outside [0, n+n2) counts as empty; entries >= n are kv2's
// rows), out [b,m,h,d]. One block of ATTN_THREADS per (b, m, group of hg
// heads): hg in {1, 2, 4, 8} divides h, grid b·m·h/hg. fast (1: d <= 512,
// d % 4 == 0, kv and kv2 16-byte aligned) picks the register-cached,
// prefetched logits. Dynamic shared memory: hg · d floats (the accumulators), and when
// fast hg · d more (q) and 64 · d (the tile of kv rows): up to 160 KiB, past
// the default limit of 48 KiB.
//   out = bf16(acc / (l + exp(sink − μ)))
extern "C" __global__ void __launch_bounds__(ATTN_THREADS) sparse_attn(float* out, const float* q, int b, int m, int h, int d,
                                                                      const float* kv, int n, const float* kv2, int n2, const float* sink,
                                                                      const int* idx, int t, float scale, int hg, int fast) {
    pdl_entry();
    ATTN_DYN_SHARED(float, dyn);
    __shared__ float ss[ATTN_MAXHG * ATTN_BLOCK], alphas[ATTN_MAXHG], fin[ATTN_MAXHG];
    __shared__ __align__(16) float pbs[ATTN_MAXHG * ATTN_BLOCK]; // read 4 at a time
    __shared__ __align__(16) int rowix[2 * ATTN_BLOCK]; // the entries of a block of 64, double-buffered
    (void)b;
#define ATTN_RUN(G, F) sparse_attn_run<G, F>(out, q, m, h, d, kv, n, kv2, n2, sink, idx, t, scale, dyn, ss, pbs, alphas, fin, rowix)
#define ATTN_HG(F)                                                                                                                         \
    switch (hg) {                                                                                                                          \
    case 8: ATTN_RUN(8, F); break;                                                                                                         \
    case 4: ATTN_RUN(4, F); break;                                                                                                         \
    case 2: ATTN_RUN(2, F); break;                                                                                                         \
    default: ATTN_RUN(1, F); break;                                                                                                        \
    }
    if (fast) {
        ATTN_HG(true)
    } else {
        ATTN_HG(false)
    }
#undef ATTN_HG
#undef ATTN_RUN
}

// ---- Decode: one row's blocks of entries on many multiprocessors ----------
//
// sparse_attn runs a (b, m, head group)'s blocks of 64 entries one after
// another on one multiprocessor: a decode step (b·m = 1, 64 heads) keeps 64
// of the H200's 132 busy, each through t/64 dependent steps. The three
// kernels below compute the same values in the same roundings with the
// blocks spread out. What makes that possible: μ before block k is
// gomax(-1e30, every logit of the blocks before it) (gomax is associative),
// so a block's α, probabilities, Σp and P·V sums need only the logits,
// and what stays sequential is the fp32 recurrence l = fp32(l·α) + Σp,
// acc = fp32(acc·α) + P·V over the blocks, a few operations per block.
//   1. sparse_attn_logits: s[u,h,i] for every entry i < t (as sparse_attn's
//      step 1, the same float64 sums), grid (u·h/G, blocks), G heads a CTA.
//   2. sparse_attn_blocks: per (u, h, block): μ before it, μ', α, bf16(p),
//      Σp (attn_softmax's), and P·V's float64 sums in index order (attn_pv's),
//      rounded to fp32, with whether the block has any entry (sparse_attn
//      skips one that has none); grid as 1.
//   3. sparse_attn_combine: the recurrence over the live blocks, then
//      out = bf16(acc / (l + exp(sink − μ))); grid u·h.
// Scratch (fp32): s [u,h,t], blk [u,h,nb,4] (α, Σp, μ', live), pv [u,h,nb,d].
#define ATTN_SPLIT_THREADS 256
#define ATTN_SPLIT_WARPS (ATTN_SPLIT_THREADS / 32)

template <int G>
__device__ __forceinline__ void attn_logits_run(float* s, const float* q, int m, int h, int d, const float* kv, int n, const float* kv2, int n2,
                                                const int* idx, int t, float scale, bool fast, float* qs) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
    const int groups = h / G, u = blockIdx.x / groups, h0 = (blockIdx.x % groups) * G, t0 = blockIdx.y * ATTN_BLOCK;
    const int bi = u / m, nt = n + n2;
    const float* kvb = kv + (size_t)bi * n * d;
    const float* kv2b = kv2 + (size_t)bi * n2 * d;
    const int* row = idx + (size_t)u * t;
    const float* qg = q + ((size_t)u * h + h0) * d;
    for (int e = tid; e < G * d; e += ATTN_SPLIT_THREADS) qs[e] = qg[e];
    __syncthreads();
    constexpr int KC = ATTN_FASTD / 128;
    for (int j = warp; j < ATTN_BLOCK; j += ATTN_SPLIT_WARPS) {
        const int i = t0 + j;
        if (i >= t) break; // (warp-uniform)
        const int ix = attn_entry(row, i, t, nt);
        float* so = s + ((size_t)u * h + h0) * t + i;
        if (ix < 0) {
            if (lane < G) so[(size_t)lane * t] = NEG_INF;
            continue;
        }
        const float* kr0 = attn_row(kvb, kv2b, n, ix, d);
        if (fast) {
            float4 kr[KC];
#pragma unroll
            for (int c = 0; c < KC; c++) {
                const int e = 4 * lane + 128 * c;
                kr[c] = e < d ? __ldg((const float4*)(kr0 + e)) : float4{0.0f, 0.0f, 0.0f, 0.0f};
            }
#pragma unroll
            for (int hh = 0; hh < G; hh++) {
                double sum = 0.0;
#pragma unroll
                for (int c = 0; c < KC; c++) {
                    const int e = 4 * lane + 128 * c;
                    if (e < d) {
                        const float4 qv = *(const float4*)(qs + hh * d + e);
                        sum += (double)qv.x * (double)kr[c].x;
                        sum += (double)qv.y * (double)kr[c].y;
                        sum += (double)qv.z * (double)kr[c].z;
                        sum += (double)qv.w * (double)kr[c].w;
                    }
                }
                const double dot = attn_sum_warp(sum);
                if (lane == 0) so[(size_t)hh * t] = (float)dot * scale;
            }
        } else {
            for (int hh = 0; hh < G; hh++) {
                double dot = 0.0;
                for (int di = lane; di < d; di += 32) dot += (double)qs[hh * d + di] * (double)kr0[di];
                dot = attn_sum_warp(dot);
                if (lane == 0) so[(size_t)hh * t] = (float)dot * scale;
            }
        }
    }
}

// sparse_attn_logits: step 1 (fast as sparse_attn's: d <= 512, d % 4 == 0,
// kv and kv2 16-byte aligned); dynamic shared memory G·d floats.
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT_THREADS)
    sparse_attn_logits(float* s, const float* q, int m, int h, int d, const float* kv, int n, const float* kv2, int n2, const int* idx, int t,
                       float scale, int g, int fast) {
    pdl_entry();
    ATTN_DYN_SHARED(float, qs);
    switch (g) {
    case 8: attn_logits_run<8>(s, q, m, h, d, kv, n, kv2, n2, idx, t, scale, fast, qs); break;
    case 4: attn_logits_run<4>(s, q, m, h, d, kv, n, kv2, n2, idx, t, scale, fast, qs); break;
    case 2: attn_logits_run<2>(s, q, m, h, d, kv, n, kv2, n2, idx, t, scale, fast, qs); break;
    default: attn_logits_run<1>(s, q, m, h, d, kv, n, kv2, n2, idx, t, scale, fast, qs); break;
    }
}

template <int G>
__device__ __forceinline__ void attn_blocks_run(float* blk, float* pvo, const float* s, int m, int h, int d, const float* kv, int n,
                                                const float* kv2, int n2, const int* idx, int t, float* pbs, int* rowix) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
    const int groups = h / G, u = blockIdx.x / groups, h0 = (blockIdx.x % groups) * G;
    const int bk = blockIdx.y, nb = gridDim.y, t0 = bk * ATTN_BLOCK, len = min(ATTN_BLOCK, t - t0);
    const int bi = u / m, nt = n + n2;
    const float* kvb = kv + (size_t)bi * n * d;
    const float* kv2b = kv2 + (size_t)bi * n2 * d;
    const int* row = idx + (size_t)u * t;
    if (tid < ATTN_BLOCK) rowix[tid] = attn_entry(row, t0 + tid, t, nt);
    const bool live = __syncthreads_or(tid < ATTN_BLOCK && rowix[tid] >= 0);
    for (int hh = warp; hh < G; hh += ATTN_SPLIT_WARPS) {
        const float* sh = s + ((size_t)u * h + h0 + hh) * t;
        float mp = NEG_INF; // the logits before the block
        for (int i = lane; i < t0; i += 32) mp = gomax(mp, sh[i]);
        const float mu = gomax(-1e30f, attn_max_warp(mp));
        const float s0 = lane < len ? sh[t0 + lane] : NEG_INF, s1 = lane + 32 < len ? sh[t0 + lane + 32] : NEG_INF;
        const float bmax = attn_max_warp(gomax(s0, s1));
        const float nmu = gomax(mu, bmax), alpha = expf32(mu - nmu);
        const float p0 = lane < len ? expf32(s0 - nmu) : 0.0f;
        const float p1 = lane + 32 < len ? expf32(s1 - nmu) : 0.0f;
        pbs[hh * ATTN_BLOCK + lane] = bf16r(p0);
        pbs[hh * ATTN_BLOCK + lane + 32] = bf16r(p1);
        const double psum = attn_sum_warp((double)p0 + (double)p1);
        if (lane == 0) {
            float* bo = blk + (((size_t)u * h + h0 + hh) * nb + bk) * 4;
            bo[0] = alpha, bo[1] = (float)psum, bo[2] = nmu, bo[3] = live ? 1.0f : 0.0f;
        }
    }
    if (!live) return; // (uniform) combine skips the block
    __syncthreads();
    for (int di = tid; di < d; di += ATTN_SPLIT_THREADS) {
        double pv[G];
#pragma unroll
        for (int hh = 0; hh < G; hh++) pv[hh] = 0.0;
        for (int j = 0; j < len; j += 4) { // attn_pv's order: each head's terms in index order
            int rs[4];
            double x[4];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                rs[k] = j + k < len ? rowix[j + k] : -1;
                x[k] = rs[k] < 0 ? 0.0 : (double)__ldg(attn_row(kvb, kv2b, n, rs[k], d) + di);
            }
#pragma unroll
            for (int hh = 0; hh < G; hh++)
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const float p = rs[k] >= 0 ? pbs[hh * ATTN_BLOCK + j + k] : 0.0f;
                    if (rs[k] >= 0 && p != 0.0f) pv[hh] += (double)p * x[k];
                }
        }
#pragma unroll
        for (int hh = 0; hh < G; hh++) pvo[(((size_t)u * h + h0 + hh) * nb + bk) * d + di] = (float)pv[hh];
    }
}

// sparse_attn_blocks: step 2; no dynamic shared memory.
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT_THREADS)
    sparse_attn_blocks(float* blk, float* pv, const float* s, int m, int h, int d, const float* kv, int n, const float* kv2, int n2,
                       const int* idx, int t, int g) {
    pdl_entry();
    __shared__ __align__(16) float pbs[ATTN_MAXHG * ATTN_BLOCK];
    __shared__ int rowix[ATTN_BLOCK];
    switch (g) {
    case 8: attn_blocks_run<8>(blk, pv, s, m, h, d, kv, n, kv2, n2, idx, t, pbs, rowix); break;
    case 4: attn_blocks_run<4>(blk, pv, s, m, h, d, kv, n, kv2, n2, idx, t, pbs, rowix); break;
    case 2: attn_blocks_run<2>(blk, pv, s, m, h, d, kv, n, kv2, n2, idx, t, pbs, rowix); break;
    default: attn_blocks_run<1>(blk, pv, s, m, h, d, kv, n, kv2, n2, idx, t, pbs, rowix); break;
    }
}

// sparse_attn_combine: step 3, one CTA a (u, h), threads along d.
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT_THREADS)
    sparse_attn_combine(float* out, const float* blk, const float* pv, const float* sink, int h, int d, int nb) {
    pdl_entry();
    const int uh = blockIdx.x;
    const float* b = blk + (size_t)uh * nb * 4;
    const float* p = pv + (size_t)uh * nb * d;
    for (int di = threadIdx.x; di < d; di += ATTN_SPLIT_THREADS) {
        float acc = 0.0f, l = 0.0f, mu = -1e30f;
        for (int k = 0; k < nb; k++) {
            if (b[4 * k + 3] == 0.0f) continue;
            const float alpha = b[4 * k];
            l = l * alpha + b[4 * k + 1];
            acc = acc * alpha + p[(size_t)k * d + di];
            mu = b[4 * k + 2];
        }
        out[(size_t)uh * d + di] = bf16r(acc / (l + expf32(sink[uh % h] - mu)));
    }
}
