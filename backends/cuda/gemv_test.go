package cuda

// GPU tests of the decode kernels against the reference, each run twice:
// gemv.cuh's exact kernels (Kernels.Exact), whose outputs must be
// bit-identical (they keep cpu-ref's summation order), and gemv_mma.cuh's
// tensor-core ones, which must be within the golden tolerance (and exact
// where they fall back: activations that are not act_quant's output). They
// skip without a GPU.

import (
	"fmt"
	"math"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/internal/numfmt"
)

// checker compares a kernel's outputs with the reference's.
type checker func(t *testing.T, name string, got, want []float32)

// gemvModes runs f with the exact decode kernels (check: exact) and the
// fast ones (check: reordered), restoring the kernels' mode after.
func gemvModes(t *testing.T, e *gpuEnv, f func(check checker)) {
	defer func(v bool) { e.k.Exact = v }(e.k.Exact)
	e.k.Exact = true
	f(exact)
	e.k.Exact = false
	f(reordered)
}

// reordered is the tolerance of a product summed in another order than the
// reference's: NaN where the reference has NaN, at most 0.1 % of the
// elements (or 2) more than 1 bf16 ulp away, and none farther than one bf16
// ulp of the output's largest magnitude (a reassociated fp32 sum moves an output
// by a few fp32 ulps of its largest partial sums, which is many ulps of the
// output itself where the terms cancel).
func reordered(t *testing.T, name string, got, want []float32) {
	t.Helper()
	ok, msg := reorderedFits(got, want)
	t.Logf("%s: %s", name, msg)
	if !ok {
		t.Errorf("%s: beyond a reordered sum's tolerance: %s", name, msg)
	}
}

// reorderedFits is reordered's judgement without a test's verdict: whether
// got is within it of want, and the figures.
func reorderedFits(got, want []float32) (bool, string) {
	d := compare(got, want, 16)
	var scale float64
	for _, w := range want {
		if !math.IsNaN(float64(w)) && !math.IsInf(float64(w), 0) {
			scale = math.Max(scale, math.Abs(float64(w)))
		}
	}
	// one bf16 ulp of the largest magnitude (a rounded output there may
	// flip by one), at least 2^-8 of it
	bound := math.Ldexp(1, math.Ilogb(scale)-7)
	var worst float64
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(w) != math.IsNaN(g) || (math.IsInf(w, 0) && g != w) {
			return false, fmt.Sprintf("element %d is %g, the reference %g", i, g, w)
		}
		if !math.IsNaN(w) && !math.IsInf(w, 0) {
			worst = math.Max(worst, math.Abs(g-w))
		}
	}
	msg := fmt.Sprintf("%v; largest difference %.3g (bound %.3g)", d, worst, bound)
	return float64(d.over1) <= max(2, 0.001*float64(d.n)) && worst <= bound, msg
}

// gemvFP8Shapes and gemvFP4Shapes are (k, n) of the released decode products and odd ones: k
// not a multiple of 32 or 128, n not a multiple of a block's rows.
var gemvFP8Shapes = []struct{ k, n int }{
	{5120, 1280},  // wq_a
	{1280, 32768}, // wq_b
	{5120, 512},   // wkv
	{8192, 5120},  // wo_b
	{5120, 2304},  // shared expert w1/w3
	{2304, 5120},  // shared expert w2
	{1280, 4096},  // index wq_b
	{200, 100}, {1000, 77}, {48, 3}, {4100, 33},
}

var gemvFP4Shapes = []struct{ k, n int }{
	{5120, 2304}, {2304, 5120}, {80, 40}, {1000, 77}, {4100, 33}, {64, 1},
}

