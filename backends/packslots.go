package backends

import (
	"sort"

	"github.com/ds4go/ds4/ir"
)

// SlotNeed is the storage of each kind (f32, i64, i32) a value needs, in
// bytes, for PackSlots.
type SlotNeed = [3]int64

// PackSlots re-assigns the buffer slots (attribute buf) of a graph whose
// plan has them (passes.AssignBuffers), choosing them by size: the
// values, largest first (need gives their storage at representative
// bindings), each take the slot whose largest value grows least among
// those holding no value whose lifetime overlaps its own (ties go to the
// smaller slot), or a new slot when that would grow more than a new one.
// So the large values share a few slots and the small ones fill the gaps,
// and the sum of the slots' largest values (what an arena holds) stays
// near the peak of the live values, where the plan's first free slot
// can put a large value beside small ones in every slot. Lifetimes are
// passes.AssignBuffers' (ir.StorageLifetimes: a value lives from its node
// to its last use, or its views' last use, inclusive: an output never
// shares a slot with its arguments), and the same values get a slot, so
// ir.CheckBuffers holds at every binding; the sizes only choose among
// sound slots.
func PackSlots(g *ir.Graph, need func(*ir.Node) SlotNeed) error {
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
