package passes

import (
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
)

// foldLimit bounds the size of a constant the folder creates.
const foldLimit = 4096

// FoldConstants evaluates, at compile time, the trivial ops whose arguments
// are all small float constants (const nodes with floats).
//
// Expects: a verified graph.
//
// Guarantees: add_scalar, mul_scalar, cast, and add/sub/mul/div of two
// constants of the same shape are replaced by a const node holding the
// values the CPU kernel would compute (fp32 arithmetic, the scalar rounded
// to fp32, the result rounded to the node's dtype), when the result has at
// most 4096 elements. Constants are never built from weights, inputs or
// state, and probes are kept (a probe of a constant still observes it). The
// folded nodes are removed; the new constants sit just before their first
// user.
func FoldConstants(g *ir.Graph) error {
	s := subst{}
	var orphans []*ir.Node
	for _, n := range g.Nodes {
		for i, a := range n.Args {
			n.Args[i] = s.resolve(a)
		}
		if !pure(n) || len(n.Args) == 0 || !n.Type.DType.IsFloat() {
			continue
		}
		vals := make([][]float64, len(n.Args))
		ok := true
		for i, a := range n.Args {
			if !is(a, "const") || !a.Type.DType.IsFloat() {
				ok = false
				break
			}
			vals[i] = a.Attrs.Floats("floats")
		}
		if !ok {
			continue
		}
		out := foldValues(n, vals)
		if out == nil {
			continue
		}
		c := g.Source("const", n.Type, ir.Attrs{"floats": out})
		s.replace(n, c)
		orphans = append(orphans, n)
	}
	rewrite(g, s, orphans)
	return nil
}

func foldValues(n *ir.Node, vals [][]float64) []float64 {
	ne, ok := n.Type.Shape.NumElements()
	if !ok || ne > foldLimit {
		return nil
	}
	var f func(i int) float32
	x := vals[0]
	switch n.Op {
	case "add_scalar", "mul_scalar":
		v := float32(n.Attrs.Float("value", 0))
		mul := n.Op == "mul_scalar"
		f = func(i int) float32 {
			if mul {
				return float32(x[i]) * v
			}
			return float32(x[i]) + v
		}
	case "cast":
		f = func(i int) float32 { return float32(x[i]) }
	case "add", "sub", "mul", "div":
		y := vals[1]
		if !n.Args[0].Type.Shape.Equal(n.Args[1].Type.Shape) || !n.Args[0].Type.Shape.Equal(n.Type.Shape) {
			return nil
		}
		f = func(i int) float32 {
			a, b := float32(x[i]), float32(y[i])
			switch n.Op {
			case "add":
				return a + b
			case "sub":
				return a - b
			case "mul":
				return a * b
			}
			return a / b
		}
	default:
		return nil
	}
	if int64(len(x)) != ne {
		return nil
	}
	out := make([]float64, ne)
	for i := range out {
		v := f(i)
		switch n.Type.DType {
		case ir.BF16:
			v = numfmt.BF16Round(v)
		case ir.F16:
			v = numfmt.F16ToF32(numfmt.F32ToF16(v))
		}
		out[i] = float64(v)
	}
	return out
}
