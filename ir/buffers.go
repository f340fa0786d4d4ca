package ir

import "fmt"

// Lifetimes is the storage view of a graph in execution order, shared by
// the pass that assigns buffer slots (passes.AssignBuffers) and the check
// that a plan's slots are sound (CheckBuffers), so that both reason about
// the same lifetimes.
type Lifetimes struct {
	// Root[i] is the index of the node that owns the storage node i reads
	// from: i itself for a node that produces a new activation, its
	// argument's root for a view (reshape, probe), -1 for storage outside
	// the arena (sources, StateUpdate results: they are the state).
	Root []int
	// Last[r], for a root r, is the position of the last node reading r's
	// storage: r itself, every node with an argument whose root is r, and
	// every view of r (a view reads its storage when it runs).
	Last []int
	// Pinned[r] is true for a root that a graph output aliases: outputs
	// outlive the call, so they never take an arena slot.
	Pinned []bool
}

// IsView reports whether the op's result aliases its argument 0.
func IsView(op string) bool { return op == "reshape" || op == "probe" }

// StorageLifetimes computes the lifetimes of g's values. g must be verified
// (arguments defined before use).
func StorageLifetimes(g *Graph) Lifetimes {
	index := make(map[*Node]int, len(g.Nodes))
	lt := Lifetimes{Root: make([]int, len(g.Nodes)), Last: make([]int, len(g.Nodes)), Pinned: make([]bool, len(g.Nodes))}
	for i, n := range g.Nodes {
		index[n] = i
		lt.Last[i] = i
		switch info := n.Info(); {
		case info == nil || info.Has(Source) || info.Has(StateUpdate):
			lt.Root[i] = -1
		case IsView(n.Op) && len(n.Args) > 0:
			lt.Root[i] = lt.Root[index[n.Args[0]]]
		default:
			lt.Root[i] = i
		}
	}
	for i, n := range g.Nodes {
		if r := lt.Root[i]; r >= 0 {
			lt.Last[r] = max(lt.Last[r], i)
		}
		for _, a := range n.Args {
			if r := lt.Root[index[a]]; r >= 0 {
				lt.Last[r] = max(lt.Last[r], i)
			}
		}
	}
	for _, o := range g.Outputs {
		if r := lt.Root[index[o.Node]]; r >= 0 {
			lt.Pinned[r] = true
		}
	}
	return lt
}

// NeedsSlot reports whether node i must have a buffer slot: it produces new
// arena storage that no output aliases.
func (lt Lifetimes) NeedsSlot(i int) bool { return lt.Root[i] == i && !lt.Pinned[i] }

// CheckBuffers proves the buffer plan of a verified graph sound, as the
// plan reader must before exec trusts it: every node that needs a slot
// (Lifetimes.NeedsSlot) has a `buf` in [0, len(g.Nodes)), no other node has
// one, and no node takes a slot whose previous value (or a view of it) is
// still read at or after that node. This is what passes.AssignBuffers
// guarantees; a hand-edited slot that would let two live values share
// storage is refused with the node that takes the slot.
func CheckBuffers(g *Graph) error {
	lt := StorageLifetimes(g)
	holder := map[int64]int{} // slot → position of the root now holding it
	for i, n := range g.Nodes {
		v, has := n.Attrs["buf"]
		b, isInt := v.(int64)
		fail := func(format string, a ...any) error {
			return fmt.Errorf("graph %s: %%%d (%s): %s", g.Name, n.ID, n.Op, fmt.Sprintf(format, a...))
		}
		switch {
		case !lt.NeedsSlot(i) && has && lt.Root[i] == i:
			return fail("is a graph output but has buffer slot buf=%s: outputs outlive the call", FormatAttr(v))
		case !lt.NeedsSlot(i) && has:
			return fail("has buffer slot buf=%s but writes no new storage (a view, state update or source)", FormatAttr(v))
		case !lt.NeedsSlot(i):
			continue
		case !has:
			return fail("has no buffer slot (buf): recompile the plan")
		case !isInt || b < 0 || b >= int64(len(g.Nodes)):
			return fail("buffer slot buf=%s out of range [0,%d)", FormatAttr(v), len(g.Nodes))
		}
		if h, ok := holder[b]; ok && lt.Last[h] >= i {
			o, r := g.Nodes[h], g.Nodes[lt.Last[h]]
			return fail("takes buffer slot %d while %%%d (%s) in it is still read by %%%d (%s)", b, o.ID, o.Op, r.ID, r.Op)
		}
		holder[b] = i
	}
	return nil
}
