// Runs the MoE gate and hyper-connection mix kernels of gate_hc.cuh and
// fused.cuh (gate_logits + gate_select, gate_tail, hc_mixes_fast +
// hc_sinkhorn_slots, torch_sum_block; the warp-per-token Sinkhorn,
// pre_norm_quant and rope_rows against the launches they replace, bit for
// bit) on the CPU (emu.h, warp shuffles emulated) against references written here from cpu-ref's definitions
// (backends/cpu/kernels: Gate, HCMixes, HCSplitSinkhorn, TorchSum): odd
// shapes, unaligned rows, ties, every score function. Gate: indices equal,
// weights and logits bit-identical (the float64 sums run in another order;
// a differing logit would need a sum within 2^-29 of an fp32 rounding
// boundary). torch_sum_block: bit-identical to the scalar port and to
// torch_sum_warp. hc_mixes_fast: bit-identical to the float64 reference,
// within 1e-5 of the output's scale of cpu-ref's fp32 order (the golden
// reorder32 rule). hc_sinkhorn_slots: bit-identical to hc_split_sinkhorn.
// No GPU needed:
//   g++ -O1 -std=c++20 -ffp-contract=off -pthread \
//     backends/cuda/kernels/shim/gate_hc_emu.cpp -o /tmp/gate_hc_emu && /tmp/gate_hc_emu
#include "emu.h"
#define HC_DYN_SHARED(T, name) T* name = (T*)emu_dyn_shared
#include "../common.cuh"
#define FUSED_NO_CPASYNC
#include "../fused.cuh"
#include "../elementwise.cuh"
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>

static std::mt19937 rng(5);
static float unif(float a, float b) { return a + (b - a) * (float)(rng() % 1000003) / 1000003.0f; }
static float bf16v(float a) { return bf16r(unif(-a, a)); }
static bool same(float a, float b) { return (a != a && b != b) || __float_as_uint(a) == __float_as_uint(b); }
static int fails = 0;

// torch_sum_ref is kernels.TorchSum (torch's CPU sum order), the scalar
// port of torch_sum_warp: columns of 8-lane vectors in rows of 4 vectors
// with the 4-level cascade, leftovers, accumulators, tail, lanes.
static float torch_sum_ref(const float* v, int n) {
    const int lanes = n < 8 ? 1 : 8, nv = n / lanes, wide = lanes * 4, rows = nv / 4;
    const int p = std::max(4, ceil_log2(rows) / 4), step = 1 << p, mask = step - 1;
    float col[32] = {0};
    for (int c = 0; c < wide; c++) {
        float acc[4] = {0, 0, 0, 0};
        int i = 0;
        while (i + step <= rows) {
            for (int r = i; r < i + step; r++) acc[0] += v[r * wide + c];
            i += step;
            for (int j = 1; j < 4; j++) {
                acc[j] += acc[j - 1];
                acc[j - 1] = 0;
                if ((i & (mask << (j * p))) != 0) break;
            }
        }
        for (int r = i; r < rows; r++) acc[0] += v[r * wide + c];
        col[c] = acc[0];
        col[c] += acc[1];
        col[c] += acc[2];
        col[c] += acc[3];
    }
    float s = 0;
    for (int i = nv * lanes; i < n; i++) s += v[i];
    for (int l = 0; l < lanes; l++) {
        float a0 = col[l];
        for (int q = rows * 4; q < nv; q++) a0 += v[q * lanes + l];
        for (int k = 1; k < 4; k++) a0 += col[k * lanes + l];
        s += a0;
    }
    return s;
}

// ---- gate ----

