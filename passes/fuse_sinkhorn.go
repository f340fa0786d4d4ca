package passes

import (
	"fmt"

	"github.com/ds4go/ds4/ir"
)

// FuseSinkhorn fuses the split of the hyper-connection mixes and the
// Sinkhorn normalisation of the comb matrix (hc_split_sinkhorn, spec §4.3)
// into one hc_split_sinkhorn node.
//
// Expects the pattern the builder emits (models/deepseekv4 hcMixes), with m
// the f32 mixes [..., (2+hc)·hc], scale an f32 [3] and base an f32
// [(2+hc)·hc] weight, aff(lo,hi,k) = add(mul(slice(m,lo,hi), slice(scale,k,k+1)),
// slice(base,lo,hi)) (operands of add and mul in either order), and one eps:
//
//	pre  = add_scalar{eps}(sigmoid(aff(0, hc, 0)))
//	post = mul_scalar{2}(sigmoid(aff(hc, 2hc, 1)))
//	c    = add_scalar{eps}(softmax{axis=-1}(reshape(aff(2hc, mix, 2)) : [..., hc, hc]))
//	col(x) = div(x, add_scalar{eps}(sum{axis=-2}(x)));  row(x) the same with axis=-1
//	comb = col(row(... col(row(col(c)))))   — col first, then (row, col) pairs
//
// The number of iterations is the number of col steps (rows are one fewer).
// A chain that does not alternate this way, ends on a row step, mixes eps
// values, or whose comb does not come from the mixes, scale and base of the
// same m does not match (nothing is rewritten then). pre and post may be
// absent (unused).
//
// Guarantees: one p = hc_split_sinkhorn(m, scale, base){hc, iters, eps} :
// f32[..., (2+hc)·hc] holding [pre | post | comb row-major]; the uses of
// pre, post and comb read slice(p, 0, hc), slice(p, hc, 2hc) and
// reshape(slice(p, 2hc, mix)) : [..., hc, hc] instead, so the probes
// L*.hc_*_pre/post/comb keep their names and places and observe the same
// values. The CPU kernel performs the same fp32 operations in the same
// order. The primitive nodes are removed when nothing else uses them.
func FuseSinkhorn(g *ir.Graph) error {
	uses := g.Uses()
	// A normalisation step used as the input of another step is interior.
	interior := map[*ir.Node]bool{}
	for _, n := range g.Nodes {
		if _, _, _, ok := normStep(n); ok {
			interior[n.Args[0]] = true
		}
	}
	s := subst{}
	var orphans []*ir.Node
	for _, n := range g.Nodes {
		if interior[n] {
			continue
		}
		mt, ok := matchSinkhorn(n, uses)
		if !ok {
			continue
		}
		hc := mt.hc
		mix := (2 + hc) * hc
		p := g.Add("hc_split_sinkhorn", ir.Attrs{"hc": hc, "iters": mt.iters, "eps": mt.eps}, mt.m, mt.scale, mt.base)
		sl := func(lo, hi int64) *ir.Node {
			return g.Add("slice", ir.Attrs{"axis": int64(-1), "start": lo, "end": hi}, p)
		}
		if mt.pre != nil {
			s.replace(mt.pre, sl(0, hc))
			orphans = append(orphans, mt.pre)
		}
		if mt.post != nil {
			s.replace(mt.post, sl(hc, 2*hc))
			orphans = append(orphans, mt.post)
		}
		comb := g.Add("reshape", ir.Attrs{"shape": n.Type.Shape.String()}, sl(2*hc, mix))
		s.replace(n, comb)
		orphans = append(orphans, n)
	}
	rewrite(g, s, orphans)
	return nil
}

type sinkhornMatch struct {
	m, scale, base, pre, post *ir.Node
	hc, iters                 int64
	eps                       float64
}

// normStep matches div(x, add_scalar{eps}(sum{axis}(x))) on x [..., hc, hc]
// and reports the axis counted from the end (1: row, 2: column).
func normStep(n *ir.Node) (x *ir.Node, fromEnd int, eps float64, ok bool) {
	if !is(n, "div") {
		return
	}
	x = n.Args[0]
	e, isAdd := scalarAttr(n.Args[1], "add_scalar")
	if !isAdd || !is(n.Args[1].Args[0], "sum") {
		return
	}
	sum := n.Args[1].Args[0]
	r := x.Type.Shape.Rank()
	if sum.Args[0] != x || !sum.Attrs.Bool("keepdim", true) || r < 2 || x.Type.Shape[r-1] != x.Type.Shape[r-2] || x.Type.DType != ir.F32 {
		return
	}
	ax := normAxis(sum, r)
	if ax != r-1 && ax != r-2 {
		return
	}
	return x, r - ax, e, true
}