func TestGemvFP8GPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	gemvModes(t, e, func(check checker) {
		for _, c := range gemvFP8Shapes {
			for _, m := range []int{1, 3, 8} {
				if m > 1 && c.k*c.n > 8<<20 {
					continue // the reference takes too long on the largest at 8 rows
				}
				a := quantActs(r, m, c.k)
				w := e4m3Codes(r, c.n*c.k)
				if c.n == 77 {
					w[5] = 0x7f // a NaN code: its row's block takes the byte path
					w[c.k+7] = 0xff
				}
				s := e8m0s(r, ceilDiv(c.n, 32)*ceilDiv(c.k, 32))
				want := make([]float32, m*c.n)
				kernels.MatmulFP8(want, a, m, c.k, w, s, c.n)
				out := alloc(t, e, 4*len(want))
				if err := e.k.MatmulFP8(e.s, "gemv fp8", out, up(t, e, a), m, c.k, up(t, e, w), up(t, e, s), c.n); err != nil {
					t.Fatal(err)
				}
				check(t, fmt.Sprintf("gemv fp8 %dx%dx%d", m, c.k, c.n), down[float32](t, e, out, len(want)), want)
			}
		}
	})
}

// TestGemvFP32ActsGPU: activations that are not bf16 values take the
// separate multiply and add (their products are not exact), fp8 and fp4.
func TestGemvFP32ActsGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	gemvModes(t, e, func(_ checker) {
		for _, fp4 := range []bool{false, true} {
			const m, k, n = 2, 5120, 1280
			a := make([]float32, m*k)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			kb := ceilDiv(k, 32)
			want := make([]float32, m*n)
			var w, s []byte
			if fp4 {
				w, s = randBytes(r, n*k/2), e8m0s(r, n*kb)
				kernels.MatmulFP4(want, a, m, k, w, s, n)
			} else {
				w, s = e4m3Codes(r, n*k), e8m0s(r, ceilDiv(n, 32)*kb)
				kernels.MatmulFP8(want, a, m, k, w, s, n)
			}
			out := alloc(t, e, 4*len(want))
			var err error
			if fp4 {
				err = e.k.MatmulFP4(e.s, "gemv fp4", out, up(t, e, a), m, k, up(t, e, w), up(t, e, s), n)
			} else {
				err = e.k.MatmulFP8(e.s, "gemv fp8", out, up(t, e, a), m, k, up(t, e, w), up(t, e, s), n)
			}
			if err != nil {
				t.Fatal(err)
			}
			exact(t, fmt.Sprintf("gemv fp4 %v, fp32 activations", fp4), down[float32](t, e, out, len(want)), want)
		}
	})
}

func TestGemvFP4GPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	gemvModes(t, e, func(check checker) {
		for _, c := range gemvFP4Shapes {
			for _, m := range []int{1, 3, 8} {
				a := quantActs(r, m, c.k)
				w := randBytes(r, c.n*c.k/2)
				s := e8m0s(r, c.n*ceilDiv(c.k, 32))
				want := make([]float32, m*c.n)
				kernels.MatmulFP4(want, a, m, c.k, w, s, c.n)
				out := alloc(t, e, 4*len(want))
				if err := e.k.MatmulFP4(e.s, "gemv fp4", out, up(t, e, a), m, c.k, up(t, e, w), up(t, e, s), c.n); err != nil {
					t.Fatal(err)
				}
				check(t, fmt.Sprintf("gemv fp4 %dx%dx%d", m, c.k, c.n), down[float32](t, e, out, len(want)), want)
			}
		}
	})
}

// routedIDs chooses topk distinct experts of experts for each token.
func routedIDs(r interface{ Perm(int) []int }, tokens, topk, experts int) []int64 {
	ids := make([]int64, tokens*topk)
	for tk := range tokens {
		for j, p := range r.Perm(experts)[:topk] {
			ids[tk*topk+j] = int64(p)
		}
	}
	return ids
}

