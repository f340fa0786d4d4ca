package cuda

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// launchesOf estimates the launches node n's unfused launcher queues (no
// probe callback): views and bindings none, hc_split_sinkhorn its kernel
// and three interleaving copies, hc_pre with one mix for all tokens a copy
// more, mask_fill a copy more, the rest one.
func launchesOf(n *ir.Node) int {
	switch {
	case quiet[n.Op]:
		return 0
	case n.Op == "hc_split_sinkhorn":
		return 4
	case n.Op == "mask_fill":
		return 2
	case n.Op == "hc_pre" && len(n.Args[1].Type.Shape) == 1:
		return 2
	}
	return 1
}

// fusedLaunches is the estimate with the runs of planFusions: a run is
// one launch.
func fusedLaunches(seg *backends.Segment) (before, after int, kinds map[string]int) {
	inRun := map[int]bool{}
	kinds = map[string]int{}
	runs := planFusions(seg)
	for _, f := range runs {
		kinds[f.kind]++
		for _, i := range f.nodes {
			inRun[i] = true
		}
		after++
	}
	for _, i := range planCastViews(seg, runs) {
		kinds["cast_view"]++
		inRun[i] = true
	}
	for i, n := range seg.Nodes {
		before += launchesOf(n)
		if !inRun[i] {
			after += launchesOf(n)
		}
	}
	return before, after, kinds
}

// TestFusionPlan (no GPU: planning is data): on the tiny, unseen6 and the
// released-width wide4 graphs every hyper-connection split and every
// hc_pre is fused, so is every MoE layer's shared expert, no run breaks the planner's rules, and the estimated
// launches per call fall. The counts are logged.
func TestFusionPlan(t *testing.T) {
	for _, cfg := range []string{"tiny/config.json", "unseen6/config.json", "../backends/cuda/testdata/wide4.config.json", "../bench/configs/slice.json"} {
		_, m := dstest.ConfigModule(t, filepath.Join(dstest.RepoRoot(), "testdata", cfg))
		for _, name := range []string{"prefill", "decode"} {
			g := m.Graph(name)
			pl, err := backends.Schedule(g, "cuda")
			if err != nil {
				t.Fatalf("%s %s: %v", cfg, name, err)
			}
			var before, after int
			kinds := map[string]int{}
			ops := map[string]int{}
			for _, seg := range pl.Segments {
				b, a, k := fusedLaunches(seg)
				before, after = before+b, after+a
				for kind, c := range k {
					kinds[kind] += c
				}
				for _, n := range seg.Nodes {
					ops[n.Op]++
				}
				checkRuns(t, seg)
			}
			t.Logf("%s %s: launches per call (estimate) %d unfused, %d fused; runs %v", cfg, name, before, after, kinds)
			if kinds["hc_mix_split"] != ops["hc_split_sinkhorn"] {
				t.Errorf("%s %s: %d of %d hc splits fused", cfg, name, kinds["hc_mix_split"], ops["hc_split_sinkhorn"])
			}
			if kinds["pre_norm_quant"] < ops["hc_pre"] {
				t.Errorf("%s %s: %d pre_norm_quant runs for %d hc_pre", cfg, name, kinds["pre_norm_quant"], ops["hc_pre"])
			}
			if kinds["shared_swiglu"] != kinds["routed_swiglu"] || kinds["shared_swiglu"] == 0 { // a shared expert beside every routed pair
				t.Errorf("%s %s: %d shared expert runs for %d routed", cfg, name, kinds["shared_swiglu"], kinds["routed_swiglu"])
			}
		}
	}
}

// checkRuns re-checks each run: inner values read only inside it, only
// quiet nodes between its nodes, one run per node.
func checkRuns(t *testing.T, seg *backends.Segment) {
	t.Helper()
	g := newGraphInfo(seg)
	seen := map[int]bool{}
	for _, f := range planFusions(seg) {
		in := map[int]bool{}
		for _, i := range f.nodes {
			if seen[i] {
				t.Errorf("%s: %s in two runs", f.kind, what(seg.Nodes[i]))
			}
			seen[i], in[i] = true, true
		}
		for _, i := range f.inner {
			for _, r := range g.readers[seg.Nodes[i]] {
				if !in[r] {
					t.Errorf("%s: inner %s read by %s", f.kind, what(seg.Nodes[i]), what(seg.Nodes[r]))
				}
			}
		}
		for k := f.nodes[0]; k < f.last; k++ {
			if !in[k] && !quiet[seg.Nodes[k].Op] {
				t.Errorf("%s: %s between the run's nodes", f.kind, what(seg.Nodes[k]))
			}
		}
	}
}

