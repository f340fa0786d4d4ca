// Runs sparse_attn of attention.cuh on the CPU (emu.h, with the warp's xor
// shuffle emulated here through per-warp exchange slots and barriers)
// against a reference written here from cpu-ref's kernels.SparseAttn: every
// head group (hg 1, 2, 4, 8) and both logit paths (fast: d <= 512, d % 4 ==
// 0), odd shapes (t not a multiple of 64, t < 64, t = 0, d < 128, d not a
// multiple of 4, d > 512), empty and out-of-range indices, a row with none,
// and logits so large that most probabilities round to zero, blocks of
// entries all empty (skipped), kv split into kv and kv2 (the compressed rows
// read in place). The kernel adds its float64 sums in another order than
// cpu-ref, which changes nothing while they are exact (bf16 inputs of a
// moderate range, as here), so every output must be bit-identical.
// No GPU needed:
//   g++ -O1 -std=c++20 -ffp-contract=off -pthread \
//     backends/cuda/kernels/shim/attn_emu.cpp -o /tmp/attn_emu && /tmp/attn_emu
#include "emu.h"
#include <barrier>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
// the xor shuffle: each lane leaves its value in its warp's slots, a warp
// barrier, each reads its partner's, a barrier (every block here has full
// warps, and every lane of a warp shuffles alike)
inline uint64_t attn_slot[32][32];
inline std::unique_ptr<std::barrier<>> attn_wbar[32];
template <class T> inline T attn_shfl_xor(T v, int off) {
    static_assert(sizeof(T) <= 8);
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    attn_slot[w][l] = bits;
    attn_wbar[w]->arrive_and_wait();
    bits = attn_slot[w][l ^ off];
    attn_wbar[w]->arrive_and_wait();
    T r;
    memcpy(&r, &bits, sizeof(T));
    return r;
}
#define ATTN_SHFL_XOR(v, o) attn_shfl_xor((v), (o))
#define ATTN_DYN_SHARED(T, name) T* name = (T*)emu_dyn_shared
#include "../attention.cuh"

std::mt19937 rng(13);
static float bf16rand(float amp) { return bf16r(std::normal_distribution<float>(0.0f, amp)(rng)); }

// ref is kernels.SparseAttn (an index outside [0, n) counts as empty, as
// the kernel's contract says; cpu-ref panics there).
static void ref(float* out, const float* q, int b, int m, int h, int d, const float* kv, int n, const float* sink, const int* idx, int t, float scale) {
    std::vector<float> s(64), pb(64), acc(d);
    std::vector<double> pv(d);
    for (int u = 0; u < b * m * h; u++) {
        const int bi = u / (m * h), mi = (u / h) % m, hi = u % h;
        const float* kvb = kv + (size_t)bi * n * d;
        const int* row = idx + ((size_t)bi * m + mi) * t;
        const float* qv = q + (((size_t)bi * m + mi) * h + hi) * d;
        float mu = -1e30f, l = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int t0 = 0; t0 < t; t0 += 64) {
            const int len = std::min(64, t - t0);
            float bmax = NEG_INF;
            for (int j = 0; j < len; j++) {
                const int ix = row[t0 + j];
                if (ix < 0 || ix >= n) { s[j] = NEG_INF; continue; }
                double dot = 0;
                for (int di = 0; di < d; di++) dot += (double)qv[di] * (double)kvb[(size_t)ix * d + di];
                s[j] = (float)dot * scale;
                bmax = gomax(bmax, s[j]);
            }
            const float nmu = gomax(mu, bmax), alpha = expf32(mu - nmu);
            double psum = 0;
            std::fill(pv.begin(), pv.end(), 0.0);
            for (int j = 0; j < len; j++) {
                const float p = expf32(s[j] - nmu);
                psum += (double)p;
                pb[j] = bf16r(p);
                const int ix = row[t0 + j];
                if (ix < 0 || ix >= n || pb[j] == 0.0f) continue;
                for (int di = 0; di < d; di++) pv[di] += (double)pb[j] * (double)kvb[(size_t)ix * d + di];
            }
            l = l * alpha + (float)psum;
            for (int di = 0; di < d; di++) acc[di] = acc[di] * alpha + (float)pv[di];
            mu = nmu;
        }
        l += expf32(sink[hi] - mu);
        float* o = out + (((size_t)bi * m + mi) * h + hi) * d;
        for (int di = 0; di < d; di++) o[di] = bf16r(acc[di] / l);
    }
}