// gate_ref is kernels.Gate.
static void gate_ref(std::vector<float>& wt, std::vector<long long>& ix, std::vector<float>& lg, const float* x, int n, int dim,
                     const float* w, const float* bias, int experts, int topk, float rs, int score) {
    std::vector<float> s(experts), b(experts);
    for (int t = 0; t < n; t++) {
        for (int e = 0; e < experts; e++) {
            double acc = 0;
            for (int d = 0; d < dim; d++) acc += (double)w[(size_t)e * dim + d] * (double)x[(size_t)t * dim + d];
            s[e] = lg[(size_t)t * experts + e] = (float)acc;
        }
        if (score == 0)
            for (auto& v : s) {
                float sp = v;
                if (v <= 20) sp = (float)log1p(exp((double)v));
                v = (float)sqrt((double)sp);
            }
        else if (score == 1)
            for (auto& v : s) v = (float)(1 / (1 + exp(-(double)v)));
        else {
            float m = -INFINITY;
            for (float v : s) m = gomax(m, v);
            float sum = 0;
            for (auto& v : s) {
                v = (float)exp((double)(v - m));
                sum += v;
            }
            const float inv = 1 / sum;
            for (auto& v : s) v *= inv;
        }
        for (int e = 0; e < experts; e++) b[e] = bias ? s[e] + bias[e] : s[e];
        std::vector<int> ord(experts);
        std::iota(ord.begin(), ord.end(), 0);
        std::stable_sort(ord.begin(), ord.end(), [&](int p, int q) { return b[p] > b[q]; });
        float sum = 0;
        for (int r = 0; r < topk; r++) {
            ix[(size_t)t * topk + r] = ord[r];
            wt[(size_t)t * topk + r] = s[ord[r]];
            sum += s[ord[r]];
        }
        if (topk > 1)
            for (int r = 0; r < topk; r++) wt[(size_t)t * topk + r] /= sum + 1e-20f;
        for (int r = 0; r < topk; r++) wt[(size_t)t * topk + r] *= rs;
    }
}

static void test_gate(int n, int dim, int experts, int topk, int score, bool withBias, int xoff, int ties) {
    std::vector<float> xb(n * dim + 8), w((size_t)experts * dim), bias(experts);
    float* x = xb.data() + xoff; // xoff 1: rows not 16-byte aligned (the scalar path)
    for (int i = 0; i < n * dim; i++) x[i] = bf16v(2);
    for (auto& v : w) v = unif(-0.05f, 0.05f);
    for (int e = 0; e < ties; e++) // experts 2e+1 copy 2e: equal logits, ties to the lower id
        std::copy(w.begin() + (size_t)2 * e * dim, w.begin() + (size_t)(2 * e + 1) * dim, w.begin() + (size_t)(2 * e + 1) * dim);
    for (int e = 0; e < experts; e++) bias[e] = (e % 3 == 0) ? 0.0f : unif(-0.3f, 0.3f);
    if (ties) bias[1] = bias[0];
    const float* bp = withBias ? bias.data() : nullptr;
    std::vector<float> wantW(n * topk), gotW(n * topk, -7), wantL(n * experts), gotL(n * experts, -7);
    std::vector<long long> wantI(n * topk), gotI(n * topk, -7);
    gate_ref(wantW, wantI, wantL, x, n, dim, w.data(), bp, experts, topk, 1.5f, score);
    launch({(unsigned)n, (unsigned)((experts + GATE_EPB - 1) / GATE_EPB), 1}, {GATE_THREADS, 1, 1},
           [&] { gate_logits(gotL.data(), x, w.data(), n, dim, experts); });
    launch({(unsigned)n, 1, 1}, {GATE_SELECT_THREADS, 1, 1},
           [&] { gate_select(gotW.data(), gotI.data(), gotL.data(), bp, experts, topk, 1.5f, score); });
    int badL = 0, badW = 0, badI = 0;
    for (size_t i = 0; i < wantL.size(); i++) badL += !same(gotL[i], wantL[i]);
    for (size_t i = 0; i < wantW.size(); i++) {
        badI += gotI[i] != wantI[i];
        badW += !same(gotW[i], wantW[i]);
    }
    printf("gate n%d dim%d experts%d top%d score%d bias%d xoff%d ties%d: logits %d/%zu differ, ids %d, weights %d differ\n", n, dim,
           experts, topk, score, withBias, xoff, ties, badL, wantL.size(), badI, badW);
    if (badL || badW || badI) fails++;
}

