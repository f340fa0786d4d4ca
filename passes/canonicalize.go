package passes

import (
	"github.com/ds4go/ds4/ir"
)

// Canonicalize removes identities and collapses chains of views.
//
// Expects: a verified graph.
//
// Guarantees, each rewrite only where the result type is unchanged:
//   - mul_scalar by 1, add_scalar of 0, a cast to the argument's own dtype,
//     a reshape to the argument's own shape, a slice covering the whole
//     axis and a one-argument concat are replaced by their argument;
//   - reshape(reshape(x)) becomes reshape(x) (row-major views compose);
//   - clamp without bounds is removed.
//
// Probes and StateUpdate ops are never removed; probes observe the
// replacement, which holds the same values. Removed nodes are swept.
func Canonicalize(g *ir.Graph) error {
	s := subst{}
	var orphans []*ir.Node
	for _, n := range g.Nodes {
		for i, a := range n.Args {
			n.Args[i] = s.resolve(a)
		}
		if !pure(n) || len(n.Args) == 0 {
			continue
		}
		x := n.Args[0]
		same := x.Type.Equal(n.Type)
		switch n.Op {
		case "mul_scalar":
			if v, _ := scalarAttr(n, "mul_scalar"); v == 1 && same {
				s.replace(n, x)
			}
		case "add_scalar":
			if v, _ := scalarAttr(n, "add_scalar"); v == 0 && same {
				s.replace(n, x)
			}
		case "cast", "concat":
			if same && len(n.Args) == 1 {
				s.replace(n, x)
			}
		case "clamp":
			if same && !hasAttr(n, "lo") && !hasAttr(n, "hi") {
				s.replace(n, x)
			}
		case "slice":
			if same {
				s.replace(n, x)
			}
		case "reshape":
			if is(x, "reshape") {
				orphans = append(orphans, x)
				n.Args[0] = x.Args[0]
				x = n.Args[0]
			}
			if x.Type.Equal(n.Type) {
				s.replace(n, x)
			}
		}
	}
	s.apply(g)
	for n := range s {
		orphans = append(orphans, n)
	}
	dropOrphans(g, orphans)
	return nil
}
