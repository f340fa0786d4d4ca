// Prefill's plain products on bf16 tensor cores (mma.sync m16n8k16, fp32
// sums): gemm_plain's contract (gemm.cuh: out[i, j] = f(Σ_c a[i, c]·w[j, c]),
// the strides and groups of the grouped output LoRA) when every operand is
// a bf16 value: the activations of a bf16 op (the Go side checks), and
// bf16 weights or the stored fp8 wo_a, whose bf16(e4m3 · e8m0) the loader
// makes as LoadFP8 does. Each product is exact in fp32; only the order of
// the fp32 sums differs from the reference's (the reordered tolerance).
//
// Tiles of 128 rows × 128 columns × 32 of K, 256 threads: 8 warps in a
// 2 × 4 grid, each 64 × 32 (4 × 4 MMA tiles). Operands go global →
// registers → shared memory (bf16, rows padded to 40 halves: the fragment
// reads of a warp hit 32 distinct banks), double-buffered with one barrier
// a K step.
#define B16_BM 128
#define B16_BN 128
#define B16_BK 32
#define B16_LD 40 // a shared row in bf16 halves (32 + 8 of padding)

__device__ __forceinline__ unsigned b16_pack(float lo, float hi) {
    // both are bf16 values: their top halves are exact
    return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
}

// mma.sync m16n8k16 bf16 (fp32 sums): lane (g, t) holds A rows g (a0:
// K 2t, 2t+1; a2: 2t+8, 2t+9) and g+8 (a1, a3), B column g at the same K
// (b0, b1), and adds to D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
__device__ __forceinline__ void b16_mma(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
#ifdef B16_EMULATE
    b16_emulate(d, a, b0, b1);
    return;
#endif
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A loader's stage: 16 consecutive K values of one tile row as 8 packed
// bf16 pairs (zeros outside the matrix).
struct B16A {
    const float* a;
    int m, k, lda;
    __device__ void load(unsigned r[8], int i, int c0) const {
        const float* p = a + (size_t)i * lda + c0;
        if (i < m && c0 + 16 <= k && (((size_t)p & 15u) == 0)) {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const float4 v = ((const float4*)p)[q];
                r[2 * q] = b16_pack(v.x, v.y);
                r[2 * q + 1] = b16_pack(v.z, v.w);
            }
            return;
        }
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const int c = c0 + 2 * q;
            const float lo = (i < m && c < k) ? p[2 * q] : 0.0f, hi = (i < m && c + 1 < k) ? p[2 * q + 1] : 0.0f;
            r[q] = b16_pack(lo, hi);
        }
    }
};

struct B16W16 { // bf16 weights [groups·n, k], group z's rows from z·n
    const unsigned short* w;
    int n, k;
    __device__ void load(unsigned r[8], int z, int j, int c0) const {
        const unsigned short* p = w + ((size_t)z * n + j) * k + c0;
        if (j < n && c0 + 16 <= k && (((size_t)p & 15u) == 0)) {
            const uint4 v0 = ((const uint4*)p)[0], v1 = ((const uint4*)p)[1];
            r[0] = v0.x, r[1] = v0.y, r[2] = v0.z, r[3] = v0.w, r[4] = v1.x, r[5] = v1.y, r[6] = v1.z, r[7] = v1.w;
            return;
        }
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const int c = c0 + 2 * q;
            const unsigned lo = (j < n && c < k) ? p[2 * q] : 0u, hi = (j < n && c + 1 < k) ? p[2 * q + 1] : 0u;
            r[q] = lo | (hi << 16);
        }
    }
};

struct B16W8 { // fp8 weights [groups·n, k] e4m3, scales [ceil(groups·n/32), ceil(k/32)]
    const unsigned char* w;
    const unsigned char* s;
    int n, k;
    __device__ void load(unsigned r[8], int z, int j, int c0) const {
        const size_t row = (size_t)z * n + j;
        const unsigned char* p = w + row * k + c0;
        const int kb = (k + 31) / 32;
        const float sc = (j < n && c0 < k) ? e8m0_to_f32(s[(row / 32) * kb + c0 / 32]) : 0.0f;
        unsigned char b[16];
        if (j < n && c0 + 16 <= k && (((size_t)p & 15u) == 0)) {
            *(uint4*)b = *(const uint4*)p;
        } else {
#pragma unroll
            for (int q = 0; q < 16; q++) b[q] = (j < n && c0 + q < k) ? p[q] : 0;
        }
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const float lo = (c0 + 2 * q < k) ? bf16r(e4m3_to_f32(b[2 * q]) * sc) : 0.0f;
            const float hi = (c0 + 2 * q + 1 < k) ? bf16r(e4m3_to_f32(b[2 * q + 1]) * sc) : 0.0f;
            r[q] = b16_pack(lo, hi);
        }
    }
};

