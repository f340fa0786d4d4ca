package backends

import (
	"math"

	"github.com/ds4go/ds4/ir"
)

// HostArena holds the activation buffers of one graph for one session: slot k
// is reused by every value the plan assigned to k (attribute buf), across
// calls, so steady-state decoding allocates almost nothing. A nil arena, or
// slot -1, allocates fresh memory. An arena is not safe for concurrent runs.
type HostArena struct {
	slots []arenaSlot
	sizes []SlotSize
}

// SlotSize is the most elements of each storage kind one slot will hold.
type SlotSize struct{ F32, I64, I32 int }

// NewHostArena returns an arena whose slot k, when it must grow, grows at once
// to sizes[k] (the largest value the plan puts there in a session): decode
// values that gain a row per step (the caches' views) would otherwise be
// reallocated, and their fresh pages faulted in, at every step.
func NewHostArena(sizes []SlotSize) *HostArena { return &HostArena{sizes: sizes} }

func (a *HostArena) size(k int) SlotSize {
	if k < len(a.sizes) {
		return a.sizes[k]
	}
	return SlotSize{}
}

type arenaSlot struct {
	f32 []float32
	i64 []int64
	i32 []int32
}

func (a *HostArena) slot(k int) *arenaSlot {
	if a == nil || k < 0 {
		return nil
	}
	for len(a.slots) <= k {
		a.slots = append(a.slots, arenaSlot{})
	}
	return &a.slots[k]
}

// F32 returns n zeroed float32s from slot k.
func (a *HostArena) F32(k, n int) []float32 {
	out := a.F32Dirty(k, n)
	clear(out)
	return out
}

// F32Dirty is F32 without the zeroing, for a kernel that writes every
// element (the contents are whatever the slot held).
func (a *HostArena) F32Dirty(k, n int) []float32 {
	s := a.slot(k)
	if s == nil {
		return make([]float32, n)
	}
	return grown(&s.f32, n, a.size(k).F32)
}

// I64 returns n zeroed int64s from slot k.
func (a *HostArena) I64(k, n int) []int64 {
	s := a.slot(k)
	if s == nil {
		return make([]int64, n)
	}
	out := grown(&s.i64, n, a.size(k).I64)
	clear(out)
	return out
}

// I32 returns n zeroed int32s from slot k.
func (a *HostArena) I32(k, n int) []int32 {
	s := a.slot(k)
	if s == nil {
		return make([]int32, n)
	}
	out := grown(&s.i32, n, a.size(k).I32)
	clear(out)
	return out
}

// grown returns (*buf)[:n], first replacing *buf by max(n, hint) elements
// when it holds fewer than n.
func grown[T any](buf *[]T, n, hint int) []T {
	if cap(*buf) < n {
		*buf = make([]T, max(n, hint))
	}
	return (*buf)[:n]
}

// Bytes is the memory the arena holds now.
func (a *HostArena) Bytes() int64 {
	if a == nil {
		return 0
	}
	var n int64
	for _, s := range a.slots {
		n += slotBytes(cap(s.f32), cap(s.i64), cap(s.i32))
	}
	return n
}

// PlannedBytes is the most the arena will hold: every slot at its planned
// size.
func (a *HostArena) PlannedBytes() int64 {
	if a == nil {
		return 0
	}
	var n int64
	for _, z := range a.sizes {
		n += slotBytes(z.F32, z.I64, z.I32)
	}
	return n
}

// slotBytes is the memory of a slot's storage of each kind.
func slotBytes(f32, i64, i32 int) int64 { return int64(f32)*4 + int64(i64)*8 + int64(i32)*4 }

// Close implements Arena: the slots are dropped for the garbage collector.
func (a *HostArena) Close() error {
	if a != nil {
		a.slots = nil
	}
	return nil
}

// SlotBytes is the largest value of each storage kind a buffer slot holds,
// in bytes (saturating): an arena keeps one array per kind.
type SlotBytes struct{ F32, I64, I32 int64 }

// Total is the sum of the kinds (saturating).
func (k SlotBytes) Total() int64 { return ir.SatAdd(ir.SatAdd(k.F32, k.I64), k.I32) }

// PlanSlots is, for a graph whose plan assigned buffer slots (attribute
// buf), the SlotBytes of each slot under b, without the values skip
// reports (values a backend makes without arena storage, such as
// HostView's; nil skips none); empty when no value has a slot.
func PlanSlots(g *ir.Graph, b ir.Bindings, skip func(*ir.Node) bool) map[int64]*SlotBytes {
	slots := map[int64]*SlotBytes{}
	for _, n := range g.Nodes {
		k, ok := n.Attrs["buf"].(int64)
		if !ok || k < 0 || skip != nil && skip(n) {
			continue
		}
		s := slots[k]
		if s == nil {
			s = &SlotBytes{}
			slots[k] = s
		}
		sz := TypeBytes(n.Type, b)
		switch {
		case n.Type.DType.IsFloat():
			s.F32 = max(s.F32, sz)
		case n.Type.DType == ir.I64:
			s.I64 = max(s.I64, sz)
		default:
			s.I32 = max(s.I32, sz)
		}
	}
	return slots
}

// SlotSizes is PlanSlots in elements, for NewHostArena and the devices'
// arenas; a slot larger than a session could allocate anyway is left to
// grow on demand.
func SlotSizes(g *ir.Graph, b ir.Bindings, skip func(*ir.Node) bool) []SlotSize {
	var sizes []SlotSize
	elems := func(bytes, per int64) int {
		if bytes/per > math.MaxInt32*4 {
			return 0
		}
		return int(bytes / per)
	}
	for k, s := range PlanSlots(g, b, skip) {
		if k > 1<<20 {
			continue
		}
		for int64(len(sizes)) <= k {
			sizes = append(sizes, SlotSize{})
		}
		sizes[k] = SlotSize{F32: elems(s.F32, 4), I64: elems(s.I64, 8), I32: elems(s.I32, 4)}
	}
	return sizes
}

// HostView reports whether the host backends compute n's value, at b, as a
// view of storage it does not own, leaving its arena slot untouched: a
// cache_read at batch 1 is the cache's first rows (backends/cpu's
// kCacheRead), and u8 values (candidate masks) are allocated apart, the
// arena having no byte storage. Sizing a host arena's slots without these values keeps a
// slot from growing to a cache's size for the small values beside it.
func HostView(n *ir.Node, b ir.Bindings) bool {
	return n.Op == "cache_read" && b.B == 1 || n.Type.DType == ir.U8
}

// SlotNeeds is the storage of each kind n's value takes at b, in bytes
// (f32, i64, i32: an arena slot's arrays), nothing for skip's values.
func SlotNeeds(n *ir.Node, b ir.Bindings, skip func(*ir.Node) bool) [3]int64 {
	if skip != nil && skip(n) {
		return [3]int64{}
	}
	sz := TypeBytes(n.Type, b)
	switch {
	case n.Type.DType.IsFloat():
		return [3]int64{sz, 0, 0}
	case n.Type.DType == ir.I64:
		return [3]int64{0, sz, 0}
	}
	return [3]int64{0, 0, sz}
}
