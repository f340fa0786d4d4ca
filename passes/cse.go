package passes

import (
	"strconv"
	"strings"

	"github.com/ds4go/ds4/ir"
)

// CSE is common-subexpression elimination.
//
// Expects: a verified graph.
//
// Guarantees: of two nodes with the same op, attributes, type and arguments
// (after merging), only the first remains and the uses of the second read
// the first. Source nodes merge only when they are the same declaration
// (same op, attributes, hence the same name, and type); state declarations,
// SideEffect ops (probes) and StateUpdate ops are never merged. Merged-away
// nodes are removed.
func CSE(g *ir.Graph) error {
	seen := map[string]*ir.Node{}
	s := subst{}
	kept := g.Nodes[:0]
	for _, n := range g.Nodes {
		for i, a := range n.Args {
			n.Args[i] = s.resolve(a)
		}
		if !pure(n) {
			kept = append(kept, n)
			continue
		}
		k := cseKey(n)
		if first, ok := seen[k]; ok {
			s.replace(n, first)
			continue
		}
		seen[k] = n
		kept = append(kept, n)
	}
	g.Nodes = kept
	s.apply(g)
	return nil
}

func cseKey(n *ir.Node) string {
	var b strings.Builder
	b.WriteString(n.Op)
	b.WriteByte('(')
	for _, a := range n.Args {
		// Node pointers are unique within the graph; IDs are too (verified).
		b.WriteString(strconv.Itoa(a.ID))
		b.WriteByte(',')
	}
	b.WriteString("){")
	for _, k := range n.Attrs.Keys() {
		b.WriteString(strconv.Quote(k))
		b.WriteByte('=')
		b.WriteString(ir.FormatAttr(n.Attrs[k]))
		b.WriteByte(',')
	}
	b.WriteString("}:")
	b.WriteString(n.Type.String())
	return b.String()
}
