// Clamped SwiGLU, RoPE and the embedding lookup (kernels.SwiGLUClamp,
// kernels.Rotary, the cpu backend's embed op).
#pragma once
#include "common.cuh"

// swiglu_clamp: out = bf16(silu(min(g, limit))·clamp(u, ±limit) [·w[row]])
// over n = rows·inter elements (limit <= 0: no clamps); rw (fp32 [rows])
// may be null. out may alias g or u.
extern "C" __global__ void swiglu_clamp(float* out, const float* g, const float* u, long long n, int inter, float limit, const float* rw) {
    pdl_entry();
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float gv = limit > 0.0f ? gomin(g[i], limit) : g[i];
    const float e = expf32(-gv);
    float uv = u[i];
    if (limit > 0.0f) uv = gomin(gomax(uv, -limit), limit);
    float a = gv / (1.0f + e) * uv;
    if (rw) a = rw[i / inter] * a;
    out[i] = bf16r(a);
}

// rotary: RoPE in place on the last rope_dim channels of each row of x
// [rows, width], pairs interleaved, position pos[row] in the table cos_sin
// [max_pos, rope_dim/2, 2] (pos int64, as the graph's positions); inverse multiplies by the conjugate. One thread
// per (row, pair). A position outside the table poisons the pair (NaN).
extern "C" __global__ void rotary(float* x, int rows, int width, int rope_dim, const float* cos_sin, int max_pos, const long long* pos, int inverse) {
    pdl_entry();
    const int half = rope_dim / 2;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)rows * half) return;
    const int r = (int)(t / half), k = (int)(t % half);
    float* z = x + (size_t)r * width + (width - rope_dim) + 2 * k;
    const long long p = pos[r];
    if (p < 0 || p >= max_pos) {
        z[0] = z[1] = __uint_as_float(0x7fc00000u);
        return;
    }
    const float c = cos_sin[((size_t)p * half + k) * 2], s = cos_sin[((size_t)p * half + k) * 2 + 1];
    const float a = z[0], b = z[1];
    float re, im;
    if (inverse) {
        re = a * c + b * s;
        im = b * c - a * s;
    } else {
        re = a * c - b * s;
        im = a * s + b * c;
    }
    z[0] = bf16r(re);
    z[1] = bf16r(im);
}

// rope_rows is the rope op in one launch: out = x [rows, width] with
// rotary's RoPE on the last rope_dim channels of each row and the others
// copied; row r takes the position pos[(r / per_t) % t_len] (rows = B ·
// t_len · per_t, the graph's positions int64 [t_len]). It replaces the
// positions' broadcast (a copy_strided kernel), the copy of x and rotary
// with the same arithmetic. One thread per (row, pair); width - rope_dim
// even. out may alias x.
extern "C" __global__ void rope_rows(float* out, const float* x, int rows, int width, int rope_dim, const float* cos_sin, int max_pos,
                                     const long long* pos, int per_t, int t_len, int inverse) {
    pdl_entry();
    const int pairs = width / 2, half = rope_dim / 2, nope = pairs - half;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)rows * pairs) return;
    const int r = (int)(t / pairs), k2 = (int)(t % pairs);
    const float* z = x + (size_t)r * width + 2 * k2;
    float* o = out + (size_t)r * width + 2 * k2;
    const float a = z[0], b = z[1];
    if (k2 < nope) {
        o[0] = a, o[1] = b;
        return;
    }
    const int k = k2 - nope;
    const long long p = pos[(r / per_t) % t_len];
    if (p < 0 || p >= max_pos) {
        o[0] = o[1] = __uint_as_float(0x7fc00000u);
        return;
    }
    const float c = cos_sin[((size_t)p * half + k) * 2], s = cos_sin[((size_t)p * half + k) * 2 + 1];
    float re, im;
    if (inverse) {
        re = a * c + b * s;
        im = b * c - a * s;
    } else {
        re = a * c - b * s;
        im = a * s + b * c;
    }
    o[0] = bf16r(re);
    o[1] = bf16r(im);
}

// embed: out[i, :] = table[ids[i], :] (ids int64, the graph's token ids) for a bf16 table [vocab, dim] (stored
// bits), widened to fp32. An id outside [0, vocab) poisons its row and
// records i+1 in *bad (the largest such i+1), for the host to report after
// its next synchronisation. One thread per output element.
extern "C" __global__ void embed_bf16(float* out, const unsigned short* table, int vocab, int dim, const long long* ids, int n, int* bad) {
    pdl_entry();
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)n * dim) return;
    const int i = (int)(t / dim), d = (int)(t % dim);
    const long long id = ids[i];
    if (id < 0 || id >= vocab) {
        out[t] = __uint_as_float(0x7fc00000u);
        if (d == 0) atomicMax(bad, i + 1);
        return;
    }
    out[t] = bf16w(table[(size_t)id * dim + d]);
}
