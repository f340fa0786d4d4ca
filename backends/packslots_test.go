package backends_test

import (
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
	"github.com/ds4go/ds4/passes"
)

// released is the released config's module (shapes only).
func released(t *testing.T) *ir.Module {
	t.Helper()
	c, err := deepseekv4.LoadConfig(filepath.Join("..", "models", "deepseekv4", "testdata", "configs", "deepseek-v41-flash.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// slotTotal is what an arena holds for g's slots at b: each slot's largest
// value of each kind.
func slotTotal(g *ir.Graph, b ir.Bindings) int64 {
	var n int64
	for _, s := range backends.PlanSlots(g, b, nil) {
		n += s.Total()
	}
	return n
}

// TestPackSlots: on the tiny and released graphs, the slots by size are
// sound (ir.CheckBuffers, the plan reader's proof), give a slot to exactly
// the values passes.AssignBuffers does, and hold no more than the
// first-free assignment at the bindings they were sized for and at others.
func TestPackSlots(t *testing.T) {
	for _, m := range []*ir.Module{dstest.BuildTiny(t), released(t)} {
		if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
			t.Fatal(err)
		}
		for _, g := range m.Graphs {
			sized := ir.Bindings{B: 1, S: 512, M: 8192, P: 8192 - 512}
			if g.Name == "decode" {
				sized.S = 1
			}
			slotted := map[*ir.Node]bool{}
			for _, n := range g.Nodes {
				if _, ok := n.Attrs["buf"]; ok {
					slotted[n] = true
				}
			}
			firstFree := slotTotal(g, sized)
			other := ir.Bindings{B: 2, S: sized.S, M: 1024, P: 1024 - sized.S}
			firstFreeOther := slotTotal(g, other)
			err := backends.PackSlots(g, func(n *ir.Node) backends.SlotNeed { return backends.SlotNeeds(n, sized, nil) })
			if err != nil {
				t.Fatal(err)
			}
			if err := ir.CheckBuffers(g); err != nil {
				t.Fatalf("%s: %v", g.Name, err)
			}
			for _, n := range g.Nodes {
				if _, ok := n.Attrs["buf"]; ok != slotted[n] {
					t.Fatalf("%s: %%%d (%s): slotted %v, AssignBuffers %v", g.Name, n.ID, n.Op, ok, slotted[n])
				}
			}
			bySize, bySizeOther := slotTotal(g, sized), slotTotal(g, other)
			t.Logf("%s: %d slot bytes by size, %d first free (%d and %d at other bindings)", g.Name, bySize, firstFree, bySizeOther, firstFreeOther)
			if bySize > firstFree {
				t.Errorf("%s: %d slot bytes by size against %d first free", g.Name, bySize, firstFree)
			}
		}
	}
}

// TestHostView: the host's views and byte values are left out of the slot
// sizes, and a slot shared by a cache_read and a small value is sized for
// the small one.
func TestHostView(t *testing.T) {
	b := ir.Bindings{B: 1, S: 4, M: 64, P: 60}
	read := &ir.Node{Op: "cache_read", Type: ir.T(ir.BF16, "B", "P+S", 8), Attrs: ir.Attrs{"buf": int64(0)}}
	small := &ir.Node{Op: "matmul", Type: ir.T(ir.F32, "B", "S", 8), Attrs: ir.Attrs{"buf": int64(0)}}
	mask := &ir.Node{Op: "candidate_blocks", Type: ir.T(ir.U8, "B", "S", "P+S"), Attrs: ir.Attrs{"buf": int64(1)}}
	g := &ir.Graph{Name: "g", Nodes: []*ir.Node{read, small, mask}}
	if !backends.HostView(read, b) || backends.HostView(small, b) || !backends.HostView(mask, b) {
		t.Fatal("HostView: cache_read and u8 are views, matmul is not")
	}
	if backends.HostView(read, ir.Bindings{B: 2, S: 4, M: 64, P: 60}) {
		t.Fatal("a cache_read of two rows is a copy")
	}
	skip := func(n *ir.Node) bool { return backends.HostView(n, b) }
	sizes := backends.SlotSizes(g, b, skip)
	if len(sizes) < 1 || sizes[0].F32 != 4*8 || len(sizes) > 1 && sizes[1] != (backends.SlotSize{}) {
		t.Fatalf("sizes %+v: slot 0 sized for the matmul's 32 floats, slot 1 empty", sizes)
	}
	if all := backends.SlotSizes(g, b, nil); all[0].F32 != 64*8 {
		t.Fatalf("SlotSizes %+v: slot 0 sized for the cache_read", all)
	}
}
