package deepseekv4

import "testing"

func TestLayoutRelease(t *testing.T) {
	c := loadRelease(t)
	layers := c.Layers()
	if len(layers) != 40 {
		t.Fatalf("got %d layers", len(layers))
	}
	if got, want := LayoutSummary(layers), "2 swa, 4 full, 4 reindex, 30 reuse"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	recent := func(l int, set []int) int {
		r := -1
		for _, s := range set {
			if s <= l {
				r = max(r, s)
			}
		}
		return r
	}
	for _, li := range layers {
		l := li.Index
		var want LayerInfo
		want.Index, want.KVFrom, want.IndexKFrom, want.TopKFrom, want.CandidatesFrom, want.EngramSlot = l, -1, -1, -1, -1, -1
		switch {
		case l < 2:
			want.Kind = KindSWA
		case l < 20:
			want.Ratio = 2
		default:
			want.Ratio = 1
		}
		if want.Ratio > 0 {
			want.KVFrom = recent(l, []int{2, 8, 14, 20})
			want.TopKFrom = recent(l, []int{2, 8, 14, 20, 24, 28, 32, 36})
			want.Kind = KindReuse
		}
		switch l {
		case 2, 8, 14, 20:
			want.Kind, want.KVSource, want.IndexSource, want.OwnsIndexK, want.IndexKFrom = KindFull, true, true, true, l
			want.CandidateSource = l == 20
		case 24, 28, 32, 36:
			want.Kind, want.IndexSource, want.IndexKFrom, want.UsesCandidates, want.CandidatesFrom = KindReindex, true, 20, true, 20
		}
		switch l {
		case 1:
			want.Engram, want.EngramSlot = true, 0
		case 14:
			want.Engram, want.EngramSlot = true, 1
		}
		if li != want {
			t.Errorf("layer %d:\n got %+v\nwant %+v", l, li, want)
		}
	}
	if layers[24].KVFrom != 20 || layers[25].TopKFrom != 24 || layers[23].TopKFrom != 20 || layers[7].KVFrom != 2 {
		t.Errorf("spot checks failed")
	}
}

func TestLayoutTiny(t *testing.T) {
	c := loadTiny(t)
	layers := c.Layers()
	type row struct {
		ratio                        int
		kind                         LayerKind
		kv, idx, owns, cand, uses    bool
		kvFrom, keyFrom, topk, cand2 int
		slot                         int
	}
	want := []row{
		{0, KindSWA, false, false, false, false, false, -1, -1, -1, -1, -1},
		{0, KindSWA, false, false, false, false, false, -1, -1, -1, -1, 0},
		{2, KindFull, true, true, true, false, false, 2, 2, 2, -1, -1},
		{2, KindReuse, false, false, false, false, false, 2, -1, 2, -1, -1},
		{2, KindReuse, false, false, false, false, false, 2, -1, 2, -1, 1},
		{1, KindFull, true, true, true, true, false, 5, 5, 5, -1, -1},
		{1, KindReindex, false, true, false, false, true, 5, 5, 6, 5, -1},
		{1, KindReuse, false, false, false, false, false, 5, -1, 6, -1, -1},
	}
	if len(layers) != len(want) {
		t.Fatalf("got %d layers", len(layers))
	}
	for l, w := range want {
		li := layers[l]
		got := row{li.Ratio, li.Kind, li.KVSource, li.IndexSource, li.OwnsIndexK, li.CandidateSource, li.UsesCandidates,
			li.KVFrom, li.IndexKFrom, li.TopKFrom, li.CandidatesFrom, li.EngramSlot}
		if got != w || li.Index != l || li.Engram != (w.slot >= 0) {
			t.Errorf("layer %d: got %+v, want %+v", l, got, w)
		}
	}
}

func TestLayerKindString(t *testing.T) {
	for k, s := range map[LayerKind]string{KindSWA: "swa", KindFull: "full", KindReuse: "reuse", KindReindex: "reindex", 9: "LayerKind(9)"} {
		if k.String() != s {
			t.Errorf("%d: %q", int(k), k.String())
		}
	}
}
