package passes

import (
	"fmt"
	"sort"

	"github.com/ds4go/ds4/ir"
)

// arenaAlign is the alignment of every buffer in the arena.
const arenaAlign = 64

// Bindings give the symbolic dims their values for a planned call: B rows,
// S tokens per row, M the maximum length of the caches, P the start
// position (0 for prefill; for decode the planner's upper bound is M-S).
type Bindings = ir.Bindings

// MemPlan is the result of memory planning one graph.
type MemPlan struct {
	// PeakBytes is the arena size: the highest end offset of any buffer.
	PeakBytes int64
	// NaiveBytes is the sum of the sizes of all activation buffers (each
	// value its own allocation, nothing freed).
	NaiveBytes int64
	// Offset and Size of every buffer, by node ID; views (reshape, probe)
	// share the buffer of the value they view and are not listed.
	Offset, Size map[int]int64
	Buffers      int
}

// PlanMemory is the plan-memory analysis (it rewrites nothing).
//
// Expects: a verified graph whose symbolic dims are expressions over B, S,
// M and P (+ - * /, parentheses, min, max), such as "B*S", "M/4",
// "(P+S)/2-P/2" or "min(S,128)".
//
// Guarantees: every activation value (not a source — weights, inputs,
// constants, state, RoPE tables — and not a StateUpdate result, which is
// the state updated in place) gets a buffer of its byte size (elements ×
// dtype bits / 8, rounded up to 64 bytes) at an offset in one arena, such
// that two buffers that are live at the same time never overlap. A value
// is live from its node to its last use (outputs: to the end of the
// graph); reshape and probe are views whose uses extend the life of the
// buffer they view. Offsets are assigned first fit in node order, a node's
// output allocated before its arguments' buffers are released.
func PlanMemory(g *ir.Graph, b Bindings) (*MemPlan, error) {
	lt := ir.StorageLifetimes(g) // the lifetimes AssignBuffers and ir.CheckBuffers use
	size := map[*ir.Node]int64{}
	frees := map[int][]*ir.Node{} // position → buffers whose last use it is
	for i, n := range g.Nodes {
		if n.Info() == nil {
			return nil, fmt.Errorf("plan-memory: %%%d: unknown op %q", n.ID, n.Op)
		}
		if lt.Root[i] != i {
			continue // a source, a state update or a view: no buffer of its own
		}
		sz, err := byteSize(n.Type, b)
		if err != nil {
			return nil, fmt.Errorf("plan-memory: %%%d (%s): %v", n.ID, n.Op, err)
		}
		size[n] = (sz + arenaAlign - 1) / arenaAlign * arenaAlign
		last := lt.Last[i]
		if lt.Pinned[i] {
			last = len(g.Nodes) // an output lives to the end of the graph
		}
		frees[last] = append(frees[last], n)
	}
	plan := &MemPlan{Offset: map[int]int64{}, Size: map[int]int64{}}
	var live []span // sorted by offset
	for i, n := range g.Nodes {
		if sz, ok := size[n]; ok {
			off := firstFit(live, sz)
			live = insertSpan(live, span{off, sz, n})
			plan.Offset[n.ID], plan.Size[n.ID] = off, sz
			plan.NaiveBytes += sz
			plan.PeakBytes = max(plan.PeakBytes, off+sz)
			plan.Buffers++
		}
		for _, d := range frees[i] {
			live = removeSpan(live, d)
		}
	}
	return plan, nil
}

type span struct {
	off, size int64
	n         *ir.Node
}

func firstFit(live []span, sz int64) int64 {
	at := int64(0)
	for _, s := range live {
		if s.off-at >= sz {
			return at
		}
		at = max(at, s.off+s.size)
	}
	return at
}

func insertSpan(live []span, s span) []span {
	i := sort.Search(len(live), func(i int) bool { return live[i].off > s.off })
	live = append(live, span{})
	copy(live[i+1:], live[i:])
	live[i] = s
	return live
}

func removeSpan(live []span, n *ir.Node) []span {
	for i, s := range live {
		if s.n == n {
			return append(live[:i], live[i+1:]...)
		}
	}
	return live
}

// byteSize is the storage size of a value of type t under bindings b.
func byteSize(t ir.Type, b Bindings) (int64, error) {
	dims, err := b.Dims(t.Shape)
	if err != nil {
		return 0, err
	}
	elems := int64(1)
	for _, v := range dims {
		elems = ir.SatMul(elems, max(v, 0))
	}
	bits := int64(t.DType.Bits())
	if bits == 0 {
		return 0, fmt.Errorf("dtype %s has no size", t.DType)
	}
	return (elems*bits + 7) / 8, nil
}
