package ir

import "testing"

// TestAddOwnsAttrs: one attribute map passed to several nodes must not be
// shared by them (the builder reuses maps; passes set attributes per node).
func TestAddOwnsAttrs(t *testing.T) {
	g := NewGraph("g")
	x := g.Source("input", T(BF16, "B", 64), Attrs{"name": "x"})
	q := Attrs{"block": int64(32)}
	a := g.Add("act_quant", q, x)
	b := g.Add("act_quant", q, x)
	a.Attrs["buf"] = int64(1)
	if _, ok := b.Attrs["buf"]; ok {
		t.Fatal("two nodes share one attribute map")
	}
	if _, ok := q["buf"]; ok {
		t.Fatal("the caller's map was changed")
	}
}

// TestUseCountsAndWeights: use counts count every argument slot and every
// graph output; Weights keeps the first node of each checkpoint name.
func TestUseCountsAndWeights(t *testing.T) {
	g := NewGraph("g")
	x := g.Source("input", T(F32, 4), Attrs{"name": "x"})
	w1 := g.Source("weight", T(F32, 4), Attrs{"name": "w", "format": "f32"})
	w2 := g.Source("weight", T(F32, 4), Attrs{"name": "w", "format": "f32"})
	v := g.Source("weight", T(F32, 4), Attrs{"name": "v", "format": "f32"})
	s := g.Add("add", nil, x, x)
	p := g.Add("mul", nil, s, w1)
	q := g.Add("mul", nil, p, w2)
	g.SetOutput("a", q)
	g.SetOutput("b", q)
	g.SetOutput("c", v)
	u := g.UseCounts()
	for n, want := range map[*Node]int{x: 2, s: 1, p: 1, q: 2, w1: 1, w2: 1, v: 1} {
		if u[n] != want {
			t.Errorf("%%%d (%s): %d uses, want %d", n.ID, n.Op, u[n], want)
		}
	}
	ws := g.Weights()
	if len(ws) != 2 || ws[0] != w1 || ws[1] != v {
		t.Errorf("Weights = %v, want [w1 v]", ws)
	}
}