// TestGemvRoutedSwiGLUGPU compares the fused routed gate/up + SwiGLU with
// the reference's two products and swiglu_clamp, fp4 at the released
// widths and fp8 on a small odd shape, with and without route weights, one
// id out of range (its row NaN).
func TestGemvRoutedSwiGLUGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	gemvModes(t, e, func(check checker) {
		const tokens, topk, experts = 2, 6, 9
		for _, c := range []struct {
			fp4      bool
			k, n     int
			weighted bool
		}{{true, 5120, 2304, true}, {true, 5120, 2304, false}, {true, 80, 40, true}, {false, 1000, 77, true}, {false, 5120, 2304, false}} {
			ids := routedIDs(r, tokens, topk, experts)
			ids[3] = experts // out of range
			rows := tokens * topk
			a := quantActs(r, tokens, c.k)
			kb := ceilDiv(c.k, 32)
			wPer, sPer := c.n*c.k/2, c.n*kb
			if !c.fp4 {
				wPer, sPer = c.n*c.k, ceilDiv(c.n, 32)*kb
			}
			var w1, w3 []byte
			if c.fp4 {
				w1, w3 = randBytes(r, experts*wPer), randBytes(r, experts*wPer)
			} else {
				w1, w3 = e4m3Codes(r, experts*wPer), e4m3Codes(r, experts*wPer)
			}
			s1, s3 := e8m0s(r, experts*sPer), e8m0s(r, experts*sPer)
			g, u := make([]float32, rows*c.n), make([]float32, rows*c.n)
			for q := range rows {
				ex := int(ids[q])
				gr, ur := g[q*c.n:(q+1)*c.n], u[q*c.n:(q+1)*c.n]
				if ex >= experts {
					for j := range gr {
						gr[j], ur[j] = float32(math.NaN()), float32(math.NaN())
					}
					continue
				}
				ar := a[(q/topk)*c.k : (q/topk+1)*c.k]
				mm := kernels.MatmulFP8
				if c.fp4 {
					mm = kernels.MatmulFP4
				}
				mm(gr, ar, 1, c.k, w1[ex*wPer:(ex+1)*wPer], s1[ex*sPer:(ex+1)*sPer], c.n)
				mm(ur, ar, 1, c.k, w3[ex*wPer:(ex+1)*wPer], s3[ex*sPer:(ex+1)*sPer], c.n)
			}
			var rw []float32
			if c.weighted {
				rw = make([]float32, rows)
				for i := range rw {
					rw[i] = r.Float32()
				}
			}
			want := make([]float32, rows*c.n)
			kernels.SwiGLUClamp(want, g, u, rows, c.n, 10, rw)
			out := alloc(t, e, 4*len(want))
			rt1 := Routed{FP4: c.fp4, W: up(t, e, w1), Scale: up(t, e, s1), WStride: wPer, ScaleStride: sPer, Experts: experts}
			rt3 := Routed{FP4: c.fp4, W: up(t, e, w3), Scale: up(t, e, s3), WStride: wPer, ScaleStride: sPer, Experts: experts}
			drw := driver.Ptr(0)
			if c.weighted {
				drw = up(t, e, rw)
			}
			if err := e.k.MatmulRoutedSwiGLU(e.s, "routed swiglu", out, up(t, e, a), topk, c.k, rt1, rt3, c.n, up(t, e, ids), rows, 10, drw); err != nil {
				t.Fatal(err)
			}
			// swiglu's exp is float64 on both sides, rounded to fp32 (see
			// TestSwiGLUClampGPU): bit-identical for the exact kernels; the
			// fast ones' products may each be a bf16 ulp off (reordered sums),
			// which SwiGLU carries on
			name := fmt.Sprintf("routed swiglu fp4 %v k %d n %d weighted %v", c.fp4, c.k, c.n, c.weighted)
			got := down[float32](t, e, out, len(want))
			if e.k.Exact {
				check(t, name, got, want)
			} else {
				swigluReordered(t, name, got, want, g, u, rw, c.n, 10)
			}
		}
	})
}

