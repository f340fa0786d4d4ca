package passes_test

import (
	"slices"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/passes"
)

// wantLayerRows checks the rows the bounded-rows pass gives each layer of
// the prefill and chunk graphs of m for a prompt of S tokens.
func wantLayerRows(t *testing.T, m *ir.Module, S int64, want []int64) {
	t.Helper()
	for _, g := range m.Graphs {
		if g.Name == "decode" {
			continue
		}
		if got := passes.LayerRows(g, S); !slices.Equal(got, want) {
			t.Errorf("%s: rows per layer %s, want %s", g.Name, passes.FormatLayerRows(got), passes.FormatLayerRows(want))
		}
	}
}

// TestBoundedRowsTiny: tiny's last kv source is layer 5 (layers 6 and 7
// read its compressed rows and index keys), the window 8: layer 7 computes
// the 8 rows its window cache keeps, layer 6 those widened by the window
// (8 + 7), layers 0-5 every row.
func TestBoundedRowsTiny(t *testing.T) {
	m := buildTiny(t)
	if _, err := passes.Run(m, nil, passes.Options{VerifyEach: true}); err != nil {
		t.Fatal(err)
	}
	wantLayerRows(t, m, 100, []int64{100, 100, 100, 100, 100, 100, 15, 8})
	wantLayerRows(t, m, 10, []int64{10, 10, 10, 10, 10, 10, 10, 8})
	// without the pass nothing is bounded
	n := buildTiny(t)
	if _, err := passes.Run(n, []string{"cse"}, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	wantLayerRows(t, n, 100, []int64{100, 100, 100, 100, 100, 100, 100, 100})
}

// TestBoundedRowsReleased: in the released pattern layers 21-39 read
// layer 20's compressed rows and index keys and own none, so layer 39
// computes its window's 128 rows and each layer before it 127 more, down
// to 19·127 + 128 - 127 = 2414 at layer 21; layer 20 and every layer
// before it see every row.
func TestBoundedRowsReleased(t *testing.T) {
	m, _ := buildReleased(t)
	if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	const S = 32768
	var want []int64
	for l := 0; l < 40; l++ {
		if l <= 20 {
			want = append(want, S)
		} else {
			want = append(want, int64(128+(39-l)*127))
		}
	}
	wantLayerRows(t, m, S, want)
	if want[21] != 2414 {
		t.Fatalf("layer 21: %d", want[21])
	}
}
