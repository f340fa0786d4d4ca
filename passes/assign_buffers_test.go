package passes_test

import (
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
