package passes

import (
	"sort"

	"github.com/ds4go/ds4/ir"
)

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

// SlotNeed is the storage of each kind (f32, i64, i32) a value needs, in
// bytes, for AssignBuffersSized.
type SlotNeed = [3]int64

// AssignBuffersSized is AssignBuffers with the slots chosen by size: the
// values, largest first (need gives their storage at representative
// bindings), each take the slot whose largest value grows least among
// those holding no value whose lifetime overlaps its own (ties go to the
// smaller slot), or a new slot when that would grow more than a new one.
// So the large values share a few slots and the small ones fill the gaps,
// and the sum of the slots' largest values (what an arena holds) stays
// near the peak of the live values, where AssignBuffers' first free slot
// can put a large value beside small ones in every slot. Lifetimes are
// AssignBuffers' (a value lives from its node to its last use, or its
// views' last use, inclusive: an output never shares a slot with its
// arguments), so the assignment is sound for every binding; the sizes only
// choose among sound slots.
func AssignBuffersSized(g *ir.Graph, need func(*ir.Node) SlotNeed) error {
	for _, n := range g.Nodes {
		delete(n.Attrs, "buf")
	}
	lt := ir.StorageLifetimes(g)
	type value struct {
		at   int
		want SlotNeed
		size int64
	}
	var vals []value
	for i, n := range g.Nodes {
		if lt.NeedsSlot(i) {
			w := need(n)
			vals = append(vals, value{i, w, w[0] + w[1] + w[2]})
		}
	}
	sort.SliceStable(vals, func(a, b int) bool { return vals[a].size > vals[b].size })
	type slot struct {
		held  SlotNeed
		spans [][2]int // lifetimes of its values, [first, last]
	}
	var slots []*slot
	fits := func(s *slot, lo, hi int) bool {
		for _, sp := range s.spans {
			if lo <= sp[1] && sp[0] <= hi {
				return false
			}
		}
		return true
	}
	for _, v := range vals {
		lo, hi := v.at, lt.Last[v.at]
		best, bestGrow, bestSize := -1, int64(0), int64(0)
		for j, s := range slots {
			if !fits(s, lo, hi) {
				continue
			}
			var grow, size int64
			for k := range v.want {
				grow += max(0, v.want[k]-s.held[k])
				size += s.held[k]
			}
			if best < 0 || grow < bestGrow || grow == bestGrow && size < bestSize {
				best, bestGrow, bestSize = j, grow, size
			}
		}
		if best < 0 || bestGrow > 0 && bestGrow >= v.size {
			best = len(slots)
			slots = append(slots, &slot{})
		}
		s := slots[best]
		for k := range v.want {
			s.held[k] = max(s.held[k], v.want[k])
		}
		s.spans = append(s.spans, [2]int{lo, hi})
		g.Nodes[v.at].Attrs["buf"] = int64(best)
	}
	return nil
}
