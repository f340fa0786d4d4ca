// The graph's unfused ops (the cpu backend's unary, binary, cast, mean_sq,
// sum, softmax, topk_idx, gather, moe_combine, token_map) and one strided
// copy for the data movement ops (slice, concat, expand, cache and window
// writes). Results are rounded to the output dtype as the cpu backend's
// round() does: round = 1 for bf16, 0 for fp32.
#pragma once
#include "common.cuh"

#define MAX_RANK 6

// Strides describes a row-major iteration space dim[0..rank) and, for two
// operands, the element stride of each axis (0 on a broadcast axis). Its C
// layout (128 bytes) is written by the Go side (stridesBytes).
struct Strides {
    int rank;
    int dim[MAX_RANK];
    long long a[MAX_RANK];
    long long b[MAX_RANK];
};

// offsets maps a flat index of the iteration space to the two operands'.
__device__ __forceinline__ void offsets(const Strides& st, long long u, long long* ai, long long* bi) {
    long long oa = 0, ob = 0;
    for (int d = st.rank - 1; d >= 0; d--) {
        const long long i = u % st.dim[d];
        u /= st.dim[d];
        oa += i * st.a[d];
        ob += i * st.b[d];
    }
    *ai = oa;
    *bi = ob;
}

__device__ __forceinline__ float round_to(float v, int round) { return round ? bf16r(v) : v; }

// unary ops, as the cpu backend computes them
enum { U_COPY, U_SIGMOID, U_SILU, U_RSQRT, U_SQRT, U_EXP, U_RELU, U_SOFTPLUS, U_CLAMP, U_ADD_SCALAR, U_MUL_SCALAR };

extern "C" __global__ void unary_op(float* out, const float* x, long long n, int op, float p0, float p1, int round) {
    pdl_entry();
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    float r;
    switch (op) {
    case U_SIGMOID: r = sigmoidf32(v); break;
    case U_SILU: r = v / (1.0f + expf32(-v)); break;
    case U_RSQRT: r = rsqrtf32(v); break;
    case U_SQRT: r = __fsqrt_rn(v); break;
    case U_EXP: r = expf32(v); break;
    case U_RELU: r = gomax(v, 0.0f); break;
    case U_SOFTPLUS: r = v > 20.0f ? v : (float)log1p(exp((double)v)); break;
    case U_CLAMP: r = gomin(gomax(v, p0), p1); break;
    case U_ADD_SCALAR: r = v + p0; break;
    case U_MUL_SCALAR: r = v * p0; break;
    default: r = v; // copy, cast
    }
    out[i] = round_to(r, round);
}

enum { B_ADD, B_SUB, B_MUL, B_DIV };

// binary_op: out (contiguous, the broadcast shape st.dim) = a op b with the
// operands read through st.a and st.b.
extern "C" __global__ void binary_op(float* out, const float* a, const float* b, long long n, int op, int round, Strides st) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= n) return;
    long long ai, bi;
    offsets(st, u, &ai, &bi);
    const float x = a[ai], y = b[bi];
    float r;
    switch (op) {
    case B_ADD: r = x + y; break;
    case B_SUB: r = x - y; break;
    case B_MUL: r = x * y; break;
    default: r = x / y;
    }
    out[u] = round_to(r, round);
}

// copy_strided: for every index of st.dim, out[·st.b] = in[·st.a], elements
// of elem bytes (4 or 8).
extern "C" __global__ void copy_strided(void* out, const void* in, int elem, long long n, Strides st) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= n) return;
    long long ai, bi;
    offsets(st, u, &ai, &bi);
    if (elem == 8) ((long long*)out)[bi] = ((const long long*)in)[ai];
    else ((float*)out)[bi] = ((const float*)in)[ai];
}

// mean_sq: out[r] = torch_sum(fp32(x²))/n per row of x [rows, n] (one warp
// a row), rounded to the dtype.
extern "C" __global__ void mean_sq(float* out, const float* x, int rows, int n, int round) {
    pdl_entry();
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * n;
    const float ms = torch_sum_warp([&](int j) { float v = xr[j]; return v * v; }, n) / (float)n;
    if ((threadIdx.x & 31) == 0) out[row] = round_to(ms, round);
}

// sum_inner: out[r] = torch_sum(x[r, :]) over the innermost axis (one warp
// a row), rounded to the dtype.
extern "C" __global__ void sum_inner(float* out, const float* x, int rows, int n, int round) {
    pdl_entry();
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * n;
    const float s = torch_sum_warp([&](int j) { return xr[j]; }, n);
    if ((threadIdx.x & 31) == 0) out[row] = round_to(s, round);
}