// fusedGPU returns the GPU environment with the fused kernels bound, or
// skips (fatal with DS4_CUDA_FATBIN: that image should have them).
func fusedGPU(t *testing.T) *gpuEnv {
	e := gpu(t)
	if !e.k.bindFused() {
		if os.Getenv("DS4_CUDA_FATBIN") != "" {
			t.Fatal("the image lacks the fused kernels")
		}
		t.Skip("the embedded image predates fused.cuh (rebuild the fatbin)")
	}
	return e
}

// TestHCMixSplitGPU: HCMixSplit against HCMixes then HCSplitSinkhorn (and
// the reference) at the released widths, bit for bit. Exact: the fused
// hc_mix_split[_wide] against cpu-ref's kernels.HCMixes + HCSplitSinkhorn;
// else the fast launches against kernels.HCSplitSinkhorn of HCMixes'
// (hc_mixes_fast's) mixes, which must be within 1 fp32 ulp of the float64
// dots (hcMixes64) and within the golden reorder32 tolerance of cpu-ref's.
func TestHCMixSplitGPU(t *testing.T) {
	e := fusedGPU(t)
	r := rng(t)
	defer func(x bool) { e.k.Exact = x }(e.k.Exact)
	for _, c := range []struct{ tokens, hc, dim int }{{1, 4, 5120}, {3, 4, 5120}, {5, 2, 100}, {2, 8, 640}, {2, 3, 1000}, {1, 4, 1282}, {2, 1, 1001}} {
		const iters, eps, hcEps = 20, 1e-20, 1e-6
		tokens, hc, dim := c.tokens, c.hc, c.dim
		mix := (2 + hc) * hc
		h := bf16s(r, tokens*hc*dim, 1)
		fn := make([]float32, mix*hc*dim)
		for i := range fn {
			fn[i] = float32(r.NormFloat64() * 0.01)
		}
		scale := []float32{0.5, 0.7, 1.3}
		base := make([]float32, mix)
		for i := range base {
			base[i] = float32(r.NormFloat64())
		}
		refMix := make([]float32, tokens*mix)
		kernels.HCMixes(refMix, h, tokens, hc, dim, fn, eps)
		dh, dfn, ds, db := up(t, e, h), up(t, e, fn), up(t, e, scale), up(t, e, base)
		for _, ex := range []bool{true, false} {
			e.k.Exact = ex
			mixes := alloc(t, e, 4*tokens*mix)
			uPre, uPost, uComb := alloc(t, e, 4*tokens*hc), alloc(t, e, 4*tokens*hc), alloc(t, e, 4*tokens*hc*hc)
			if err := e.k.HCMixes(e.s, "hc_mixes", mixes, dh, tokens, hc, dim, dfn, eps); err != nil {
				t.Fatal(err)
			}
			wantMix, wides := refMix, []bool{true, false}
			if !ex {
				wantMix, wides = down[float32](t, e, mixes, tokens*mix), []bool{true}
				name := fmt.Sprintf("hc_mixes_fast %d×%d×%d", tokens, hc, dim)
				d := compare(wantMix, hcMixes64(h, tokens, hc, dim, fn, eps), 0)
				t.Logf("%s vs float64 dots: %v", name, d)
				if d.over1 > 0 {
					t.Errorf("%s: over 1 fp32 ulp from the float64 dots: %v", name, d)
				}
				reorder32(t, name+" vs reference", wantMix, refMix)
			}
			wantPre, wantPost, wantComb := make([]float32, tokens*hc), make([]float32, tokens*hc), make([]float32, tokens*hc*hc)
			kernels.HCSplitSinkhorn(wantPre, wantPost, wantComb, wantMix, tokens, hc, scale, base, iters, hcEps)
			if err := e.k.HCSplitSinkhorn(e.s, "sinkhorn", uPre, uPost, uComb, mixes, tokens, hc, ds, db, iters, hcEps); err != nil {
				t.Fatal(err)
			}
			for _, wide := range wides {
				hcWide = wide
				pre, post, comb := alloc(t, e, 4*tokens*hc), alloc(t, e, 4*tokens*hc), alloc(t, e, 4*tokens*hc*hc)
				err := e.k.HCMixSplit(e.s, "hc_mix_split", pre, post, comb, dh, tokens, hc, dim, dfn, eps, ds, db, iters, hcEps)
				hcWide = true
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("hc_mix_split exact %v wide %v %d×%d×%d", ex, wide, tokens, hc, dim)
				for _, p := range []struct {
					part      string
					got, unf  driver.Ptr
					n         int
					reference []float32
				}{{"pre", pre, uPre, tokens * hc, wantPre}, {"post", post, uPost, tokens * hc, wantPost}, {"comb", comb, uComb, tokens * hc * hc, wantComb}} {
					got := down[float32](t, e, p.got, p.n)
					exact(t, name+" "+p.part+" vs unfused", got, down[float32](t, e, p.unf, p.n))
					exact(t, name+" "+p.part+" vs reference", got, p.reference)
				}
			}
		}
	}
}