// gate_tail_ref is gate_tail's doc, step by step (the unfused kernels).
static void test_gate_tail(int rows, int e, int k, int ties) {
    std::vector<float> lg(rows * e), bias(e), wantW(rows * k), gotW(rows * k, -7);
    std::vector<long long> wantI(rows * k), gotI(rows * k, -7);
    for (auto& v : lg) v = unif(-4, 4);
    for (int r = 0; r < rows; r++) {
        lg[r * e + 5 % e] = 25; // past softplus's threshold
        for (int q = 0; q < ties; q++) lg[r * e + 2 * q + 1] = lg[r * e + 2 * q];
    }
    for (int j = 0; j < e; j++) bias[j] = j < 2 * ties ? 0.0f : unif(-0.2f, 0.2f);
    for (int r = 0; r < rows; r++) {
        std::vector<float> s(e), b(e);
        for (int j = 0; j < e; j++) {
            const float v = lg[r * e + j];
            const float sp = v > 20 ? v : (float)log1p(exp((double)v));
            s[j] = std::sqrt(sp);
            b[j] = s[j] + bias[j];
        }
        std::vector<int> ord(e);
        std::iota(ord.begin(), ord.end(), 0);
        std::stable_sort(ord.begin(), ord.end(), [&](int p, int q) { return b[p] > b[q]; });
        std::vector<float> g(k);
        for (int q = 0; q < k; q++) g[q] = s[ord[q]];
        const float den = torch_sum_ref(g.data(), k) + 1e-20f;
        for (int q = 0; q < k; q++) {
            wantI[r * k + q] = ord[q];
            wantW[r * k + q] = (g[q] / den) * 1.5f;
        }
    }
    launch({(unsigned)rows, 1, 1}, {512, 1, 1}, [&] { gate_tail(gotI.data(), gotW.data(), lg.data(), bias.data(), e, k, 1e-20f, 1.5f); });
    int bad = 0;
    for (size_t i = 0; i < wantW.size(); i++) bad += gotI[i] != wantI[i] || !same(gotW[i], wantW[i]);
    printf("gate_tail rows%d e%d k%d ties%d: %d/%zu differ\n", rows, e, k, ties, bad, wantW.size());
    if (bad) fails++;
}

// ---- torch_sum_block ----

static void test_torch_sum(int n) {
    std::vector<float> v(n);
    for (auto& a : v) a = bf16v(3) * bf16v(3);
    const float want = torch_sum_ref(v.data(), n);
    float gotB = -7, gotW = -7;
    launch({1, 1, 1}, {HCF_THREADS, 1, 1}, [&] {
        __shared__ float bs[HCF_WIN * 32];
        __shared__ float cols[32];
        __shared__ float res;
        const float s = torch_sum_block([&](int j) { return v[j]; }, n, bs, cols, &res);
        if (threadIdx.x == 7) gotB = s;
    });
    launch({1, 1, 1}, {32, 1, 1}, [&] {
        const float s = torch_sum_warp([&](int j) { return v[j]; }, n);
        if (threadIdx.x == 3) gotW = s;
    });
    const bool ok = same(gotB, want) && same(gotW, want);
    if (!ok || n > 30000) printf("torch_sum n%d: block %.9g warp %.9g ref %.9g%s\n", n, gotB, gotW, want, ok ? "" : "  FAIL");
    if (!ok) fails++;
}

// ---- hc mixes + Sinkhorn ----