func matchSinkhorn(root *ir.Node, uses map[*ir.Node][]*ir.Node) (sinkhornMatch, bool) {
	var mt sinkhornMatch
	// The normalisation chain, walked backwards from the last step.
	var steps []int
	x := root
	eps := 0.0
	for {
		y, axis, e, ok := normStep(x)
		if !ok {
			break
		}
		if len(steps) > 0 && e != eps {
			return mt, false
		}
		eps = e
		steps = append(steps, axis)
		x = y
	}
	if len(steps) == 0 || len(steps)%2 == 0 {
		return mt, false
	}
	for i, ax := range steps { // backwards: col, row, col, ..., col
		if (i%2 == 0) != (ax == 2) {
			return mt, false
		}
	}
	// x = add_scalar{eps}(softmax{-1}(reshape(aff)))
	if e, ok := scalarAttr(x, "add_scalar"); !ok || e != eps || !is(x.Args[0], "softmax") {
		return mt, false
	}
	sm := x.Args[0]
	if normAxis(sm, sm.Type.Shape.Rank()) != sm.Type.Shape.Rank()-1 || !is(sm.Args[0], "reshape") {
		return mt, false
	}
	rs := sm.Args[0]
	cs := rs.Type.Shape
	hcDim := cs[cs.Rank()-1]
	if !hcDim.IsConst() {
		return mt, false
	}
	hc := hcDim.N
	mix := (2 + hc) * hc
	aff := rs.Args[0]
	as := aff.Type.Shape
	if as.Rank() != cs.Rank()-1 || !as[:as.Rank()-1].Equal(cs[:cs.Rank()-2]) || as.Last() != ir.C(hc*hc) {
		return mt, false
	}
	m, scale, base, ok := matchAffine(aff, 2*hc, mix, 2)
	if !ok || m.Type.DType != ir.F32 || m.Type.Shape.Last() != ir.C(mix) ||
		!scale.Type.Equal(ir.T(ir.F32, 3)) || !base.Type.Equal(ir.T(ir.F32, mix)) {
		return mt, false
	}
	mt = sinkhornMatch{m: m, scale: scale, base: base, hc: hc, iters: int64(len(steps)+1) / 2, eps: eps}
	// pre and post hang off other slices of the same m.
	for _, sl := range uses[m] {
		for _, mul := range uses[sl] {
			for _, add := range uses[mul] {
				if mm, sc, bs, ok := matchAffine(add, 0, hc, 0); ok && mm == m && sc == scale && bs == base && mt.pre == nil {
					mt.pre = findTail(add, uses, "add_scalar", eps)
				}
				if mm, sc, bs, ok := matchAffine(add, hc, 2*hc, 1); ok && mm == m && sc == scale && bs == base && mt.post == nil {
					mt.post = findTail(add, uses, "mul_scalar", 2)
				}
			}
		}
	}
	ms := m.Type.Shape
	want := ir.Type{DType: ir.F32, Shape: append(ms[:ms.Rank()-1:ms.Rank()-1], ir.C(hc))}
	for _, v := range []*ir.Node{mt.pre, mt.post} {
		if v != nil && !v.Type.Equal(want) {
			panic(fmt.Sprintf("hc_split_sinkhorn: %%%d has type %s, want %s", v.ID, v.Type, want))
		}
	}
	return mt, true
}

// findTail finds op{value=v}(sigmoid(a)) among the users of a.
func findTail(a *ir.Node, uses map[*ir.Node][]*ir.Node, op string, v float64) *ir.Node {
	for _, sg := range uses[a] {
		if !is(sg, "sigmoid") {
			continue
		}
		for _, t := range uses[sg] {
			if x, ok := scalarAttr(t, op); ok && x == v {
				return t
			}
		}
	}
	return nil
}

// matchAffine matches add(mul(slice(m,lo,hi), slice(scale,k,k+1)), slice(base,lo,hi)).
func matchAffine(n *ir.Node, lo, hi, k int64) (m, scale, base *ir.Node, ok bool) {
	if !is(n, "add") {
		return
	}
	ok = either(n, func(mul, bs *ir.Node) bool {
		if !is(mul, "mul") {
			return false
		}
		b, okB := sliceOf(bs, lo, hi)
		if !okB {
			return false
		}
		return either(mul, func(ms, ss *ir.Node) bool {
			mm, ok1 := sliceOf(ms, lo, hi)
			sc, ok2 := sliceOf(ss, k, k+1)
			if ok1 && ok2 && sc.Type.Shape.Rank() == 1 && b.Type.Shape.Rank() == 1 {
				m, scale, base = mm, sc, b
				return true
			}
			return false
		})
	})
	return
}