// hcMixes64 is kernels.HCMixes with each dot Σ_c x_c·fn[i,c] summed in
// float64 (exact products) and rounded once to fp32, ρ as the reference's:
// hc_mixes_fast's values (its float64 sums run in another order, which
// can move an fp32 rounding by an ulp only near a rounding boundary).
func hcMixes64(h []float32, tokens, hc, dim int, fn []float32, eps float32) []float32 {
	mix, n := (2+hc)*hc, hc*dim
	out := make([]float32, tokens*mix)
	ms := make([]float32, 1)
	for t := range tokens {
		x := h[t*n : (t+1)*n]
		kernels.MeanSquare(ms, x, 1, n)
		rho := 1 / float32(math.Sqrt(float64(ms[0]+eps)))
		for i := range mix {
			var d float64
			for c, v := range x {
				d += float64(v) * float64(fn[i*n+c])
			}
			out[t*mix+i] = float32(d) * rho
		}
	}
	return out
}

// reorder32 asserts the golden tolerance of reordered fp32 sums (backendtest
// reorder32: hc_mix): every |got - want| within 1e-5 of max |want|.
func reorder32(t *testing.T, name string, got, want []float32) {
	t.Helper()
	var scale, worst float64
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
		worst = max(worst, math.Abs(float64(got[i])-float64(want[i])))
	}
	t.Logf("%s: max |Δ| %.3g = %.3g of max |want| %.3g", name, worst, worst/scale, scale)
	if !(worst <= 1e-5*scale) {
		t.Errorf("%s: max |Δ| %.3g over 1e-5 of max |want| %.3g", name, worst, scale)
	}
}

