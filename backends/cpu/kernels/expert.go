package kernels

import (
	"fmt"

	"github.com/ds4go/ds4/internal/numfmt"
)

// SwiGLUClamp is the clamped SwiGLU of Expert.forward (spec §4.10) on the
// gate g and up u projections [rows, inter] (the bf16 GEMM outputs, taken as
// fp32):
//
//	u'  = clamp(u, −limit, limit)
//	g'  = min(g, limit)                      (the gate is clamped from above only)
//	a   = fp32(g' / (1 + exp(−g'))) · u'     (F.silu in fp32, then one fp32 product)
//	a   = fp32(w[r] · a)                     (only if routeWeight != nil: one weight per row)
//	out = bf16(a)
//
// limit is swiglu_limit (10); limit <= 0 disables both clamps, as in the
// reference. routeWeight (len rows, fp32) is the routed expert's gate weight,
// applied before the down projection and so before its activation
// quantisation; pass nil for the shared expert. NaN propagates. out may
// alias g or u.
func SwiGLUClamp(out, g, u []float32, rows, inter int, limit float32, routeWeight []float32) {
	gemmCheck("SwiGLUClamp", len(out), rows*inter, len(g), rows*inter, len(u), rows*inter)
	if routeWeight != nil {
		gemmCheck("SwiGLUClamp", len(routeWeight), rows)
	}
	if inter == 0 {
		return
	}
	// elements are independent: split the flat range (an exp each)
	parallelRange(rows*inter, 256, rows*inter*16, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			gv := SwiGLUGate(g[j], limit)
			var w float32
			if routeWeight != nil {
				w = routeWeight[j/inter]
			}
			out[j] = SwiGLUElement(gv, elemExp(-gv), u[j], limit, w, routeWeight != nil)
		}
	})
}

// SwiGLUGate is the gate value SwiGLUClamp feeds to SiLU: g, clamped from
// above by limit when limit > 0.
func SwiGLUGate(g, limit float32) float32 {
	if limit > 0 {
		return min(g, limit)
	}
	return g
}

// SwiGLUElement is one output of SwiGLUClamp from its gate gv (SwiGLUGate),
// e = float32 exp(−gv), the up value u (clamped to ±limit when limit > 0)
// and, when weighted, the route weight w: bf16(silu(gv)·u [·w]) with
// silu(gv) = gv/(1+e), every step rounded to fp32.
func SwiGLUElement(gv, e, u, limit, w float32, weighted bool) float32 {
	if limit > 0 {
		u = min(max(u, -limit), limit)
	}
	a := float32(gv / (1 + e) * u)
	if weighted {
		a = float32(w * a)
	}
	return numfmt.BF16Round(a)
}

// expertMatmul is a quantised GEMM with the weights bound: out [m, n] from
// fake-quantised activations a [m, k].
type expertMatmul func(out, a []float32, m int)

// expertForward runs Expert.forward on x [rows, dim] (bf16 values) and
// returns the intermediates: g = w1(x), u = w3(x) [rows, inter] (bf16 values,
// before the clamps). Every Linear first fake-quantises its input with
// act_quant (block 32, ue8m0), so x and bf16(a) are quantised before the
// GEMMs; out [rows, dim] is the bf16 down projection.
func expertForward(out, x []float32, rows, dim, inter int, w1, w3, w2 expertMatmul, limit float32, routeWeight []float32) (g, u []float32) {
	if dim%gemmBlock != 0 || inter%gemmBlock != 0 {
		panic(fmt.Sprintf("kernels: expert dims %d and %d must be multiples of %d (act_quant block)", dim, inter, gemmBlock))
	}
	gemmCheck("Expert", len(out), rows*dim, len(x), rows*dim)
	xq := make([]float32, rows*dim)
	copy(xq, x)
	numfmt.ActQuantInplace(xq, gemmBlock)
	g, u = make([]float32, rows*inter), make([]float32, rows*inter)
	w1(g, xq, rows)
	w3(u, xq, rows)
	a := make([]float32, rows*inter)
	SwiGLUClamp(a, g, u, rows, inter, limit, routeWeight)
	numfmt.ActQuantInplace(a, gemmBlock)
	w2(out, a, rows)
	return g, u
}

// ExpertFP4 is a routed expert (spec §4.10) with fp4 weights:
//
//	g = MatmulFP4(actq(x), w1), u = MatmulFP4(actq(x), w3)       [rows, inter], bf16
//	a = SwiGLUClamp(g, u, limit, routeWeight)                     bf16
//	out = MatmulFP4(actq(a), w2)                                  [rows, dim], bf16
//
// actq is act_quant(·, 32, ue8m0) in place (numfmt.ActQuantInplace). w1, w3
// are packed [inter, dim/2] with e8m0 scales s1, s3 [inter, dim/32]; w2 is
// packed [dim, inter/2] with s2 [dim, inter/32]. routeWeight [rows] may be
// nil. dim and inter must be multiples of 32. x is not modified.
func ExpertFP4(out, x []float32, rows, dim, inter int, w1, s1, w3, s3, w2, s2 []byte, limit float32, routeWeight []float32) {
	expertForward(out, x, rows, dim, inter,
		func(o, a []float32, m int) { MatmulFP4(o, a, m, dim, w1, s1, inter) },
		func(o, a []float32, m int) { MatmulFP4(o, a, m, dim, w3, s3, inter) },
		func(o, a []float32, m int) { MatmulFP4(o, a, m, inter, w2, s2, dim) },
		limit, routeWeight)
}

// ExpertFP8 is ExpertFP4 with fp8 weights (the shared expert): w1, w3 are
// e4m3 [inter, dim] with e8m0 scales [ceil(inter/32), dim/32]; w2 is e4m3
// [dim, inter] with scales [ceil(dim/32), inter/32]; the GEMMs are MatmulFP8.
// The shared expert passes routeWeight = nil.
func ExpertFP8(out, x []float32, rows, dim, inter int, w1, s1, w3, s3, w2, s2 []byte, limit float32, routeWeight []float32) {
	expertForward(out, x, rows, dim, inter,
		func(o, a []float32, m int) { MatmulFP8(o, a, m, dim, w1, s1, inter) },
		func(o, a []float32, m int) { MatmulFP8(o, a, m, dim, w3, s3, inter) },
		func(o, a []float32, m int) { MatmulFP8(o, a, m, inter, w2, s2, dim) },
		limit, routeWeight)
}
