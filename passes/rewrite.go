package passes

import (
	"fmt"

	"github.com/ds4go/ds4/ir"
)

// This file holds the small rewriting toolkit the passes share.

// subst maps replaced nodes to their replacements; apply rewires every
// argument and output, following chains.
type subst map[*ir.Node]*ir.Node

func (s subst) resolve(n *ir.Node) *ir.Node {
	for {
		r, ok := s[n]
		if !ok || r == n {
			return n
		}
		n = r
	}
}

// replace records that old's value is new's. It panics (a pass bug) when the
// types differ.
func (s subst) replace(old, new *ir.Node) {
	if !old.Type.Equal(new.Type) {
		panic(fmt.Sprintf("replacing %%%d (%s %s) by %%%d (%s %s): types differ", old.ID, old.Op, old.Type, new.ID, new.Op, new.Type))
	}
	s[old] = new
}

func (s subst) apply(g *ir.Graph) {
	if len(s) == 0 {
		return
	}
	for _, n := range g.Nodes {
		for i, a := range n.Args {
			n.Args[i] = s.resolve(a)
		}
	}
	for i := range g.Outputs {
		g.Outputs[i].Node = s.resolve(g.Outputs[i].Node)
	}
}

// schedule restores a valid order after nodes were appended at the end of
// the graph: the existing nodes keep their relative order, and every node is
// emitted after its arguments, so a new node lands just before its first
// user. Nodes no one uses stay in place (appended ones at the end).
func schedule(g *ir.Graph) {
	done := make(map[*ir.Node]bool, len(g.Nodes))
	out := make([]*ir.Node, 0, len(g.Nodes))
	var visit func(n *ir.Node)
	visit = func(n *ir.Node) {
		if done[n] {
			return
		}
		done[n] = true
		for _, a := range n.Args {
			visit(a)
		}
		out = append(out, n)
	}
	for _, n := range g.Nodes {
		visit(n)
	}
	g.Nodes = out
}

// sweep removes the nodes that do not contribute to an output, a SideEffect
// op or a StateUpdate op (dead-code elimination). Inputs and state
// declarations are kept: they are the graph's interface.
func sweep(g *ir.Graph) int {
	live := make(map[*ir.Node]bool, len(g.Nodes))
	var mark func(n *ir.Node)
	mark = func(n *ir.Node) {
		if live[n] {
			return
		}
		live[n] = true
		for _, a := range n.Args {
			mark(a)
		}
	}
	for _, o := range g.Outputs {
		mark(o.Node)
	}
	for _, n := range g.Nodes {
		if rooted(n) {
			mark(n)
		}
	}
	kept := g.Nodes[:0]
	removed := 0
	for _, n := range g.Nodes {
		if live[n] {
			kept = append(kept, n)
		} else {
			removed++
		}
	}
	for i := len(kept); i < len(g.Nodes); i++ {
		g.Nodes[i] = nil
	}
	g.Nodes = kept
	return removed
}

// rooted reports whether a node must stay even when its value is unused.
func rooted(n *ir.Node) bool {
	info := n.Info()
	if info == nil {
		return true
	}
	return info.Flags&(ir.SideEffect|ir.StateUpdate) != 0 || n.Op == "input" || n.Op == "state"
}

// pure reports whether a node may be merged, folded or removed freely.
func pure(n *ir.Node) bool {
	info := n.Info()
	return info != nil && info.Flags&(ir.SideEffect|ir.StateUpdate) == 0 && n.Op != "state"
}

// ---- matching helpers -------------------------------------------------------

func is(n *ir.Node, op string) bool { return n != nil && n.Op == op }

// lastAxis normalises an axis attribute against a rank (-1 default).
func normAxis(n *ir.Node, rank int) int {
	ax := int(n.Attrs.Int("axis", -1))
	if ax < 0 {
		ax += rank
	}
	return ax
}

// sliceOf matches slice(x){axis=last, start=lo, end=hi} and returns x.
func sliceOf(n *ir.Node, lo, hi int64) (*ir.Node, bool) {
	if !is(n, "slice") {
		return nil, false
	}
	x := n.Args[0]
	if normAxis(n, x.Type.Shape.Rank()) != x.Type.Shape.Rank()-1 {
		return nil, false
	}
	if n.Attrs.Int("start", -1) != lo || n.Attrs.Int("end", -1) != hi {
		return nil, false
	}
	return x, true
}

// either calls f(a, b) and then f(b, a) for a commutative binary node.
func either(n *ir.Node, f func(a, b *ir.Node) bool) bool {
	return f(n.Args[0], n.Args[1]) || f(n.Args[1], n.Args[0])
}

func scalarAttr(n *ir.Node, op string) (float64, bool) {
	if !is(n, op) {
		return 0, false
	}
	return n.Attrs.Float("value", 0), true
}

func hasAttr(n *ir.Node, k string) bool { _, ok := n.Attrs[k]; return ok }

// rewrite applies the substitutions a pattern pass collected, restores an
// order in which every node follows its arguments, and removes the matched
// nodes nothing reads any more. Nothing happens when s is empty.
func rewrite(g *ir.Graph, s subst, orphans []*ir.Node) {
	if len(s) == 0 {
		return
	}
	s.apply(g)
	schedule(g)
	dropOrphans(g, orphans)
}

// dropOrphans removes the candidates that nothing uses any more and that
// may be removed (pure, not an input or state declaration), then, in turn,
// the arguments that only they used. It is the local form of sweep that a
// rewrite calls on the nodes it bypassed.
func dropOrphans(g *ir.Graph, cands []*ir.Node) {
	if len(cands) == 0 {
		return
	}
	uses := g.UseCounts()
	dead := map[*ir.Node]bool{}
	work := append([]*ir.Node(nil), cands...)
	for len(work) > 0 {
		n := work[len(work)-1]
		work = work[:len(work)-1]
		if dead[n] || uses[n] > 0 || rooted(n) {
			continue
		}
		dead[n] = true
		for _, a := range n.Args {
			uses[a]--
			work = append(work, a)
		}
	}
	if len(dead) == 0 {
		return
	}
	kept := g.Nodes[:0]
	for _, n := range g.Nodes {
		if !dead[n] {
			kept = append(kept, n)
		}
	}
	for i := len(kept); i < len(g.Nodes); i++ {
		g.Nodes[i] = nil
	}
	g.Nodes = kept
}