// TestPreNormQuantGPU: the fused pre_norm_quant against hc_pre, rms_norm
// and act_quant / fp4_act_quant launched one by one (and the reference),
// bit for bit: a mix per token and one for all, no hc_pre, the three
// quantisers, rows of the released widths (5120, q-LoRA 1280, head 512),
// each with one block a row and with a row spread over blocks.
func TestPreNormQuantGPU(t *testing.T) {
	e := fusedGPU(t)
	defer func(v bool) { pnqSplit = v }(pnqSplit)
	r := rng(t)
	for _, c := range []struct {
		rows, hc, dim, qkind, block int
		constPre                    bool
	}{
		{1, 4, 5120, 1, 32, false}, {3, 4, 5120, 1, 32, false}, {2, 4, 5120, 0, 32, true}, {3, 4, 5120, 0, 32, false},
		{3, 0, 1280, 1, 32, false}, {2, 0, 512, 2, 32, false}, {2, 0, 5120, 3, 16, false}, {4, 0, 100, 1, 4, false},
		{2, 0, 8192, 1, 32, false}, {1, 0, 4100, 0, 32, false}, {2, 3, 640, 1, 32, false},
	} {
		const eps = 1e-20
		rows, hc, dim := c.rows, c.hc, c.dim
		name := fmt.Sprintf("pre_norm_quant rows %d hc %d dim %d q %d/%d const %v", rows, hc, dim, c.qkind, c.block, c.constPre)
		w := bf16s(r, dim, 1)
		var x []float32 // the rmsnorm's input
		var dh, dpre driver.Ptr
		preStride := hc
		if hc > 0 {
			h := bf16s(r, rows*hc*dim, 1)
			pre := make([]float32, rows*hc)
			for i := range pre {
				pre[i] = float32(r.Float64())
			}
			if c.constPre {
				for i := range pre {
					pre[i] = pre[i%hc]
				}
				preStride = 0
			}
			x = make([]float32, rows*dim)
			kernels.HCPre(x, h, pre, rows, hc, dim)
			dh, dpre = up(t, e, h), up(t, e, pre)
		} else {
			x = bf16s(r, rows*dim, 2)
			dh = up(t, e, x)
		}
		wantNorm := make([]float32, rows*dim)
		kernels.RMSNorm(wantNorm, x, rows, dim, w, eps)
		wantQ := append([]float32(nil), wantNorm...)
		switch c.qkind {
		case 1:
			numfmt.ActQuant(wantQ, c.block, nil, nil)
		case 2:
			numfmt.FP4ActQuantE8M0(wantQ, c.block, nil, nil)
		case 3:
			numfmt.FP4ActQuantE4M3(wantQ, c.block, nil, nil)
		}
		dw := up(t, e, w)
		// unfused
		ux := dh
		if hc > 0 {
			ux = alloc(t, e, 4*rows*dim)
			if err := e.k.HCPre(e.s, "hc_pre", ux, dh, dpre, rows, hc, dim); err != nil {
				t.Fatal(err)
			}
		}
		uNorm, uQ := alloc(t, e, 4*rows*dim), alloc(t, e, 4*rows*dim)
		if err := e.k.rmsNormWarps(e.s, "rmsnorm", uNorm, ux, dw, rows, dim, eps); err != nil { // not RMSNorm: few rows take pre_norm_quant
			t.Fatal(err)
		}
		var err error
		switch c.qkind {
		case 1:
			err = e.k.ActQuant(e.s, "act_quant", uQ, uNorm, 0, 0, rows*dim, c.block)
		case 2, 3:
			err = e.k.FP4ActQuant(e.s, "fp4_act_quant", uQ, uNorm, 0, 0, rows*dim, c.block, c.qkind == 3)
		}
		if err != nil {
			t.Fatal(err)
		}
		// fused
		norm, q := alloc(t, e, 4*rows*dim), alloc(t, e, 4*rows*dim)
		qp := q
		if c.qkind == 0 {
			qp = 0
		}
		for _, split := range []bool{false, true} { // one block a row, and a row's steps over blocks
			pnqSplit = split
			if err := e.k.PreNormQuant(e.s, "pre_norm_quant", norm, qp, dh, dpre, preStride, hc, dw, rows, dim, eps, c.qkind, c.block); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s split %v", name, split)
			gotNorm := down[float32](t, e, norm, rows*dim)
			exact(t, name+" norm vs unfused", gotNorm, down[float32](t, e, uNorm, rows*dim))
			golden(t, name+" norm vs reference", gotNorm, wantNorm)
			if c.qkind != 0 {
				gotQ := down[float32](t, e, q, rows*dim)
				exact(t, name+" quant vs unfused", gotQ, down[float32](t, e, uQ, rows*dim))
				golden(t, name+" quant vs reference", gotQ, wantQ)
			}
		}
	}
}

// TestFusedModelMatchesUnfusedGPU: the tiny and unseen6 models with and
// without fusion (cuda-fusions=false): every call's logits (prefill and
// greedy decode steps, B 2) bit-identical, and the greedy tokens equal.
// (TestModelsMatchReferenceOnGPU compares the fused run with cpu-ref.)
func TestFusedModelMatchesUnfusedGPU(t *testing.T) {
	fusedGPU(t)
	for _, dir := range []string{"tiny", "unseen6"} {
		t.Run(dir, func(t *testing.T) {
			m, path := dstest.ReleasedModule(t, dir)
			run := func(fuse string) (*greedyRun, int64) {
				backends.SetOptions(map[string]string{"cuda-fusions": fuse})
				defer backends.SetOptions(nil)
				before := fusedRuns.Load()
				md, err := engine.Open(m, path, "cuda")
				if err != nil {
					t.Fatal(err)
				}
				defer md.Close()
				g := runGreedy(t, md, prompt(int64(md.Vocab), 2, 11), 8)
				return g, fusedRuns.Load() - before
			}
			f, nf := run("true")
			u, nu := run("false")
			t.Logf("fused runs planned: %d with fusion, %d without", nf, nu)
			if nf == 0 || nu != 0 {
				t.Errorf("fused runs planned: %d with fusion (want > 0), %d without (want 0)", nf, nu)
			}
			for call := range u.logits {
				rel, diff := relL2(f.logits[call], u.logits[call])
				if diff != 0 {
					t.Errorf("call %d: %d logits differ between fused and unfused (rel-L2 %.3g)", call, diff, rel)
				}
			}
			if fmt.Sprint(f.fed) != fmt.Sprint(u.fed) {
				t.Errorf("greedy tokens: fused %v, unfused %v", f.fed, u.fed)
			}
		})
	}
}