template <class W>
__device__ void gemm_bf16_tc(float* out, const float* a, int m, int k, W wl, int n, int lda, int ldo, long long a_z, long long o_z, int round) {
    __shared__ __align__(16) unsigned short as[2][B16_BM * B16_LD];
    __shared__ __align__(16) unsigned short ws[2][B16_BN * B16_LD];
    const int z = blockIdx.z;
    const B16A al{a + z * a_z, m, k, lda};
    out += z * o_z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3; // 2 × 4 warps of 64 × 32
    const int i0 = blockIdx.y * B16_BM, j0 = blockIdx.x * B16_BN;
    const int lr = tid >> 1, lc = (tid & 1) * 16; // the row and K offset this thread loads
    float acc[4][4][4];
#pragma unroll
    for (int x = 0; x < 4; x++)
#pragma unroll
        for (int y = 0; y < 4; y++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[x][y][q] = 0.0f;
    unsigned ra[8], rw[8];
    al.load(ra, i0 + lr, lc);
    wl.load(rw, z, j0 + lr, lc);
    const int nk = (k + B16_BK - 1) / B16_BK;
    for (int kt = 0; kt < nk; kt++) {
        const int buf = kt & 1;
        uint4* da = (uint4*)&as[buf][lr * B16_LD + lc];
        uint4* dw = (uint4*)&ws[buf][lr * B16_LD + lc];
        da[0] = make_uint4(ra[0], ra[1], ra[2], ra[3]), da[1] = make_uint4(ra[4], ra[5], ra[6], ra[7]);
        dw[0] = make_uint4(rw[0], rw[1], rw[2], rw[3]), dw[1] = make_uint4(rw[4], rw[5], rw[6], rw[7]);
        __syncthreads();
        if (kt + 1 < nk) { // the next stage's loads fly while this one multiplies
            al.load(ra, i0 + lr, (kt + 1) * B16_BK + lc);
            wl.load(rw, z, j0 + lr, (kt + 1) * B16_BK + lc);
        }
        const unsigned short* sa = as[buf];
        const unsigned short* sw = ws[buf];
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int kk = 0; kk < B16_BK; kk += 16) {
            unsigned af[4][4], bf[4][2];
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int r0 = wm * 64 + x * 16 + g;
                af[x][0] = *(const unsigned*)&sa[r0 * B16_LD + kk + 2 * t];
                af[x][1] = *(const unsigned*)&sa[(r0 + 8) * B16_LD + kk + 2 * t];
                af[x][2] = *(const unsigned*)&sa[r0 * B16_LD + kk + 2 * t + 8];
                af[x][3] = *(const unsigned*)&sa[(r0 + 8) * B16_LD + kk + 2 * t + 8];
            }
#pragma unroll
            for (int y = 0; y < 4; y++) {
                const int c = wn * 32 + y * 8 + g;
                bf[y][0] = *(const unsigned*)&sw[c * B16_LD + kk + 2 * t];
                bf[y][1] = *(const unsigned*)&sw[c * B16_LD + kk + 2 * t + 8];
            }
#pragma unroll
            for (int x = 0; x < 4; x++)
#pragma unroll
                for (int y = 0; y < 4; y++) b16_mma(acc[x][y], af[x], bf[y][0], bf[y][1]);
        }
        // the other buffer is written next step: every warp must be done
        // reading it (it was this step's previous use), which the barrier
        // after the stores gives; this one's reads end before the stores
        // two steps on, after that barrier
    }
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int x = 0; x < 4; x++)
#pragma unroll
        for (int y = 0; y < 4; y++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int i = i0 + wm * 64 + x * 16 + g + 8 * h;
                const int j = j0 + wn * 32 + y * 8 + 2 * t;
                if (i >= m) continue;
                float v0 = acc[x][y][2 * h], v1 = acc[x][y][2 * h + 1];
                if (round) v0 = bf16r(v0), v1 = bf16r(v1);
                if (j < n) out[(size_t)i * ldo + j] = v0;
                if (j + 1 < n) out[(size_t)i * ldo + j + 1] = v1;
            }
}

// grid (ceil(n/128), ceil(m/128), groups), block 256; w_z: a group's rows
// of w are n apart for both formats (the grouped LoRA's rank).
extern "C" __global__ void __launch_bounds__(256) matmul_bf16w_tc(float* out, const float* a, int m, int k, const unsigned short* w, int n, int lda, int ldo,
                                                                 long long a_z, long long o_z, int round) {
    pdl_entry();
    gemm_bf16_tc(out, a, m, k, B16W16{w, n, k}, n, lda, ldo, a_z, o_z, round);
}

extern "C" __global__ void __launch_bounds__(256) matmul_fp8w_tc(float* out, const float* a, int m, int k, const unsigned char* w, const unsigned char* wscale,
                                                                int n, int lda, int ldo, long long a_z, long long o_z, int round) {
    pdl_entry();
    gemm_bf16_tc(out, a, m, k, B16W8{w, wscale, n, k}, n, lda, ldo, a_z, o_z, round);
}