// sum_outer: out[o, i] = Σ_a x[o, a, i] in ascending a (kernels.SumAxis over
// a non-innermost axis), one thread per output.
extern "C" __global__ void sum_outer(float* out, const float* x, int outer, int n, int inner, int round) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)outer * inner) return;
    const long long o = u / inner, i = u % inner;
    float s = 0.0f;
    for (int a = 0; a < n; a++) s += x[(o * n + a) * inner + i];
    out[u] = round_to(s, round);
}

// softmax_rows: kernels.Softmax over the last axis (one warp a row):
// e_j = exp(x_j − max), out_j = e_j / Σ e (the sum in ascending j), rounded.
extern "C" __global__ void softmax_rows(float* out, const float* x, int rows, int n, int round) {
    pdl_entry();
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * n;
    float* orow = out + (size_t)row * n;
    float mx = NEG_INF;
    for (int j = lane; j < n; j += 32) mx = gomax(mx, xr[j]);
    for (int off = 16; off > 0; off >>= 1) mx = gomax(mx, __shfl_xor_sync(FULL_MASK, mx, off));
    for (int j = lane; j < n; j += 32) orow[j] = expf32(xr[j] - mx);
    __syncwarp();
    float sum = 0.0f;
    if (lane == 0)
        for (int j = 0; j < n; j++) sum += orow[j];
    sum = __shfl_sync(FULL_MASK, sum, 0);
    for (int j = lane; j < n; j += 32) orow[j] = round_to(orow[j] / sum, round);
}

// topk_idx: out[i, r] (int64) = the position of rank r in row i of x [N, E]
// (descending, ties to the lower position: a stable sort), one thread per
// element; the ranks are distinct, so each selected element writes its slot.
extern "C" __global__ void topk_idx(long long* out, const float* x, int rows, int e, int k) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)rows * e) return;
    const int i = (int)(u / e), p = (int)(u % e);
    const float* xr = x + (size_t)i * e;
    const float v = xr[p];
    int rank = 0;
    for (int q = 0; q < e && rank < k; q++) {
        const float w = xr[q];
        rank += (w > v || (w == v && q < p)) ? 1 : 0;
    }
    if (rank < k) out[(size_t)i * k + rank] = p;
}

// gather_rows: out[i, j] = x[i, idx[i, j]] for x [N, E], idx int64 [N, k].
extern "C" __global__ void gather_rows(float* out, const float* x, int rows, int e, const long long* idx, int k) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)rows * k) return;
    const int i = (int)(u / k);
    const long long c = idx[u];
    out[u] = (c >= 0 && c < e) ? x[(size_t)i * e + c] : __uint_as_float(0x7fc00000u);
}

#define MOE_MAX_TOPK 32

// moe_combine: out[i, d] = Σ_j y[i, j, d] over the token's k routed outputs
// in ascending expert id (the cpu backend's order), from 0 in fp32.
extern "C" __global__ void moe_combine(float* out, const float* y, const long long* idx, int rows, int k, int dim) {
    pdl_entry();
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= (long long)rows * dim || k > MOE_MAX_TOPK) return;
    const int i = (int)(u / dim), d = (int)(u % dim);
    const long long* ix = idx + (size_t)i * k;
    float acc = 0.0f;
    long long prev = -1;
    int prev_j = -1;
    for (int step = 0; step < k; step++) { // next (id, slot) in ascending order
        int best = -1;
        for (int j = 0; j < k; j++) {
            const bool after = ix[j] > prev || (ix[j] == prev && j > prev_j);
            if (after && (best < 0 || ix[j] < ix[best])) best = j;
        }
        prev = ix[best];
        prev_j = best;
        acc += y[((size_t)i * k + best) * dim + d];
    }
    out[u] = acc;
}

// token_map: out[i] = map[ids[i]] (int64); an id outside [0, n_map)
// poisons its entry with -1 and records i+1 in *bad (the largest such).
extern "C" __global__ void token_map(long long* out, const long long* map, long long n_map, const long long* ids, int n, int* bad) {
    pdl_entry();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long id = ids[i];
    if (id < 0 || id >= n_map) {
        out[i] = -1;
        atomicMax(bad, i + 1);
        return;
    }
    out[i] = map[id];
}
