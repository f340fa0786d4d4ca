package passes

import (
	"github.com/ds4go/ds4/ir"
)

// FuseSwiGLU fuses the clamped SwiGLU of the experts (spec §4.10) into one
// swiglu_clamp node.
//
// Expects the pattern the builder emits (models/deepseekv4 swiglu), with g
// and u f32 values of one type (the builder's casts of the bf16 GEMM
// outputs) and L > 0:
//
//	a = mul(silu(clamp{hi=L}(g)), clamp{lo=-L, hi=L}(u))     (mul operands in either order)
//	a = mul(a, w)                                            (optional: the routing weight, f32 [..., 1])
//	y = cast{to=bf16}(a)
//
// or the same without both clamps (limit 0, no clamping). Clamp limits that
// differ from each other (lo ≠ -hi, or g's hi ≠ u's hi), a clamp of g with
// a lower bound, one clamp without the other, or a weight that is not one
// value per row do not match.
//
// Guarantees: y is replaced by swiglu_clamp(g, u[, w]){limit=L} : bf16, which
// the CPU kernel computes with the same fp32 operations and one rounding to
// bf16. The casts to f32 stay (the op takes f32 g and u; a cast of bf16
// values to f32 is exact). The bypassed nodes are removed when nothing else
// uses them.
func FuseSwiGLU(g *ir.Graph) error {
	s := subst{}
	var orphans []*ir.Node
	for _, n := range g.Nodes {
		if !is(n, "cast") || n.Attrs.Str("to", "") != "bf16" {
			continue
		}
		args, limit, ok := matchSwiGLU(n.Args[0])
		if !ok {
			continue
		}
		if want := (ir.Type{DType: ir.BF16, Shape: args[0].Type.Shape}); !want.Equal(n.Type) {
			continue // e.g. a weight that broadcasts to a larger shape
		}
		fused := g.Add("swiglu_clamp", ir.Attrs{"limit": limit}, args...)
		s.replace(n, fused)
		orphans = append(orphans, n)
	}
	rewrite(g, s, orphans)
	return nil
}

// matchSwiGLU matches the product (before the cast) and returns the fused
// op's arguments and limit.
func matchSwiGLU(a *ir.Node) (args []*ir.Node, limit float64, ok bool) {
	if !is(a, "mul") || a.Type.DType != ir.F32 {
		return
	}
	var w *ir.Node
	core := a
	// With a routing weight the outer mul has a silu product on one side.
	if p, q := a.Args[0], a.Args[1]; !isSiluMul(a) {
		switch {
		case isSiluMul(p):
			core, w = p, q
		case isSiluMul(q):
			core, w = q, p
		default:
			return
		}
	}
	var gc, uc *ir.Node
	if !either(core, func(sx, ux *ir.Node) bool {
		if !is(sx, "silu") {
			return false
		}
		gc, uc = sx.Args[0], ux
		return true
	}) {
		return
	}
	// Clamps: both or neither.
	gClamp, uClamp := is(gc, "clamp"), is(uc, "clamp")
	switch {
	case gClamp && uClamp:
		if hasAttr(gc, "lo") || !hasAttr(gc, "hi") || !hasAttr(uc, "lo") || !hasAttr(uc, "hi") {
			return
		}
		L := gc.Attrs.Float("hi", 0)
		if L <= 0 || uc.Attrs.Float("hi", 0) != L || uc.Attrs.Float("lo", 0) != -L {
			return
		}
		limit, gc, uc = L, gc.Args[0], uc.Args[0]
	case gClamp || uClamp:
		return
	}
	if gc.Type.DType != ir.F32 || !gc.Type.Equal(uc.Type) || !core.Type.Equal(gc.Type) {
		return
	}
	args = []*ir.Node{gc, uc}
	if w != nil {
		gs, ws := gc.Type.Shape, w.Type.Shape
		if w.Type.DType != ir.F32 || ws.Rank() != gs.Rank() || ws.Last() != ir.C(1) || !ws[:ws.Rank()-1].Equal(gs[:gs.Rank()-1]) {
			return nil, 0, false
		}
		args = append(args, w)
	}
	return args, limit, true
}

// isSiluMul reports whether n = mul(silu(_), _).
func isSiluMul(n *ir.Node) bool {
	return is(n, "mul") && (is(n.Args[0], "silu") || is(n.Args[1], "silu"))
}