// swigluReordered is the tolerance of a SwiGLU on products summed in
// another order: each product may move by the reordered bound (a bf16 ulp
// of its largest magnitude, reordered), so an output may move by what
// those moves make of swiglu_clamp (silu's slope is below 1.1; u's clamp
// and the route weight scale it) plus a bf16 ulp of its own; NaN where the
// reference has NaN.
func swigluReordered(t *testing.T, name string, got, want, g, u, rw []float32, n int, limit float32) {
	t.Helper()
	var gmax, umax float64
	for i := range g {
		if !math.IsNaN(float64(g[i])) {
			gmax, umax = math.Max(gmax, math.Abs(float64(g[i]))), math.Max(umax, math.Abs(float64(u[i])))
		}
	}
	dg, du := math.Ldexp(gmax, -8), math.Ldexp(umax, -8)
	moved := 0
	for i := range want {
		w, v := float64(want[i]), float64(got[i])
		if math.IsNaN(w) || math.IsNaN(v) {
			if math.IsNaN(w) != math.IsNaN(v) {
				t.Errorf("%s: element %d is %g, the reference %g", name, i, v, w)
				return
			}
			continue
		}
		if v == w {
			continue
		}
		gv, uv := math.Min(float64(g[i]), float64(limit)), math.Max(math.Min(float64(u[i]), float64(limit)), -float64(limit))
		silu := gv / (1 + math.Exp(-gv))
		scale := 1.0
		if rw != nil {
			scale = math.Abs(float64(rw[i/n]))
		}
		bound := scale*(1.1*dg*math.Abs(uv)+math.Abs(silu)*du+dg*du) + math.Ldexp(math.Abs(w), -7)
		if math.Abs(v-w) > bound {
			t.Errorf("%s: element %d is %g, the reference %g (g %g, u %g): beyond what reordered products make of it (%.3g)", name, i, v, w, g[i], u[i], bound)
			return
		}
		moved++
	}
	t.Logf("%s: %d elements, %d moved by the reordered products", name, len(want), moved)
}

// TestGemvGroupedFP8GPU: the released fp8 wo_a (8 groups of 4096 -> 1024)
// at 1 and 3 tokens, and an odd group width, against the widened reference.
func TestGemvGroupedFP8GPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	gemvModes(t, e, func(check checker) {
		for _, c := range []struct{ m, groups, dg, rank int }{{1, 8, 4096, 1024}, {3, 8, 4096, 1024}, {2, 3, 1000, 70}} {
			o := bf16s(r, c.m*c.groups*c.dg, 1)
			codes, scales := e4m3Codes(r, c.groups*c.rank*c.dg), e8m0s(r, ceilDiv(c.groups*c.rank, 32)*ceilDiv(c.dg, 32))
			codes[1] = 0x7f // a NaN code
			kb := ceilDiv(c.dg, 32)
			wide := make([]float32, len(codes))
			for row := range c.groups * c.rank {
				for col := range c.dg {
					wide[row*c.dg+col] = numfmt.BF16Round(numfmt.E4M3ToF32(codes[row*c.dg+col]) * numfmt.E8M0ToF32(scales[(row/32)*kb+col/32]))
				}
			}
			want := make([]float32, c.m*c.groups*c.rank)
			kernels.GroupedLoRA(want, o, c.m, c.groups, c.dg, wide, c.rank)
			out := alloc(t, e, 4*len(want))
			if err := e.k.GroupedLoRA(e.s, "wo_a fp8", out, up(t, e, o), c.m, c.groups, c.dg, Plain{W: up(t, e, codes), Scale: up(t, e, scales), Format: PlainFP8}, c.rank, true); err != nil {
				t.Fatal(err)
			}
			check(t, fmt.Sprintf("gemv grouped fp8 %d×%d groups×%d→%d", c.m, c.groups, c.dg, c.rank), down[float32](t, e, out, len(want)), want)
		}
	})
}

// TestGemvShape checks the launch shapes the decode products get (no GPU).
func TestGemvShape(t *testing.T) {
	for _, c := range []struct {
		fp4              bool
		n, k, ys, mr, du int
		rb               int
	}{
		{false, 1280, 5120, 1, 1, 1, 2},   // wq_a: 640 blocks (rb 1 would leave K groups without a chunk)
		{false, 32768, 1280, 1, 1, 1, 16}, // wq_b: 2048 blocks
		{false, 512, 5120, 1, 1, 1, 2},    // wkv: 256 blocks, 128 K groups of 160 chunks
		{false, 5120, 8192, 1, 1, 1, 4},   // wo_b: 1280 blocks
		{true, 2304, 5120, 6, 1, 2, 8},    // routed w1+w3 of one token: 1728 blocks
		{true, 5120, 2304, 6, 1, 1, 16},   // routed w2: 1920 blocks
		{false, 1280, 5120, 1, 8, 1, 2},
	} {
		l, sh, ok := gemvShape(c.fp4, c.n, c.k, c.ys, c.mr, c.du)
		if !ok || 1<<l != c.rb || sh > gemvSharedMax {
			t.Errorf("gemvShape(%v, n %d, k %d, ys %d, mr %d, dual %d) = rb %d, %d bytes, %v; want rb %d", c.fp4, c.n, c.k, c.ys, c.mr, c.du, 1<<l, sh, ok, c.rb)
		}
	}
	if _, _, ok := gemvShape(false, 10, 1<<20, 1, 8, 2); ok {
		t.Errorf("gemvShape took k = 2^20 at 8 rows, dual")
	}
}

