package passes_test

import (
	"strings"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/passes"
)

// TestAssignBuffersNoOverlap checks the buffer plan of the tiny module
// independently of the pass: walking the graph, a slot may be taken only
// when every earlier value in it (and every view of that value) has had its
// last use, and never by a node that reads the slot's current value.
func TestAssignBuffersNoOverlap(t *testing.T) {
	m := buildTiny(t)
	if _, err := passes.Run(m, nil, passes.Options{VerifyEach: true}); err != nil {
		t.Fatal(err)
	}
	for _, g := range m.Graphs {
		owner := map[*ir.Node]*ir.Node{} // value → the node whose buffer holds it
		lastUse := map[*ir.Node]int{}    // buffer owner → last position reading it
		for i, n := range g.Nodes {
			if n.Op == "reshape" || n.Op == "probe" {
				owner[n] = owner[n.Args[0]]
			} else if _, ok := n.Attrs["buf"]; ok {
				owner[n] = n
			}
			if o := owner[n]; o != nil {
				lastUse[o] = i
			}
			for _, a := range n.Args {
				if o := owner[a]; o != nil {
					lastUse[o] = max(lastUse[o], i)
				}
			}
		}
		for _, o := range g.Outputs {
			if owner[o.Node] != nil {
				t.Errorf("%s: output %s lives in an arena slot", g.Name, o.Name)
			}
		}
		holder := map[int64]*ir.Node{} // slot → current buffer owner
		pos := map[*ir.Node]int{}
		slots := 0
		for i, n := range g.Nodes {
			pos[n] = i
			b, ok := n.Attrs["buf"].(int64)
			if !ok {
				continue
			}
			slots++
			if h := holder[b]; h != nil && lastUse[h] >= i {
				t.Fatalf("%s: %%%d (%s) takes slot %d while %%%d (%s) is live until position %d", g.Name, n.ID, n.Op, b, h.ID, h.Op, lastUse[h])
			}
			holder[b] = n
		}
		distinct := map[int64]bool{}
		for _, n := range g.Nodes {
			if b, ok := n.Attrs["buf"].(int64); ok {
				distinct[b] = true
			}
		}
		t.Logf("%s: %d values in %d slots", g.Name, slots, len(distinct))
		if len(distinct) >= slots/4 {
			t.Errorf("%s: %d slots for %d values: little reuse", g.Name, len(distinct), slots)
		}
	}
}

// TestAssignBuffersPassesCheck: the plan reader's proof (ir.CheckBuffers)
// accepts what the pass assigns, with and without the optional passes, and
// refuses the assignment once one slot is given to a value whose slot-mate
// is still live.
func TestAssignBuffersPassesCheck(t *testing.T) {
	for _, names := range [][]string{nil, {"none"}} {
		m := buildTiny(t)
		if _, err := passes.Run(m, names, passes.Options{}); err != nil {
			t.Fatal(err)
		}
		for _, g := range m.Graphs {
			if err := ir.CheckBuffers(g); err != nil {
				t.Fatalf("passes %v: %v", names, err)
			}
		}
		// The first two slotted nodes where the second reads the first:
		// sharing a slot is a conflict.
		g := m.Graphs[0]
		broken := false
		for _, n := range g.Nodes {
			b, ok := n.Attrs["buf"].(int64)
			if !ok {
				continue
			}
			for _, a := range n.Args {
				if ab, ok := a.Attrs["buf"].(int64); ok && ab != b {
					n.Attrs["buf"] = ab
					broken = true
					break
				}
			}
			if broken {
				break
			}
		}
		if !broken {
			t.Fatal("no node reads a slotted argument")
		}
		if err := ir.CheckBuffers(g); err == nil || !strings.Contains(err.Error(), "takes buffer slot") {
			t.Fatalf("passes %v: a shared live slot: %v", names, err)
		}
	}
}
