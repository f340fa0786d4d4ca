// The gated compressor's pooling and the Engram hash, lookup and gate
// (kernels.CompressorPool, EngramHash, EngramLookup, EngramGate).
#pragma once
#include "common.cuh"

#define POOL_MAX 16

// pool_group pools channel i of the `ratio` rows c_j = c + j·stride (and z_j
// likewise) with a softmax over the gate scores z, in the reference's order:
// μ = max z_j, e_j = exp(z_j − μ), σ = e_0 + e_1 + …, out = Σ_j c_j·(e_j/σ).
__device__ __forceinline__ float pool_group(const float* c, const float* z, size_t stride, int ratio) {
    float e[POOL_MAX];
    float mu = z[0];
    for (int j = 1; j < ratio; j++) mu = gomax(mu, z[j * stride]);
    for (int j = 0; j < ratio; j++) e[j] = expf32(z[j * stride] - mu);
    float sum = e[0];
    for (int j = 1; j < ratio; j++) sum += e[j];
    float acc = c[0] * (e[0] / sum);
    for (int j = 1; j < ratio; j++) acc += c[j * stride] * (e[j] / sum);
    return acc;
}

// compressor_pool_prefill: c, z [b, s, d] (fp32); out [b, ⌊s/ratio⌋, d]
// gets the complete groups; the tail of s mod ratio tokens goes to the
// state slots 0.. of kv_state / score_state [b, ratio, d]. One thread per
// (b, token, channel).
extern "C" __global__ void compressor_pool_prefill(float* out, const float* c, const float* z, int b, int s, int d, int ratio,
                                                   float* kv_state, float* score_state) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)b * s * d || ratio > POOL_MAX) return;
    const int i = (int)(u % d), t = (int)((u / d) % s), bi = (int)(u / ((long long)d * s));
    const int groups = s / ratio;
    if (t < groups * ratio) {
        if (t % ratio == 0) out[((size_t)bi * groups + t / ratio) * d + i] = pool_group(c + u, z + u, d, ratio);
        return;
    }
    const size_t dst = ((size_t)bi * ratio + t % ratio) * d + i;
    kv_state[dst] = c[u];
    score_state[dst] = z[u];
}

// compressor_pool_decode: when the token c, z [b, 1, d] at start_pos
// completes a group, the group is pooled into out [b, 1, d] as pool_group
// does, its earlier tokens from the state slots 0..ratio-2 and the last from
// c, z (kernels.CompressorPoolChunk; the state is group_state_update's to
// write). One thread per (b, channel).
extern "C" __global__ void compressor_pool_decode(float* out, const float* c, const float* z, int b, int d, int ratio,
                                                  const float* kv_state, const float* score_state, int start_pos) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)b * d || ratio > POOL_MAX || (start_pos + 1) % ratio != 0) return;
    const int i = (int)(u % d), bi = (int)(u / d);
    const size_t row = (size_t)bi * ratio * d + i;
    const int last = ratio - 1;
    const float* kv = kv_state + row;
    const float* sc = score_state + row;
    float e[POOL_MAX];
    float mu = last == 0 ? z[u] : sc[0];
    for (int j = 1; j < ratio; j++) mu = gomax(mu, j == last ? z[u] : sc[j * (size_t)d]);
    for (int j = 0; j < ratio; j++) e[j] = expf32((j == last ? z[u] : sc[j * (size_t)d]) - mu);
    float sum = e[0];
    for (int j = 1; j < ratio; j++) sum += e[j];
    float acc = (last == 0 ? c[u] : kv[0]) * (e[0] / sum);
    for (int j = 1; j < ratio; j++) acc += (j == last ? c[u] : kv[j * (size_t)d]) * (e[j] / sum);
    out[u] = acc;
}

#define ENGRAM_MAX_NGRAM 8
#define ENGRAM_DEAD (-1LL)

// wrapping int64 product (Go's; signed overflow is undefined in C)
__device__ __forceinline__ long long mul_wrap(long long a, long long b) {
    return (long long)((unsigned long long)a * (unsigned long long)b);
}

// floor_mod is a mod m with the sign of m (torch's % on int64).
__device__ __forceinline__ long long floor_mod(long long a, long long m) {
    long long r = a % m;
    if (r != 0 && ((r < 0) != (m < 0))) r += m;
    return r;
}