// BenchmarkHCMixSplitDecode: one token's fused mix + split at hc 4, dim
// 5120 (compare BenchmarkHCMixesDecode, the unfused mix alone).
func BenchmarkHCMixSplitDecode(b *testing.B) {
	e := gpu(b)
	if !e.k.bindFused() {
		b.Skip("the image lacks the fused kernels")
	}
	r := benchRand()
	const hc, dim = 4, 5120
	mix := (2 + hc) * hc
	h, fn := up(b, e, bf16s(r, hc*dim, 1)), up(b, e, bf16s(r, mix*hc*dim, 0.01))
	scale, base := up(b, e, []float32{0.5, 0.7, 1.3}), up(b, e, bf16s(r, mix, 1))
	pre, post, comb := alloc(b, e, 4*hc), alloc(b, e, 4*hc), alloc(b, e, 4*hc*hc)
	for _, v := range []struct {
		name        string
		exact, wide bool
	}{{"fast", false, true}, {"exact,wide=true", true, true}, {"exact,wide=false", true, false}} {
		b.Run(v.name, func(b *testing.B) {
			defer func(x bool) { hcWide, e.k.Exact = true, x }(e.k.Exact)
			hcWide, e.k.Exact = v.wide, v.exact
			timeLaunches(b, e, 4*(mix+1)*hc*dim, func() error {
				return e.k.HCMixSplit(e.s, "bench", pre, post, comb, h, 1, hc, dim, fn, 1e-20, scale, base, 20, 1e-6)
			})
		})
	}
}

// BenchmarkPreNormQuantDecode: one token's hc_pre + rmsnorm + act_quant at
// hc 4, dim 5120.
func BenchmarkPreNormQuantDecode(b *testing.B) {
	e := gpu(b)
	if !e.k.bindFused() {
		b.Skip("the image lacks the fused kernels")
	}
	r := benchRand()
	const hc, dim = 4, 5120
	h, pre, w := up(b, e, bf16s(r, hc*dim, 1)), up(b, e, []float32{0.3, 0.2, 0.4, 0.1}), up(b, e, bf16s(r, dim, 1))
	norm, q := alloc(b, e, 4*dim), alloc(b, e, 4*dim)
	timeLaunches(b, e, 4*(hc+3)*dim, func() error {
		return e.k.PreNormQuant(e.s, "bench", norm, q, h, pre, hc, hc, w, 1, dim, 1e-20, 1, 32)
	})
}

// TestGateTailGPU: the fused gate_tail against the nine unfused launches
// (softplus, sqrt, add bias, topk_idx, gather, sum, add_scalar, div,
// mul_scalar) on the released router (384 experts, top 6; 5 rows), with
// ties among the biased scores: ids equal, weights bit for bit.
func TestGateTailGPU(t *testing.T) {
	e := fusedGPU(t)
	r := rng(t)
	for _, c := range []struct{ rows, experts, k int }{{1, 384, 6}, {5, 384, 6}, {3, 8, 3}, {2, 64, 32}} {
		rows, E, k := c.rows, c.experts, c.k
		lg := make([]float32, rows*E)
		for i := range lg {
			lg[i] = float32(r.NormFloat64() * 4)
			if i%7 == 3 { // ties: equal logits give equal scores
				lg[i] = lg[i-1]
			}
		}
		lg[0] = 25 // the softplus threshold
		bias := make([]float32, E)
		for i := range bias {
			bias[i] = float32(r.IntN(3)) * 0.25
		}
		dl, db := up(t, e, lg), up(t, e, bias)
		n := rows * E
		sp, sq, ad := alloc(t, e, 4*n), alloc(t, e, 4*n), alloc(t, e, 4*n)
		idx, ga, su, as, dv, ms := alloc(t, e, 8*rows*k), alloc(t, e, 4*rows*k), alloc(t, e, 4*rows), alloc(t, e, 4*rows), alloc(t, e, 4*rows*k), alloc(t, e, 4*rows*k)
		steps := []func() error{
			func() error { return e.k.Unary(e.s, "softplus", sp, dl, n, "softplus", 0, 0, false) },
			func() error { return e.k.Unary(e.s, "sqrt", sq, sp, n, "sqrt", 0, 0, false) },
			func() error {
				_, err := e.k.Binary(e.s, "add", ad, sq, []int{rows, E}, db, []int{E}, "add", false)
				return err
			},
			func() error { return e.k.TopkIdx(e.s, "topk", idx, ad, rows, E, k) },
			func() error { return e.k.GatherRows(e.s, "gather", ga, sq, rows, E, idx, k) },
			func() error { return e.k.Sum(e.s, "sum", su, ga, []int{rows, k}, 1, false) },
			func() error { return e.k.Unary(e.s, "add_scalar", as, su, rows, "add_scalar", 1e-20, 0, false) },
			func() error {
				_, err := e.k.Binary(e.s, "div", dv, ga, []int{rows, k}, as, []int{rows, 1}, "div", false)
				return err
			},
			func() error { return e.k.Unary(e.s, "mul_scalar", ms, dv, rows*k, "mul_scalar", 1.5, 0, false) },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				t.Fatal(err)
			}
		}
		fIdx, fW := alloc(t, e, 8*rows*k), alloc(t, e, 4*rows*k)
		if err := e.k.GateTail(e.s, "gate_tail", fIdx, fW, dl, db, rows, E, k, 1e-20, 1.5); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("gate_tail %d×%d top %d", rows, E, k)
		gi, ui := down[int64](t, e, fIdx, rows*k), down[int64](t, e, idx, rows*k)
		if fmt.Sprint(gi) != fmt.Sprint(ui) {
			t.Errorf("%s: ids %v, unfused %v", name, gi, ui)
		}
		exact(t, name+" weights", down[float32](t, e, fW, rows*k), down[float32](t, e, ms, rows*k))
	}
}