static void test_hc(int tokens, int hc, int dim, int hoff, int iters) {
    const int mix = (2 + hc) * hc, n = hc * dim;
    const float eps = 1e-6f, hcEps = 1e-6f;
    std::vector<float> hb(tokens * n + 8), fn((size_t)mix * n), scale(3), base(mix);
    float* h = hb.data() + hoff;
    for (int i = 0; i < tokens * n; i++) h[i] = bf16v(1.5f);
    for (auto& v : fn) v = unif(-0.02f, 0.02f);
    for (auto& v : scale) v = unif(0.5f, 2);
    for (auto& v : base) v = unif(-1, 1);
    // references: cpu-ref (ascending fp32 dots) and the float64 dots, ρ by torch_sum_ref
    std::vector<float> ref32(tokens * mix), ref64(tokens * mix), got(tokens * mix, -7);
    for (int t = 0; t < tokens; t++) {
        std::vector<float> sq(n);
        for (int c = 0; c < n; c++) sq[c] = h[t * n + c] * h[t * n + c];
        const float rho = rsqrtf32(torch_sum_ref(sq.data(), n) / (float)n + eps);
        for (int i = 0; i < mix; i++) {
            float s = 0;
            double d = 0;
            for (int c = 0; c < n; c++) {
                s += h[t * n + c] * fn[(size_t)i * n + c];
                d += (double)h[t * n + c] * (double)fn[(size_t)i * n + c];
            }
            ref32[t * mix + i] = s * rho;
            ref64[t * mix + i] = (float)d * rho;
        }
    }
    // hc_mixes_fast into one [tokens, mix] array (HCMixes' launch)
    launch({(unsigned)tokens, (unsigned)mix, 1}, {HCF_THREADS, 1, 1},
           [&] { hc_mixes_fast(got.data(), mix, got.data() + hc, mix, got.data() + 2 * hc, mix, h, n, fn.data(), hc, eps); });
    float scl = 0, worst = 0;
    int bad64 = 0;
    for (int i = 0; i < tokens * mix; i++) {
        scl = std::max(scl, std::fabs(ref32[i]));
        worst = std::max(worst, std::fabs(got[i] - ref32[i]));
        bad64 += !same(got[i], ref64[i]);
    }
    const bool ok32 = worst <= 1e-5f * scl;
    printf("hc_mixes_fast tokens%d hc%d dim%d hoff%d: vs float64 ref %d/%d differ; vs cpu-ref max |d| %.3g = %.3g of scale%s\n", tokens,
           hc, dim, hoff, bad64, tokens * mix, worst, worst / scl, ok32 ? "" : "  FAIL (> 1e-5)");
    if (bad64 || !ok32) fails++;
    // HCMixSplit's launches: the mixes into the pre/post/comb slots, then
    // Sinkhorn in place; against hc_split_sinkhorn on hc_mixes_fast's mixes
    std::vector<float> pre(tokens * hc, -7), post(tokens * hc, -7), comb(tokens * hc * hc, -7);
    std::vector<float> wPre(tokens * hc), wPost(tokens * hc), wComb(tokens * hc * hc);
    launch({(unsigned)tokens, (unsigned)mix, 1}, {HCF_THREADS, 1, 1},
           [&] { hc_mixes_fast(pre.data(), hc, post.data(), hc, comb.data(), hc * hc, h, n, fn.data(), hc, eps); });
    launch({1, 1, 1}, {64, 1, 1},
           [&] { hc_sinkhorn_slots(pre.data(), post.data(), comb.data(), tokens, hc, scale.data(), base.data(), iters, hcEps); });
    launch({1, 1, 1}, {64, 1, 1}, [&] {
        hc_split_sinkhorn(wPre.data(), wPost.data(), wComb.data(), got.data(), tokens, hc, scale.data(), base.data(), iters, hcEps);
    });
    int bad = 0;
    for (int i = 0; i < tokens * hc; i++) bad += !same(pre[i], wPre[i]) + !same(post[i], wPost[i]);
    for (int i = 0; i < tokens * hc * hc; i++) bad += !same(comb[i], wComb[i]);
    // and how far the fused result is from cpu-ref's (its Sinkhorn over ref32)
    std::vector<float> rPre(tokens * hc), rPost(tokens * hc), rComb(tokens * hc * hc);
    launch({1, 1, 1}, {64, 1, 1}, [&] {
        hc_split_sinkhorn(rPre.data(), rPost.data(), rComb.data(), ref32.data(), tokens, hc, scale.data(), base.data(), iters, hcEps);
    });
    float dr = 0;
    for (int i = 0; i < tokens * hc; i++) dr = std::max({dr, std::fabs(pre[i] - rPre[i]), std::fabs(post[i] - rPost[i])});
    for (int i = 0; i < tokens * hc * hc; i++) dr = std::max(dr, std::fabs(comb[i] - rComb[i]));
    printf("hc_mixes_fast + hc_sinkhorn_slots tokens%d hc%d iters%d: %d differ from hc_split_sinkhorn; max |d| from cpu-ref %.3g\n", tokens,
           hc, iters, bad, dr);
    if (bad) fails++;
}