// engram_hash: the n-gram table rows of kernels.EngramHash for tokens
// t < s at positions start_pos + t of hist [b, max_len] (int64); mult [nl,
// ng], primes [nl, ng-1, heads], offsets [nl, (ng-1)·heads]; out [b, s, nl,
// (ng-1)·heads] (int64). One thread per (b, t).
extern "C" __global__ void engram_hash(long long* out, const long long* hist, int b, int max_len, int s, int start_pos,
                                       const long long* mult, const long long* primes, const long long* offsets,
                                       int nl, int ng, int heads, long long pad) {
    pdl_entry();
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= b * s || ng > ENGRAM_MAX_NGRAM) return;
    const int bi = u / s, t = u % s, p = start_pos + t;
    const long long* h = hist + (size_t)bi * max_len;
    long long tok[ENGRAM_MAX_NGRAM];
    bool blocked = false;
    for (int sg = 0; sg < ng; sg++) {
        const long long src = h[max(p - sg, 0)];
        blocked = blocked || p < sg || src == ENGRAM_DEAD;
        tok[sg] = blocked ? pad : src;
    }
    const int cols = (ng - 1) * heads;
    for (int l = 0; l < nl; l++) {
        long long* o = out + ((size_t)u * nl + l) * cols;
        long long roll = mul_wrap(tok[0], mult[l * ng]);
        for (int i = 1; i < ng; i++) {
            roll ^= mul_wrap(tok[i], mult[l * ng + i]);
            for (int hi = 0; hi < heads; hi++) {
                const int c = (i - 1) * heads + hi;
                o[c] = floor_mod(roll, primes[((size_t)l * (ng - 1) + i - 1) * heads + hi]) + offsets[(size_t)l * cols + c];
            }
        }
    }
}

// engram_lookup: out[i, c] = bf16(e4m3(table[r, c]) · e8m0(scale[r, c/32]))
// for r = rows[i] (int64), a zero row for r outside [0, num_rows). One
// thread per output element.
extern "C" __global__ void engram_lookup(float* out, const unsigned char* table, const unsigned char* scale, int width, long long num_rows,
                                         const long long* rows, int n) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)n * width) return;
    const int i = (int)(u / width), c = (int)(u % width);
    const long long r = rows[i];
    if (r < 0 || r >= num_rows) {
        out[u] = 0.0f;
        return;
    }
    out[u] = bf16r(e4m3_to_f32(table[r * width + c]) * e8m0_to_f32(scale[r * (width / 32) + c / 32]));
}

// engram_gate: kernels.EngramGate, one block (blockDim ENGRAM_GATE_THREADS)
// per (token, copy j) of h [tokens, hc, dim]; the three sums in float64
// (thread-strided, a butterfly per warp, then the warps in order: another
// order than the reference's, rounding to the same fp32 but across a
// boundary). A decode token's four rows were four warps' chains of
// dependent loads (~60 µs at dim 5120). h_out may alias h (each thread
// writes only the elements it read).
#define ENGRAM_GATE_THREADS 256
extern "C" __global__ void __launch_bounds__(ENGRAM_GATE_THREADS)
    engram_gate(float* h_out, const float* h, int tokens, int hc, int dim, const float* key, const float* value, const float* omega, float eps) {
    pdl_entry();
    __shared__ double red[3][ENGRAM_GATE_THREADS / 32];
    const int wid = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (wid >= tokens * hc) return;
    const int t = wid / hc, j = wid % hc;
    const size_t o = (size_t)wid * dim;
    const float* hj = h + o;
    const float* kj = key + o;
    const float* wj = omega + (size_t)j * dim;
    double sh = 0.0, sk = 0.0, sd = 0.0;
    for (int d = tid; d < dim; d += ENGRAM_GATE_THREADS) {
        sh += (double)(hj[d] * hj[d]);
        sk += (double)(kj[d] * kj[d]);
        sd += (double)((hj[d] * wj[d]) * kj[d]);
    }
    for (int off = 16; off > 0; off >>= 1) {
        sh += __shfl_xor_sync(FULL_MASK, sh, off);
        sk += __shfl_xor_sync(FULL_MASK, sk, off);
        sd += __shfl_xor_sync(FULL_MASK, sd, off);
    }
    if (lane == 0) red[0][warp] = sh, red[1][warp] = sk, red[2][warp] = sd;
    __syncthreads();
    sh = red[0][0], sk = red[1][0], sd = red[2][0];
    for (int w = 1; w < ENGRAM_GATE_THREADS / 32; w++) sh += red[0][w], sk += red[1][w], sd += red[2][w];
    const float fdim = (float)dim;
    const float rho = rsqrtf32((float)sh / fdim + eps) * rsqrtf32((float)sk / fdim + eps);
    const float scale = (float)(1.0 / sqrt((double)dim));
    const float dot = ((float)sd * rho) * scale;
    const float mag = (float)sqrt((double)gomax(fabsf(dot), 1e-6f));
    const float arg = copysignf(mag, dot);
    const float gate = (float)(1.0 / (1.0 + exp(-(double)arg)));
    const float* v = value + (size_t)t * dim;
    for (int d = tid; d < dim; d += ENGRAM_GATE_THREADS) h_out[o + d] = bf16r(hj[d] + gate * v[d]);
}
