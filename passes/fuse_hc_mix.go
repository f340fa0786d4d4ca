package passes

import (
	"github.com/ds4go/ds4/ir"
)

// FuseHCMix fuses the hyper-connection mix projection (hc_mixes, spec §4.3)
// into one hc_mix node.
//
// Expects the pattern the builder emits (models/deepseekv4 hcMixes), with h
// a float stream [..., hc, D] and fn an f32 [mix, hc·D] weight:
//
//	flat = reshape(cast{to=f32}(h)) : f32[..., hc·D]   (the cast may be absent when h is f32)
//	r    = rsqrt(add_scalar{value=eps}(mean_sq{axis=-1}(flat)))
//	m    = mul(matmul(flat, fn), r)                       (either operand order)
//
// Guarantees: m is replaced by hc_mix(h, fn){eps} : f32[..., mix], which the
// CPU kernel computes with the same fp32 operations (mean of squares in
// torch order, rsqrt, dot products in K order, one product). A mul whose
// scale is not the rsqrt of the mean square of the same flattened stream,
// a reshape that is not the flattening of the last two axes, or a mean over
// another axis does not match. The bypassed primitive nodes are removed
// when nothing else uses them.
func FuseHCMix(g *ir.Graph) error {
	s := subst{}
	var orphans []*ir.Node
	for _, n := range g.Nodes {
		if !is(n, "mul") {
			continue
		}
		var h, fn *ir.Node
		var eps float64
		if !either(n, func(a, b *ir.Node) bool {
			var ok bool
			h, fn, eps, ok = matchHCMix(a, b)
			return ok
		}) {
			continue
		}
		fused := g.Add("hc_mix", ir.Attrs{"eps": eps}, h, fn)
		if !fused.Type.Equal(n.Type) {
			panic("hc_mix type " + fused.Type.String() + " differs from the matched " + n.Type.String())
		}
		s.replace(n, fused)
		orphans = append(orphans, n)
	}
	rewrite(g, s, orphans)
	return nil
}

// matchHCMix matches mm = matmul(flat, fn) and r = rsqrt(mean_sq(flat)+eps)
// and returns the stream h, fn and eps.
func matchHCMix(mm, r *ir.Node) (h, fn *ir.Node, eps float64, ok bool) {
	if !is(mm, "matmul") || !is(r, "rsqrt") {
		return
	}
	flat, fn := mm.Args[0], mm.Args[1]
	as := r.Args[0]
	e, isAdd := scalarAttr(as, "add_scalar")
	if !isAdd || !is(as.Args[0], "mean_sq") {
		return
	}
	ms := as.Args[0]
	if ms.Args[0] != flat || normAxis(ms, flat.Type.Shape.Rank()) != flat.Type.Shape.Rank()-1 || !ms.Attrs.Bool("keepdim", true) {
		return
	}
	if !is(flat, "reshape") || flat.Type.DType != ir.F32 || fn.Type.DType != ir.F32 {
		return
	}
	h = flat.Args[0]
	if is(h, "cast") && h.Attrs.Str("to", "") == "f32" {
		h = h.Args[0]
	}
	if h.Type.DType != ir.F32 && !(is(flat.Args[0], "cast") && h.Type.DType.IsFloat()) {
		return
	}
	// flat must be h with its last two axes merged.
	hs, fs := h.Type.Shape, flat.Type.Shape
	r2 := hs.Rank()
	if r2 < 2 || fs.Rank() != r2-1 || !hs[r2-1].IsConst() || !hs[r2-2].IsConst() {
		return
	}
	if !hs[:r2-2].Equal(fs[:r2-2]) || fs[r2-2] != ir.C(hs[r2-1].N*hs[r2-2].N) {
		return
	}
	return h, fn, e, true
}