// ---- hc_split_sinkhorn4, hc_sinkhorn_slots4: a warp per token ----

// test_sinkhorn4: the warp kernels against hc_split_sinkhorn (a thread per
// token), bit for bit, on random mixes (and a token of large ones).
static void test_sinkhorn4(int tokens, int iters) {
    const int hc = 4, mix = 24;
    std::vector<float> m(tokens * mix), scale = {unif(0.1f, 2), unif(0.1f, 2), unif(0.1f, 2)}, base(mix);
    for (auto& v : m) v = unif(-3, 3);
    for (auto& v : base) v = bf16v(1);
    for (int k = 0; k < mix; k++) m[k] *= 40; // token 0: saturating sigmoids, a peaked softmax
    const float eps = 1e-6f;
    std::vector<float> wPre(tokens * hc), wPost(tokens * hc), wComb(tokens * 16);
    launch({1, 1, 1}, {64, 1, 1}, [&] {
        hc_split_sinkhorn(wPre.data(), wPost.data(), wComb.data(), m.data(), tokens, hc, scale.data(), base.data(), iters, eps);
    });
    std::vector<float> pre(tokens * hc, -7), post(tokens * hc, -7), comb(tokens * 16, -7);
    launch({(unsigned)((32 * tokens + 63) / 64), 1, 1}, {64, 1, 1}, [&] {
        hc_split_sinkhorn4(pre.data(), post.data(), comb.data(), m.data(), tokens, scale.data(), base.data(), iters, eps);
    });
    // slots: the mixes in place
    std::vector<float> sPre(tokens * hc), sPost(tokens * hc), sComb(tokens * 16);
    for (int t = 0; t < tokens; t++) {
        for (int k = 0; k < 4; k++) sPre[t * 4 + k] = m[t * mix + k], sPost[t * 4 + k] = m[t * mix + 4 + k];
        for (int k = 0; k < 16; k++) sComb[t * 16 + k] = m[t * mix + 8 + k];
    }
    launch({(unsigned)((32 * tokens + 255) / 256), 1, 1}, {256, 1, 1}, [&] {
        hc_sinkhorn_slots4(sPre.data(), sPost.data(), sComb.data(), tokens, scale.data(), base.data(), iters, eps);
    });
    int bad = 0, badS = 0;
    for (int i = 0; i < tokens * hc; i++) {
        bad += !same(pre[i], wPre[i]) + !same(post[i], wPost[i]);
        badS += !same(sPre[i], wPre[i]) + !same(sPost[i], wPost[i]);
    }
    for (int i = 0; i < tokens * 16; i++) bad += !same(comb[i], wComb[i]), badS += !same(sComb[i], wComb[i]);
    printf("hc_split_sinkhorn4 / hc_sinkhorn_slots4 tokens%d iters%d: %d / %d of %d differ from hc_split_sinkhorn%s\n", tokens, iters,
           bad, badS, tokens * 24, bad + badS ? "  FAIL" : "");
    if (bad + badS) fails++;
}

