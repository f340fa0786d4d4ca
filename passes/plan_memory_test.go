package passes_test

import (
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/passes"
)

// TestPlanMemoryChain: in a chain a→b→c→d each value dies at the next node,
// so two buffers are enough; views share their buffer; sources take none.
func TestPlanMemoryChain(t *testing.T) {
	g := ir.NewGraph("prefill")
	x := g.Source("input", ir.T(ir.F32, "B", "S", 16), ir.Attrs{"name": "x"})
	a := g.Add("exp", nil, x) // 2·4·16·4 = 512 bytes
	v := g.Add("reshape", ir.Attrs{"shape": "[B,S,4,4]"}, a)
	b := g.Add("relu", nil, v)
	p := g.Add("probe", ir.Attrs{"name": "b"}, b)
	c := g.Add("exp", nil, p)
	d := g.Add("relu", nil, c)
	g.SetOutput("y", d)
	plan, err := passes.PlanMemory(g, passes.Bindings{B: 2, S: 4, M: 4})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Buffers != 4 || plan.NaiveBytes != 4*512 || plan.PeakBytes != 2*512 {
		t.Errorf("buffers %d, naive %d, peak %d; want 4, 2048, 1024", plan.Buffers, plan.NaiveBytes, plan.PeakBytes)
	}
	if plan.Offset[a.ID] == plan.Offset[b.ID] || plan.Offset[c.ID] != plan.Offset[a.ID] {
		t.Errorf("offsets %v", plan.Offset)
	}
}

// TestPlanMemoryReleased: prefill of 1,024 tokens on the released config
// needs at least 3× less than one buffer per value.
func TestPlanMemoryReleased(t *testing.T) {
	m, _ := buildReleased(t)
	if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	plan, err := passes.PlanMemory(m.Graph("prefill"), passes.Bindings{B: 1, S: 1024, M: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak %d bytes, naive %d bytes (%.1f×), %d buffers", plan.PeakBytes, plan.NaiveBytes, float64(plan.NaiveBytes)/float64(plan.PeakBytes), plan.Buffers)
	if plan.PeakBytes*3 > plan.NaiveBytes {
		t.Errorf("peak %d not 3× below naive %d", plan.PeakBytes, plan.NaiveBytes)
	}
	// The decode graph plans too (P bound to its upper value).
	if _, err := passes.PlanMemory(m.Graph("decode"), passes.Bindings{B: 4, S: 1, M: 1024, P: 1023}); err != nil {
		t.Fatal(err)
	}
}