// BenchmarkGateTailDecode: one token's gate chain after the logits (384
// experts, top 6).
func BenchmarkGateTailDecode(b *testing.B) {
	e := gpu(b)
	if !e.k.bindFused() {
		b.Skip("the image lacks the fused kernels")
	}
	r := benchRand()
	const experts, k = 384, 6
	lg, bias := up(b, e, bf16s(r, experts, 2)), up(b, e, bf16s(r, experts, 0.1))
	idx, w := alloc(b, e, 8*k), alloc(b, e, 4*k)
	timeLaunches(b, e, 8*experts, func() error { return e.k.GateTail(e.s, "bench", idx, w, lg, bias, 1, experts, k, 1e-20, 1.5) })
}

// TestFusedDecodeStepGPU logs the kernels and launches per decode step of
// tiny and unseen6 (B 1, after a 16-token prompt, no probe callback) and the
// wall time of a step, with fusion and CUDA graphs each on and off; fusion
// must run fewer kernels.
func TestFusedDecodeStepGPU(t *testing.T) {
	fusedGPU(t)
	for _, dir := range []string{"tiny", "unseen6"} {
		m, path := dstest.ReleasedModule(t, dir)
		kernels := map[string]float64{}
		for _, graphs := range []string{"true", "false"} {
			for _, fuse := range []string{"true", "false"} {
				backends.SetOptions(map[string]string{"cuda-fusions": fuse, "cuda-graphs": graphs})
				md, err := engine.Open(m, path, "cuda")
				if err != nil {
					t.Fatal(err)
				}
				const steps = 50
				s, err := md.NewSession(engine.Options{Batch: 1, MaxLen: 16 + 5 + steps + 1})
				if err != nil {
					t.Fatal(err)
				}
				lg, err := s.Prefill(prompt(int64(md.Vocab), 1, 16))
				if err != nil {
					t.Fatal(err)
				}
				next := []int64{argmax(lg.Last()[0])}
				step := func() {
					if lg, err = s.Decode(next); err != nil {
						t.Fatal(err)
					}
					next = []int64{argmax(lg.Last()[0])}
				}
				for range 5 {
					step()
				}
				p := md.Device().(backends.Profiler)
				c0, t0 := p.Counters(), time.Now()
				for range steps {
					step()
				}
				el, c1 := time.Since(t0), p.Counters()
				s.Close()
				md.Close()
				backends.SetOptions(nil)
				k := float64(c1.Kernels-c0.Kernels) / steps
				kernels[fuse] = k
				t.Logf("%s graphs %s fusions %s: %.1f kernels, %.1f launches, %.2f graph replays a step; %.1f µs a step (%.0f tokens/s)",
					dir, graphs, fuse, k, float64(c1.Launches-c0.Launches)/steps, float64(c1.GraphReplays-c0.GraphReplays)/steps,
					float64(el.Microseconds())/steps, steps/el.Seconds())
			}
			if kernels["true"] >= kernels["false"] {
				t.Errorf("%s graphs %s: %.1f kernels a step fused, %.1f unfused", dir, graphs, kernels["true"], kernels["false"])
			}
		}
	}
}