struct Case { const char* name; int b, m, h, d, n, t; float qamp, scale; int emptyPct, n2, tailEmpty; };

int main(int argc, char** argv) {
    // quick (backends/cuda TestKernelEmulations): three cases, one head per
    // block and the most a block takes
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    for (auto& w : attn_wbar) w = std::make_unique<std::barrier<>>(32);
    const Case cases[] = {
        {"decode-like h8 d512 t640", 1, 1, 8, 512, 300, 640, 1, 0.044f, 0, 0, 0},
        {"b2 m3 h8 d128 t150, empties, kv2", 2, 3, 8, 128, 97, 150, 1, 0.09f, 15, 30, 0},
        {"decode h8 d512 t640, kv2, 400 empty", 1, 1, 8, 512, 128, 640, 1, 0.044f, 0, 170, 400},
        {"b1 m2 h8 d100 t64", 1, 2, 8, 100, 40, 64, 1, 0.1f, 10, 0, 0},
        {"b1 m2 h4 d70 t33 (d % 4 != 0), kv2", 1, 2, 4, 70, 50, 33, 1, 0.12f, 10, 9, 0},
        {"b1 m1 h2 d640 t100 (d > 512)", 1, 1, 2, 640, 120, 100, 1, 0.04f, 5, 0, 0},
        {"b1 m2 h8 d256 t200, huge logits", 1, 2, 8, 256, 64, 200, 4, 1.0f, 5, 0, 0},
        {"b1 m1 h2 d64 t0", 1, 1, 2, 64, 8, 0, 1, 0.1f, 0, 0, 0},
    };
    bool ok = true;
    printf("%-36s %4s %4s %10s %10s %10s\n", "case", "hg", "fast", "outputs", "nonzero", "differ");
    int ci = -1;
    for (const Case& c : cases) {
        ci++;
        if (quick && ci != 1 && ci != 2 && ci != 4) continue;
        // kv's rows: the first n1 in kv, the other n2 in kv2 (both [b, rows, d])
        const int b = c.b, m = c.m, h = c.h, d = c.d, n = c.n + c.n2, t = c.t, n1 = c.n, n2 = c.n2;
        std::vector<float> q((size_t)b * m * h * d), kv((size_t)b * n * d), sink(h);
        std::vector<int> idx((size_t)b * m * t);
        for (auto& x : q) x = bf16rand(c.qamp);
        for (auto& x : kv) x = bf16rand(1);
        for (auto& x : sink) x = bf16rand(1);
        for (size_t i = 0; i < idx.size(); i++) {
            idx[i] = (int)(rng() % n);
            if ((int)(rng() % 100) < c.emptyPct) idx[i] = -1;
            if (rng() % 50 == 0) idx[i] = n + (int)(rng() % 5); // out of range: empty
            if (m > 1 && i / t == (size_t)(b * m - 1)) idx[i] = -1; // the last row sees nothing
            if ((int)(i % t) >= t - c.tailEmpty) idx[i] = -1;        // as index_topk leaves them
        }
        std::vector<float> kv1((size_t)b * n1 * d), kv2((size_t)b * std::max(n2, 1) * d);
        for (int bi = 0; bi < b; bi++)
            for (int r = 0; r < n; r++)
                memcpy(r < n1 ? &kv1[((size_t)bi * n1 + r) * d] : &kv2[((size_t)bi * n2 + r - n1) * d], &kv[((size_t)bi * n + r) * d], d * 4);
        std::vector<float> want(q.size());
        ref(want.data(), q.data(), b, m, h, d, kv.data(), n, sink.data(), idx.data(), t, c.scale);
        for (int fast = 0; fast < 2; fast++) {
            if (fast && !(d % 4 == 0 && d <= ATTN_FASTD)) continue;
            for (int hg : {1, 2, 4, 8}) {
                if (h % hg) continue;
                if (quick && hg != 1 && hg != (h % 8 == 0 ? 8 : h)) continue;
                if ((fast ? 2 * hg * d + ATTN_BLOCK * d : hg * d) > (int)(sizeof(emu_dyn_shared) / 4)) continue;
                std::vector<float> got(q.size(), NAN);
                launch(dim3{(unsigned)(b * m * h / hg), 1, 1}, dim3{ATTN_THREADS, 1, 1}, [&] {
                    sparse_attn(got.data(), q.data(), b, m, h, d, kv1.data(), n1, kv2.data(), n2, sink.data(), idx.data(), t, c.scale, hg,
                                fast);
                });
                size_t bad = 0, nonzero = 0;
                for (size_t i = 0; i < got.size(); i++) nonzero += want[i] != 0.0f;
                for (size_t i = 0; i < got.size(); i++)
                    if (__float_as_uint(got[i]) != __float_as_uint(want[i])) {
                        if (bad < 3) printf("  out[%zu] = %g, want %g\n", i, got[i], want[i]);
                        bad++;
                    }
                printf("%-36s %4d %4d %10zu %10zu %10zu%s\n", c.name, hg, fast, got.size(), nonzero, bad, bad ? "  FAIL" : "");
                fflush(stdout);
                if (bad) ok = false;
            }
        }
        // the decode form: sparse_attn_logits, _blocks, _combine
        const int U = b * m, nb = (t + ATTN_BLOCK - 1) / ATTN_BLOCK;
        for (int fast = 0; fast < 2 && nb > 0; fast++) {
            if (fast && !(d % 4 == 0 && d <= ATTN_FASTD)) continue;
            for (int g : {1, 2, 4, 8}) {
                if (h % g || (quick && g != 1 && g != 8)) continue;
                std::vector<float> s((size_t)U * h * t, NAN), blk((size_t)U * h * nb * 4, NAN), pv((size_t)U * h * nb * d, NAN), got(q.size(), NAN);
                const dim3 grid{(unsigned)(U * h / g), (unsigned)nb, 1}, block{ATTN_SPLIT_THREADS, 1, 1};
                launch(grid, block, [&] { sparse_attn_logits(s.data(), q.data(), m, h, d, kv1.data(), n1, kv2.data(), n2, idx.data(), t, c.scale, g, fast); });
                launch(grid, block, [&] { sparse_attn_blocks(blk.data(), pv.data(), s.data(), m, h, d, kv1.data(), n1, kv2.data(), n2, idx.data(), t, g); });
                launch(dim3{(unsigned)(U * h), 1, 1}, block, [&] { sparse_attn_combine(got.data(), blk.data(), pv.data(), sink.data(), h, d, nb); });
                size_t bad = 0;
                for (size_t i = 0; i < got.size(); i++)
                    if (__float_as_uint(got[i]) != __float_as_uint(want[i])) {
                        if (bad < 3) printf("  split out[%zu] = %g, want %g\n", i, got[i], want[i]);
                        bad++;
                    }
                printf("%-36s %4s %4d %10zu %10s %10zu%s\n", c.name, (std::string("s") + std::to_string(g)).c_str(), fast, got.size(), "", bad, bad ? "  FAIL" : "");
                fflush(stdout);
                if (bad) ok = false;
            }
        }
    }
    printf(ok ? "attn_emu: ok\n" : "attn_emu: FAILED\n");
    return ok ? 0 : 1;
}
