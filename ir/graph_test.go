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
