package passes

import "github.com/ds4go/ds4/ir"

// AssignBuffers gives every node that produces a new activation a buffer
// slot (attribute buf), reusing slots whose values are dead: the static
// memory plan of the graph, recorded in the plan file so that exec runs it
// without re-deriving anything.
//
// Expects: a verified graph in execution order.
// Guarantees: two values whose lifetimes overlap never share a slot (what
// ir.CheckBuffers proves when a plan is read; both use ir.StorageLifetimes).
// A value's lifetime runs from its node to the last use of it or of any
// view of it (reshape and probe results alias their argument). Sources
// (inputs, weights, constants, state), StateUpdate results (they are the
// state), views, and everything a graph output aliases get no slot: outputs
// outlive the call. A node's arguments stay live while it runs, so its
// output never shares a slot with them. Slots hold any dtype; their size is
// whatever the largest value placed there needs at run time, so the
// assignment holds for every batch size and token count.
func AssignBuffers(g *ir.Graph) error {
	for _, n := range g.Nodes {
		delete(n.Attrs, "buf")
	}
	lt := ir.StorageLifetimes(g)
	ending := map[int][]int{} // node index → roots whose last use it is
	for r := range g.Nodes {
		if lt.NeedsSlot(r) {
			ending[lt.Last[r]] = append(ending[lt.Last[r]], r)
		}
	}
	var free []int64
	next := int64(0)
	slotOf := map[int]int64{}
	for i, n := range g.Nodes {
		if lt.NeedsSlot(i) {
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
