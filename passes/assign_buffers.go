package passes

import "github.com/ds4go/ds4/ir"

// AssignBuffers gives every node that produces a new activation a buffer
// slot (attribute buf), reusing slots whose values are dead: the static
// memory plan of the graph, recorded in the plan file so that exec runs it
// without re-deriving anything.
//
// Expects: a verified graph in execution order.
// Guarantees: two values whose lifetimes overlap never share a slot. A
// value's lifetime runs from its node to the last use of it or of any view
// of it (reshape and probe results alias their argument). Sources (inputs,
// weights, constants, state), StateUpdate results (they are the state),
// views, and everything a graph output aliases get no slot: outputs outlive
// the call. A node's arguments stay live while it runs, so its output never
// shares a slot with them. Slots hold any dtype; their size is whatever the
// largest value placed there needs at run time, so the assignment holds for
// every batch size and token count.
func AssignBuffers(g *ir.Graph) error {
	index := make(map[*ir.Node]int, len(g.Nodes))
	root := make([]int, len(g.Nodes)) // storage owner of each node, -1 if not arena storage
	for i, n := range g.Nodes {
		index[n] = i
		delete(n.Attrs, "buf")
		switch info := n.Info(); {
		case info.Has(ir.Source) || info.Has(ir.StateUpdate):
			root[i] = -1
		case n.Op == "reshape" || n.Op == "probe":
			root[i] = root[index[n.Args[0]]]
		default:
			root[i] = i
		}
	}
	last := make([]int, len(g.Nodes))
	for i := range last {
		last[i] = i
	}
	for i, n := range g.Nodes {
		// A view (a probe nobody reads, say) reads its storage when it runs.
		if r := root[i]; r >= 0 {
			last[r] = max(last[r], i)
		}
		for _, a := range n.Args {
			if r := root[index[a]]; r >= 0 {
				last[r] = max(last[r], i)
			}
		}
	}
	pinned := map[int]bool{}
	for _, o := range g.Outputs {
		if r := root[index[o.Node]]; r >= 0 {
			pinned[r] = true
		}
	}
	var free []int64
	next := int64(0)
	slotOf := map[int]int64{}
	ending := map[int][]int{} // node index → roots whose last use it is
	for r := range g.Nodes {
		if root[r] == r && !pinned[r] {
			ending[last[r]] = append(ending[last[r]], r)
		}
	}
	for i, n := range g.Nodes {
		if root[i] == i && !pinned[i] {
			var s int64
			if k := len(free); k > 0 {
				s, free = free[k-1], free[:k-1]
			} else {
				s, next = next, next+1
			}
			slotOf[i] = s
			n.Attrs["buf"] = s
		}
		// Slots of values last used here are free for later nodes only.
		for _, r := range ending[i] {
			free = append(free, slotOf[r])
		}
	}
	return nil
}