// ---- pre_norm_quant: a block per row ----

// test_pre_norm: pre_norm_quant (blockDim as PreNormQuant picks it) against
// hc_pre, rms_norm (a warp per row) and act_quant / fp4_act_quant one by
// one, bit for bit; hc 0 and qkind 0 is RMSNorm's few-row form.
static void test_pre_norm(int rows, int hc, int dim, int qkind, int block, bool constPre) {
    const float eps = 1e-6f;
    std::vector<float> w(dim), x(rows * std::max(hc, 1) * dim), pre(rows * std::max(hc, 1));
    for (auto& v : w) v = bf16v(1);
    for (auto& v : x) v = bf16v(2);
    for (auto& v : pre) v = unif(0, 1);
    if (constPre)
        for (int i = 0; i < (int)pre.size(); i++) pre[i] = pre[i % hc];
    const int preStride = constPre ? 0 : hc;
    std::vector<float> ux(rows * dim), uNorm(rows * dim), uQ(rows * dim);
    if (hc > 0)
        launch({(unsigned)((rows * dim + 255) / 256), 1, 1}, {256, 1, 1}, [&] {
            // hc_pre reads pre per token: a constant mix is the same values in every row here
            hc_pre(ux.data(), x.data(), pre.data(), rows, hc, dim);
        });
    else
        ux = x;
    launch({(unsigned)((rows + 3) / 4), 1, 1}, {128, 1, 1}, [&] { rms_norm(uNorm.data(), ux.data(), w.data(), rows, dim, eps); });
    const long long n = (long long)rows * dim;
    if (qkind == 1)
        launch({(unsigned)((n + 255) / 256), 1, 1}, {256, 1, 1}, [&] { act_quant(uQ.data(), uNorm.data(), nullptr, nullptr, n, block); });
    else if (qkind >= 2)
        launch({(unsigned)((n + 255) / 256), 1, 1}, {256, 1, 1},
               [&] { fp4_act_quant(uQ.data(), uNorm.data(), nullptr, nullptr, n, block, qkind == 3); });
    const int T = std::min(1024, std::max(128, ((dim + 3) / 4 + 31) / 32 * 32)); // preNormThreads
    const int steps = (dim + T - 1) / T;
    int bad = 0;
    for (int split : {1, steps}) { // PreNormQuant's split of a row over blocks
        std::vector<float> norm(rows * dim, -7), q(rows * dim, -7);
        launch({(unsigned)rows, (unsigned)split, 1}, {(unsigned)T, 1, 1}, [&] {
            pre_norm_quant(norm.data(), qkind ? q.data() : nullptr, x.data(), pre.data(), preStride, hc, w.data(), dim, eps, qkind, block);
        });
        for (int i = 0; i < rows * dim; i++) bad += !same(norm[i], uNorm[i]) + (qkind ? !same(q[i], uQ[i]) : 0);
    }
    printf("pre_norm_quant rows%d hc%d dim%d q%d/%d const%d (%d threads, split 1 and %d): %d differ from hc_pre + rms_norm + quant%s\n", rows,
           hc, dim, qkind, block, constPre, T, steps, bad, bad ? "  FAIL" : "");
    if (bad) fails++;
}

// ---- rope_rows: the rope op in one launch ----