// TestSharedSwiGLUGPU: the shared expert's one launch (MatmulSharedSwiGLU,
// the routed SwiGLU pair over a stack of one with the plain product's
// chunk) against its three launches (MatmulFP8 of w1 and of w3, then
// swiglu_clamp): bit-identical, at the released widths and on a small
// shape, 1 to 8 rows, with and without route weights.
func TestSharedSwiGLUGPU(t *testing.T) {
	e := gpu(t)
	if e.k.Exact || e.k.gmmaLimit == 0 {
		t.Skip("the tensor-core decode kernels are off")
	}
	r := rng(t)
	for _, c := range []struct {
		m, k, n  int
		weighted bool
	}{{1, 5120, 2304, false}, {2, 5120, 2304, true}, {5, 1280, 72, false}, {8, 5120, 2304, false}} {
		kb := ceilDiv(c.k, 32)
		w1, w3 := e4m3Codes(r, c.n*c.k), e4m3Codes(r, c.n*c.k)
		s1, s3 := e8m0s(r, ceilDiv(c.n, 32)*kb), e8m0s(r, ceilDiv(c.n, 32)*kb)
		a := up(t, e, quantActs(r, c.m, c.k))
		dw1, ds1, dw3, ds3 := up(t, e, w1), up(t, e, s1), up(t, e, w3), up(t, e, s3)
		drw := driver.Ptr(0)
		if c.weighted {
			rw := make([]float32, c.m)
			for i := range rw {
				rw[i] = r.Float32()
			}
			drw = up(t, e, rw)
		}
		g, u, want, got := alloc(t, e, 4*c.m*c.n), alloc(t, e, 4*c.m*c.n), alloc(t, e, 4*c.m*c.n), alloc(t, e, 4*c.m*c.n)
		if err := e.k.MatmulFP8(e.s, "w1", g, a, c.m, c.k, dw1, ds1, c.n); err != nil {
			t.Fatal(err)
		}
		if err := e.k.MatmulFP8(e.s, "w3", u, a, c.m, c.k, dw3, ds3, c.n); err != nil {
			t.Fatal(err)
		}
		if err := e.k.SwiGLUClamp(e.s, "swiglu", want, g, u, c.m, c.n, 10, drw); err != nil {
			t.Fatal(err)
		}
		ok, err := e.k.MatmulSharedSwiGLU(e.s, "shared swiglu", got, a, c.m, c.k, dw1, ds1, dw3, ds3, c.n, 10, drw)
		if err != nil || !ok {
			t.Fatalf("m %d k %d n %d: MatmulSharedSwiGLU ok %v, %v", c.m, c.k, c.n, ok, err)
		}
		w, gv := down[float32](t, e, want, c.m*c.n), down[float32](t, e, got, c.m*c.n)
		diff := 0
		for i := range w {
			if math.Float32bits(w[i]) != math.Float32bits(gv[i]) {
				if diff < 3 {
					t.Errorf("m %d k %d n %d [%d]: one launch %g, three %g", c.m, c.k, c.n, i, gv[i], w[i])
				}
				diff++
			}
		}
		if diff > 0 {
			t.Errorf("m %d k %d n %d weighted %v: %d of %d outputs differ", c.m, c.k, c.n, c.weighted, diff, len(w))
		}
	}
}