// test_rope_rows: rope_rows against the copy of x and rotary on the
// positions broadcast to every row (the launches it replaces), bit for bit,
// a position outside the table included.
static void test_rope_rows(int B, int T, int perT, int width, int ropeDim, int inverse) {
    const int rows = B * T * perT, maxPos = 50, half = ropeDim / 2;
    std::vector<float> x(rows * width), cs(maxPos * half * 2);
    for (auto& v : x) v = bf16v(3);
    for (auto& v : cs) v = unif(-1, 1);
    std::vector<long long> pos(T), rowPos(rows);
    for (int t = 0; t < T; t++) pos[t] = (t * 7 + 3) % maxPos;
    if (T > 1) pos[T - 1] = maxPos + 2; // outside: NaN pairs
    for (int r = 0; r < rows; r++) rowPos[r] = pos[(r / perT) % T];
    std::vector<float> want = x, got(rows * width, -7);
    launch({(unsigned)((rows * half + 255) / 256), 1, 1}, {256, 1, 1},
           [&] { rotary(want.data(), rows, width, ropeDim, cs.data(), maxPos, rowPos.data(), inverse); });
    launch({(unsigned)((rows * width / 2 + 255) / 256), 1, 1}, {256, 1, 1},
           [&] { rope_rows(got.data(), x.data(), rows, width, ropeDim, cs.data(), maxPos, pos.data(), perT, T, inverse); });
    std::vector<float> inplace = x;
    launch({(unsigned)((rows * width / 2 + 255) / 256), 1, 1}, {256, 1, 1},
           [&] { rope_rows(inplace.data(), inplace.data(), rows, width, ropeDim, cs.data(), maxPos, pos.data(), perT, T, inverse); });
    int bad = 0;
    for (int i = 0; i < rows * width; i++) bad += !same(got[i], want[i]) + !same(inplace[i], want[i]);
    printf("rope_rows B%d T%d perT%d width%d rope%d inverse%d: %d differ from copy + rotary%s\n", B, T, perT, width, ropeDim, inverse, bad,
           bad ? "  FAIL" : "");
    if (bad) fails++;
}

int main(int argc, char** argv) {
    // quick (backends/cuda TestKernelEmulations): the released shapes and an odd one of each
    const bool quick = argc > 1 && std::string(argv[1]) == "quick";
    for (int n : {1, 5, 7, 8, 9, 31, 32, 33, 100, 511, 512, 513, 1000, 4096, 4099, 20480, 20487, 40000, 65536 + 40})
        test_torch_sum(n);
    test_gate(2, 5120, 384, 6, 0, true, 0, 0);
    if (!quick) test_gate(1, 5120, 384, 6, 0, false, 0, 3);
    test_gate(3, 1000, 77, 5, 1, true, 1, 2);
    if (!quick) {
        test_gate(2, 77, 9, 4, 2, false, 0, 0);
        test_gate(2, 130, 600, 1, 2, true, 1, 0);
        test_gate(1, 4096, 256, 8, 1, true, 0, 4);
    }
    test_gate_tail(2, 384, 6, 0);
    test_gate_tail(3, 384, 6, 3);
    test_gate_tail(2, 600, 32, 2);
    test_gate_tail(1, 9, 9, 0);
    test_hc(1, 4, 5120, 1, 20);
    test_hc(3, 3, 1001, 0, 7);
    if (!quick) {
        test_hc(2, 4, 5120, 0, 20);
        test_hc(1, 2, 20, 1, 3);
        test_hc(2, 8, 640, 0, 20);
    }
    test_rope_rows(1, 1, 64, 512, 64, 0);
    test_rope_rows(2, 3, 4, 192, 64, 1);
    test_rope_rows(1, 5, 1, 64, 64, 0);
    test_sinkhorn4(3, 20);
    test_sinkhorn4(1, 1);
    test_pre_norm(1, 4, 5120, 1, 32, false);
    test_pre_norm(2, 4, 5120, 0, 32, true);
    test_pre_norm(2, 0, 1280, 1, 32, false);
    test_pre_norm(1, 0, 512, 2, 32, false);
    test_pre_norm(1, 0, 8192, 3, 16, false);
    if (!quick) {
        test_sinkhorn4(40, 20);
        test_pre_norm(3, 3, 640, 1, 32, false);
        test_pre_norm(2, 0, 100, 1, 4, false);
        test_pre_norm(1, 0, 4100, 0, 32, false);
    }
    printf("fails=%d\n", fails);
    return fails != 0;
}
